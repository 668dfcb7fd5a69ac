"""YAML 1.1 booleans in boolean fields only (resolutions G2, issue 15 item 6).

The Go tool's yaml.v3 loader decodes ``y``/``yes``/``on`` and ``n``/``no``/``off`` (lower, title and
upper case) into fields typed bool, and nowhere else. So does ours: every boolean field takes
them, every string field keeps them as strings.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from distributor_core.config import Config, S3Backend, shape
from distributor_core.config.loader import YAML11_BOOLEANS
from distributor_core.config.shape import Kind

from .helpers import TOKENS, load, messages, one_pipeline, upload_pipeline, with_destination

TRUE_WORDS = ["y", "Y", "yes", "Yes", "YES", "on", "On", "ON"]
FALSE_WORDS = ["n", "N", "no", "No", "NO", "off", "Off", "OFF"]
WORDS = [(word, True) for word in TRUE_WORDS] + [(word, False) for word in FALSE_WORDS]

pytestmark = pytest.mark.usefixtures("yaml_parser")


def test_the_table_is_yaml_v3s() -> None:
    assert dict(WORDS) == YAML11_BOOLEANS


def _s3(config: Config) -> S3Backend:
    storage = config.pipelines[0].destinations[0].storage
    assert isinstance(storage, S3Backend)
    return storage


#: every boolean field of the config, the text that sets it to ``{w}``, and how to read it back
BOOLEAN_FIELDS: dict[str, tuple[str, Callable[[Config], Any]]] = {
    "force_path_style": (
        one_pipeline(destination="{id: a, backend: s3, bucket: b, force_path_style: {w}}"),
        lambda c: _s3(c).force_path_style,
    ),
    "server.http.staging_s3.force_path_style": (
        "server: {http: {staging_root: 's3://b/p', staging_s3: {force_path_style: {w}}}}\n" + upload_pipeline(),
        lambda c: c.server.http.staging_store.force_path_style,
    ),
    "publish.source": (
        with_destination("publish: {source: {w}, html: true}, transform: {markdown_to_html: {enabled: true}}"),
        lambda c: c.pipelines[0].destinations[0].publish.source,
    ),
    "publish.html": (
        with_destination("publish: {source: true, html: {w}}, transform: {markdown_to_html: {enabled: true}}"),
        lambda c: c.pipelines[0].destinations[0].publish.html,
    ),
    "transform.markdown_to_html.enabled": (
        with_destination("transform: {markdown_to_html: {enabled: {w}}}"),
        lambda c: c.pipelines[0].destinations[0].transform.markdown_to_html.enabled,
    ),
    "pipelines.validation.cache": (
        one_pipeline(pipeline_id="reports, validation: {cache: {w}}"),
        lambda c: c.pipelines[0].validation.cache,
    ),
    "retention.prune.enabled": (
        with_destination("retention: {prune: {enabled: {w}, keep_latest: 2}}"),
        lambda c: c.pipelines[0].destinations[0].retention.prune.enabled,
    ),
}


def _all_fields() -> list[tuple[str, shape.Key]]:
    return [*shape.walk(shape.root()), *(item for table in shape.backends().values() for item in shape.walk(table))]


def test_every_boolean_field_is_covered() -> None:
    booleans = {path for path, spec in _all_fields() if spec.kind is Kind.BOOLEAN}
    assert {path.split("destinations.", 1)[-1] for path in booleans} == set(BOOLEAN_FIELDS)


@pytest.mark.parametrize("field", sorted(BOOLEAN_FIELDS))
@pytest.mark.parametrize(("word", "expected"), WORDS)
def test_boolean_field_takes_yaml11_words(field: str, word: str, expected: bool) -> None:
    text, read = BOOLEAN_FIELDS[field]
    assert read(load(text.replace("{w}", word))) is expected


@pytest.mark.parametrize(("word", "expected"), [("'yes'", True), ('"off"', False), ("!!str On", True)])
def test_quoted_words_decode_too_like_yaml_v3(word: str, expected: bool) -> None:
    # yaml.v3 hands a quoted scalar to a bool field as its string, and the string matches
    text, read = BOOLEAN_FIELDS["force_path_style"]
    assert read(load(text.replace("{w}", word))) is expected


@pytest.mark.parametrize("word", ["'true'", "'False'", "yEs", "oN", "YeS", "1", "0", "t", "enable", "~x"])
def test_other_spellings_are_not_booleans(word: str) -> None:
    text, _ = BOOLEAN_FIELDS["retention.prune.enabled"]
    assert messages(text.replace("{w}", word)) == [
        "pipelines[0].destinations[0].retention.prune.enabled must be a boolean"
    ]


@pytest.mark.parametrize("word", TRUE_WORDS + FALSE_WORDS)
def test_string_fields_keep_the_word(word: str) -> None:
    config = load(
        TOKENS.replace("allow_pipelines: [reports]", f"allow_pipelines: [{word}]").replace("reporter", word)
        + f"secrets: {{directory: {word}}}\n"
        + one_pipeline(
            pipeline_id=word,
            source="{backend: http_upload}",
            destination=f"{{id: {word}, backend: s3, bucket: {word}, prefix: {word}, region: {word}}}",
        )
    )
    pipeline = config.pipelines[0]
    storage = _s3(config)
    assert (pipeline.id, pipeline.destinations[0].id) == (word, word)
    assert (storage.bucket, storage.prefix, storage.region) == (word, word, word)
    assert config.upload_tokens[0].id == word and config.upload_tokens[0].allow_pipelines == (word,)
    assert str(config.secrets.directory).endswith(word)


def test_mixed_document_decodes_only_the_boolean_fields() -> None:
    config = load(upload_pipeline("staging_path: on").replace(
        "destinations: [{id: archive, backend: local, path: /archive}]",
        "destinations: [{id: 'yes', backend: local, path: 'no', publish: {source: no, html: yes}, "
        "transform: {markdown_to_html: {enabled: On}}}]",
    ))
    destination = config.pipelines[0].destinations[0]
    assert (destination.id, destination.publish.source, destination.publish.html) == ("yes", False, True)
    assert destination.transform.markdown_to_html.enabled is True
    assert destination.storage.path == "no"
    assert str(config.pipelines[0].source.staging_path) == "/srv/config/on"

"""``load_config`` builds the validated tree without a pydantic schema (config/construct.py, issue
17 start-up): the result must be exactly what ``Config.model_validate`` builds from the same tree,
value for value, type for type, with the same fields-set, for every example and a spread of
configs covering every backend, optional block and union."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pydantic import BaseModel

from distributor_core.config.construct import construct
from distributor_core.config.decode import decode_document
from distributor_core.config.defaults import apply_defaults
from distributor_core.config.loader import load_yaml_mapping
from distributor_core.config.models import Config, LocalBackend
from distributor_core.config.validate import validate_tree
from tests.config.helpers import BASE_DIR, TOKENS, one_pipeline, upload_pipeline, with_destination

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted(p for p in (ROOT / "examples").rglob("*.yml") if p.name != "docker-compose.yml")

SSH = "{backend: ssh, host: files.example.com, port: 2222, user: deploy, path: /srv/out, known_hosts_file: /etc/kh}"
S3 = "{backend: s3, bucket: site, prefix: out, region: eu-west-1, force_path_style: true}"
TEXTS = {
    "local": one_pipeline(),
    "ssh source": one_pipeline(source=SSH),
    "s3 destination": one_pipeline(destination=f"{{id: archive, {S3[1:]}"),
    "ssh destination": one_pipeline(destination=f"{{id: archive, {SSH[1:]}"),
    "markdown and links": with_destination(
        "publish: {source: true, html: true}, transform: {markdown_to_html: {enabled: true, mode: index}}, "
        "links: {base_url: 'https://example.com/site', primary: html}"
    ),
    "policies": with_destination(
        "state: {mode: shared_root}, reconciliation: {mode: merge}, takeover: {mode: any_managed}, "
        "retention: {prune: {keep_latest: 3, older_than: 720h}}"
    ),
    "upload": upload_pipeline(),
    "server and secrets": "server: {http: {bind: '127.0.0.1:8080', staging_root: staging, max_upload_size: 20MB}}\n"
    + "secrets: {directory: secrets}\n"
    + TOKENS
    + one_pipeline(source="{backend: http_upload}"),
}


def _tree(text: str, base_dir: Path) -> dict:
    raw = load_yaml_mapping(text, source_name="<test>")
    tree, messages = decode_document(raw)
    assert messages == []
    filled = apply_defaults(tree, Path(os.path.abspath(base_dir)))
    assert validate_tree(filled) == []
    return {**filled, "config_path": None}


def _same(ours: object, theirs: object, path: str = "config") -> None:
    assert type(ours) is type(theirs), f"{path}: {type(ours).__name__} != {type(theirs).__name__}"
    if isinstance(ours, BaseModel):
        assert ours.model_fields_set == theirs.model_fields_set, path
        for name in type(ours).model_fields:
            _same(getattr(ours, name), getattr(theirs, name), f"{path}.{name}")
    elif isinstance(ours, tuple):
        assert len(ours) == len(theirs), path
        for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
            _same(a, b, f"{path}[{i}]")
    else:
        assert ours == theirs, f"{path}: {ours!r} != {theirs!r}"


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_example_builds_as_model_validate_builds_it(example: Path) -> None:
    tree = _tree(example.read_text(), example.parent)
    built = construct(Config, tree)
    _same(built, Config.model_validate(tree))
    assert built == Config.model_validate(tree)


@pytest.mark.parametrize("name", list(TEXTS))
def test_a_spread_of_configs_builds_as_model_validate_builds_it(name: str) -> None:
    tree = _tree(TEXTS[name], BASE_DIR)
    _same(construct(Config, tree), Config.model_validate(tree))


def test_a_field_the_model_does_not_have_is_a_type_error_not_a_silent_extra() -> None:
    with pytest.raises(TypeError, match="LocalBackend has no field 'colour'"):
        construct(LocalBackend, {"path": "x", "resolved_path": "/x", "colour": "red"})

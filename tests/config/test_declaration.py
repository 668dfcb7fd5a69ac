"""The config is declared once (issue 39 item 1): every bound and documented value a key declares
is what the loader enforces, with the catalogue's wording; and each backend names its own root
(item 3), the one text reports, refusals, Dagster and the scrubber show."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from distributor_core.config import (
    Destination,
    HTTPUploadSource,
    LocalBackend,
    S3Backend,
    ServerHTTP,
    SSHBackend,
    default_of,
    shape,
)
from distributor_core.config.shape import Kind

from .helpers import BASE_DIR, LOCAL_DEST, TOKENS, load, messages, one_pipeline, upload_pipeline

P, D = "pipelines[0]", "pipelines[0].destinations[0]"
#: where each model's keys sit in a config, and a config that writes ``{key}: {value}`` there
PLACES = {
    ServerHTTP: ("server.http", lambda key, value: f"server: {{http: {{{key}: {value}}}}}\n" + one_pipeline()),
    shape.field(ServerHTTP, "limits").model: (
        "server.http.limits",
        lambda key, value: f"server: {{http: {{limits: {{{key}: {value}}}}}}}\n" + one_pipeline(),
    ),
    SSHBackend: (f"{D}", lambda key, value: one_pipeline(
        destination=f"{{id: a, backend: ssh, host: h, user: u, path: /p, {key}: {value}}}")),
    HTTPUploadSource: (f"{P}.source", lambda key, value: upload_pipeline(f"{key}: {value}")),
    Destination: (f"{D}", lambda key, value: one_pipeline(destination=f"{{id: a, backend: local, path: /a, "
                                                                      f"{key}: {value}}}")),
    shape.field(shape.root().keys["pipelines"].model, "dagster").model: (  # type: ignore[arg-type]
        f"{P}.dagster",
        lambda key, value: f"pipelines: [{{id: p, source: {{backend: local, path: /s}}, dagster: {{{key}: {value}}}, "
                           f"destinations: [{LOCAL_DEST}]}}]\n",
    ),
}


def _bounded() -> list[tuple[type, str, shape.Key]]:
    found = []
    for model in PLACES:
        for name, key in shape.fields_of(model).items():
            if key.gt is not None or key.ge is not None:
                found.append((model, name, key))
    return found


def _breaking(key: shape.Key) -> str:
    """A written value just outside the key's bounds."""
    low = key.gt if key.gt is not None else key.ge - 1  # type: ignore[operator]
    if key.kind is Kind.DURATION:
        return "0s"
    if key.kind is Kind.BYTE_SIZE:
        return "0B"
    return str(low)


@pytest.mark.parametrize(("model", "name", "key"), _bounded(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_declared_bound_is_enforced_with_its_message(model: type, name: str, key: shape.Key) -> None:
    where, text = PLACES[model]
    if key.le is not None:
        wording = f"must be between {key.ge} and {key.le}"
    elif key.gt == 0:
        wording = "must be greater than zero"
    elif key.ge == 0:
        wording = "must be zero or greater"
    else:
        wording = f"must be {key.ge} or greater"
    assert f"{where}.{name} {wording}" in messages(text(name, _breaking(key)))


def test_every_documented_value_is_the_only_one_accepted() -> None:
    for name, key in shape.walk(shape.root()):
        if key.choices and name.startswith("pipelines.destinations.") and name.count(".") == 3:
            block, field = name.split(".")[2:]
            extra = "base_url: 'https://example.com/', " if block == "links" else ""

            def text(value: str, block: str = block, field: str = field, extra: str = extra) -> str:
                destination = f"{{id: a, backend: local, path: /a, {block}: {{{extra}{field}: {value}}}}}"
                return one_pipeline(destination=destination)

            for choice in key.choices:
                load(text(choice))
            listed = " or ".join(key.choices) if len(key.choices) == 2 else None
            (message,) = messages(text("nope"))
            assert message.startswith(f"{D}.{block}.{field} must be ")
            if listed:
                assert message.endswith(listed)


def test_defaults_come_from_the_declaration() -> None:
    config = load(one_pipeline())
    http, destination = config.server.http, config.pipelines[0].destinations[0]
    assert http.retention == default_of(ServerHTTP, "retention") == timedelta(hours=24)
    assert http == ServerHTTP(staging_root=BASE_DIR / ".distributor/staging")  # built in code: the same defaults
    assert destination.lock_lease == default_of(Destination, "lock_lease")
    assert destination.publish.source is True  # an absent publish block: the source files
    assert load(one_pipeline(destination="{id: a, backend: local, path: /a, publish: {html: true}, "
                                         "transform: {markdown_to_html: {enabled: true}}}")
                ).pipelines[0].destinations[0].publish.source is False  # present: an omitted key is false


# --- one root text -------------------------------------------------------------------------------


def test_each_backend_names_its_root_and_its_paths() -> None:
    local = LocalBackend(path="out", resolved_path=Path("/srv/out"))
    assert (local.location(), local.location("a/b.txt")) == ("/srv/out", "/srv/out/a/b.txt")
    assert local.uri("a b.txt") == "file:///srv/out/a%20b.txt"
    assert (local.root_text, local.root_path, local.local_root) == ("/srv/out", "out", Path("/srv/out"))

    ssh = SSHBackend(host="files.example.com", port=2222, user="deploy", path="/srv/site")
    assert ssh.location() == ssh.uri() == ssh.root_key == "ssh://deploy@files.example.com:2222/srv/site"
    assert ssh.location("2026/x.md") == "ssh://deploy@files.example.com:2222/srv/site/2026/x.md"
    assert (ssh.root_text, ssh.local_root, ssh.endpoint_note) == ("/srv/site", None, "")
    spaced = SSHBackend(host="h", user="a b", path="/srv/my site")
    assert spaced.location("x y.md") == "ssh://a b@h:22/srv/my site/x y.md"  # as an operator types it
    assert spaced.uri("x y.md") == "ssh://a%20b@h:22/srv/my%20site/x%20y.md"  # a URI (dagster/uri)

    s3 = S3Backend(bucket="site", prefix="reports/daily", endpoint="http://127.0.0.1:9000")
    assert s3.location() == s3.uri() == "s3://site/reports/daily"
    assert s3.location("x.md") == "s3://site/reports/daily/x.md"
    assert s3.endpoint_note == " at http://127.0.0.1:9000" and s3.root_text == "reports/daily"
    assert S3Backend(bucket="site").location() == "s3://site" and S3Backend(bucket="site").root_text == "."
    assert S3Backend(bucket="site", prefix="a b").uri("c#d.md") == "s3://site/a%20b/c%23d.md"


def test_a_shared_upload_source_is_named_by_its_store() -> None:
    config = load("server: {http: {staging_root: 's3://stage/up', staging_s3: {endpoint: 'http://h:9000'}}}\n"
                  + TOKENS + one_pipeline(source="{backend: http_upload}"))
    source = config.pipelines[0].source
    assert isinstance(source, HTTPUploadSource) and source.shared
    assert source.location() == "s3://stage/up/reports" and source.endpoint_note == " at http://h:9000"
    local = load(upload_pipeline()).pipelines[0].source
    assert local.location() == str(BASE_DIR / ".distributor/staging/reports")
    assert local.uri() == (BASE_DIR / ".distributor/staging/reports").as_uri()

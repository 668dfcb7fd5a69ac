"""The JSON Schema of the config (draft 2020-12) matches what the loader accepts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from distributor_core.config import config_json_schema, models, shape
from distributor_core.config.loader import load_yaml_mapping

from .helpers import messages, one_pipeline, upload_pipeline, with_destination

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.yml"))


def _validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(config_json_schema())


def _errors(text: str) -> list[str]:
    return [error.message for error in _validator().iter_errors(load_yaml_mapping(text))]


def test_schema_is_a_valid_draft_2020_12_schema() -> None:
    schema = config_json_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(schema)
    json.dumps(schema)  # plain JSON data


def test_schema_is_a_fresh_copy() -> None:
    first = config_json_schema()
    first["properties"].clear()
    assert config_json_schema()["properties"]


@pytest.mark.parametrize("path", EXAMPLES, ids=[path.name for path in EXAMPLES])
def test_every_example_config_is_valid(path: Path) -> None:
    assert _errors(path.read_text()) == []


def test_examples_exist() -> None:
    assert len(EXAMPLES) >= 10


@pytest.mark.parametrize(
    "text",
    [
        one_pipeline(),
        upload_pipeline("staging_path: s, max_upload_size: 32MB"),
        one_pipeline(source="{backend: ssh, host: h, user: u, path: /p, port: 2222, host_key_policy: accept_new}"),
        one_pipeline(source="{backend: ssh, host: 'fe80::1%eth0', user: svc@example.com, path: /p}"),
        one_pipeline(destination="{id: a, backend: s3, bucket: b, prefix: p, endpoint: 'http://h:9000', "
                                 "force_path_style: true, "
                                 "credentials: {access_key_id_env: A, secret_access_key_env: B}}"),
        with_destination("retention: {prune: {enabled: true, older_than: 1h30m, keep_latest: 3}}"),
        "server: {http: {max_upload_size: 1048576, retention: 1.5h}}\n" + one_pipeline(),
        with_destination("publish: {source: yes, html: On}, transform: {markdown_to_html: {enabled: Y}}"),
        with_destination("retention: {prune: {enabled: off, keep_latest: 1}}"),
    ],
)
def test_valid_configs_pass_the_schema(text: str) -> None:
    assert _errors(text) == []


@pytest.mark.parametrize(
    "text",
    [
        "surprise: 1\n" + one_pipeline(),
        one_pipeline(source="{backend: local, path: /s, bucket: b}"),
        one_pipeline(destination="{id: a, backend: local, path: /a, staging_path: /s}"),
        one_pipeline(destination="{id: a, backend: http_upload}"),
        one_pipeline(destination="{id: a, backend: local}"),
        with_destination("state: {mode: shared}"),
        with_destination("transfer: {on_destination_older: skip}"),
        with_destination("links: {primary: html}"),
        with_destination("retention: {prune: {older_than: 7d}}"),
        "server: {http: {max_upload_size: 20XB}}\n" + one_pipeline(),
        one_pipeline(pipeline_id="'.hidden'"),
        one_pipeline(source="{backend: s3, bucket: b, credentials: {access_key_id_env: A}}"),
        "pipelines: []",
        with_destination("retention: {prune: {enabled: yEs, keep_latest: 1}}"),
        with_destination("publish: {source: 'true'}"),
        "upload_tokens: [{id: t, token: x, token_env: T, allow_pipelines: [reports]}]\n" + one_pipeline(),
        one_pipeline(source="{backend: ssh, host: '-oProxyCommand=x', user: u, path: /p}"),  # the declared pattern
        one_pipeline(source="{backend: ssh, host: h, user: '.u', path: /p}"),
    ],
)
def test_invalid_configs_fail_the_schema_and_the_loader(text: str) -> None:
    assert _errors(text) != []
    assert messages(text) != []


def _keys(schema: dict[str, Any]) -> set[str]:
    return set(schema["properties"])


def test_schema_names_exactly_the_decoder_keys() -> None:
    schema = config_json_schema()
    destination_keys = set(shape.root().keys["pipelines"].keys["destinations"].keys)
    backends = shape.backends()
    assert _keys(schema) == set(shape.root().keys) == {"server", "secrets", "upload_tokens", "pipelines"}
    pipeline = schema["properties"]["pipelines"]["items"]
    destination = pipeline["properties"]["destinations"]["items"]
    assert _keys(destination) == destination_keys | {"backend"}
    for branch in destination["allOf"]:
        backend = branch["if"]["properties"]["backend"]["const"]
        assert set(branch["then"]["properties"]) == destination_keys | {"backend"} | set(backends[backend].keys)
    source = pipeline["properties"]["source"]
    assert {b["if"]["properties"]["backend"]["const"] for b in source["allOf"]} == set(backends)
    assert source["properties"]["backend"]["enum"] == ["local", "ssh", "s3", "http_upload"]
    assert destination["properties"]["backend"]["enum"] == ["local", "ssh", "s3"]


def test_schema_carries_the_declared_defaults_and_bounds() -> None:
    http = config_json_schema()["properties"]["server"]["properties"]["http"]["properties"]
    assert http["retention"]["default"] == "24h" and http["max_upload_size"]["default"] == "100MB"
    assert http["publication_lease"]["default"] == "60s" and http["queue_size"]["minimum"] == 1
    assert "[" not in http["max_connections_per_client"]["description"]  # Markdown links dropped
    ssh = shape.backends()["ssh"].keys["port"]
    assert (ssh.ge, ssh.le, ssh.default) == (1, 65535, models.default_of(models.SSHBackend, "port"))

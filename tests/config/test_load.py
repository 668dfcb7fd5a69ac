"""Loading valid configs: interfaces §1.11 cases 1–7 and 13, defaults §1.9, paths (resolutions D4)."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import pytest

from distributor_core.config import (
    ConfigError,
    ConfigFileError,
    ConfigLookupError,
    HTTPUploadSource,
    LocalBackend,
    S3Backend,
    SSHBackend,
    destination_context,
    format_duration,
    load_config,
    parse_config,
)

from .helpers import BASE_DIR, TOKENS, load, messages, one_pipeline, with_destination

MINIMAL = """
pipelines:
  - id: reports
    source:
      backend: local
      path: /source
    destinations:
      - id: archive
        backend: local
        path: /archive
"""


def test_case1_minimal_config_defaults() -> None:
    config = load(MINIMAL)
    destination = config.pipelines[0].destinations[0]
    assert destination.transfer.on_destination_older == "replace"
    assert destination.reconciliation.mode == "replace"
    assert destination.state.mode == "single_owner"
    assert destination.retention.prune.enabled is False
    assert config.secrets.directory == ""
    assert config.secrets.resolved_directory is None


def test_all_section_1_9_defaults() -> None:
    config = load(MINIMAL)
    http = config.server.http
    assert http.bind == "127.0.0.1:8080"
    assert (http.bind_host, http.bind_port) == ("127.0.0.1", 8080)
    assert http.staging_root == BASE_DIR / ".distributor" / "staging"
    assert http.max_upload_size == 100 * 1024 * 1024
    assert http.queue_size == 16
    assert http.max_concurrency == 1
    assert http.retention == timedelta(hours=24)
    destination = config.pipelines[0].destinations[0]
    assert destination.publish.source is True
    assert destination.publish.html is False
    assert destination.transform.markdown_to_html is None
    assert destination.markdown_mode is None
    assert destination.path_mapping.mode == "preserve_relative"
    assert destination.links is None
    assert destination.retention.prune.older_than is None
    assert destination.retention.prune.keep_latest is None
    assert destination.takeover.mode == "same_pipeline"
    assert destination.transfer.on_destination_same == "skip"
    assert destination.transfer.on_destination_newer == "skip"
    assert destination.transfer.on_conflict == "fail"
    assert config.upload_tokens == ()
    assert config.base_dir == BASE_DIR
    assert config.config_path is None


def test_case2_reconciliation_modes_are_kept() -> None:
    config = load(
        one_pipeline(destination="{id: archive, backend: local, path: /archive, reconciliation: {mode: replace}}, "
                     "{id: web, backend: local, path: /web, reconciliation: {mode: merge}}")
    )
    assert [d.reconciliation.mode for d in config.pipelines[0].destinations] == ["replace", "merge"]


def test_case3_state_modes_are_kept() -> None:
    config = load(
        one_pipeline(destination="{id: archive, backend: local, path: /archive, state: {mode: single_owner}}, "
                     "{id: web, backend: local, path: /web, state: {mode: shared_root}}")
    )
    assert [d.state.mode for d in config.pipelines[0].destinations] == ["single_owner", "shared_root"]


def test_case4_retention_prune() -> None:
    config = load(with_destination("retention: {prune: {enabled: true, older_than: 168h, keep_latest: 3}}"))
    prune = config.pipelines[0].destinations[0].retention.prune
    assert prune.enabled is True
    assert prune.older_than == timedelta(hours=168)
    assert format_duration(prune.older_than) == "168h0m0s"
    assert prune.keep_latest == 3


def test_case5_http_upload_source_values_are_preserved() -> None:
    config = load(
        """
server:
  http:
    bind: 127.0.0.1:0
    staging_root: /srv/distributor/staging
    max_upload_size: 64MB
    queue_size: 4
    max_concurrency: 2
    retention: 36h
pipelines:
  - id: weather-daily
    source:
      backend: http_upload
      staging_path: /srv/distributor/staging/weather-daily
      max_upload_size: 32MB
    destinations:
      - id: archive
        backend: local
        path: /archive
upload_tokens:
  - id: weather-reporter
    token_env: WEATHER_DAILY_UPLOAD_TOKEN
    allow_pipelines:
      - weather-daily
"""
    )
    http = config.server.http
    assert (http.bind, http.bind_port) == ("127.0.0.1:0", 0)
    assert http.staging_root == Path("/srv/distributor/staging")
    assert http.max_upload_size == 64 * 1024**2
    assert (http.queue_size, http.max_concurrency, http.retention) == (4, 2, timedelta(hours=36))
    source = config.pipelines[0].source
    assert isinstance(source, HTTPUploadSource)
    assert source.backend == "http_upload"
    assert source.staging_path == Path("/srv/distributor/staging/weather-daily")
    assert source.max_upload_size == 32 * 1024**2
    token = config.upload_tokens[0]
    assert (token.id, token.token_env, token.allow_pipelines) == (
        "weather-reporter", "WEATHER_DAILY_UPLOAD_TOKEN", ("weather-daily",)
    )
    assert config.pipelines[0].is_upload
    assert config.upload_pipelines == (config.pipelines[0],)


def test_case6_http_upload_defaults_come_from_server() -> None:
    config = load(
        "server: {http: {max_upload_size: 20MB}}\n"
        "upload_tokens: [{id: weather-reporter, token_env: T, allow_pipelines: [weather-daily]}]\n"
        "pipelines: [{id: weather-daily, source: {backend: http_upload}, "
        "destinations: [{id: archive, backend: local, path: /archive}]}]\n"
    )
    source = config.pipelines[0].source
    assert isinstance(source, HTTPUploadSource)
    assert source.staging_path == config.server.http.staging_root / "weather-daily"
    assert source.staging_path == BASE_DIR / ".distributor/staging/weather-daily"
    assert source.max_upload_size == config.server.http.max_upload_size == 20 * 1024**2


@pytest.mark.parametrize(
    "text",
    [
        """
pipelines:
  - {id: weather-daily, source: {backend: http_upload}, destinations: [{id: archive, backend: local, path: /a/w}]}
  - {id: calendar-daily, source: {backend: http_upload}, destinations: [{id: archive, backend: local, path: /a/c}]}
upload_tokens:
  - {id: reporter, token_env: REPORTER_UPLOAD_TOKEN, allow_pipelines: [weather-daily, calendar-daily]}
""",
        """
pipelines:
  - {id: reports, source: {backend: http_upload}, destinations: [{id: archive, backend: local, path: /archive}]}
upload_tokens:
  - {id: reporter-a, token_env: REPORTER_A_UPLOAD_TOKEN, allow_pipelines: [reports]}
  - {id: reporter-b, token_env: REPORTER_B_UPLOAD_TOKEN, allow_pipelines: [reports]}
""",
    ],
    ids=["one-token-two-pipelines", "two-tokens-one-pipeline"],
)
def test_case7_token_sharing_is_allowed(text: str) -> None:
    config = load(text)
    allowed = {token.id: set(token.allow_pipelines) for token in config.upload_tokens}
    assert allowed in (
        {"reporter": {"weather-daily", "calendar-daily"}},
        {"reporter-a": {"reports"}, "reporter-b": {"reports"}},
    )


@pytest.mark.parametrize("mode", ["same_pipeline", "same_source", "any_managed", "never"])
def test_case13_takeover_modes_load(mode: str) -> None:
    config = load(with_destination(f"takeover: {{mode: {mode}}}"))
    assert config.pipelines[0].destinations[0].takeover.mode == mode


def test_case13_takeover_bogus_fails() -> None:
    assert messages(with_destination("takeover: {mode: bogus}")) == [
        "pipelines[0].destinations[0].takeover.mode must be same_pipeline, same_source, any_managed, or never"
    ]


def test_empty_strings_mean_default_like_go_zero_values() -> None:
    config = load(
        "server: {http: {bind: '', staging_root: ''}}\n"
        + with_destination("state: {mode: ''}, reconciliation: {mode: ''}, takeover: {mode: ''}, "
                           "path_mapping: {mode: ''}, transfer: {on_conflict: ''}")
    )
    destination = config.pipelines[0].destinations[0]
    assert config.server.http.bind == "127.0.0.1:8080"
    assert config.server.http.staging_root == BASE_DIR / ".distributor/staging"
    assert (destination.state.mode, destination.reconciliation.mode, destination.takeover.mode) == (
        "single_owner", "replace", "same_pipeline"
    )
    assert destination.path_mapping.mode == "preserve_relative"
    assert destination.transfer.on_conflict == "fail"


def test_null_values_mean_absent() -> None:
    config = load("server: ~\nsecrets: ~\n" + with_destination("publish: ~, links: ~, transform: ~, retention: ~"))
    destination = config.pipelines[0].destinations[0]
    assert destination.publish.source is True and destination.publish.html is False
    assert destination.links is None
    assert config.server.http.queue_size == 16


def test_publish_block_present_omitted_key_is_false() -> None:
    config = load(with_destination("publish: {html: true}, transform: {markdown_to_html: {enabled: true}}"))
    destination = config.pipelines[0].destinations[0]
    assert (destination.publish.source, destination.publish.html) == (False, True)
    assert destination.transform.markdown_to_html is not None
    assert destination.transform.markdown_to_html.mode == "sidecar"
    assert destination.markdown_mode == "sidecar"


def test_transform_without_html_is_allowed_and_unused() -> None:
    config = load(with_destination("transform: {markdown_to_html: {enabled: false, mode: index}}"))
    destination = config.pipelines[0].destinations[0]
    assert destination.transform.markdown_to_html is not None
    assert destination.transform.markdown_to_html.mode == "index"
    assert destination.markdown_mode is None


def test_links_default_primary_auto_and_all_primaries() -> None:
    config = load(with_destination("links: {base_url: 'https://reports.example.com/x/'}"))
    links = config.pipelines[0].destinations[0].links
    assert links is not None and links.primary == "auto"
    assert links.base_url == "https://reports.example.com/x/"
    for primary in ("auto", "source", "html"):
        config = load(with_destination(f"links: {{base_url: 'http://h', primary: {primary}}}"))
        assert config.pipelines[0].destinations[0].links.primary == primary  # type: ignore[union-attr]


def test_transfer_values_accepted() -> None:
    config = load(with_destination(
        "transfer: {on_destination_same: fail, on_destination_older: fail, on_destination_newer: replace, "
        "on_conflict: replace}"
    ))
    transfer = config.pipelines[0].destinations[0].transfer
    assert (transfer.on_destination_same, transfer.on_destination_older) == ("fail", "fail")
    assert (transfer.on_destination_newer, transfer.on_conflict) == ("replace", "replace")


def test_disabled_prune_accepts_negative_keep_latest() -> None:
    config = load(with_destination("retention: {prune: {enabled: false, keep_latest: -1, older_than: 0s}}"))
    prune = config.pipelines[0].destinations[0].retention.prune
    assert (prune.enabled, prune.keep_latest, prune.older_than) == (False, -1, timedelta(0))


def test_numbers_for_string_fields_are_their_text() -> None:
    config = load(one_pipeline(pipeline_id="2026", destination="{id: 010, backend: local, path: 1.10}"))
    pipeline = config.pipelines[0]
    assert pipeline.id == "2026"
    destination = pipeline.destinations[0]
    assert destination.id == "010"
    assert isinstance(destination.storage, LocalBackend)
    assert destination.storage.path == "1.10"


def test_validation_block_may_be_empty() -> None:
    config = load("pipelines: [{id: reports, validation: {}, source: {backend: local, path: /s}, "
                  "destinations: [{id: a, backend: local, path: /a}]}]")
    assert config.pipelines[0].validation.cache is True  # issue 17 P3: the one field, on by default


@pytest.mark.parametrize(("block", "expected"), [("", True), ("validation: {cache: true}, ", True),
                                                 ("validation: {cache: false}, ", False),
                                                 ("validation: {cache: off}, ", False)])
def test_validation_cache_switch(block: str, expected: bool) -> None:
    config = load(f"pipelines: [{{id: reports, {block}source: {{backend: local, path: /s}}, "
                  "destinations: [{id: a, backend: local, path: /a}]}]")
    assert config.pipelines[0].validation.cache is expected


def test_validation_cache_must_be_a_boolean() -> None:
    with pytest.raises(ConfigError) as raised:
        load("pipelines: [{id: reports, validation: {cache: 3}, source: {backend: local, path: /s}, "
             "destinations: [{id: a, backend: local, path: /a}]}]")
    assert "pipelines[0].validation.cache must be a boolean" in str(raised.value)


# --- backends ------------------------------------------------------------------------------------


def test_ssh_backend_fields_and_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", "/home/operator")
    config = load(one_pipeline(
        source="{backend: ssh, host: sftp.example.com, user: dist, path: /srv/in}",
        destination="{id: out, backend: ssh, host: h, port: 2222, user: u, path: /srv/out, "
                    "private_key_file: keys/id_ed25519, known_hosts_file: ~/kh, host_key_policy: accept_new}",
    ))
    source = config.pipelines[0].source
    assert isinstance(source, SSHBackend)
    assert (source.host, source.port, source.user, source.path) == ("sftp.example.com", 22, "dist", "/srv/in")
    assert source.private_key_file is None
    assert source.known_hosts_file == Path("/home/operator/.ssh/known_hosts")
    assert source.host_key_policy == "strict"
    assert source.root_path == "/srv/in"
    assert source.root_key == "ssh://dist@sftp.example.com:22/srv/in"
    storage = config.pipelines[0].destinations[0].storage
    assert isinstance(storage, SSHBackend)
    assert storage.port == 2222
    assert storage.private_key_file == BASE_DIR / "keys/id_ed25519"
    assert storage.known_hosts_file == Path("/home/operator/kh")
    assert storage.host_key_policy == "accept_new"
    assert config.pipelines[0].destinations[0].backend == "ssh"


def test_s3_backend_fields_and_defaults() -> None:
    config = load(one_pipeline(
        source="{backend: s3, bucket: in}",
        destination="{id: out, backend: s3, bucket: out, prefix: reports/daily, region: eu-west-1, "
                    "endpoint: 'http://127.0.0.1:9000', force_path_style: true, "
                    "credentials: {access_key_id_env: AK, secret_access_key_env: SK}}",
    ))
    source = config.pipelines[0].source
    assert isinstance(source, S3Backend)
    assert (source.bucket, source.prefix, source.region, source.endpoint) == ("in", "", "us-east-1", None)
    assert source.force_path_style is False and source.credentials is None
    assert source.root_path == "."
    storage = config.pipelines[0].destinations[0].storage
    assert isinstance(storage, S3Backend)
    assert (storage.prefix, storage.region, storage.endpoint) == ("reports/daily", "eu-west-1", "http://127.0.0.1:9000")
    assert storage.force_path_style is True
    assert storage.credentials is not None
    assert (storage.credentials.access_key_id_env, storage.credentials.secret_access_key_env) == ("AK", "SK")
    assert storage.root_path == "reports/daily"
    assert storage.root_key == "s3://out/reports/daily@http://127.0.0.1:9000"
    # AWS S3 enforces If-None-Match/If-Match; a custom endpoint is pre-checked unless told otherwise
    assert (source.conditional_writes, storage.conditional_writes) == ("trusted", "precheck")


def test_s3_conditional_writes_explicit() -> None:
    config = load(one_pipeline(
        source="{backend: s3, bucket: in, conditional_writes: precheck}",
        destination="{id: out, backend: s3, bucket: out, endpoint: 'http://127.0.0.1:9000', "
                    "conditional_writes: trusted}",
    ))
    source = config.pipelines[0].source
    storage = config.pipelines[0].destinations[0].storage
    assert isinstance(source, S3Backend) and isinstance(storage, S3Backend)
    assert (source.conditional_writes, storage.conditional_writes) == ("precheck", "trusted")


def test_s3_empty_credentials_block_means_default_chain() -> None:
    config = load(one_pipeline(destination="{id: out, backend: s3, bucket: b, credentials: {}}"))
    storage = config.pipelines[0].destinations[0].storage
    assert isinstance(storage, S3Backend) and storage.credentials is None


# --- paths (resolutions D4) ----------------------------------------------------------------------


def test_relative_paths_resolve_against_the_config_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config_dir = tmp_path / "etc" / "distributor"
    config_dir.mkdir(parents=True)
    config_file = config_dir / "distributor.yml"
    config_file.write_text(
        "secrets: {directory: secrets}\n"
        "server: {http: {staging_root: ../spool}}\n"
        + TOKENS.replace("allow_pipelines: [reports]", "allow_pipelines: [reports, third]")
        + "pipelines:\n"
        "  - {id: reports, source: {backend: http_upload, staging_path: stage/reports}, "
        "destinations: [{id: archive, backend: local, path: ../out/archive}]}\n"
        "  - {id: other, source: {backend: local, path: ./in}, "
        "destinations: [{id: archive, backend: local, path: /abs/out}]}\n"
        "  - {id: third, source: {backend: http_upload}, destinations: [{id: a, backend: local, path: o}]}\n"
    )
    monkeypatch.chdir(tmp_path)  # the working directory must not matter
    config = load_config("etc/distributor/distributor.yml")
    assert config.config_path == config_file
    assert config.base_dir == config_dir
    assert config.secrets.directory == "secrets"
    assert config.secrets.resolved_directory == config_dir / "secrets"
    assert config.server.http.staging_root == tmp_path / "etc" / "spool"
    first, second, third = config.pipelines
    assert isinstance(first.source, HTTPUploadSource)
    assert first.source.staging_path == config_dir / "stage/reports"
    archive = first.destinations[0].storage
    assert isinstance(archive, LocalBackend)
    assert archive.path == "../out/archive"  # as configured, for reports
    assert archive.root_path == "../out/archive"
    assert archive.resolved_path == tmp_path / "etc" / "out" / "archive"
    assert archive.root_key == f"local:{tmp_path / 'etc' / 'out' / 'archive'}"
    assert isinstance(second.source, LocalBackend)
    assert second.source.resolved_path == config_dir / "in"
    assert second.destinations[0].storage.resolved_path == Path("/abs/out")  # type: ignore[union-attr]
    assert isinstance(third.source, HTTPUploadSource)
    assert third.source.staging_path == tmp_path / "etc" / "spool" / "third"


def test_parse_config_resolves_against_a_relative_base_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    config = parse_config(MINIMAL.replace("/source", "src"), base_dir="conf")
    assert config.base_dir == tmp_path / "conf"
    assert config.pipelines[0].source.resolved_path == tmp_path / "conf" / "src"  # type: ignore[union-attr]


def test_local_path_tilde_is_not_expanded() -> None:
    config = load(MINIMAL.replace("/source", "~/src"))
    assert config.pipelines[0].source.resolved_path == BASE_DIR / "~" / "src"  # type: ignore[union-attr]


# --- files ---------------------------------------------------------------------------------------


def test_load_config_missing_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yml"
    with pytest.raises(ConfigFileError) as info:
        load_config(missing)
    assert str(info.value) == f"cannot read config {missing}: No such file or directory"
    assert isinstance(info.value, ConfigError)


def test_load_config_directory(tmp_path: Path) -> None:
    with pytest.raises(ConfigFileError) as info:
        load_config(tmp_path)
    assert str(info.value) == f"cannot read config {tmp_path}: Is a directory"


def test_load_config_invalid_utf8(tmp_path: Path) -> None:
    path = tmp_path / "bad.yml"
    path.write_bytes(b"pipelines: \xff\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert info.value.messages == [f"{path}: yaml: invalid UTF-8 at byte 11"]


def test_load_config_yaml_error_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "dup.yml"
    path.write_text("pipelines: []\npipelines: []\n")
    with pytest.raises(ConfigError) as info:
        load_config(os.fspath(path))
    assert str(info.value) == f'invalid config: {path}: yaml: line 2: mapping key "pipelines" already defined at line 1'


def test_error_string_joins_all_messages() -> None:
    with pytest.raises(ConfigError) as info:
        load("pipelines: [{source: {backend: local}, destinations: []}]")
    assert info.value.messages == [
        "pipelines[0].id is required",
        "pipelines[0].source.path is required for local backend",
        "pipelines[0].destinations is required",
    ]
    assert str(info.value) == (
        "invalid config: pipelines[0].id is required; pipelines[0].source.path is required for local backend; "
        "pipelines[0].destinations is required"
    )


# --- lookups ---------------------------------------------------------------------------------------


def test_pipeline_and_destination_lookups() -> None:
    config = load(
        "pipelines:\n"
        "  - {id: a, source: {backend: local, path: /s}, destinations: [{id: x, backend: local, path: /x}, "
        "{id: y, backend: local, path: /y}]}\n"
        "  - {id: b, source: {backend: local, path: /s}, destinations: [{id: x, backend: local, path: /z}]}\n"
    )
    assert config.pipeline("b") is config.pipelines[1]
    assert config.pipeline_index("b") == 1
    assert config.pipeline("a").destination("y") is config.pipelines[0].destinations[1]
    assert config.pipeline("a").destination_index("y") == 1
    assert config.destination("b", "x").storage.resolved_path == Path("/z")  # type: ignore[union-attr]
    with pytest.raises(ConfigLookupError) as info:
        config.pipeline("missing")
    assert str(info.value) == 'pipeline "missing" not found'
    with pytest.raises(ConfigLookupError) as info:
        config.pipeline("a").destination("z")
    assert str(info.value) == "pipeline a destination z not found"
    with pytest.raises(ConfigLookupError, match=r"^pipeline id is required$"):
        config.pipeline("")
    with pytest.raises(ConfigLookupError, match=r"^destination id is required$"):
        config.pipeline("a").destination("")
    assert destination_context(0, 1) == "pipelines[0].destinations[1]"


def test_models_are_immutable() -> None:
    config = load(MINIMAL)
    with pytest.raises(AttributeError):
        config.pipelines[0].destinations[0].state.mode = "shared_root"  # type: ignore[misc]


def test_config_errors_survive_pickling() -> None:
    import pickle

    error = pickle.loads(pickle.dumps(ConfigError(["a is required", "b: unknown field"], source="x.yml")))
    assert error.messages == ["a is required", "b: unknown field"]
    assert error.source == "x.yml"
    assert str(error) == "invalid config: a is required; b: unknown field"
    file_error = pickle.loads(pickle.dumps(ConfigFileError(["cannot read config x: gone"])))
    assert type(file_error) is ConfigFileError and str(file_error) == "cannot read config x: gone"
    lookup = pickle.loads(pickle.dumps(ConfigLookupError('pipeline "p" not found')))
    assert str(lookup) == 'pipeline "p" not found'

"""Every shipped example config loads (interfaces §1.11 case 12) with the values it documents."""

from __future__ import annotations

import os
import subprocess
from datetime import timedelta
from pathlib import Path

import pytest

from distributor_core.config import (
    Config,
    Environment,
    HTTPUploadSource,
    LocalBackend,
    S3Backend,
    SSHBackend,
    config_json_schema,
    load_config,
    resolve_s3_credentials,
    resolve_upload_tokens,
)

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
DEMO = ROOT / "demo-output"
SOURCE_BUNDLE = EXAMPLES / "source-bundle"

EXPECTED_FILES = [
    "archive-and-latest.yml",
    "fan-out.yml",
    "http-upload-local.yml",
    "http-upload-s3-staging.yml",
    "local-index.yml",
    "local-publish.yml",
    "merge-reconciliation.yml",
    "reports.yml",
    "s3-destination.yml",
    "shared-root.yml",
    "ssh-bastion.yml",
    "ssh-destination.yml",
    "takeover-latest.yml",
]


def load(name: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Config:
    monkeypatch.chdir(tmp_path)  # relative paths must not depend on the working directory
    return load_config(EXAMPLES / name)


def local(backend: object) -> LocalBackend:
    assert isinstance(backend, LocalBackend)
    return backend


def test_the_example_set() -> None:
    assert sorted(path.name for path in EXAMPLES.glob("*.yml")) == EXPECTED_FILES


@pytest.mark.parametrize("name", EXPECTED_FILES)
def test_every_example_loads_and_writes_only_under_demo_output(
    name: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    config = load(name, monkeypatch, tmp_path)
    assert config.base_dir == EXAMPLES
    for pipeline in config.pipelines:
        if isinstance(pipeline.source, LocalBackend):  # the example bundle, or the docs' spool
            assert pipeline.source.resolved_path in (SOURCE_BUNDLE, EXAMPLES / "spool" / "reports")
        for destination in pipeline.destinations:
            if isinstance(destination.storage, LocalBackend):
                assert destination.storage.resolved_path.is_relative_to(DEMO), destination.id
                assert destination.storage.path.startswith("../demo-output/")


def test_local_publish(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    config = load("local-publish.yml", monkeypatch, tmp_path)
    pipeline = config.pipeline("example-source-bundle")
    assert local(pipeline.source).path == "source-bundle"
    archive = pipeline.destination("local-archive")
    assert local(archive.storage).resolved_path == DEMO / "local-publish" / "archive"
    assert archive.storage.root_path == "../demo-output/local-publish/archive"
    assert (archive.publish.source, archive.publish.html) == (True, False)
    assert archive.reconciliation.mode == "replace" and archive.state.mode == "single_owner"
    assert archive.transfer.on_destination_older == "replace"
    prune = archive.retention.prune  # a bundle path per bundle: the example keeps whole bundles
    assert (prune.enabled, prune.older_than, prune.keep_latest) == (True, None, None)
    assert prune.bundles is not None and (prune.bundles.keep_latest, prune.bundles.older_than) == (30, None)


def test_reports_the_config_the_docs_call_distributor_yml(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    pipeline = load("reports.yml", monkeypatch, tmp_path).pipeline("reports")
    assert local(pipeline.source).resolved_path == EXAMPLES / "spool" / "reports"
    archive, latest, site = pipeline.destinations
    assert [d.id for d in pipeline.destinations] == ["archive", "latest", "site"]
    assert archive.path_mapping.mode == "preserve_relative"
    assert archive.retention.prune.bundles is not None and archive.retention.prune.bundles.keep_latest == 2
    assert latest.path_mapping.mode == "fixed" and site.path_mapping.mode == "fixed"
    assert site.markdown_mode == "index" and not site.publish.source
    bundles = sorted(p.parent.name for p in (EXAMPLES / "spool" / "reports").rglob("manifest.json"))
    assert bundles == ["2026-06-07", "2026-06-08"]


def test_local_index(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    destination = load("local-index.yml", monkeypatch, tmp_path).pipelines[0].destinations[0]
    assert destination.markdown_mode == "index"
    assert destination.links is not None
    assert (destination.links.base_url, destination.links.primary) == ("https://reports.example.com/latest/", "html")


def test_fan_out(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    source_archive, html_site = load("fan-out.yml", monkeypatch, tmp_path).pipelines[0].destinations
    assert (source_archive.id, html_site.id) == ("source-archive", "html-site")
    assert source_archive.markdown_mode is None and source_archive.publish.source
    assert html_site.markdown_mode == "sidecar" and not html_site.publish.source
    assert local(source_archive.storage).resolved_path != local(html_site.storage).resolved_path


def test_archive_and_latest(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    archive, latest = load("archive-and-latest.yml", monkeypatch, tmp_path).pipelines[0].destinations
    assert archive.path_mapping.mode == "preserve_relative"
    assert latest.path_mapping.mode == "fixed"
    assert latest.markdown_mode == "sidecar"
    assert latest.links is not None and latest.links.primary == "auto"


def test_merge_reconciliation(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    destination = load("merge-reconciliation.yml", monkeypatch, tmp_path).pipelines[0].destinations[0]
    assert destination.reconciliation.mode == "merge"
    assert (destination.publish.source, destination.publish.html) == (False, True)


def test_shared_root(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    source_owner, html_owner = load("shared-root.yml", monkeypatch, tmp_path).pipelines
    first, second = source_owner.destinations[0], html_owner.destinations[0]
    assert first.state.mode == second.state.mode == "shared_root"
    assert first.storage.root_key == second.storage.root_key
    assert local(first.storage).resolved_path == DEMO / "shared-root" / "site"
    assert (first.publish.source, first.publish.html) == (True, False)
    assert (second.publish.source, second.publish.html) == (False, True)


def test_takeover_latest(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    config = load("takeover-latest.yml", monkeypatch, tmp_path)
    archive, latest = config.pipeline("example-takeover-latest").destinations
    assert archive.takeover.mode == "same_source"
    assert (latest.id, latest.path_mapping.mode, latest.takeover.mode) == ("latest", "fixed", "same_pipeline")


def test_http_upload_local(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    config = load("http-upload-local.yml", monkeypatch, tmp_path)
    http = config.server.http
    assert (http.bind_host, http.bind_port) == ("127.0.0.1", 8080)
    assert http.staging_root == EXAMPLES / ".distributor" / "staging"
    assert (http.queue_size, http.max_concurrency, http.retention) == (16, 1, timedelta(hours=24))
    pipeline = config.pipeline("example-http-upload")
    assert isinstance(pipeline.source, HTTPUploadSource)
    assert pipeline.source.staging_path == http.staging_root / "example-http-upload"
    assert pipeline.source.max_upload_size == 20 * 1024**2
    assert config.upload_pipelines == (pipeline,)
    (token,) = config.upload_tokens
    assert (token.id, token.token_env, token.allow_pipelines) == (
        "example-uploader", "DISTRIBUTOR_EXAMPLE_UPLOAD_TOKEN", ("example-http-upload",)
    )
    table = resolve_upload_tokens(config, Environment({"DISTRIBUTOR_EXAMPLE_UPLOAD_TOKEN": "demo"}))
    grant = table.authenticate("demo")
    assert grant is not None and grant.allows("example-http-upload")


def test_http_upload_s3_staging(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Several replicas: staging in S3 (each pipeline under <prefix>/<pipeline id>), credentials by
    secret name, the publication lease; the local root is only this host's scratch space."""
    config = load("http-upload-s3-staging.yml", monkeypatch, tmp_path)
    http = config.server.http
    assert (http.bind_host, http.bind_port) == ("0.0.0.0", 8080)
    assert http.staging_store is not None
    assert (http.staging_store.bucket, http.staging_store.prefix, http.staging_store.region) == (
        "acme-distributor-uploads", "staging", "eu-west-1")
    assert http.publication_lease == timedelta(seconds=60)
    assert (http.queue_size, http.max_concurrency, http.retention) == (64, 1, timedelta(hours=24))
    assert not http.staging_root.is_relative_to(EXAMPLES)  # scratch under $TMPDIR, not examples/
    pipeline = config.pipeline("example-http-upload")
    assert isinstance(pipeline.source, HTTPUploadSource) and pipeline.source.shared
    assert pipeline.source.staging_store is not None
    assert pipeline.source.staging_store.prefix == "staging/example-http-upload"
    environ = {"DISTRIBUTOR_EXAMPLE_UPLOAD_TOKEN": "demo", "UPLOAD_STAGING_KEY_ID": "id",
               "UPLOAD_STAGING_SECRET": "secret"}
    pair = resolve_s3_credentials(pipeline.source.staging_store, Environment(environ))
    assert pair is not None and (pair.access_key_id, pair.secret_access_key) == ("id", "secret")
    table = resolve_upload_tokens(config, Environment(environ))
    grant = table.authenticate("demo")
    assert grant is not None and grant.allows("example-http-upload")


def test_ssh_destination(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", "/home/operator")
    storage = load("ssh-destination.yml", monkeypatch, tmp_path).pipelines[0].destinations[0].storage
    assert isinstance(storage, SSHBackend)
    assert (storage.host, storage.port, storage.user, storage.path) == (
        "sftp.example.com", 22, "distributor", "/srv/distributor/reports"
    )
    assert storage.private_key_file == Path("/home/operator/.ssh/id_ed25519")
    assert storage.known_hosts_file == Path("/home/operator/.ssh/known_hosts")
    assert storage.host_key_policy == "strict"
    assert storage.transport == "paramiko"


def test_ssh_bastion(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", "/home/operator")
    storage = load("ssh-bastion.yml", monkeypatch, tmp_path).pipelines[0].destinations[0].storage
    assert isinstance(storage, SSHBackend)
    assert (storage.transport, storage.host, storage.user) == ("openssh", "sftp.internal.example.com", "distributor")
    assert storage.ssh_config_file == EXAMPLES / "ssh" / "bastion.conf"
    assert storage.ssh_options == (("ServerAliveInterval", "15"),)
    # OpenSSH itself reads the named file and resolves the target through the bastion
    shown = subprocess.run(
        ["ssh", "-G", "-F", str(storage.ssh_config_file), storage.host],
        capture_output=True, text=True, check=True, env={**os.environ, "HOME": str(tmp_path)},
    ).stdout.lower()
    assert "proxyjump jump@bastion.example.com:22" in shown
    assert "controlmaster auto" in shown


def test_s3_destination(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    config = load("s3-destination.yml", monkeypatch, tmp_path)
    storage = config.pipelines[0].destinations[0].storage
    assert isinstance(storage, S3Backend)
    assert (storage.bucket, storage.prefix, storage.region) == ("distributor-example", "reports/daily", "us-east-1")
    assert (storage.endpoint, storage.force_path_style) == ("http://127.0.0.1:9000", True)
    assert storage.credentials is not None
    assert storage.credentials.access_key_id_env == "DISTRIBUTOR_S3_ACCESS_KEY_ID"
    assert storage.credentials.secret_access_key_env == "DISTRIBUTOR_S3_SECRET_ACCESS_KEY"
    assert config.secrets.resolved_directory == Path("/run/secrets")
    env = Environment(
        {"DISTRIBUTOR_S3_ACCESS_KEY_ID": "ak", "DISTRIBUTOR_S3_SECRET_ACCESS_KEY": "sk"},
        secrets_directory=config.secrets.resolved_directory,
    )
    pair = resolve_s3_credentials(storage, env)
    assert pair is not None and (pair.access_key_id, pair.secret_access_key) == ("ak", "sk")


def test_examples_validate_against_the_json_schema() -> None:
    import jsonschema

    from distributor_core.config.loader import load_yaml_mapping

    validator = jsonschema.Draft202012Validator(config_json_schema())
    for name in EXPECTED_FILES:
        document = load_yaml_mapping((EXAMPLES / name).read_text())
        assert list(validator.iter_errors(document)) == [], name

"""Setup failures stop a run before any destination is planned (issue 15 items 1 and 2,
resolutions G3), through the real console script.

- A missing source root (local directory, SFTP directory, S3 bucket) names the pipeline and the
  path and exits 1 from ``run``, ``validate --config`` and ``inspect --config``; an existing but
  empty root is still "0 bundles" and exits 0 from ``run``.
- A credential that does not resolve fails the whole run with its message, and nothing is written
  to any destination (the local destination next to the S3 one stays untouched).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.bundle.conftest import make_bundle
from tests.cli.conftest import run_script


def _with_remedy(stderr: str, message: str, root: str, remedy: str, anchor: str) -> None:
    """``run`` adds where and how to fix a setup failure (issue 25): ``distributor: <message>
    (root <root>; ...remedy: ...; more: distributor explain <class>)``."""
    assert stderr.startswith(f"distributor: {message} (root {root}"), stderr
    assert remedy in stderr
    assert stderr.endswith(f"; more: distributor explain {anchor.replace('-', '_')})\n"), stderr


def _config(tmp_path: Path, source_yaml: str, destinations_yaml: str | None = None) -> Path:
    destinations = destinations_yaml or "      - {id: archive, backend: local, path: out/archive}\n"
    config = tmp_path / "distributor.yml"
    config.write_text(
        "pipelines:\n"
        "  - id: ok\n"
        "    source: {backend: local, path: spool-ok}\n"
        "    destinations:\n"
        "      - {id: first, backend: local, path: out/first}\n"
        "  - id: reports\n"
        f"    source:\n{source_yaml}"
        "    destinations:\n"
        f"{destinations}"
    )
    return config


def _local_source(path: str) -> str:
    return f"      backend: local\n      path: {path}\n"


def test_missing_local_source_fails_run_validate_and_inspect(tmp_path: Path) -> None:
    make_bundle(tmp_path / "spool-ok" / "daily")
    config = _config(tmp_path, _local_source("spool-typo"))
    missing = tmp_path / "spool-typo"
    expected = f"distributor: pipeline reports source path {missing} not found\n"

    for args in (("run",), ("run", "--dry-run"), ("run", "--format", "json")):
        result = run_script(*args, "--config", str(config))
        assert result.returncode == 1, result.stdout
        _with_remedy(result.stderr, f"pipeline reports source path {missing} not found", str(missing),
                     "`source.path`", "missing-source-root")
        if "json" in args:  # the non-ok envelope names the same facts
            document = json.loads(result.stdout)
            assert (document["ok"], document["result"]) == (False, None)
            assert document["error"] == result.stderr.removeprefix("distributor: ").rstrip("\n")
            assert document["refusal"]["class"] == "missing_source_root"
            assert document["refusal"]["root"] == str(missing)
        else:
            assert result.stdout == ""
    # the setup check runs before any pipeline publishes: the healthy pipeline wrote nothing
    assert not (tmp_path / "out").exists()

    for command in ("validate", "inspect"):
        result = run_script(command, "--config", str(config), "--pipeline", "reports")
        assert result.returncode == 1
        assert result.stderr == expected
    # --pipeline selects the healthy pipeline only: it publishes
    result = run_script("run", "--config", str(config), "--pipeline", "ok")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "out" / "first" / "daily" / "report.md").is_file()


def test_source_root_that_is_a_file_is_a_setup_failure(tmp_path: Path) -> None:
    (tmp_path / "spool-ok").mkdir()
    (tmp_path / "spool-file").write_text("not a directory\n")
    config = _config(tmp_path, _local_source("spool-file"))
    result = run_script("run", "--config", str(config))
    assert result.returncode == 1
    _with_remedy(result.stderr, f"pipeline reports source path {tmp_path / 'spool-file'} is not a directory",
                 str(tmp_path / "spool-file"), "`source.path`", "missing-source-root")


def test_existing_empty_source_is_zero_bundles(tmp_path: Path) -> None:
    (tmp_path / "spool-ok").mkdir()
    (tmp_path / "spool-empty").mkdir()
    config = _config(tmp_path, _local_source("spool-empty"))
    result = run_script("run", "--config", str(config), "--format", "json")
    assert result.returncode == 0, result.stderr
    pipelines = json.loads(result.stdout)["result"]["pipelines"]
    assert [(p["id"], p["bundle_count"]) for p in pipelines] == [("ok", 0), ("reports", 0)]
    text = run_script("run", "--config", str(config))
    assert text.returncode == 0
    assert "actions=0 failed=0" in text.stdout


def _sftp_source(server, root: Path) -> str:  # type: ignore[no-untyped-def]
    return (
        "      backend: ssh\n"
        f"      host: {server.host}\n"
        f"      port: {server.port}\n"
        f"      user: {server.user}\n"
        f"      path: {root}\n"
        f"      private_key_file: {server.client_key_path}\n"
        f"      known_hosts_file: {server.known_hosts_path}\n"
    )


def test_missing_sftp_source_directory(tmp_path: Path, sshd_server) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "spool-ok").mkdir()
    root = sshd_server.make_sftp_root()
    missing = root / "not-there"
    config = _config(tmp_path, _sftp_source(sshd_server, missing))
    where = f"ssh://{sshd_server.user}@{sshd_server.host}:{sshd_server.port}{missing}"
    for args in (("run",), ("validate", "--pipeline", "reports"), ("inspect", "--pipeline", "reports")):
        result = run_script(*args, "--config", str(config))
        assert result.returncode == 1, result.stdout
        if args[0] == "run":
            _with_remedy(result.stderr, f"pipeline reports source path {where} not found", where, "`source.path`",
                         "missing-source-root")
        else:
            assert result.stderr == f"distributor: pipeline reports source path {where} not found\n"
    # the existing, empty remote root is "0 bundles"
    config = _config(tmp_path, _sftp_source(sshd_server, root))
    result = run_script("run", "--config", str(config), "--format", "json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["result"]["pipelines"][1]["bundle_count"] == 0


def _s3_yaml(server, bucket: str, indent: str, extra: str = "") -> str:  # type: ignore[no-untyped-def]
    return (
        f"{indent}backend: s3\n"
        f"{indent}bucket: {bucket}\n"
        f"{indent}endpoint: {server.endpoint_url}\n"
        f"{indent}region: {server.region}\n"
        f"{indent}force_path_style: true\n"
        f"{indent}credentials: {{access_key_id_env: DIST_TEST_S3_KEY, secret_access_key_env: DIST_TEST_S3_SECRET}}\n"
        f"{extra}"
    )


def _s3_env(server) -> dict[str, str]:  # type: ignore[no-untyped-def]
    return {"DIST_TEST_S3_KEY": server.access_key_id, "DIST_TEST_S3_SECRET": server.secret_access_key}


def test_missing_s3_bucket_and_empty_prefix(tmp_path: Path, moto_server) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "spool-ok").mkdir()
    config = _config(tmp_path, _s3_yaml(moto_server, "no-such-bucket-x1", "      ", "      prefix: incoming\n"))
    for args in (("run",), ("validate", "--pipeline", "reports"), ("inspect", "--pipeline", "reports")):
        result = run_script(*args, "--config", str(config), env=_s3_env(moto_server))
        assert result.returncode == 1, result.stdout
        message = ("pipeline reports source path s3://no-such-bucket-x1/incoming not found "
                   "(bucket no-such-bucket-x1 does not exist)")
        if args[0] == "run":
            _with_remedy(result.stderr, message, f"s3://no-such-bucket-x1/incoming at {moto_server.endpoint_url}",
                         "`source.path`", "missing-source-root")
        else:
            assert result.stderr == f"distributor: {message}\n"
    bucket = moto_server.create_bucket()
    config = _config(tmp_path, _s3_yaml(moto_server, bucket, "      ", "      prefix: incoming\n"))
    result = run_script("run", "--config", str(config), "--format", "json", env=_s3_env(moto_server))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["result"]["pipelines"][1]["bundle_count"] == 0


@pytest.mark.parametrize("dry_run", [False, True])
def test_unresolved_s3_credential_fails_whole_run(tmp_path: Path, moto_server, dry_run: bool) -> None:  # type: ignore[no-untyped-def]
    make_bundle(tmp_path / "spool-ok" / "daily")
    make_bundle(tmp_path / "spool" / "daily")
    bucket = moto_server.create_bucket()
    destinations = (
        "      - {id: local, backend: local, path: out/local}\n"
        "      - id: bucket\n"
        f"{_s3_yaml(moto_server, bucket, '        ')}"
    )
    config = _config(tmp_path, _local_source("spool"), destinations)
    env = {"DIST_TEST_S3_KEY": moto_server.access_key_id}  # the secret key variable stays unset
    args = ("run", "--config", str(config), *(("--dry-run",) if dry_run else ()))
    result = run_script(*args, env=env)
    assert result.returncode == 1, result.stdout
    _with_remedy(
        result.stderr,
        "pipeline reports destination bucket: s3 secret access key environment variable DIST_TEST_S3_SECRET is not set",
        f"s3://{bucket} at {moto_server.endpoint_url}", "export DIST_TEST_S3_SECRET (non-empty)", "missing-credential",
    )
    assert result.stdout == ""
    assert not (tmp_path / "out").exists()  # neither pipeline's local destination was touched
    assert moto_server.client().list_objects_v2(Bucket=bucket).get("KeyCount", 0) == 0

    # an empty value is a resolution failure too; a secrets.directory file resolves it
    result = run_script(*args, env={**env, "DIST_TEST_S3_SECRET": ""})
    assert result.returncode == 1
    assert "s3 secret access key environment variable DIST_TEST_S3_SECRET is empty" in result.stderr
    assert not (tmp_path / "out").exists()
    result = run_script(*args, env=_s3_env(moto_server))
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "out" / "local").exists() is (not dry_run)


def test_unreadable_ssh_key_fails_before_planning(tmp_path: Path) -> None:
    make_bundle(tmp_path / "spool-ok" / "daily")
    make_bundle(tmp_path / "spool" / "daily")
    destinations = (
        "      - {id: local, backend: local, path: out/local}\n"
        "      - id: remote\n"
        "        backend: ssh\n"
        "        host: 127.0.0.1\n"
        "        user: nobody\n"
        "        path: /srv/remote\n"
        f"        private_key_file: {tmp_path / 'missing_key'}\n"
        f"        known_hosts_file: {tmp_path / 'known_hosts'}\n"
    )
    config = _config(tmp_path, _local_source("spool"), destinations)
    result = run_script("run", "--config", str(config))
    assert result.returncode == 1
    _with_remedy(
        result.stderr,
        f"pipeline reports destination remote: cannot read private key file {tmp_path / 'missing_key'}: "
        "No such file or directory",
        "ssh://nobody@127.0.0.1:22/srv/remote", "`private_key_file`", "missing-credential",
    )
    assert f"paths (1): {tmp_path / 'missing_key'}" in result.stderr
    assert not (tmp_path / "out").exists()

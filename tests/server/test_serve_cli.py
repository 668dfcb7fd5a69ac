"""``distributor serve`` as users run it (interfaces §2.8, resolutions C4): startup line, startup
failures (exit 1), usage errors (exit 2), signals (exit 0) and graceful shutdown."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
import yaml

from distributor_core import staging as sg
from distributor_core.cli import main
from tests.server.harness import (
    TOKEN,
    bundle_archive,
    foreign_lock,
    start_serve,
    upload,
    wait_status,
    write_setup,
)

DISTRIBUTOR = str(Path(sys.executable).parent / "distributor")


def _run(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([DISTRIBUTOR, *args], cwd=cwd, env={**os.environ, **(env or {})}, capture_output=True,
                          text=True, timeout=60)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_serves_until_a_signal_and_exits_zero(tmp_path: Path, sig: int) -> None:
    setup = write_setup(tmp_path / "site")
    process = start_serve(setup)
    assert process.first_line.startswith("distributor: serving HTTP upload API on 127.0.0.1:")
    assert not process.url.endswith(":0")
    with httpx.Client(base_url=process.url, timeout=10) as http:
        assert http.get("/healthz").json() == {"status": "ok"}
    code, rest = process.stop(sig)
    assert (code, rest) == (0, "")
    assert process.process.stdout is not None and process.process.stdout.read() == ""
    # the staging lock is released: a new server starts on the same staging path
    again = start_serve(setup)
    assert again.stop()[0] == 0


def test_default_config_path_is_distributor_yml(tmp_path: Path) -> None:
    setup = write_setup(tmp_path / "site")
    process = subprocess.Popen([DISTRIBUTOR, "serve"], cwd=setup.root, env={**os.environ, **setup.environ},
                               stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    assert "serving HTTP upload API on 127.0.0.1:" in process.stderr.readline()
    process.send_signal(signal.SIGTERM)
    assert process.wait(30) == 0


def test_missing_token_fails_startup(tmp_path: Path) -> None:
    setup = write_setup(tmp_path / "site")
    result = _run(["serve", "--config", str(setup.config_path)], setup.root, env={"TOKEN_REPORTER": ""})
    assert result.returncode == 1
    assert result.stderr == "distributor: upload token reporter environment variable TOKEN_REPORTER is empty\n"
    assert result.stdout == ""
    assert not setup.staging_root.exists()


def test_no_upload_pipeline_fails_startup(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "distributor.yml").write_text(yaml.safe_dump({"pipelines": [
        {"id": "files", "source": {"backend": "local", "path": "src"},
         "destinations": [{"id": "archive", "backend": "local", "path": "out"}]}]}))
    result = _run(["serve"], tmp_path)
    assert (result.returncode, result.stderr) == (1, "distributor: serve requires at least one http_upload pipeline\n")


def test_invalid_config_and_usage_errors(tmp_path: Path) -> None:
    (tmp_path / "distributor.yml").write_text("pipelines: []\nbogus: 1\n")
    result = _run(["serve"], tmp_path)
    assert result.returncode == 1 and result.stderr.startswith("distributor: invalid config: ")
    out, err = io.StringIO(), io.StringIO()
    assert main(["serve", "--publisher", "cron"], stdout=out, stderr=err) == 2
    assert err.getvalue() == "distributor: publisher must be inline or dagster\n"
    err = io.StringIO()
    assert main(["serve", "extra"], stdout=out, stderr=err) == 2
    assert err.getvalue() == "distributor: serve does not accept positional arguments\n"
    err = io.StringIO()
    assert main(["serve", "--format", "json"], stdout=out, stderr=err) == 2
    assert out.getvalue() == ""
    help_out = io.StringIO()
    assert main(["serve", "--help"], stdout=help_out, stderr=err) == 0
    assert "serve [--config <path>] [--publisher inline|dagster]" in help_out.getvalue()
    root = io.StringIO()
    assert main(["--help"], stdout=root, stderr=err) == 0
    assert "serve" in root.getvalue()


def test_second_server_on_the_same_staging_path_fails(tmp_path: Path) -> None:
    setup = write_setup(tmp_path / "site")
    first = start_serve(setup)
    try:
        result = _run(["serve", "--config", str(setup.config_path)], setup.root, env=setup.environ)
        assert result.returncode == 1
        assert result.stderr == (
            f"distributor: staging directory {setup.staging('reports')} is in use by another distributor serve "
            "process\n")
    finally:
        assert first.stop()[0] == 0


def test_address_in_use_fails_startup(tmp_path: Path) -> None:
    import socket

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    port = taken.getsockname()[1]
    setup = write_setup(tmp_path / "site", http={"bind": f"127.0.0.1:{port}"})
    try:
        result = _run(["serve", "--config", str(setup.config_path)], setup.root, env=setup.environ)
    finally:
        taken.close()
    assert result.returncode == 1
    assert result.stderr.startswith(f"distributor: listen tcp 127.0.0.1:{port}: ")


def test_shutdown_lets_a_running_publication_finish(tmp_path: Path) -> None:
    setup = write_setup(tmp_path / "site")
    lock = foreign_lock(setup.destinations["reports/dest1"])
    process = start_serve(setup)
    with httpx.Client(base_url=process.url, timeout=10) as http:
        run_id = upload(http, "reports", bundle_archive(tmp_path)).json()["run_id"]
        wait_status(http, run_id, "running")
        queued = upload(http, "reports", bundle_archive(tmp_path, bundle_id="second")).json()["run_id"]
    process.process.send_signal(signal.SIGTERM)
    time.sleep(1.0)
    assert process.process.poll() is None  # still waiting for the running publication
    threading.Timer(0.5, lock.unlink).start()
    assert process.process.wait(40) == 0
    assert sg.read_record(setup.staging("reports"), run_id).status == "succeeded"
    assert sg.read_record(setup.staging("reports"), queued).status == "queued"  # resumes at the next start
    restarted = start_serve(setup)
    with httpx.Client(base_url=restarted.url, timeout=10) as http:
        assert wait_status(http, queued, {"succeeded", "failed"})["status"] == "failed"  # conflicting bundle id
        assert http.get(f"/runs/{run_id}", headers={"Authorization": f"Bearer {TOKEN}"}).json()["status"] == (
            "succeeded")
    assert restarted.stop()[0] == 0


def test_dagster_publisher_only_stages(tmp_path: Path) -> None:
    setup = write_setup(tmp_path / "site")
    process = start_serve(setup, "--publisher", "dagster", env={"DAGSTER_HOME": str(tmp_path / "dagster-home")})
    (tmp_path / "dagster-home").mkdir()
    try:
        with httpx.Client(base_url=process.url, timeout=30) as http:
            run_id = upload(http, "reports", bundle_archive(tmp_path)).json()["run_id"]
            time.sleep(0.5)
            status = http.get(f"/runs/{run_id}", headers={"Authorization": f"Bearer {TOKEN}"}).json()
            assert status["status"] == "accepted" and "dagster_run_id" not in status
    finally:
        assert process.stop()[0] == 0
    assert (setup.staging("reports") / run_id / "bundle" / "report.md").exists()
    assert not setup.destinations["reports/dest1"].exists()

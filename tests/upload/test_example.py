"""``examples/upload_client.py`` against ``distributor serve`` running the shipped
``examples/http-upload-local.yml`` (copied to a temporary directory, on an ephemeral port)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.server.harness import Setup, start_serve

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_CLIENT = ROOT / "examples" / "upload_client.py"
SOURCE_BUNDLE = ROOT / "examples" / "source-bundle"
TOKEN_ENV = "DISTRIBUTOR_EXAMPLE_UPLOAD_TOKEN"


def _client(url: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DISTRIBUTOR_UPLOAD_ENDPOINT": url, "DISTRIBUTOR_UPLOAD_TOKEN": "example-token"}
    return subprocess.run([sys.executable, str(EXAMPLE_CLIENT), *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)


def test_example_client_against_the_example_server(tmp_path: Path) -> None:
    examples = tmp_path / "examples"
    examples.mkdir()
    text = (ROOT / "examples" / "http-upload-local.yml").read_text()
    assert "bind: 127.0.0.1:8080" in text
    (examples / "http-upload-local.yml").write_text(text.replace("bind: 127.0.0.1:8080", "bind: 127.0.0.1:0"))
    shutil.copytree(SOURCE_BUNDLE, examples / "source-bundle")
    setup = Setup(examples, examples / "http-upload-local.yml", {}, {})
    server = start_serve(setup, env={TOKEN_ENV: "example-token"})
    archive = tmp_path / "demo-output" / "http-upload-local" / "archive"
    try:
        first = _client(server.url, "--pipeline", "example-http-upload", "--bundle", "examples/source-bundle",
                        "--run-stamp", "20260607T150000Z", "--wait", cwd=tmp_path)
        assert first.returncode == 0, first.stderr
        run_id = first.stdout.split("distributor accepted run ")[1].split()[0]
        assert f"run {run_id} succeeded" in first.stdout
        assert (archive / "report.md").read_bytes() == (SOURCE_BUNDLE / "report.md").read_bytes()

        retry = _client(server.url, "--pipeline", "example-http-upload", "--bundle", "examples/source-bundle",
                        "--run-stamp", "20260607T150000Z", cwd=tmp_path)
        assert retry.stdout == f"distributor accepted run {run_id}\n"  # the same run: idempotent retry

        (tmp_path / "out.md").write_text("# Fresh report\n")
        files = _client(server.url, "--pipeline", "example-http-upload", "--id", "reports.example", "--wait",
                        "report.md=out.md", str(SOURCE_BUNDLE / "summary.txt"), cwd=tmp_path)
        assert files.returncode == 0, files.stderr
        assert "succeeded" in files.stdout
        assert (archive / "report.md").read_text() == "# Fresh report\n"
        assert (archive / "summary.txt").exists()

        refused = _client(server.url, "--pipeline", "private", "--bundle", "examples/source-bundle", cwd=tmp_path)
        assert refused.returncode == 1
        assert refused.stderr == "upload failed: HTTP 404 Not Found: upload pipeline not found\n"
    finally:
        assert server.stop()[0] == 0
    staging = examples / ".distributor" / "staging"
    assert staging.is_dir() and oct(staging.stat().st_mode & 0o777) == "0o700"

"""The real ``distributor`` console script in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from distributor_core import __version__
from tests.cli.conftest import REPO, SCRIPT
from tests.cli.conftest import run_script as run

EXAMPLE = REPO / "examples" / "source-bundle"


def test_script_is_installed() -> None:
    assert SCRIPT.exists()


def test_version() -> None:
    result = run("version")
    assert (result.returncode, result.stdout, result.stderr) == (0, f"distributor {__version__}\n", "")


def test_root_help_and_unknown_command() -> None:
    help_result = run("--help")
    assert help_result.returncode == 0
    assert "validate" in help_result.stdout and help_result.stderr == ""
    unknown = run("bogus")
    assert (unknown.returncode, unknown.stdout, unknown.stderr) == (2, "", 'distributor: unknown command "bogus"\n')


def test_validate_example_bundle_text_and_json() -> None:
    result = run("validate", "examples/source-bundle")
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == "Valid: path=examples/source-bundle id=reports.example files=2\n"
    as_json = run("validate", "--format", "json", "examples/source-bundle")
    doc = json.loads(as_json.stdout)
    assert doc["ok"] is True
    assert doc["result"]["bundles"][0]["id"] == "reports.example"


def test_usage_error_and_runtime_error_exit_codes(tmp_path: Path) -> None:
    usage = run("validate", "--format", "xml", "examples/source-bundle")
    assert (usage.returncode, usage.stdout, usage.stderr) == (2, "", "distributor: format must be text or json\n")
    runtime = run("validate", str(tmp_path))
    assert runtime.returncode == 1
    assert runtime.stderr == f"distributor: no source bundles found under {tmp_path}\n"
    assert "Traceback" not in runtime.stderr


def test_manifest_create_then_validate(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("alpha\n")
    created = run("manifest", "create", "--id", "cli.test", str(tmp_path))
    assert created.returncode == 0, created.stderr
    validated = run("validate", str(tmp_path))
    assert validated.stdout == f"Valid: path={tmp_path} id=cli.test files=1\n"


def test_broken_pipe_is_quiet(tmp_path: Path) -> None:
    for index in range(1500):
        (tmp_path / f"file-{index:04d}.txt").write_text(str(index))
    assert run("manifest", "create", "--id", "big", str(tmp_path)).returncode == 0
    # with PYTHONUNBUFFERED, Python drops the unwritten rest of a short write silently; test the
    # buffered stdout a user's shell gives the script
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    proc = subprocess.Popen(
        [str(SCRIPT), "inspect", "--format", "json", str(tmp_path)],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None
    assert proc.stdout.read(1) == b"{"
    proc.stdout.close()  # the reader goes away long before the ~300 KB document is written
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 1
    assert stderr == b""


def test_demo_script_runs(tmp_path: Path) -> None:
    home = tmp_path / "dagster_home"
    result = subprocess.run(
        ["bash", str(REPO / "scripts" / "demo.sh")],
        cwd=REPO,
        env={**os.environ, "DISTRIBUTOR_BIN": str(SCRIPT.parent), "DAGSTER_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "Valid: path=examples/source-bundle id=reports.example files=2" in result.stdout
    assert "(exit code 1 as expected)" in result.stdout
    assert "file summary.txt size 119 does not match manifest size 81" in result.stderr
    first, second = result.stdout.split("==> Run it again")[0], result.stdout.split("==> Run it again")[1]
    assert "publish_local_archive ASSET_MATERIALIZATION" in first and "action=publish_new status=completed" in first
    # the partition is materialized again with the same data version; nothing is written
    assert "ASSET_MATERIALIZATION" in second and "action=skip_same status=skipped" in second
    assert f"runs:     {home}" in result.stdout
    archive = REPO / "demo-output" / "local-publish" / "archive"
    assert sorted(p.name for p in archive.iterdir()) == [".distributor.json", "report.md", "summary.txt"]
    assert (archive / "summary.txt").read_bytes() == (REPO / "examples" / "source-bundle" / "summary.txt").read_bytes()
    assert (home / "dagster.yaml").is_file() and any(home.iterdir())

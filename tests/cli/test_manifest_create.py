"""``distributor manifest create`` (interfaces §2.9)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from distributor_core.bundle import load_manifest, validate_bundle
from tests.cli.conftest import Runner


@pytest.fixture
def files(tmp_path: Path) -> Path:
    root = tmp_path / "bundle"
    (root / "sub").mkdir(parents=True)
    (root / "report.md").write_bytes(b"# Report\nSunny.\n")
    (root / "summary.txt").write_bytes(b"Summary\n")
    (root / "sub" / "data.csv").write_bytes(b"a,b\n1,2\n")
    (root / ".hidden").write_bytes(b"h")
    return root


def test_scan_is_the_default(cli: Runner, files: Path) -> None:
    result = cli("manifest", "create", "--id", "reports.daily", "--created", "2026-06-07T15:00:00Z", str(files))
    assert (result.code, result.stderr) == (0, "")
    manifest = load_manifest(files)
    assert [f.path for f in manifest.files] == [".hidden", "report.md", "sub/data.csv", "summary.txt"]
    validate_bundle(files, manifest)
    assert result.stdout == (
        f"Created: path={files / 'manifest.json'} id=reports.daily digest={manifest.digest} "
        "created=2026-06-07T15:00:00Z files=4\n"
    )


def test_explicit_files_keep_order_and_json_result_is_manifest(cli: Runner, files: Path) -> None:
    result = cli(
        "manifest", "create", "--format", "json", "--id", "x",
        "--file", "summary.txt", "--file=report.md", "--created", "2026-06-07T17:00:00.5+02:00", str(files),
    )
    assert result.code == 0
    doc = result.json()
    assert (doc["command"], doc["ok"]) == ("manifest create", True)
    assert doc["result"] == json.loads((files / "manifest.json").read_text())
    assert [f["path"] for f in doc["result"]["files"]] == ["summary.txt", "report.md"]
    assert doc["result"]["created"] == "2026-06-07T15:00:00.5Z"


def test_explicit_scan_flag(cli: Runner, files: Path) -> None:
    assert cli("manifest", "create", "--id", "x", "--scan", str(files)).code == 0
    assert len(load_manifest(files).files) == 4


def test_existing_manifest_needs_overwrite(cli: Runner, files: Path) -> None:
    assert cli("manifest", "create", "--id", "first", str(files)).code == 0
    before = (files / "manifest.json").read_bytes()
    again = cli("manifest", "create", "--id", "second", str(files))
    assert (again.code, again.stdout) == (1, "")
    assert again.stderr == f"distributor: {files / 'manifest.json'} already exists (use --overwrite to replace it)\n"
    assert (files / "manifest.json").read_bytes() == before
    replaced = cli("manifest", "create", "--id", "second", "--overwrite", str(files))
    assert replaced.code == 0
    assert load_manifest(files).id == "second"
    # the old manifest.json is never listed in the new one
    assert "manifest.json" not in [f.path for f in load_manifest(files).files]


def test_default_created_is_now_whole_seconds(cli: Runner, files: Path) -> None:
    assert cli("manifest", "create", "--id", "x", str(files)).code == 0
    created = json.loads((files / "manifest.json").read_text())["created"]
    assert created.endswith("Z") and "." not in created


@pytest.mark.parametrize(
    ("argv", "stderr"),
    [
        (["--id", "x"], "distributor: manifest create requires <bundle-path>\n"),
        (["--id", "x", "a", "b"], "distributor: manifest create accepts exactly one <bundle-path>\n"),
        (["d"], "distributor: manifest create requires --id\n"),
        (["--id", "", "d"], "distributor: manifest create requires --id\n"),
        (["--id", "x", "--file", "a", "--scan", "d"], "distributor: manifest create accepts either --file or --scan\n"),
        (["--id", "x", "--format", "xml", "d"], "distributor: format must be text or json\n"),
        (
            ["--id", "x", "--created", "2026-06-07 15:00:00Z", "d"],
            'distributor: manifest create: --created must be RFC3339: parsing time "2026-06-07 15:00:00Z": '
            "not an RFC 3339 date-time\n",
        ),
    ],
)
def test_usage_errors(cli: Runner, argv: list[str], stderr: str) -> None:
    result = cli("manifest", "create", *argv)
    assert (result.code, result.stdout, result.stderr) == (2, "", stderr)


@pytest.mark.parametrize(
    ("file_arg", "message"),
    [
        ("../x", 'files[0]: path "../x" must not contain "." or ".." segments'),
        ("missing.md", "file missing.md does not exist"),
        (".distributor.json", 'files[0]: path ".distributor.json" must not use reserved name ".distributor.json"'),
    ],
)
def test_runtime_errors_name_the_file(cli: Runner, files: Path, file_arg: str, message: str) -> None:
    result = cli("manifest", "create", "--id", "x", "--file", file_arg, str(files))
    assert (result.code, result.stdout, result.stderr) == (1, "", f"distributor: {message}\n")
    assert not (files / "manifest.json").exists()


def test_scan_with_symlink_fails(cli: Runner, files: Path) -> None:
    os.symlink(files / "report.md", files / "link.md")
    result = cli("manifest", "create", "--id", "x", str(files))
    assert result.code == 1
    assert result.stderr == "distributor: scan found symlink link.md; bundles may contain regular files only\n"


def test_not_a_directory(cli: Runner, tmp_path: Path) -> None:
    result = cli("manifest", "create", "--id", "x", str(tmp_path / "nope"))
    assert (result.code, result.stderr) == (1, f"distributor: bundle path {tmp_path / 'nope'} is not a directory\n")


def test_progress_on_terminal(cli: Runner, files: Path) -> None:
    result = cli("manifest", "create", "--id", "x", str(files), tty=True)
    assert result.code == 0
    assert "\rdistributor: hashing " in result.stderr

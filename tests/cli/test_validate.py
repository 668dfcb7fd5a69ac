"""``distributor validate`` with a path and with --config (interfaces §2.9, resolutions A1, C2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from distributor_core.bundle import ManifestFile, bundle_digest, file_digest, manifest_to_obj
from distributor_core.jsonfmt import dumps_indented
from tests.bundle.conftest import REPORT, make_bundle
from tests.cli.conftest import Runner, write_config

DIGEST = "sha256:099b205780d2b050024868399961b05731729a548d5d6329c7b06a6740dd75fe"


def test_single_bundle_text(cli: Runner, tmp_path: Path) -> None:
    make_bundle(tmp_path / "b")
    (tmp_path / "b" / "nested").mkdir()
    make_bundle(tmp_path / "b" / "nested" / "inner", {"x": b"x"})
    result = cli("validate", str(tmp_path / "b"))
    assert (result.code, result.stderr) == (0, "")
    assert result.stdout == f"Valid: path={tmp_path / 'b'} id=reports.daily files=2\n"


def test_single_bundle_json(cli: Runner, tmp_path: Path) -> None:
    make_bundle(tmp_path / "b")
    result = cli("validate", "--format", "json", str(tmp_path / "b"))
    assert result.code == 0
    assert result.json() == {
        "command": "validate",
        "ok": True,
        "result": {
            "bundles": [
                {
                    "path": str(tmp_path / "b"),
                    "id": "reports.daily",
                    "digest": DIGEST,
                    "created": "2026-06-07T15:00:00Z",
                    "file_count": 2,
                }
            ],
            "invalid": [],
        },
    }


def test_manifest_file_path_is_accepted(cli: Runner, tmp_path: Path) -> None:
    make_bundle(tmp_path / "b")
    result = cli("validate", str(tmp_path / "b" / "manifest.json"))
    assert result.code == 0
    assert result.stdout == f"Valid: path={tmp_path / 'b'} id=reports.daily files=2\n"


def test_tree_prints_valid_on_stdout_and_one_stderr_line_per_invalid(cli: Runner, tree: Path) -> None:
    result = cli("validate", str(tree))
    assert result.code == 1
    assert result.stdout == (
        f"Valid: path={tree}/daily-1 id=reports.daily files=2\n"
        f"Valid: path={tree}/weekly/w23 id=reports.weekly files=1\n"
    )
    assert result.stderr == (
        f"distributor: invalid bundle {tree}/broken: file summary.txt size 16 does not match manifest size 8\n"
    )


def test_tree_json_is_not_ok_envelope(cli: Runner, tree: Path) -> None:
    result = cli("validate", str(tree), "--format", "json")
    assert result.code == 1
    doc = result.json()
    assert doc["command"] == "validate"
    assert doc["ok"] is False
    assert doc["error"] == (
        f"1 invalid bundle: {tree}/broken: file summary.txt size 16 does not match manifest size 8"
    )
    assert [b["path"] for b in doc["result"]["bundles"]] == [f"{tree}/daily-1", f"{tree}/weekly/w23"]
    assert doc["result"]["invalid"] == [
        {"path": f"{tree}/broken", "error": "file summary.txt size 16 does not match manifest size 8"}
    ]
    assert result.stderr.count("\n") == 1


def test_invalid_manifest_is_reported_per_bundle(cli: Runner, tree: Path) -> None:
    (tree / "daily-1" / "manifest.json").write_text('{"schema_version": 2}')
    result = cli("validate", str(tree))
    assert result.code == 1
    assert f"distributor: invalid bundle {tree}/daily-1: manifest schema_version must be 1\n" in result.stderr
    assert "Valid: path=" + str(tree) + "/weekly/w23" in result.stdout


def test_bundle_listing_a_reserved_name_is_rejected(cli: Runner, tmp_path: Path) -> None:
    root = tmp_path / "b"
    root.mkdir()
    (root / ".distributor.json").write_bytes(REPORT)
    files = [ManifestFile(".distributor.json", file_digest(REPORT), len(REPORT))]
    obj = manifest_to_obj(make_bundle(tmp_path / "template"))
    obj["files"] = [{"path": f.path, "sha256": f.sha256, "size": f.size} for f in files]
    obj["digest"] = bundle_digest(files)
    (root / "manifest.json").write_text(dumps_indented(obj))
    result = cli("validate", str(root))
    assert result.code == 1
    assert result.stdout == ""
    assert result.stderr == (
        f"distributor: invalid bundle {root}: manifest files[0].path: "
        'path ".distributor.json" must not use reserved name ".distributor.json"\n'
    )


def test_symlinked_file_is_rejected(cli: Runner, tmp_path: Path) -> None:
    make_bundle(tmp_path / "b")
    (tmp_path / "elsewhere.md").write_bytes(b"# Report\nSunny.\n")
    (tmp_path / "b" / "report.md").unlink()
    (tmp_path / "b" / "report.md").symlink_to(tmp_path / "elsewhere.md")
    result = cli("validate", str(tmp_path / "b"))
    assert result.code == 1
    assert "file report.md is not a regular file (symlink)" in result.stderr


def test_no_bundles(cli: Runner, tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("x")
    result = cli("validate", str(tmp_path))
    assert (result.code, result.stdout) == (1, "")
    assert result.stderr == f"distributor: no source bundles found under {tmp_path}\n"


def test_missing_and_non_directory_path(cli: Runner, tmp_path: Path) -> None:
    missing = cli("validate", str(tmp_path / "nope"))
    assert (missing.code, missing.stderr) == (1, f"distributor: path {tmp_path / 'nope'} does not exist\n")
    (tmp_path / "file").write_text("x")
    not_dir = cli("validate", str(tmp_path / "file"))
    assert (not_dir.code, not_dir.stderr) == (1, f"distributor: path {tmp_path / 'file'} is not a directory\n")


def test_progress_on_terminal_only(cli: Runner, tmp_path: Path) -> None:
    make_bundle(tmp_path / "b")
    on_tty = cli("validate", str(tmp_path / "b"), tty=True)
    assert on_tty.code == 0
    assert "\rdistributor: validating " in on_tty.stderr
    assert on_tty.stderr.endswith("\r\x1b[K")
    assert "\r" not in on_tty.stdout
    as_json = cli("validate", "--format", "json", str(tmp_path / "b"), tty=True)
    assert as_json.stderr == ""
    not_tty = cli("validate", str(tmp_path / "b"))
    assert not_tty.stderr == ""


@pytest.mark.parametrize(
    ("argv", "stderr"),
    [
        ([], "distributor: validate requires <path> or --config with --pipeline\n"),
        (["--pipeline", "reports"], "distributor: validate requires <path> or --config with --pipeline\n"),
        (["--config", "c.yml"], "distributor: validate requires --pipeline\n"),
        (["p", "--config", "c.yml"], "distributor: validate accepts either <path> or --config with --pipeline\n"),
        (["p", "--bundle", "x"], "distributor: validate accepts either <path> or --config with --pipeline\n"),
        (["a", "b"], "distributor: validate accepts at most one <path>\n"),
        (["--format", "yaml", "p"], "distributor: format must be text or json\n"),
        (["--config"], "distributor: validate: flag needs an argument: -config\n"),
        (
            ["--config", "c.yml", "--pipeline", "reports", "--bundle", "/abs"],
            'distributor: validate: invalid --bundle "/abs": path must be relative\n',
        ),
        (
            ["--config", "c.yml", "--pipeline", "reports", "--bundle", "a/../b"],
            'distributor: validate: invalid --bundle "a/../b": path must not contain "." or ".." segments\n',
        ),
    ],
)
def test_usage_errors(cli: Runner, argv: list[str], stderr: str) -> None:
    result = cli("validate", *argv)
    assert (result.code, result.stdout, result.stderr) == (2, "", stderr)


# ---------------------------------------------------------------- --config


def test_config_form_discovers_in_configured_source(cli: Runner, tree: Path, tmp_path: Path) -> None:
    config = write_config(tmp_path)
    result = cli("validate", "--config", str(config), "--pipeline", "reports")
    assert result.code == 1
    assert result.stdout == (
        "Valid: path=daily-1 id=reports.daily files=2\nValid: path=weekly/w23 id=reports.weekly files=1\n"
    )
    assert result.stderr == (
        "distributor: invalid bundle broken: file summary.txt size 16 does not match manifest size 8\n"
    )


def test_config_form_relative_source_resolves_against_config_dir(
    cli: Runner, tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = write_config(tmp_path)
    monkeypatch.chdir(tree / "daily-1")
    result = cli("validate", "--config", str(config), "--pipeline", "reports", "--bundle", "weekly/w23")
    assert (result.code, result.stdout) == (0, "Valid: path=weekly/w23 id=reports.weekly files=1\n")


def test_config_form_root_bundle(cli: Runner, tmp_path: Path) -> None:
    make_bundle(tmp_path / "spool")
    config = write_config(tmp_path)
    for bundle in ([], ["--bundle", "."]):
        result = cli("validate", "--config", str(config), "--pipeline", "reports", *bundle)
        assert (result.code, result.stdout) == (0, "Valid: path=. id=reports.daily files=2\n")


def test_config_form_missing_bundle(cli: Runner, tree: Path, tmp_path: Path) -> None:
    config = write_config(tmp_path)
    result = cli("validate", "--config", str(config), "--pipeline", "reports", "--bundle", "nope")
    assert result.code == 1
    assert result.stderr == "distributor: invalid bundle nope: manifest.json does not exist\n"


def test_config_form_errors(cli: Runner, tree: Path, tmp_path: Path) -> None:
    config = write_config(tmp_path)
    unknown = cli("validate", "--config", str(config), "--pipeline", "nope")
    assert (unknown.code, unknown.stdout, unknown.stderr) == (1, "", 'distributor: pipeline "nope" not found\n')
    upload = cli("validate", "--config", str(config), "--pipeline", "uploads")
    assert upload.code == 1
    assert upload.stderr == (
        "distributor: pipeline uploads has an http_upload source; "
        "validate --config works with local, ssh and s3 sources\n"
    )
    bad = tmp_path / "bad.yml"
    bad.write_text("pipelines: []\nbogus: 1\n")
    invalid = cli("validate", "--config", str(bad), "--pipeline", "reports")
    assert invalid.code == 1
    assert invalid.stderr.startswith("distributor: invalid config: ")
    assert invalid.stderr.count("\n") == 1
    missing = cli("validate", "--config", str(tmp_path / "missing.yml"), "--pipeline", "reports")
    assert missing.code == 1
    assert missing.stderr.startswith("distributor: ")
    assert "missing.yml" in missing.stderr


def test_config_form_empty_source(cli: Runner, tmp_path: Path) -> None:
    (tmp_path / "spool").mkdir()
    config = write_config(tmp_path)
    result = cli("validate", "--config", str(config), "--pipeline", "reports")
    assert result.code == 1
    assert result.stderr == "distributor: no source bundles found in pipeline reports source spool\n"

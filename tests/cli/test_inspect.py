"""``distributor inspect``: manifests and file metadata, or parsed destination state."""

from __future__ import annotations

from pathlib import Path

from distributor_core.bundle import file_digest
from tests.bundle.conftest import REPORT, SUMMARY, make_bundle
from tests.cli.conftest import Runner, write_config, write_state


def test_inspect_bundle_text(cli: Runner, tmp_path: Path) -> None:
    make_bundle(tmp_path / "b")
    result = cli("inspect", str(tmp_path / "b"))
    assert (result.code, result.stderr) == (0, "")
    lines = result.stdout.splitlines()
    assert lines[0] == (
        f"Bundle: path={tmp_path / 'b'} id=reports.daily "
        "digest=sha256:099b205780d2b050024868399961b05731729a548d5d6329c7b06a6740dd75fe "
        "created=2026-06-07T15:00:00Z files=2 size=24 valid=true"
    )
    report, summary = file_digest(REPORT), file_digest(SUMMARY)
    assert lines[1] == f"File: path=report.md size=16 sha256={report} actual_size=16 actual_sha256={report} ok=true"
    assert lines[2] == f"File: path=summary.txt size=8 sha256={summary} actual_size=8 actual_sha256={summary} ok=true"
    assert len(lines) == 3


def test_inspect_bundle_json(cli: Runner, tmp_path: Path) -> None:
    make_bundle(tmp_path / "b")
    result = cli("inspect", "--format=json", str(tmp_path / "b"))
    doc = result.json()
    assert (result.code, doc["command"], doc["ok"]) == (0, "inspect", True)
    bundle = doc["result"]["bundles"][0]
    assert list(bundle) == [
        "path", "id", "digest", "created", "file_count", "total_size", "valid", "manifest", "files",
    ]
    assert bundle["valid"] is True
    assert bundle["manifest"]["files"][0] == {"path": "report.md", "sha256": file_digest(REPORT), "size": 16}
    assert bundle["files"][1] == {
        "path": "summary.txt", "size": 8, "sha256": file_digest(SUMMARY),
        "actual_size": 8, "actual_sha256": file_digest(SUMMARY), "ok": True,
    }
    assert list(bundle["manifest"]) == ["schema_version", "id", "digest", "created", "files"]


def test_inspect_tree_with_invalid_manifest(cli: Runner, tree: Path) -> None:
    (tree / "daily-1" / "manifest.json").write_text("{} trailing")
    result = cli("inspect", "--format", "json", str(tree))
    assert result.code == 1
    doc = result.json()
    assert doc["ok"] is False
    changed = "file summary.txt size 16 does not match manifest size 8"
    assert doc["result"]["invalid"] == [
        {"path": f"{tree}/broken", "error": changed},
        {"path": f"{tree}/daily-1", "error": "manifest is not valid JSON: trailing data"},
    ]
    # a bundle whose manifest could be read is reported in full, with its verdict
    bundles = doc["result"]["bundles"]
    assert [(b["path"], b["valid"]) for b in bundles] == [(f"{tree}/broken", False), (f"{tree}/weekly/w23", True)]
    assert bundles[0]["error"] == changed
    assert result.stderr == (
        f"distributor: invalid bundle {tree}/broken: {changed}\n"
        f"distributor: invalid bundle {tree}/daily-1: manifest is not valid JSON: trailing data\n"
    )


def test_inspect_config_form(cli: Runner, tree: Path, tmp_path: Path) -> None:
    config = write_config(tmp_path)
    result = cli("inspect", "--config", str(config), "--pipeline", "reports", "--bundle", "weekly/w23")
    assert result.code == 0
    assert result.stdout.splitlines()[0].startswith("Bundle: path=weekly/w23 id=reports.weekly ")


def test_inspect_state_text(cli: Runner, tmp_path: Path) -> None:
    dest = tmp_path / "published"
    dest.mkdir()
    write_state(dest)
    result = cli("inspect", str(dest))
    assert (result.code, result.stderr) == (0, "")
    lines = result.stdout.splitlines()
    assert lines[0] == (
        f"State: path={dest} schema=2 mode=single_owner owners=1 outputs=2 updated_at=2026-06-07T15:00:00Z"
    )
    assert lines[1].startswith("Owner: pipeline=reports destination=archive reconciliation=replace ")
    assert lines[2] == (
        f"Output: path=report.md kind=source size=16 sha256={file_digest(REPORT)} updated_at=2026-06-07T15:00:00Z"
    )


def test_inspect_state_json(cli: Runner, tmp_path: Path) -> None:
    write_state(tmp_path)
    doc = cli("inspect", str(tmp_path), "--format", "json").json()
    assert doc["ok"] is True
    result = doc["result"]
    assert (result["path"], result["state_schema"], result["state_mode"]) == (str(tmp_path), 2, "single_owner")
    assert result["state"]["pipeline_id"] == "reports"
    assert [o["path"] for o in result["state"]["outputs"]] == ["report.md", "summary.txt"]


def test_inspect_invalid_state(cli: Runner, tmp_path: Path) -> None:
    write_state(tmp_path, valid=False)
    result = cli("inspect", str(tmp_path))
    assert (result.code, result.stdout) == (1, "")
    assert result.stderr == f"distributor: invalid state {tmp_path}/.distributor.json: state outputs is required\n"


def test_inspect_nothing_found(cli: Runner, tmp_path: Path) -> None:
    result = cli("inspect", str(tmp_path))
    assert result.code == 1
    assert result.stderr == (
        f"distributor: no source bundles (manifest.json) or distributor state (.distributor.json) "
        f"found under {tmp_path}\n"
    )


def test_inspect_usage(cli: Runner) -> None:
    result = cli("inspect")
    assert (result.code, result.stdout) == (2, "")
    assert result.stderr == "distributor: inspect requires <path> or --config with --pipeline\n"


def test_inspect_shared_root_state(cli: Runner, tmp_path: Path) -> None:
    fixture = Path(__file__).resolve().parents[1] / "state" / "data" / "shared_root_v3.json"
    (tmp_path / ".distributor.json").write_bytes(fixture.read_bytes())
    result = cli("inspect", str(tmp_path))
    assert result.code == 0
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"State: path={tmp_path} schema=3 mode=shared_root owners=2 outputs=2 ")
    assert [line.split()[1] for line in lines[1:3]] == ["pipeline=reports", "pipeline=reports"]
    assert "destination=html reconciliation=merge" in lines[2]
    assert " owner=reports/archive " in lines[3]
    assert lines[4].startswith("Output: path=report.html kind=generated owner=reports/html ")
    doc = cli("inspect", "--format", "json", str(tmp_path)).json()
    assert (doc["result"]["state_schema"], doc["result"]["state_mode"]) == (3, "shared_root")
    assert len(doc["result"]["state"]["owners"]) == 2

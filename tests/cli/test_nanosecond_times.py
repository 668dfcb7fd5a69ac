"""Nanosecond ``created`` times end to end through the console script (issue 15 item 4,
resolutions G1): ``manifest create --created``, ``validate``/``inspect``, the state ``run``
writes, the comparison with state the Go tool wrote, and the run report."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.conftest import run_script

NANO = "2026-06-04T12:00:00.123456789Z"


def _bundle(tmp_path: Path, created: str) -> Path:
    bundle = tmp_path / "spool" / "daily"
    bundle.mkdir(parents=True)
    (bundle / "report.md").write_text("# Daily\n")
    made = run_script("manifest", "create", "--id", "reports.daily", "--file", "report.md",
                      "--created", created, "--format", "json", str(bundle))
    assert made.returncode == 0, made.stderr
    assert json.loads(made.stdout)["result"]["created"] == NANO
    return bundle


def _config(tmp_path: Path) -> Path:
    config = tmp_path / "distributor.yml"
    config.write_text(
        "pipelines:\n"
        "  - id: reports\n"
        "    source: {backend: local, path: spool}\n"
        "    destinations:\n"
        "      - {id: archive, backend: local, path: out}\n"
    )
    return config


def _run(config: Path) -> dict:
    result = run_script("run", "--config", str(config), "--format", "json")
    assert result.returncode == 0, result.stderr
    (action,) = json.loads(result.stdout)["result"]["actions"]
    return action


def test_manifest_create_validate_and_inspect_keep_nanoseconds(tmp_path: Path) -> None:
    # an offset is the same instant; it is written in UTC, nanoseconds kept
    bundle = _bundle(tmp_path, "2026-06-04T14:00:00.123456789+02:00")
    assert json.loads((bundle / "manifest.json").read_text())["created"] == NANO
    text = run_script("manifest", "create", "--id", "x", "--file", "report.md", "--overwrite",
                      "--created", "2026-06-04T12:00:00.120000000Z", str(bundle))
    assert text.returncode == 0, text.stderr
    assert "created=2026-06-04T12:00:00.12Z" in text.stdout
    assert json.loads((bundle / "manifest.json").read_text())["created"] == "2026-06-04T12:00:00.12Z"

    bundle = _bundle(tmp_path / "again", NANO)
    validated = run_script("validate", "--format", "json", str(bundle))
    assert validated.returncode == 0, validated.stderr
    assert NANO in validated.stdout
    inspected = run_script("inspect", "--format", "json", str(bundle))
    assert inspected.returncode == 0, inspected.stderr
    (found,) = json.loads(inspected.stdout)["result"]["bundles"]
    assert (found["created"], found["manifest"]["created"]) == (NANO, NANO)


def test_state_records_nanoseconds_and_go_state_compares_equal(tmp_path: Path) -> None:
    _bundle(tmp_path, NANO)
    config = _config(tmp_path)
    assert _run(config)["action"] == "publish_new"
    state_file = tmp_path / "out" / "daily" / ".distributor.json"
    state = json.loads(state_file.read_text())
    assert state["source"]["manifest"]["created"] == NANO
    assert state["published_at"].endswith("Z") and "." not in state["published_at"]  # Go's RFC3339
    assert _run(config)["action"] == "skip_same"

    def go_state(created: str) -> None:
        # the state the Go tool writes: the embedded manifest's created in RFC3339Nano
        state["source"]["manifest"]["created"] = created
        state_file.write_text(json.dumps(state, indent=2) + "\n")

    go_state(NANO)
    assert _run(config)["action"] == "skip_same"
    go_state("2026-06-04T12:00:00.123456788Z")  # one nanosecond older
    older = _run(config)
    assert (older["action"], older["reason"]) == ("replace_older", "destination source is older than source")
    assert json.loads(state_file.read_text())["source"]["manifest"]["created"] == NANO
    state = json.loads(state_file.read_text())
    go_state("2026-06-04T12:00:00.12345679Z")  # ten nanoseconds newer
    newer = _run(config)
    assert (newer["action"], newer["reason"]) == ("skip_destination_newer", "destination source is newer than source")


def test_shared_root_state_keeps_manifest_nanoseconds(tmp_path: Path) -> None:
    _bundle(tmp_path, NANO)
    config = tmp_path / "distributor.yml"
    config.write_text(
        "pipelines:\n"
        "  - id: reports\n"
        "    source: {backend: local, path: spool}\n"
        "    destinations:\n"
        "      - {id: site, backend: local, path: out, state: {mode: shared_root}}\n"
    )
    assert _run(config)["action"] == "publish_new"
    state = json.loads((tmp_path / "out" / "daily" / ".distributor.json").read_text())
    (owner,) = state["owners"]
    assert owner["source"]["manifest"]["created"] == NANO
    # source_created is whole seconds, as the Go tool writes it (time.RFC3339)
    assert {o["source_created"] for o in state["outputs"]} == {"2026-06-04T12:00:00Z"}
    assert _run(config)["action"] == "skip_same"

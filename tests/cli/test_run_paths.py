"""Run reports say where things went (issue 15 item 7), through the console script: each action
names its source bundle path (``bundle_path``, text ``path``) and the bundle path inside the
destination (``destination_path``), in text and JSON, planned, completed or failed."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from distributor_core.bundle import build_manifest, write_manifest
from tests.bundle.conftest import make_bundle
from tests.cli.conftest import run_script


def _setup(tmp_path: Path) -> Path:
    make_bundle(tmp_path / "spool" / "2026" / "06" / "daily")
    newest = tmp_path / "spool" / "weekly"
    newest.mkdir(parents=True)
    (newest / "week.txt").write_text("week\n")
    write_manifest(newest, build_manifest(newest, id="reports.weekly", files=["week.txt"],
                                          created=datetime(2026, 6, 9, tzinfo=UTC)))
    config = tmp_path / "distributor.yml"
    config.write_text(
        """\
pipelines:
  - id: reports
    source: {backend: local, path: spool}
    destinations:
      - {id: archive, backend: local, path: out/archive}
      - {id: latest, backend: local, path: out/latest, path_mapping: {mode: fixed}}
"""
    )
    return config


def _where(stdout: str) -> list[tuple[str, ...]]:
    rows = []
    for line in stdout.splitlines():
        if line.startswith("Action: "):
            fields = dict(pair.split("=", 1) for pair in line.removeprefix("Action: ").split())
            rows.append((fields["destination"], fields["path"], fields["destination_path"], fields["status"]))
    return rows


def test_text_and_json_name_source_and_destination_paths(tmp_path: Path) -> None:
    config = _setup(tmp_path)
    planned = run_script("run", "--config", str(config), "--dry-run")
    assert planned.returncode == 0, planned.stderr
    assert _where(planned.stdout) == [
        ("archive", "2026/06/daily", "2026/06/daily", "planned"),
        ("archive", "weekly", "weekly", "planned"),
        ("latest", "weekly", ".", "planned"),
    ]
    done = run_script("run", "--config", str(config), "--format", "json")
    assert done.returncode == 0, done.stderr
    actions = json.loads(done.stdout)["result"]["actions"]
    assert [(a["destination_id"], a["bundle_path"], a["destination_path"]) for a in actions] == [
        ("archive", "2026/06/daily", "2026/06/daily"),
        ("archive", "weekly", "weekly"),
        ("latest", "weekly", ""),
    ]
    # the paths are where the bytes are
    assert (tmp_path / "out" / "archive" / "2026" / "06" / "daily" / "report.md").is_file()
    assert (tmp_path / "out" / "archive" / "weekly" / "week.txt").is_file()
    assert (tmp_path / "out" / "latest" / "week.txt").is_file()
    again = run_script("run", "--config", str(config))
    assert [row[3] for row in _where(again.stdout)] == ["skipped", "skipped", "skipped"]
    assert [row[2] for row in _where(again.stdout)] == ["2026/06/daily", "weekly", "."]


def test_failed_actions_still_say_where(tmp_path: Path) -> None:
    config = _setup(tmp_path)
    (tmp_path / "spool" / "weekly" / "week.txt").write_text("changed\n")
    result = run_script("run", "--config", str(config))
    assert result.returncode == 1
    assert ("archive", "weekly", "weekly", "failed") in _where(result.stdout)
    assert ("latest", "weekly", ".", "failed") in _where(result.stdout)
    doc = json.loads(run_script("run", "--config", str(config), "--format", "json").stdout)
    failed = [a for a in doc["result"]["actions"] if a["status"] == "failed"]
    assert {(a["bundle_path"], a["destination_path"]) for a in failed} == {("weekly", "weekly"), ("weekly", "")}

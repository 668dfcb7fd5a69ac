"""Prune and state-repair jobs: dry run by default (E1), through the real ``dagster job execute``
and ``dg launch`` command lines, and in process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import pytest

from distributor_core.app.run import RunOptions, run_config
from distributor_core.config import load_config
from distributor_dagster import build_definitions
from tests.dagster.conftest import make_bundle, write_config

pytestmark = pytest.mark.dagster

BIN = Path(sys.executable).parent

CONFIG = """\
pipelines:
  - id: reports
    source: {backend: local, path: source}
    destinations:
      - id: site
        backend: local
        path: out
        reconciliation: {mode: merge}
        retention:
          prune: {enabled: true, keep_latest: 1}
"""


def at(day: int):
    return lambda: datetime(2026, 1, day, 9, 0, 0, tzinfo=UTC)


@pytest.fixture
def published(tmp_path: Path) -> Path:
    """Two merge publications: a.txt and b.txt from the first, c.txt (newer) from the second."""
    config = write_config(tmp_path, CONFIG)
    source = tmp_path / "source"
    make_bundle(source, "reports", {"a.txt": "a\n", "b.txt": "b\n"}, created=datetime(2026, 1, 1, tzinfo=UTC))
    assert run_config(load_config(config), RunOptions(clock=at(1))).ok
    for name in ("a.txt", "b.txt", "manifest.json"):
        (source / name).unlink()
    make_bundle(source, "reports", {"c.txt": "c\n"}, created=datetime(2026, 1, 2, tzinfo=UTC))
    assert run_config(load_config(config), RunOptions(clock=at(2))).ok
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [".distributor.json", "a.txt", "b.txt", "c.txt"]
    return config


def cli_env(tmp_path: Path, config: Path) -> dict[str, str]:
    home = tmp_path / "dagster-home"
    home.mkdir(exist_ok=True)
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    return {**os.environ, "DAGSTER_HOME": str(home), "DISTRIBUTOR_CONFIG": str(config)}


def last_report(env: dict[str, str], job: str, step: str) -> dict:
    """The ``report`` output metadata of ``step`` in the newest run of ``job`` in DAGSTER_HOME."""
    with dg.DagsterInstance.from_config(env["DAGSTER_HOME"]) as instance:
        (run, *_) = instance.get_runs(filters=dg.RunsFilter(job_name=job), limit=1)
        records = instance.all_logs(run.run_id, of_type=dg.DagsterEventType.STEP_OUTPUT)
        (output,) = [r.dagster_event for r in records if r.step_key == step]
        return output.step_output_data.metadata["report"].value


def execute(job: str, config: Path, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``dagster job execute -m distributor_dagster.definitions -j <job> -c <config>``."""
    command = [str(BIN / "dagster"), "job", "execute", "-m", "distributor_dagster.definitions"]
    command += ["-j", job, "-c", str(config)]
    return subprocess.run(command, capture_output=True, text=True, env=env, cwd=cwd, check=False)


def state_paths(out: Path) -> list[str]:
    return [o["path"] for o in json.loads((out / ".distributor.json").read_text())["outputs"]]


def test_prune_job_on_the_command_line_deletes_exactly_what_the_dry_run_listed(tmp_path: Path, published: Path) -> None:
    env = cli_env(tmp_path, published)
    job = "prune_reports__site"
    dry_config = tmp_path / "dry.yaml"
    dry_config.write_text("ops:\n  plan_prune:\n    config: {}\n")
    dry = execute(job, dry_config, env, tmp_path)
    assert dry.returncode == 0, dry.stderr
    dry_report = last_report(env, job, "apply_prune")
    planned = [item["path"] for item in dry_report["planned_outputs"]]
    assert planned == ["a.txt", "b.txt"]
    assert [item["path"] for item in dry_report["preserved_outputs"]] == ["c.txt"]
    assert dry_report["dry_run"] is True and dry_report["deleted_outputs"] == []
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [".distributor.json", "a.txt", "b.txt", "c.txt"]

    apply_config = tmp_path / "apply.yaml"
    apply_config.write_text("ops:\n  plan_prune:\n    config:\n      apply: true\n")
    applied = execute(job, apply_config, env, tmp_path)
    assert applied.returncode == 0, applied.stderr
    report = last_report(env, job, "apply_prune")
    assert [item["path"] for item in report["deleted_outputs"]] == planned
    assert report["state_changed"] is True and report["dry_run"] is False
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [".distributor.json", "c.txt"]
    assert state_paths(tmp_path / "out") == ["c.txt"]


def test_repair_job_through_dg_launch_reports_missing_outputs_without_writing(
    tmp_path: Path, published: Path
) -> None:
    (tmp_path / "out" / "b.txt").unlink()
    before = (tmp_path / "out" / ".distributor.json").read_bytes()
    env = cli_env(tmp_path, published)
    launched = subprocess.run(
        [str(BIN / "dg"), "launch", "--job", "reconcile_state_reports__site", "-m", "distributor_dagster.definitions",
         "--config-json", json.dumps({"ops": {"reconcile_state": {"config": {"all_owners": False}}}})],
        capture_output=True, text=True, env=env, cwd=tmp_path,
    )
    assert launched.returncode == 0, launched.stderr
    report = last_report(env, "reconcile_state_reports__site", "reconcile_state")
    assert report["missing_managed_outputs"] == [{"path": "b.txt", "storage_status": "missing"}]
    assert report["would_change"] is True and report["changed"] is False and report["dry_run"] is True
    assert (tmp_path / "out" / ".distributor.json").read_bytes() == before


def run_job(config: Path, name: str, run_config: dict) -> dg.ExecuteInProcessResult:
    job = build_definitions(config).resolve_job_def(name)
    return job.execute_in_process(run_config=run_config, raise_on_error=False)


def output_report(result: dg.ExecuteInProcessResult, step: str) -> dict:
    return result.output_for_node(step)


def test_repair_applies_only_with_apply(tmp_path: Path, published: Path) -> None:
    (tmp_path / "out" / "a.txt").unlink()
    (tmp_path / "out" / "stray.txt").write_text("not managed\n")
    dry = run_job(published, "reconcile_state_reports__site", {})
    assert dry.success
    report = output_report(dry, "reconcile_state")
    assert report["dry_run"] is True and report["would_change"] is True
    assert report["unmanaged_entries"] == [{"path": "stray.txt", "type": "file", "size": 12}]
    assert state_paths(tmp_path / "out") == ["a.txt", "b.txt", "c.txt"]

    apply = {"ops": {"reconcile_state": {"config": {"apply": True}}}}
    applied = run_job(published, "reconcile_state_reports__site", apply)
    assert applied.success
    report = output_report(applied, "reconcile_state")
    assert report["changed"] is True and report["dry_run"] is False
    assert state_paths(tmp_path / "out") == ["b.txt", "c.txt"]
    assert (tmp_path / "out" / "stray.txt").is_file()


def test_all_bundles_and_bundle_path_selections(tmp_path: Path) -> None:
    config = write_config(
        tmp_path,
        """\
        pipelines:
          - id: reports
            source: {backend: local, path: source}
            destinations:
              - id: site
                backend: local
                path: out
                retention: {prune: {enabled: true, keep_latest: 0}}
        """,
    )
    for day in ("d1", "d2"):
        make_bundle(tmp_path / "source" / day, "reports", {"r.txt": day})
    assert run_config(load_config(config), RunOptions()).ok

    root = run_job(config, "prune_reports__site", {})
    assert not root.success
    failure = next(e for e in root.all_events if e.event_type_value == "STEP_FAILURE")
    assert failure.step_key == "load_state"
    assert "does not exist" in failure.event_specific_data.error.message

    every = run_job(config, "prune_reports__site", {"ops": {"plan_prune": {"config": {"all_bundles": True}}}})
    assert every.success
    report = output_report(every, "apply_prune")
    assert report["all_bundles"] is True and report["bundle_count"] == 2
    assert [b["bundle_path"] for b in report["bundles"]] == ["d1", "d2"]
    assert all(b["planned_outputs"][0]["path"] == "r.txt" for b in report["bundles"])
    assert (tmp_path / "out" / "d1" / "r.txt").is_file()

    one = run_job(config, "prune_reports__site",
                  {"ops": {"plan_prune": {"config": {"bundle_path": "d2", "apply": True}}}})
    assert one.success
    assert output_report(one, "apply_prune")["deleted_outputs"][0]["path"] == "r.txt"
    assert not (tmp_path / "out" / "d2" / "r.txt").exists()
    assert (tmp_path / "out" / "d1" / "r.txt").is_file()

    both = run_job(config, "prune_reports__site",
                   {"ops": {"plan_prune": {"config": {"bundle_path": "d1", "all_bundles": True}}}})
    assert not both.success
    failure = next(e for e in both.all_events if e.event_type_value == "STEP_FAILURE")
    assert "bundle_path and all_bundles exclude each other" in failure.event_specific_data.error.message

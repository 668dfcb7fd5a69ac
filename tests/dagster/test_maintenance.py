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


def last_report(env: dict[str, str], job: str) -> dict:
    """The ``report`` output metadata of the newest run of the maintenance ``job`` in DAGSTER_HOME."""
    with dg.DagsterInstance.from_config(env["DAGSTER_HOME"]) as instance:
        (run, *_) = instance.get_runs(filters=dg.RunsFilter(job_name=job), limit=1)
        records = instance.all_logs(run.run_id, of_type=dg.DagsterEventType.STEP_OUTPUT)
        (output,) = [r.dagster_event for r in records if r.step_key == job]
        return output.step_output_data.metadata["report"].value["destinations"]


def execute(job: str, config: Path, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``dagster job execute -m distributor_dagster.definitions -j <job> -c <config>``."""
    command = [str(BIN / "dagster"), "job", "execute", "-m", "distributor_dagster.definitions"]
    command += ["-j", job, "-c", str(config)]
    return subprocess.run(command, capture_output=True, text=True, env=env, cwd=cwd, check=False)


def state_paths(out: Path) -> list[str]:
    return [o["path"] for o in json.loads((out / ".distributor.json").read_text())["outputs"]]


SITE = "reports/site"
KEY = dg.AssetKey(["reports", "site"])


def test_the_code_location_has_three_maintenance_jobs_whatever_its_size(tmp_path: Path) -> None:
    """Issue 28: maintenance is three site-wide jobs, one short step each, not three per destination."""
    destinations = "\n".join(f"      - {{id: d{i}, backend: local, path: out/d{i}}}" for i in range(5))
    pipelines = "\n".join(
        f"  - id: p{n}\n    source: {{backend: local, path: source}}\n    destinations:\n{destinations}"
        for n in range(4)
    )
    defs = build_definitions(write_config(tmp_path, f"pipelines:\n{pipelines}\n"))
    jobs = {job.name for job in defs.resolve_all_job_defs()} - {"__ASSET_JOB"}
    assert jobs == {"prune", "reconcile_state", "audit"} | {f"publish_p{n}" for n in range(4)}
    for name in ("prune", "reconcile_state", "audit"):
        job = defs.resolve_job_def(name)
        assert [node.name for node in job.graph.nodes] == [name]
    # the launchpad shows only the fields that apply, each with its default
    prune_fields = defs.resolve_job_def("prune").run_config_schema.config_type.fields["ops"].config_type.fields
    fields = prune_fields["prune"].config_type.fields["config"].config_type.fields
    assert set(fields) == {"destinations", "bundle_path", "apply"}
    assert not any(field.is_required for field in fields.values())
    assert fields["apply"].default_value is False


def test_prune_on_the_command_line_deletes_exactly_what_the_dry_run_listed(tmp_path: Path, published: Path) -> None:
    env = cli_env(tmp_path, published)
    dry_config = tmp_path / "dry.yaml"
    dry_config.write_text("ops:\n  prune:\n    config: {}\n")
    dry = execute("prune", dry_config, env, tmp_path)
    assert dry.returncode == 0, dry.stderr
    dry_report = last_report(env, "prune")[SITE]  # every bundle path with state: the root here
    (section,) = dry_report["bundles"]
    planned = [item["path"] for item in section["planned_outputs"]]
    assert planned == ["a.txt", "b.txt"]
    assert [item["path"] for item in section["preserved_outputs"]] == ["c.txt"]
    assert section["dry_run"] is True and section["deleted_outputs"] == []
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [".distributor.json", "a.txt", "b.txt", "c.txt"]

    apply_config = tmp_path / "apply.yaml"
    apply_config.write_text(f"ops:\n  prune:\n    config:\n      apply: true\n      destinations: [{SITE}]\n")
    applied = execute("prune", apply_config, env, tmp_path)
    assert applied.returncode == 0, applied.stderr
    (section,) = last_report(env, "prune")[SITE]["bundles"]
    assert [item["path"] for item in section["deleted_outputs"]] == planned
    assert section["state_changed"] is True and section["dry_run"] is False
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [".distributor.json", "c.txt"]
    assert state_paths(tmp_path / "out") == ["c.txt"]
    # what it did is on the destination asset
    with dg.DagsterInstance.from_config(env["DAGSTER_HOME"]) as instance:
        (observation,) = [r.asset_observation for r in instance.fetch_observations(KEY, limit=10).records
                          if r.asset_observation.metadata["dry_run"].value is False]
    assert observation.metadata["operation"].value == "prune" and observation.metadata["deleted"].value == 2
    rows = [r.data for r in observation.metadata["paths"].value.records]
    assert rows == [{"path": "a.txt", "what": "deleted"}, {"path": "b.txt", "what": "deleted"}]


def test_repair_through_dg_launch_reports_missing_outputs_without_writing(tmp_path: Path, published: Path) -> None:
    (tmp_path / "out" / "b.txt").unlink()
    before = (tmp_path / "out" / ".distributor.json").read_bytes()
    env = cli_env(tmp_path, published)
    launched = subprocess.run(
        [str(BIN / "dg"), "launch", "--job", "reconcile_state", "-m", "distributor_dagster.definitions",
         "--config-json", json.dumps({"ops": {"reconcile_state": {"config": {"destinations": ["reports"]}}}})],
        capture_output=True, text=True, env=env, cwd=tmp_path,
    )
    assert launched.returncode == 0, launched.stderr
    (section,) = last_report(env, "reconcile_state")[SITE]["bundles"]
    assert section["missing_managed_outputs"] == [{"path": "b.txt", "storage_status": "missing"}]
    assert section["would_change"] is True and section["changed"] is False and section["dry_run"] is True
    assert (tmp_path / "out" / ".distributor.json").read_bytes() == before


def run_job(config: Path, name: str, run_config: dict, instance: dg.DagsterInstance | None = None
            ) -> dg.ExecuteInProcessResult:
    job = build_definitions(config).resolve_job_def(name)
    return job.execute_in_process(run_config=run_config, raise_on_error=False, instance=instance)


def report_of(result: dg.ExecuteInProcessResult, job: str) -> dict:
    return result.output_for_node(job)["destinations"]


def evaluations(result: dg.ExecuteInProcessResult) -> dict[str, bool]:
    return {e.check_name: e.passed for e in result.get_asset_check_evaluations() if e.asset_key == KEY}


def test_an_applied_repair_turns_the_failed_check_green_in_the_same_run(tmp_path: Path, published: Path) -> None:
    """Issue 25 item 3: the repair records what it did on the asset and evaluates its checks."""
    with dg.instance_for_test() as instance:
        publish = build_definitions(published).resolve_job_def("publish_reports")
        assert publish.execute_in_process(instance=instance, raise_on_error=False).success
        (tmp_path / "out" / "a.txt").unlink()
        (tmp_path / "out" / "stray.txt").write_text("not managed\n")
        dry = run_job(published, "reconcile_state", {}, instance)
        assert dry.success
        (section,) = report_of(dry, "reconcile_state")[SITE]["bundles"]
        assert section["dry_run"] is True and section["would_change"] is True
        assert section["unmanaged_entries"] == [{"path": "stray.txt", "type": "file", "size": 12}]
        assert state_paths(tmp_path / "out") == ["a.txt", "b.txt", "c.txt"]
        assert evaluations(dry)["managed_outputs_present"] is False  # the dry run tells the truth

        apply = {"ops": {"reconcile_state": {"config": {"apply": True}}}}
        applied = run_job(published, "reconcile_state", apply, instance)
        assert applied.success
        (section,) = report_of(applied, "reconcile_state")[SITE]["bundles"]
        assert section["changed"] is True and section["dry_run"] is False
        assert state_paths(tmp_path / "out") == ["b.txt", "c.txt"]
        assert (tmp_path / "out" / "stray.txt").is_file()
        assert evaluations(applied) == {
            "state_valid": True, "managed_outputs_present": True, "no_unmanaged_content": False,
        }
        observed = [e for e in applied.asset_observations_for_node("reconcile_state") if e.asset_key == KEY]
        (observation,) = observed
        assert observation.metadata["missing"].value == 1 and observation.metadata["state_changed"].value is True
        # the latest evaluation, what the asset page shows, is green for the repaired check
        key = dg.AssetCheckKey(KEY, "managed_outputs_present")
        (latest, *_) = instance.event_log_storage.get_asset_check_execution_history(key, limit=1)
        assert latest.evaluation.passed is True and latest.run_id == applied.run_id


def test_bundle_selection_defaults_to_every_bundle_path_and_a_disabled_policy_says_so(tmp_path: Path) -> None:
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
              - {id: plain, backend: local, path: plain}
        """,
    )
    for day in ("d1", "d2"):
        make_bundle(tmp_path / "source" / day, "reports", {"r.txt": day})
    assert run_config(load_config(config), RunOptions()).ok

    with dg.instance_for_test() as instance:
        every = run_job(config, "prune", {}, instance)  # a dated layout: no selection means every bundle path
        messages = [entry.user_message for entry in instance.all_logs(every.run_id)]
    assert every.success
    report = report_of(every, "prune")[SITE]
    assert report["all_bundles"] is True and [b["bundle_path"] for b in report["bundles"]] == ["d1", "d2"]
    assert all(b["planned_outputs"][0]["path"] == "r.txt" for b in report["bundles"])
    assert (tmp_path / "out" / "d1" / "r.txt").is_file()
    plain = report_of(every, "prune")["reports/plain"]
    assert all(b["enabled"] is False and b["planned_outputs"] == [] for b in plain["bundles"])
    assert any("retention.prune is disabled for destination reports/plain" in m for m in messages)

    one = run_job(config, "prune", {"ops": {"prune": {"config": {"destinations": [SITE], "bundle_path": "d2",
                                                                  "apply": True}}}})
    assert one.success
    assert report_of(one, "prune")[SITE]["deleted_outputs"][0]["path"] == "r.txt"
    assert not (tmp_path / "out" / "d2" / "r.txt").exists()
    assert (tmp_path / "out" / "d1" / "r.txt").is_file()

    unknown = run_job(config, "prune", {"ops": {"prune": {"config": {"destinations": ["reports/nope"]}}}})
    assert not unknown.success
    failure = next(e for e in unknown.all_events if e.event_type_value == "STEP_FAILURE")
    message = failure.event_specific_data.error.message
    assert "unknown destination 'reports/nope'" in message and "reports/site" in message

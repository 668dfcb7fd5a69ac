"""Digest audits in Dagster (issue 18 item 1): the ``audit_<p>__<d>`` job through ``dagster job
execute``, and the opt-in ``outputs_match_digests`` asset check, evaluated with a materialization
(``dagster asset materialize``) and in a checks-only run ("Execute checks"); off by default, turned
on by the build option, the environment variable or the Component attribute."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest
import yaml
from dagster.components.testing import create_defs_folder_sandbox

from distributor_dagster import DistributorComponent, build_definitions
from distributor_dagster.audit import DIGEST_CHECK
from distributor_dagster.location import DistributorConfigError, definitions_from_environment
from tests.dagster.conftest import make_bundle, write_config

pytestmark = pytest.mark.dagster

BIN = Path(sys.executable).parent
CONFIG = """\
pipelines:
  - id: reports.daily
    source: {backend: local, path: source}
    destinations:
      - {id: archive, backend: local, path: out}
"""
KEY = dg.AssetKey(["reports_daily", "archive"])
CHECK = dg.AssetCheckKey(KEY, DIGEST_CHECK)
JOB = "audit"
LABEL = "reports.daily/archive"


@pytest.fixture
def config(tmp_path: Path) -> Path:
    make_bundle(tmp_path / "source" / "d1", "reports", {"r.txt": "first day\n", "sub/s.txt": "s\n"})
    return write_config(tmp_path, CONFIG)


@pytest.fixture
def home(config: Path) -> Path:
    home = config.parent / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    with dg.DagsterInstance.from_config(str(home)) as instance:
        # what the watch sensor's first tick does (test_watch_sensor): the bundle becomes a partition
        # of the source and of the destinations
        instance.add_dynamic_partitions("reports_daily__bundles", ["d1"])
        instance.add_dynamic_partitions("reports_daily__published", ["d1"])
    return home


def dagster(home: Path, *args: str, digest_checks: bool = False) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DAGSTER_HOME": str(home), "DISTRIBUTOR_CONFIG": str(home.parent / "distributor.yml")}
    env.pop("DISTRIBUTOR_DAGSTER_DIGEST_CHECKS", None)
    if digest_checks:
        env["DISTRIBUTOR_DAGSTER_DIGEST_CHECKS"] = "true"
    return subprocess.run(
        [str(BIN / "dagster"), *args, "-m", "distributor_dagster.definitions"],
        capture_output=True,
        text=True,
        env=env,
        cwd=home.parent,
        timeout=600,
        check=False,
    )


def run_config(home: Path, config: dict) -> str:
    path = home.parent / "audit.yaml"
    path.write_text(json.dumps({"ops": {"audit": {"config": config}}}))  # JSON is YAML
    return str(path)


def latest_run_events(home: Path, kind: dg.DagsterEventType) -> list[dg.EventLogEntry]:
    with dg.DagsterInstance.from_config(str(home)) as instance:
        run = instance.get_runs(limit=1)[0]
        return [r.event_log_entry for r in instance.get_records_for_run(run.run_id, of_type=kind).records]


def check_names(defs: dg.Definitions) -> set[str]:
    graph = defs.resolve_asset_graph()
    return {key.name for key in graph.asset_check_keys if key.asset_key == KEY}


def test_materialize_evaluates_the_check_and_the_audit_job_fails_on_changed_bytes(home: Path) -> None:
    out = home.parent / "out" / "d1"
    done = dagster(home, "asset", "materialize", "--select", "reports_daily/archive", "--partition", "d1",
                   digest_checks=True)
    assert done.returncode == 0, done.stdout + done.stderr
    evaluations = {
        e.dagster_event.event_specific_data.check_name: e.dagster_event.event_specific_data
        for e in latest_run_events(home, dg.DagsterEventType.ASSET_CHECK_EVALUATION)
    }
    assert evaluations[DIGEST_CHECK].passed is True
    assert evaluations[DIGEST_CHECK].metadata["checked_count"].value == 2
    assert evaluations[DIGEST_CHECK].metadata["bytes_read"].value == len("first day\n") + len("s\n")

    audit = dagster(home, "job", "execute", "-j", JOB, "-c", run_config(home, {}))  # every destination, bundle
    assert audit.returncode == 0, audit.stdout + audit.stderr
    (output,) = latest_run_events(home, dg.DagsterEventType.STEP_OUTPUT)
    report = output.dagster_event.event_specific_data.metadata["report"].value["destinations"][LABEL]
    assert [(b["bundle_path"], b["status"], b["checked_count"]) for b in report["bundles"]] == [("d1", "ok", 2)]

    state = (out / ".distributor.json").read_bytes()
    (out / "r.txt").write_text("FIRST DAY\n")  # same size, other bytes
    failed = dagster(home, "job", "execute", "-j", JOB, "-c",
                     run_config(home, {"destinations": [LABEL], "bundle_path": "d1"}), digest_checks=True)
    assert failed.returncode != 0
    (failure,) = latest_run_events(home, dg.DagsterEventType.STEP_FAILURE)
    data = failure.dagster_event.event_specific_data
    assert "1 digest_mismatch" in data.error.message and LABEL in data.error.message
    (output,) = latest_run_events(home, dg.DagsterEventType.STEP_OUTPUT)
    report = output.dagster_event.event_specific_data.metadata["report"].value["destinations"][LABEL]
    outputs = {o["path"]: o for o in report["outputs"]}
    assert outputs["r.txt"]["status"] == "digest_mismatch"
    assert outputs["sub/s.txt"]["status"] == "ok"
    # the audit answered the asset's digest check too, for that partition
    (evaluation,) = [e.dagster_event.event_specific_data for e in
                     latest_run_events(home, dg.DagsterEventType.ASSET_CHECK_EVALUATION)
                     if e.dagster_event.event_specific_data.check_name == DIGEST_CHECK]
    assert (evaluation.passed, evaluation.partition) == (False, "d1")
    # an audit never writes: the state and the changed file stay as they are
    assert (out / ".distributor.json").read_bytes() == state
    assert (out / "r.txt").read_text() == "FIRST DAY\n"

    # the check alone, as "Execute checks" runs it, against the same instance
    defs = build_definitions(home.parent / "distributor.yml", digest_checks=True)
    job = defs.resolve_implicit_global_asset_job_def().get_subset(asset_check_selection={CHECK}, asset_selection=set())
    with dg.DagsterInstance.from_config(str(home)) as instance:
        result = job.execute_in_process(instance=instance, raise_on_error=False)
    assert result.success  # a failed check of severity error does not fail the run: it is not blocking
    (evaluation,) = result.get_asset_check_evaluations()
    assert (evaluation.check_name, evaluation.passed) == (DIGEST_CHECK, False)
    assert evaluation.severity == dg.AssetCheckSeverity.ERROR
    assert evaluation.metadata["digest_mismatch_count"].value == 1
    assert evaluation.partition == "d1"  # one evaluation per bundle partition the asset materialized
    rows = [r.data for r in evaluation.metadata["problems"].value.records]
    assert [(r["path"], r["status"]) for r in rows] == [("r.txt", "digest_mismatch")]


def test_the_check_reports_truncated_and_deleted_outputs(config: Path, tmp_path: Path) -> None:
    defs = build_definitions(config, digest_checks=True)
    with dg.instance_for_test() as instance:
        published = defs.resolve_job_def("publish_reports_daily").execute_in_process(instance=instance)
        assert {e.check_name: e.passed for e in published.get_asset_check_evaluations()}[DIGEST_CHECK] is True
        (tmp_path / "out" / "d1" / "r.txt").write_text("first")
        (tmp_path / "out" / "d1" / "sub" / "s.txt").unlink()
        job = defs.resolve_implicit_global_asset_job_def().get_subset(
            asset_check_selection={CHECK}, asset_selection=set()
        )
        result = job.execute_in_process(instance=instance)
    (evaluation,) = result.get_asset_check_evaluations()
    assert evaluation.passed is False
    assert evaluation.description == "1 missing, 1 size_mismatch"
    rows = {r.data["path"]: r.data for r in evaluation.metadata["problems"].value.records}
    assert rows["r.txt"]["status"] == "size_mismatch" and rows["r.txt"]["actual_size"] == len("first")
    assert rows["sub/s.txt"]["status"] == "missing"


def test_the_check_is_off_by_default_and_turned_on_three_ways(config: Path) -> None:
    assert DIGEST_CHECK not in check_names(build_definitions(config))
    assert JOB in {job.name for job in build_definitions(config).resolve_all_job_defs()}  # the job always exists
    assert DIGEST_CHECK in check_names(build_definitions(config, digest_checks=True))

    env = {"DISTRIBUTOR_CONFIG": str(config)}
    assert DIGEST_CHECK not in check_names(definitions_from_environment(env))
    for value in ("1", "true", "yes", "on"):
        defs = definitions_from_environment({**env, "DISTRIBUTOR_DAGSTER_DIGEST_CHECKS": value})
        assert DIGEST_CHECK in check_names(defs), value
    assert DIGEST_CHECK not in check_names(
        definitions_from_environment({**env, "DISTRIBUTOR_DAGSTER_DIGEST_CHECKS": "0"})
    )
    with pytest.raises(
        DistributorConfigError, match="DISTRIBUTOR_DAGSTER_DIGEST_CHECKS: digest_checks must be true or false"
    ):
        definitions_from_environment({**env, "DISTRIBUTOR_DAGSTER_DIGEST_CHECKS": "sometimes"})

    with create_defs_folder_sandbox() as sandbox:
        folder = sandbox.defs_folder_path / "publications"
        folder.mkdir()
        absolute = config.read_text().replace("path: source", f"path: {config.parent}/source")
        absolute = absolute.replace("path: out", f"path: {config.parent}/out")
        (folder / "distributor.yml").write_text(absolute)
        (folder / "defs.yaml").write_text(
            yaml.safe_dump(
                {
                    "type": "distributor_dagster.DistributorComponent",
                    "attributes": {"config_path": "distributor.yml", "digest_checks": True},
                }
            )
        )
        with sandbox.load_component_and_build_defs(defs_path=folder) as (component, defs):
            assert isinstance(component, DistributorComponent) and component.digest_checks is True
            assert DIGEST_CHECK in check_names(defs)

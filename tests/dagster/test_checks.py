"""Asset checks of destination assets: declared with the assets, evaluated in every run that
materializes them and alone ("Execute checks"); they look at the bundle paths the asset
materialized; failing ones list the paths at fault as tables; ``managed_outputs_present`` blocks."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from distributor_dagster import build_definitions
from tests.dagster.conftest import make_bundle, write_config

pytestmark = pytest.mark.dagster

CONFIG = """\
pipelines:
  - id: reports
    source: {backend: local, path: source}
    destinations:
      - id: archive
        backend: local
        path: out
"""
KEY = dg.AssetKey(["reports", "archive"])
NAMES = ("state_valid", "managed_outputs_present", "no_unmanaged_content")


@pytest.fixture
def config(tmp_path: Path) -> Path:
    for day in ("d1", "d2"):
        make_bundle(tmp_path / "source" / day, "reports", {"r.txt": f"{day}\n", "sub/s.txt": "s\n"})
    return write_config(tmp_path, CONFIG)


def run_checks(
    defs: dg.Definitions, instance: dg.DagsterInstance, *, success: bool = True
) -> dict[str, dg.AssetCheckEvaluation]:
    """A checks-only run, as "Execute checks" in the UI launches it."""
    job = defs.resolve_implicit_global_asset_job_def().get_subset(
        asset_check_selection={dg.AssetCheckKey(KEY, name) for name in NAMES}, asset_selection=set()
    )
    result = job.execute_in_process(instance=instance, raise_on_error=False)
    assert result.success is success
    assert result.asset_materializations_for_node("reports") == []
    return {e.check_name: e for e in result.get_asset_check_evaluations()}


def publish(
    defs: dg.Definitions, instance: dg.DagsterInstance, bundle_path: str | None = None, *, success: bool = True
) -> dg.ExecuteInProcessResult:
    config = {"bundle_path": bundle_path} if bundle_path is not None else {}
    result = defs.resolve_job_def("publish_reports").execute_in_process(
        instance=instance, run_config={"ops": {"reports": {"config": config}}}, raise_on_error=False
    )
    assert result.success is success
    return result


def rows(evaluation: dg.AssetCheckEvaluation, table: str) -> list[dict]:
    return [record.data for record in evaluation.metadata[table].value.records]


def test_checks_pass_after_publication_and_fail_when_an_output_is_deleted_by_hand(
    tmp_path: Path, config: Path, instance: dg.DagsterInstance
) -> None:
    defs = build_definitions(config)
    published = publish(defs, instance)
    # the checks ran in the publishing run, after the materializations
    in_run = {e.check_name: e for e in published.get_asset_check_evaluations()}
    assert {name: e.passed for name, e in in_run.items()} == dict.fromkeys(NAMES, True)
    assert in_run["state_valid"].metadata["bundle_paths"].value == ["d1", "d2"]
    passed = run_checks(defs, instance)
    assert {name: e.passed for name, e in passed.items()} == dict.fromkeys(NAMES, True)
    assert passed["state_valid"].metadata["bundle_paths"].value == ["d1", "d2"]

    (tmp_path / "out" / "d2" / "sub" / "s.txt").unlink()
    # managed_outputs_present is blocking: its failure fails the check step, so the run fails
    after = run_checks(defs, instance, success=False)
    assert after["managed_outputs_present"].passed is False
    assert after["managed_outputs_present"].severity == dg.AssetCheckSeverity.ERROR
    assert after["managed_outputs_present"].blocking is True
    assert after["managed_outputs_present"].metadata["missing"].value == {"d2": ["sub/s.txt"]}
    assert rows(after["managed_outputs_present"], "missing_outputs") == [{"bundle_path": "d2", "path": "sub/s.txt"}]
    assert after["state_valid"].passed is True
    assert after["no_unmanaged_content"].passed is True


def test_unmanaged_content_is_a_warning_and_invalid_state_fails_state_valid(
    tmp_path: Path, config: Path, instance: dg.DagsterInstance
) -> None:
    defs = build_definitions(config)
    publish(defs, instance)
    (tmp_path / "out" / "d1" / "stray.txt").write_text("x\n")
    (tmp_path / "out" / "d2" / ".distributor.json").write_text("{not json")
    checks = run_checks(defs, instance, success=False)
    unmanaged = checks["no_unmanaged_content"]
    assert unmanaged.passed is False and unmanaged.severity == dg.AssetCheckSeverity.WARN
    assert unmanaged.metadata["unmanaged"].value == {"d1": ["stray.txt"]}
    stray = {"bundle_path": "d1", "path": "stray.txt", "type": "file", "size": 2}
    assert rows(unmanaged, "unmanaged_entries") == [stray]
    assert checks["state_valid"].passed is False
    assert list(checks["state_valid"].metadata["errors"].value) == ["d2"]
    assert [row["bundle_path"] for row in rows(checks["state_valid"], "error_table")] == ["d2"]
    assert checks["managed_outputs_present"].passed is False


def test_checks_ignore_bundle_paths_the_asset_did_not_materialize(
    tmp_path: Path, config: Path, instance: dg.DagsterInstance
) -> None:
    defs = build_definitions(config)
    untouched = run_checks(defs, instance)
    assert all(e.passed for e in untouched.values())
    assert untouched["state_valid"].metadata["bundle_paths"].value == []

    publish(defs, instance, "d1")
    (tmp_path / "out" / "elsewhere").mkdir()
    (tmp_path / "out" / "elsewhere" / ".distributor.json").write_text("{broken")
    checks = run_checks(defs, instance)
    assert checks["state_valid"].metadata["bundle_paths"].value == ["d1"]
    assert all(e.passed for e in checks.values())


def test_blocking_checks_are_configurable(tmp_path: Path, config: Path, instance: dg.DagsterInstance) -> None:
    defs = build_definitions(config, blocking_checks=())
    publish(defs, instance)
    (tmp_path / "out" / "d1" / "r.txt").unlink()
    checks = run_checks(defs, instance)  # nothing blocks: the failed check does not fail the run
    assert checks["managed_outputs_present"].passed is False
    assert checks["managed_outputs_present"].blocking is False
    strict = build_definitions(config, blocking_checks=["state_valid", "managed_outputs_present"])
    graph = strict.resolve_asset_graph()
    blocking = {key.name for key in graph.asset_check_keys if graph.get_check_spec(key).blocking}
    assert blocking == {"state_valid", "managed_outputs_present"}
    with pytest.raises(ValueError, match="blocking_checks must name checks"):
        build_definitions(config, blocking_checks=["fresh"])


def test_a_failing_blocking_check_fails_the_publishing_run_after_the_publication(
    tmp_path: Path, config: Path, instance: dg.DagsterInstance
) -> None:
    defs = build_definitions(config)
    publish(defs, instance, "d1")
    (tmp_path / "out" / "d1" / "r.txt").unlink()
    result = publish(defs, instance, "d2", success=False)
    assert [m.metadata["source_bundle_path"].value for m in result.asset_materializations_for_node("reports")] == ["d2"]
    failed = [e.step_key for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    assert failed == ["reports.check_archive"]
    (evaluation,) = [e for e in result.get_asset_check_evaluations() if e.check_name == "managed_outputs_present"]
    assert rows(evaluation, "missing_outputs") == [{"bundle_path": "d1", "path": "r.txt"}]


class _CountingInstance:
    """The real instance, with every ``fetch_materializations`` call's ``limit`` recorded."""

    def __init__(self, instance: dg.DagsterInstance) -> None:
        self.instance = instance
        self.limits: list[int] = []

    def fetch_materializations(self, key: dg.AssetKey, *, limit: int, cursor: str | None = None):
        self.limits.append(limit)
        return self.instance.fetch_materializations(key, limit=limit, cursor=cursor)


def test_a_fixed_destination_reads_one_materialization_however_long_its_history(
    tmp_path: Path, instance: dg.DagsterInstance
) -> None:
    from distributor_core.config import load_config
    from distributor_dagster.checks import PAGE_SIZE, published_bundle_paths

    make_bundle(tmp_path / "source" / "d1", "reports", {"r.txt": "one\n"})
    config = write_config(tmp_path, CONFIG.replace("path: out\n", "path: out\n        path_mapping: {mode: fixed}\n"))
    destination = load_config(config).destination("reports", "archive")
    counting = _CountingInstance(instance)
    assert published_bundle_paths(counting, KEY, destination) == []  # type: ignore[arg-type]
    defs = build_definitions(config)
    first = publish(defs, instance)
    assert {e.check_name: e.passed for e in first.get_asset_check_evaluations()} == dict.fromkeys(NAMES, True)
    for _ in range(PAGE_SIZE + 5):  # a long history of the root
        instance.report_runless_asset_event(dg.AssetMaterialization(KEY, metadata={"destination_path": "."}))
    counting.limits.clear()
    assert published_bundle_paths(counting, KEY, destination) == [""]  # type: ignore[arg-type]
    assert counting.limits == [1]
    # a preserve_relative reading of the same history pages through all of it
    assert published_bundle_paths(counting, KEY) == [""]  # type: ignore[arg-type]
    assert counting.limits == [1, PAGE_SIZE, PAGE_SIZE]
    checks = run_checks(defs, instance)
    assert checks["state_valid"].metadata["bundle_paths"].value == ["."]
    assert all(e.passed for e in checks.values())

"""Asset checks of destination assets (issues 12 and 24): declared with the assets, per bundle
partition where the asset is partitioned, evaluated in every run that publishes (on the paths the
run targeted) and alone ("Execute checks", on the partitions asked for or every materialized
one); failing ones list the paths at fault as tables; ``managed_outputs_present`` blocks."""

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


Evaluations = dict[tuple[str | None, str], dg.AssetCheckEvaluation]


def evaluations(result: dg.ExecuteInProcessResult) -> Evaluations:
    """(partition, check name) -> evaluation, of the destination's checks."""
    return {(e.partition, e.check_name): e for e in result.get_asset_check_evaluations() if e.asset_key == KEY}


def passed(found: Evaluations) -> dict[tuple[str | None, str], bool]:
    return {key: e.passed for key, e in found.items()}


def run_checks(
    defs: dg.Definitions, instance: dg.DagsterInstance, *, partition: str | None = None, success: bool = True
) -> Evaluations:
    """A checks-only run, as "Execute checks" in the UI launches it (the partition as a run tag: a
    checks-only run selects no asset, so Dagster cannot tell which partitions definition to check a
    ``partition_key`` argument against, the source's and the destinations' being different)."""
    job = defs.resolve_implicit_global_asset_job_def().get_subset(
        asset_check_selection={dg.AssetCheckKey(KEY, name) for name in NAMES}, asset_selection=set()
    )
    tags = {"dagster/partition": partition} if partition is not None else None
    result = job.execute_in_process(instance=instance, raise_on_error=False, tags=tags)
    assert result.success is success
    assert result.asset_materializations_for_node("reports") == []
    return evaluations(result)


def publish(
    defs: dg.Definitions, instance: dg.DagsterInstance, partition: str | None = None, *, success: bool = True
) -> dg.ExecuteInProcessResult:
    """``publish_reports`` of one bundle partition, or of every bundle."""
    result = defs.resolve_job_def("publish_reports").execute_in_process(
        instance=instance, partition_key=partition, raise_on_error=False
    )
    assert result.success is success
    return result


def rows(evaluation: dg.AssetCheckEvaluation, table: str) -> list[dict]:
    return [record.data for record in evaluation.metadata[table].value.records]


def every(partitions: tuple[str, ...], value: bool) -> dict[tuple[str, str], bool]:
    return {(p, name): value for p in partitions for name in NAMES}


def test_checks_pass_after_publication_and_fail_when_an_output_is_deleted_by_hand(
    tmp_path: Path, config: Path, instance: dg.DagsterInstance
) -> None:
    defs = build_definitions(config)
    published = publish(defs, instance)
    # the checks ran in the publishing run, after the materializations, once per bundle partition
    in_run = evaluations(published)
    assert passed(in_run) == every(("d1", "d2"), True)
    assert in_run[("d1", "state_valid")].metadata["bundle_path"].value == "d1"
    assert in_run[("d1", "state_valid")].metadata["destination_uri"].value == (tmp_path / "out").as_uri() + "/d1"
    assert passed(run_checks(defs, instance)) == every(("d1", "d2"), True)  # every materialized partition

    (tmp_path / "out" / "d2" / "sub" / "s.txt").unlink()
    # managed_outputs_present is blocking: its failure fails the step, so the run fails; d1 is fine
    after = run_checks(defs, instance, success=False)
    assert passed(after) == {**every(("d1", "d2"), True), ("d2", "managed_outputs_present"): False}
    failed = after[("d2", "managed_outputs_present")]
    assert failed.severity == dg.AssetCheckSeverity.ERROR and failed.blocking is True
    assert rows(failed, "missing_outputs") == [{"path": "sub/s.txt"}]
    assert "sub/s.txt" in failed.description
    # "Execute checks" of one partition looks at that partition only
    assert passed(run_checks(defs, instance, partition="d1")) == every(("d1",), True)


def test_unmanaged_content_is_a_warning_and_invalid_state_fails_state_valid(
    tmp_path: Path, config: Path, instance: dg.DagsterInstance
) -> None:
    defs = build_definitions(config)
    publish(defs, instance)
    (tmp_path / "out" / "d1" / "stray.txt").write_text("x\n")
    (tmp_path / "out" / "d2" / ".distributor.json").write_text("{not json")
    checks = run_checks(defs, instance, success=False)
    unmanaged = checks[("d1", "no_unmanaged_content")]
    assert unmanaged.passed is False and unmanaged.severity == dg.AssetCheckSeverity.WARN
    assert rows(unmanaged, "unmanaged_entries") == [{"path": "stray.txt", "type": "file", "size": 2}]
    assert checks[("d1", "state_valid")].passed and checks[("d1", "managed_outputs_present")].passed
    assert checks[("d2", "state_valid")].passed is False
    assert checks[("d2", "state_valid")].metadata["error"].value
    assert checks[("d2", "managed_outputs_present")].passed is False
    assert checks[("d2", "no_unmanaged_content")].passed


def test_checks_only_look_at_the_partitions_the_asset_materialized(
    tmp_path: Path, config: Path, instance: dg.DagsterInstance
) -> None:
    defs = build_definitions(config)
    assert run_checks(defs, instance) == {}  # nothing materialized, nothing vouched for

    publish(defs, instance)
    instance.add_dynamic_partitions("reports__published", ["d1", "d2"])
    only = publish(defs, instance, "d1")
    assert set(evaluations(only)) == {("d1", name) for name in NAMES}
    (tmp_path / "out" / "elsewhere").mkdir()
    (tmp_path / "out" / "elsewhere" / ".distributor.json").write_text("{broken")
    assert passed(run_checks(defs, instance)) == every(("d1", "d2"), True)


def test_blocking_checks_are_configurable(tmp_path: Path, config: Path, instance: dg.DagsterInstance) -> None:
    defs = build_definitions(config, blocking_checks=())
    publish(defs, instance)
    (tmp_path / "out" / "d1" / "r.txt").unlink()
    checks = run_checks(defs, instance)  # nothing blocks: the failed check does not fail the run
    assert checks[("d1", "managed_outputs_present")].passed is False
    assert checks[("d1", "managed_outputs_present")].blocking is False
    strict = build_definitions(config, blocking_checks=["state_valid", "managed_outputs_present"])
    graph = strict.resolve_asset_graph()
    blocking = {key.name for key in graph.asset_check_keys if graph.get_check_spec(key).blocking}
    assert blocking == {"state_valid", "managed_outputs_present"}
    with pytest.raises(ValueError, match="blocking_checks must name checks"):
        build_definitions(config, blocking_checks=["fresh"])


def test_a_failing_blocking_check_fails_the_publishing_run_after_the_publication(
    tmp_path: Path, config: Path, instance: dg.DagsterInstance
) -> None:
    """A publication that finds its bundle already there (``skip_same``) does not repair a file
    deleted by hand: the run records the partition's materialization, then its check fails and
    fails the step."""
    defs = build_definitions(config)
    publish(defs, instance)
    (tmp_path / "out" / "d1" / "r.txt").unlink()
    result = publish(defs, instance, "d1", success=False)
    (materialization,) = result.asset_materializations_for_node("reports")
    assert materialization.partition == "d1" and materialization.metadata["action"].value == "skip_same"
    failed = [e.step_key for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    assert failed == ["reports.publish_archive"]
    evaluation = evaluations(result)[("d1", "managed_outputs_present")]
    assert rows(evaluation, "missing_outputs") == [{"path": "r.txt"}]


def test_a_fixed_destination_is_checked_at_its_root(tmp_path: Path, instance: dg.DagsterInstance) -> None:
    make_bundle(tmp_path / "source" / "d1", "reports", {"r.txt": "one\n"})
    config = write_config(tmp_path, CONFIG.replace("path: out\n", "path: out\n        path_mapping: {mode: fixed}\n"))
    defs = build_definitions(config)
    assert run_checks(defs, instance) == {}  # never materialized
    first = publish(defs, instance)
    assert passed(evaluations(first)) == every((None,), True)  # type: ignore[arg-type]
    (tmp_path / "out" / "stray.txt").write_text("x\n")
    checks = run_checks(defs, instance)
    assert checks[(None, "state_valid")].metadata["bundle_path"].value == "."
    assert checks[(None, "no_unmanaged_content")].passed is False
    assert rows(checks[(None, "no_unmanaged_content")], "unmanaged_entries") == [
        {"path": "stray.txt", "type": "file", "size": 2}
    ]


def test_checks_never_pass_on_an_output_list_a_prune_emptied(tmp_path: Path, config: Path,
                                                             instance: dg.DagsterInstance) -> None:
    """Issue 37: a bundle path whose every output was pruned (the per-file keys, keep_latest 0) holds
    nothing of its bundle: its state is valid and nothing recorded is missing, but
    ``managed_outputs_present`` says so instead of passing on an empty list. A bundle that has
    nothing to publish there (no Markdown for an HTML-only destination) passes."""
    from distributor_core.app.prune import prune

    defs = build_definitions(config)
    publish(defs, instance)
    text = config.read_text() + "        retention: {prune: {enabled: true, keep_latest: 0}}\n"
    config.write_text(text)
    pruned = prune(config, pipeline_id="reports", destination_id="archive", dry_run=False, bundle_path="d1")
    assert [o.path for o in pruned.deleted_outputs] == ["r.txt", "sub/s.txt"]
    checks = run_checks(build_definitions(config), instance, partition="d1", success=False)
    emptied = checks[("d1", "managed_outputs_present")]
    assert emptied.passed is False
    assert "records no output of this destination" in emptied.description
    assert checks[("d1", "state_valid")].passed

    html_only = write_config(tmp_path, CONFIG.replace("path: out", "path: site\n        publish: {source: false, "
                                                      "html: true}\n        transform: {markdown_to_html: "
                                                      "{enabled: true}}"), "html.yml")
    site = build_definitions(html_only)
    assert site.resolve_job_def("publish_reports").execute_in_process(instance=instance).success
    assert passed(run_checks(site, instance, partition="d1")) == every(("d1",), True)

"""Opt-in declarative automation (issue 12 item 6): ``automation: eager`` as a build option, a
Component attribute and an environment variable gives the destination assets of local, ssh and s3
pipelines ``AutomationCondition.eager()``; the watch sensor then only observes, and a newly
observed source bundle requests the destinations. Sensors stay the default."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import dagster as dg
import pytest
import yaml
from dagster.components.testing import create_defs_folder_sandbox

from distributor_core.bundle import load_manifest
from distributor_dagster import DistributorComponent, build_definitions
from distributor_dagster.location import DistributorConfigError, definitions_from_environment
from tests.dagster.conftest import FROZEN, apply_tick, make_bundle, write_config

pytestmark = pytest.mark.dagster

CONFIG = """\
server:
  http: {bind: "127.0.0.1:0", staging_root: staging}
upload_tokens:
  - {id: producer, token_env: TEST_UPLOAD_TOKEN, allow_pipelines: [uploads]}
pipelines:
  - id: reports.daily
    source: {backend: local, path: source}
    destinations:
      - {id: archive, backend: local, path: out/archive}
      - {id: copy, backend: local, path: out/copy}
  - id: uploads
    source: {backend: http_upload}
    destinations:
      - {id: mirror, backend: local, path: out/mirror}
"""
ARCHIVE = dg.AssetKey(["reports_daily", "archive"])
COPY = dg.AssetKey(["reports_daily", "copy"])
MIRROR = dg.AssetKey(["uploads", "mirror"])


@pytest.fixture
def config(tmp_path: Path) -> Path:
    make_bundle(tmp_path / "source" / "d1", "reports", {"r.md": "# one\n"})
    return write_config(tmp_path, CONFIG)


def conditions(defs: dg.Definitions) -> dict[dg.AssetKey, dg.AutomationCondition | None]:
    return {spec.key: spec.automation_condition for spec in defs.resolve_all_asset_specs()}


def sensor_names(defs: dg.Definitions) -> set[str]:
    return {sensor.name for sensor in defs.sensors or []}


def test_sensors_are_the_default_and_eager_is_opt_in(config: Path) -> None:
    default = build_definitions(config)
    assert all(condition is None for condition in conditions(default).values())
    assert sensor_names(default) == {"watch_reports_daily", "uploads_uploads"}

    eager = build_definitions(config, automation="eager", sensor_interval=7)
    found = conditions(eager)
    assert found[ARCHIVE] == found[COPY] == dg.AutomationCondition.eager()
    assert found[MIRROR] is None  # each upload needs its own run with its upload_run_id
    assert sensor_names(eager) == {"watch_reports_daily", "uploads_uploads", "distributor_automation"}
    automation = eager.resolve_sensor_def("distributor_automation")
    assert isinstance(automation, dg.AutomationConditionSensorDefinition)
    assert automation.minimum_interval_seconds == 7
    with pytest.raises(ValueError, match="automation must be sensors or eager"):
        build_definitions(config, automation="sometimes")


def test_the_environment_variable_and_the_component_attribute_turn_it_on(config: Path) -> None:
    env = {"DISTRIBUTOR_CONFIG": str(config), "DISTRIBUTOR_DAGSTER_AUTOMATION": "eager"}
    assert conditions(definitions_from_environment(env))[ARCHIVE] == dg.AutomationCondition.eager()
    with pytest.raises(DistributorConfigError, match="DISTRIBUTOR_DAGSTER_AUTOMATION: automation must be"):
        definitions_from_environment({**env, "DISTRIBUTOR_DAGSTER_AUTOMATION": "later"})

    with create_defs_folder_sandbox() as sandbox:
        folder = sandbox.defs_folder_path / "publications"
        folder.mkdir()
        absolute = config.read_text().replace("path: source", f"path: {config.parent}/source")
        (folder / "distributor.yml").write_text(absolute)
        (folder / "defs.yaml").write_text(yaml.safe_dump({
            "type": "distributor_dagster.DistributorComponent",
            "attributes": {"config_path": "distributor.yml", "automation": "eager"},
        }))
        with sandbox.load_component_and_build_defs(defs_path=folder) as (component, defs):
            assert isinstance(component, DistributorComponent) and component.automation == "eager"
            assert conditions(defs)[COPY] == dg.AutomationCondition.eager()
            assert "distributor_automation" in sensor_names(defs)


def requested(defs: dg.Definitions, instance: dg.DagsterInstance, cursor=None):  # type: ignore[no-untyped-def]
    result = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=cursor)
    keys = {key for key in (ARCHIVE, COPY, MIRROR) if result.get_num_requested(key)}
    return keys, result.cursor


def test_a_newly_observed_bundle_requests_the_destinations_without_a_publish_run(
    tmp_path: Path, config: Path, instance: dg.DagsterInstance
) -> None:
    defs = build_definitions(config, automation="eager")
    watch = defs.resolve_sensor_def("watch_reports_daily")

    # nothing observed yet: the source counts as missing, nothing is requested
    keys, cursor = requested(defs, instance)
    assert keys == set()

    # the watch sensor only adds the bundle's partition and observes it (no run request) ...
    tick = watch(dg.build_sensor_context(instance=instance, definitions=defs))
    assert tick.run_requests == []
    (observation,) = tick.asset_events
    assert observation.partition == "d1"
    assert observation.tags["dagster/data_version"] == load_manifest(tmp_path / "source" / "d1").digest
    apply_tick(instance, tick)
    # ... and the automation condition requests that partition of both destinations of the pipeline
    result = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=cursor)
    assert {key: result.get_requested_partitions(key) for key in (ARCHIVE, COPY)} == {ARCHIVE: {"d1"}, COPY: {"d1"}}
    cursor = result.cursor

    # the requested materialization publishes; afterwards nothing is requested until a new bundle
    job = defs.resolve_implicit_global_asset_job_def().get_subset(asset_selection={ARCHIVE, COPY})
    assert job.execute_in_process(instance=instance, partition_key="d1").success
    assert (tmp_path / "out" / "archive" / "d1" / "r.md").read_text() == "# one\n"
    keys, cursor = requested(defs, instance, cursor)
    assert keys == set()

    make_bundle(tmp_path / "source" / "d2", "reports", {"r.md": "# two\n"}, created=FROZEN + timedelta(days=1))
    later = watch(dg.build_sensor_context(cursor=tick.cursor, instance=instance, definitions=defs))
    assert later.run_requests == []
    apply_tick(instance, later)
    result = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=cursor)
    assert {key: result.get_requested_partitions(key) for key in (ARCHIVE, COPY)} == {ARCHIVE: {"d2"}, COPY: {"d2"}}
    assert job.execute_in_process(instance=instance, partition_key="d2").success
    keys, cursor = requested(defs, instance, result.cursor)
    assert keys == set()

    # a re-issue of d1: automation republishes exactly that partition (issue 24 item 3)
    make_bundle(tmp_path / "source" / "d1", "reports", {"r.md": "# one, fixed\n"}, created=FROZEN + timedelta(hours=1))
    reissued = watch(dg.build_sensor_context(cursor=later.cursor, instance=instance, definitions=defs))
    apply_tick(instance, reissued)
    result = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=cursor)
    assert {key: result.get_requested_partitions(key) for key in (ARCHIVE, COPY)} == {ARCHIVE: {"d1"}, COPY: {"d1"}}


def test_a_large_site_splits_automation_into_bounded_sensors(tmp_path: Path) -> None:
    """A tick's cost grows with the assets it evaluates: each automation sensor evaluates at most
    300 destination assets, a pipeline's destinations always in the same sensor."""
    pipelines = "".join(
        f"""
  - id: p{n}
    source: {{backend: local, path: src/p{n}}}
    destinations:
      - {{id: a, backend: local, path: out/p{n}/a}}
      - {{id: b, backend: local, path: out/p{n}/b}}
      - {{id: c, backend: local, path: out/p{n}/c, path_mapping: {{mode: fixed}}}}"""
        for n in range(101)
    )
    defs = build_definitions(write_config(tmp_path, f"pipelines:{pipelines}\n"), automation="eager")
    sensors = [s for s in defs.sensors if isinstance(s, dg.AutomationConditionSensorDefinition)]
    assert [s.name for s in sensors] == ["distributor_automation", "distributor_automation_2"]
    graph = defs.resolve_asset_graph()
    targets = [s.asset_selection.resolve(graph) for s in sensors]
    assert [len(t) for t in targets] == [300, 3]
    destinations = {key for key in graph.get_all_asset_keys() if len(key.path) == 2 and key.path[1] != "newest"}
    assert targets[0] | targets[1] == destinations and not targets[0] & targets[1]
    assert {key.path[0] for key in targets[1]} == {"p100"}

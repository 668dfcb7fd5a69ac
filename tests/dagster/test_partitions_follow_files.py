"""Partitions follow the files (issue 37 item 3), read from a real ``dagster-webserver`` over
GraphQL, on the embedded SQLite storage and on PostgreSQL.

A dated source published to an archive that keeps its two newest bundles
(``retention.prune.bundles``) and to a ``fixed`` "latest", with ``dagster.max_partitions: 4``,
step by step: the watch sensor adds the bundles as partitions and a publish run materializes them;
the prune job removes the two oldest bundle paths and their partitions leave the archive (the
source, which still holds them, keeps its own); a state repair of a bundle whose files were
deleted by hand ends its partition too, and its checks never passed on an empty output list; the
producer deletes bundles from the source: one no asset holds any more stops being a partition, one
the archive still holds stays, recorded as gone from the source; and new bundles beyond the bound
push the partitions seen first out. Runs are launched through the webserver (subprocess runs);
sensor ticks run here against the same instance, applied as the daemon applies them.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import dagster as dg
import pytest

from distributor_dagster.location import definitions_from_environment
from tests.dagster.conftest import FROZEN, REPO, apply_tick, make_bundle, write_config
from tests.peers.daemon import INSTANCE_EXAMPLE, environment
from tests.peers.webserver import INSTANCE_YAML, Webserver, running_webserver

pytestmark = pytest.mark.dagster

CONFIG = """\
pipelines:
  - id: reports.daily
    source: {backend: local, path: source}
    dagster: {max_partitions: 4}
    destinations:
      - id: archive
        backend: local
        path: out/archive
        retention: {prune: {enabled: true, bundles: {keep_latest: 2}}}
      - {id: latest, backend: local, path: out/latest, path_mapping: {mode: fixed}}
"""
SOURCE = ("reports_daily",)
ARCHIVE = ("reports_daily", "archive")
DAYS = [f"2026-06-{day:02d}" for day in range(1, 9)]

STATUS = """
query Status($keys: [AssetKeyInput!]) {
  assetNodes(assetKeys: $keys) {
    assetKey { path }
    partitionKeysByDimension { partitionKeys }
    partitionStats { numMaterialized numPartitions numFailed }
    assetPartitionStatuses {
      ... on DefaultPartitionStatuses { materializedPartitions failedPartitions unmaterializedPartitions }
    }
    assetChecksOrError {
      ... on AssetChecks { checks { name partitionStatuses {
        ... on AssetCheckDefaultPartitionStatuses { succeededPartitions failedPartitions } } } }
    }
  }
}
"""


@dataclass
class Deployment:
    root: Path
    home: Path
    server: Webserver
    env: dict[str, str]

    def status(self) -> dict[tuple[str, ...], dict]:
        keys = [{"path": list(k)} for k in (SOURCE, ARCHIVE)]
        nodes = self.server.graphql(STATUS, {"keys": keys})["assetNodes"]
        return {tuple(n["assetKey"]["path"]): n for n in nodes}

    def partitions(self, key: tuple[str, ...]) -> list[str]:
        return self.status()[key]["partitionKeysByDimension"][0]["partitionKeys"]

    def materialized(self, key: tuple[str, ...]) -> list[str]:
        return sorted(self.status()[key]["assetPartitionStatuses"]["materializedPartitions"])

    def instance(self) -> dg.DagsterInstance:
        return dg.DagsterInstance.from_config(str(self.home))

    def sensor_tick(self) -> dg.SensorResult:
        defs = definitions_from_environment({"DISTRIBUTOR_CONFIG": str(self.root / "distributor.yml")})
        sensor = defs.resolve_sensor_def("watch_reports_daily")
        cursor_file = self.root / "cursor"
        cursor = cursor_file.read_text() if cursor_file.exists() else None
        with environment(self.env), self.instance() as instance:
            tick = sensor(dg.build_sensor_context(cursor=cursor, instance=instance, definitions=defs))
            apply_tick(instance, tick)
        cursor_file.write_text(tick.cursor or "")
        return tick

    def job(self, name: str, run_config: dict | None = None) -> None:
        run_id = self.server.launch([], run_config=run_config, job=name)
        run = self.server.wait_run(run_id)
        assert run["status"] == "SUCCESS", self.server.log_text()


def day(root: Path, name: str) -> Path:
    return make_bundle(root / "source" / name, "reports.daily", {"report.md": f"# {name}\n", "data/n.txt": name},
                       created=FROZEN + timedelta(days=DAYS.index(name)))


def postgres_yaml() -> str:
    """The shipped instance file's PostgreSQL storage, with runs launched at once (no daemon)."""
    text = INSTANCE_EXAMPLE.read_text()
    storage = text[text.index("storage:"):text.index("# Runs wait")]
    return storage + INSTANCE_YAML


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def deployment(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    root = tmp_path_factory.mktemp(f"follow-{request.param}")
    for name in DAYS[:4]:
        day(root, name)
    config = write_config(root, CONFIG)
    home = root / "dagster_home"
    home.mkdir()
    env: dict[str, str] = {}
    if request.param == "postgres":
        server = request.getfixturevalue("postgres_server")
        env = server.environment(server.create_database())
        (home / "dagster.yaml").write_text(postgres_yaml())
    else:
        (home / "dagster.yaml").write_text(INSTANCE_YAML)
    with running_webserver(REPO / "workspace.yaml", home, {"DISTRIBUTOR_CONFIG": str(config), **env},
                           root / "webserver.log") as server:
        yield Deployment(root, home, server, env)


def test_1_published_bundles_are_materialized_partitions(deployment: Deployment) -> None:
    deployment.sensor_tick()
    deployment.job("publish_reports_daily")
    assert deployment.partitions(SOURCE) == DAYS[:4]
    assert deployment.partitions(ARCHIVE) == DAYS[:4]
    assert deployment.materialized(ARCHIVE) == DAYS[:4]


def test_2_pruned_bundles_leave_the_destination_not_the_source(deployment: Deployment) -> None:
    deployment.job("prune", {"ops": {"prune": {"config": {"apply": True}}}})
    archive = deployment.root / "out" / "archive"
    assert sorted(p.name for p in archive.iterdir()) == DAYS[2:4]
    status = deployment.status()
    node = status[ARCHIVE]
    assert node["partitionKeysByDimension"][0]["partitionKeys"] == DAYS[2:4]
    statuses = node["assetPartitionStatuses"]
    assert sorted(statuses["materializedPartitions"]) == DAYS[2:4] and statuses["failedPartitions"] == []
    assert node["partitionStats"] == {"numMaterialized": 2, "numPartitions": 2, "numFailed": 0}
    for check in node["assetChecksOrError"]["checks"]:  # nothing red: a pruned bundle is not a failure
        assert check["partitionStatuses"]["failedPartitions"] == [], check["name"]
    # the source still holds every bundle: its partitions stay
    assert status[SOURCE]["partitionKeysByDimension"][0]["partitionKeys"] == DAYS[:4]
    # what happened stays in the partition's history
    with environment(deployment.env), deployment.instance() as instance:
        records = instance.fetch_observations(
            dg.AssetRecordsFilter(asset_key=dg.AssetKey(list(ARCHIVE)), asset_partitions=[DAYS[0]]), limit=5).records
    (last, *_) = [r.asset_observation for r in records]
    assert last.metadata["operation"].value == "prune" and last.metadata["bundle_removed"].value is True


def test_3_execute_checks_of_a_remaining_partition(deployment: Deployment) -> None:
    """The UI's "Execute checks" of one partition: a checks-only run, the source's and the
    destinations' partitions being two sets."""
    checks = [(ARCHIVE, name) for name in ("state_valid", "managed_outputs_present", "no_unmanaged_content")]
    run_id = deployment.server.launch([], checks, partition=DAYS[3])
    assert deployment.server.wait_run(run_id)["status"] == "SUCCESS", deployment.server.log_text()
    with environment(deployment.env), deployment.instance() as instance:
        key = dg.AssetCheckKey(dg.AssetKey(list(ARCHIVE)), "managed_outputs_present")
        (latest, *_) = instance.event_log_storage.get_asset_check_execution_history(key, limit=1)
    assert latest.run_id == run_id and latest.evaluation.passed and latest.partition == DAYS[3]


def test_4_a_repaired_bundle_without_its_files_stops_reading_materialized(deployment: Deployment) -> None:
    bundle = deployment.root / "out" / "archive" / DAYS[2]
    for name in ("report.md", "data"):
        path = bundle / name
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    deployment.job("reconcile_state", {"ops": {"reconcile_state": {"config": {"apply": True}}}})
    assert deployment.partitions(ARCHIVE) == [DAYS[3]]
    assert deployment.materialized(ARCHIVE) == [DAYS[3]]


def test_5_a_bundle_deleted_from_the_source_stays_a_partition_while_a_destination_holds_it(
        deployment: Deployment) -> None:
    for name in (DAYS[0], DAYS[3]):  # pruned from the archive / still in the archive
        shutil.rmtree(deployment.root / "source" / name)
    tick = deployment.sensor_tick()
    assert deployment.partitions(SOURCE) == DAYS[1:4]  # DAYS[0]: no asset holds it any more
    assert deployment.materialized(ARCHIVE) == [DAYS[3]]
    (gone,) = [e for e in tick.asset_events if e.partition == DAYS[3]]
    assert gone.metadata["in_source"].value is False
    assert gone.tags["dagster/data_version"].startswith("sha256:")  # unchanged: nothing turns stale
    departures = {e.partition for e in tick.asset_events if e.partition is not None}
    assert departures == {DAYS[0], DAYS[3]}  # each departure recorded (the newest view is observed too)
    again = deployment.sensor_tick()  # once
    assert again.asset_events == [] and not again.dynamic_partitions_requests


def test_6_max_partitions_bounds_the_partitions_of_a_pipeline(deployment: Deployment) -> None:
    for name in DAYS[4:8]:
        day(deployment.root, name)
    tick = deployment.sensor_tick()
    assert len(tick.run_requests) == 2  # the new bundles' backfill, and latest (the newest changed)
    assert deployment.partitions(SOURCE) == DAYS[4:8]  # the three seen first went
    assert deployment.partitions(ARCHIVE) == DAYS[4:8]
    assert (deployment.root / "out" / "archive" / DAYS[3] / "report.md").is_file()  # files stay

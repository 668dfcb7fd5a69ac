"""The asset model as a data team reads it in the UI (issue 24): a real ``dagster-webserver`` on
127.0.0.1 loading the repository's ``workspace.yaml``, queried and driven through its GraphQL API,
over the layout most producers use: dated bundle folders published to a ``preserve_relative``
archive, an HTML site (both partitioned by bundle) and a ``fixed`` "latest" destination.

One scenario, step by step: the watch sensor adds the bundles as partitions; a publish run
publishes them all (per-partition data versions, checks per partition, the latest destination
holding the newest bundle); a re-issued older bundle makes exactly that partition stale in the
archive and the site and nothing else; a one-destination Materialize of that partition runs only
that destination's steps; a corrupt bundle fails only its own source check, no destination; and a
refused publication (unmanaged content) fails its partition's checks, naming the file."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import dagster as dg
import httpx
import pytest
import yaml

from distributor_core.bundle import load_manifest
from distributor_dagster.location import definitions_from_environment
from tests.dagster.conftest import FROZEN, REPO, apply_tick, make_bundle, write_config
from tests.peers.webserver import ASSET_JOB, INSTANCE_YAML, LAUNCH, REPOSITORY, Webserver, running_webserver

pytestmark = pytest.mark.dagster

CONFIG = """\
pipelines:
  - id: reports.daily
    source: {backend: local, path: source}
    destinations:
      - {id: archive, backend: local, path: out/archive}
      - id: latest
        backend: local
        path: out/latest
        path_mapping: {mode: fixed}
      - id: site
        backend: local
        path: out/site
        publish: {source: false, html: true}
        transform: {markdown_to_html: {enabled: true}}
"""
SOURCE = ("reports_daily",)
NEWEST = ("reports_daily", "newest")
ARCHIVE = ("reports_daily", "archive")
LATEST = ("reports_daily", "latest")
SITE = ("reports_daily", "site")
CHECKS = ("state_valid", "managed_outputs_present", "no_unmanaged_content")
DAYS = ["2026-06-07", "2026-06-08", "2026-06-09", "2026-06-10"]

ASSETS = """
query Assets($keys: [AssetKeyInput!]) {
  assetNodes(assetKeys: $keys) {
    assetKey { path }
    isPartitioned isMaterializable isObservable
    dependencyKeys { path }
    partitionKeysByDimension { partitionKeys }
    dataVersion staleStatus
    assetPartitionStatuses {
      ... on DefaultPartitionStatuses { materializedPartitions failedPartitions unmaterializedPartitions }
    }
    assetChecksOrError {
      ... on AssetChecks {
        checks {
          name blocking
          partitionStatuses {
            ... on AssetCheckDefaultPartitionStatuses { succeededPartitions failedPartitions }
          }
        }
      }
    }
  }
}
"""
#: fields only a partitioned asset node has
PARTITIONS = """
query Partitions($keys: [AssetKeyInput!], $partitions: [String!]) {
  assetNodes(assetKeys: $keys) {
    assetKey { path }
    dataVersionByPartition(partitions: $partitions)
    staleStatusByPartition(partitions: $partitions)
    staleCausesByPartition(partitions: $partitions) { key { path } partitionKey category }
  }
}
"""
RUNS = "{ runsOrError { ... on Runs { results { runId } } } }"
RUN_STEPS = "query Run($id: ID!) { runOrError(runId: $id) { ... on Run { status stepKeysToExecute } } }"


@dataclass
class Site:
    root: Path
    home: Path
    server: Webserver

    def assets(self, partitions: list[str] | None = None) -> dict[tuple[str, ...], dict]:
        keys = [{"path": list(k)} for k in (SOURCE, NEWEST, ARCHIVE, LATEST, SITE)]
        nodes = {tuple(n["assetKey"]["path"]): n for n in self.server.graphql(ASSETS, {"keys": keys})["assetNodes"]}
        partitioned = [{"path": list(k)} for k in (SOURCE, ARCHIVE, SITE)]
        found = self.server.graphql(PARTITIONS, {"keys": partitioned, "partitions": partitions or []})
        for node in found["assetNodes"]:
            nodes[tuple(node["assetKey"]["path"])].update(node)
        return nodes

    def sensor_tick(self) -> dg.SensorResult:
        """One tick of the watch sensor against the webserver's instance, applied as the daemon does."""
        defs = definitions_from_environment({"DISTRIBUTOR_CONFIG": str(self.root / "distributor.yml")})
        sensor = defs.resolve_sensor_def("watch_reports_daily")
        cursor = (self.root / "cursor").read_text() if (self.root / "cursor").exists() else None
        with dg.DagsterInstance.from_config(str(self.home)) as instance:
            tick = sensor(dg.build_sensor_context(cursor=cursor, instance=instance, definitions=defs))
            apply_tick(instance, tick)
        (self.root / "cursor").write_text(tick.cursor or "")
        return tick

    def run(self, assets: list[tuple[str, ...]], partition: str | None = None, job: str | None = None) -> dict:
        checks = [(key, name) for key in assets for name in CHECKS]
        run_id = (self.server.launch([], job=job) if job else
                  self.server.launch(assets, checks, partition=partition))
        self.server.wait_run(run_id)
        run = self.server.graphql(RUN_STEPS, {"id": run_id})["runOrError"]
        run["runId"] = run_id
        return run

    def check_history(self, key: tuple[str, ...], name: str, partition: str) -> list:
        with dg.DagsterInstance.from_config(str(self.home)) as instance:
            check = dg.AssetCheckKey(dg.AssetKey(list(key)), name)
            records = instance.event_log_storage.get_asset_check_execution_history(check, limit=50)
        return [r.evaluation for r in records if r.partition == partition and r.evaluation is not None
                and hasattr(r.evaluation, "passed")]


def day(site_root: Path, name: str, text: str, *, hours: int = 0) -> Path:
    index = DAYS.index(name)
    return make_bundle(site_root / "source" / name, "reports.daily", {"report.md": f"# {name}\n\n{text}\n"},
                       created=FROZEN + timedelta(days=index, hours=hours))


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    root = tmp_path_factory.mktemp("webserver")
    for name in DAYS[:2]:
        day(root, name, "first issue")
    config = write_config(root, CONFIG)
    home = root / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text(INSTANCE_YAML)
    with running_webserver(REPO / "workspace.yaml", home, {"DISTRIBUTOR_CONFIG": str(config)},
                           root / "webserver.log") as server:
        yield Site(root, home, server)


def checks_of(node: dict) -> dict[str, dict]:
    return {check["name"]: check for check in node["assetChecksOrError"]["checks"]}


def digest(site: Site, name: str) -> str:
    return load_manifest(site.root / "source" / name).digest


def test_1_bundles_are_partitions_of_the_source_and_the_per_bundle_destinations(site: Site) -> None:
    tick = site.sensor_tick()
    assert len(tick.run_requests) == 2  # a backfill of both bundles and a run of the fixed destination
    nodes = site.assets(DAYS[:2])
    for key in (SOURCE, ARCHIVE, SITE):
        node = nodes[key]
        assert node["isPartitioned"], key
        assert node["partitionKeysByDimension"][0]["partitionKeys"] == DAYS[:2]
    assert not nodes[LATEST]["isPartitioned"] and not nodes[NEWEST]["isPartitioned"]
    assert [d["path"] for d in nodes[LATEST]["dependencyKeys"]] == [list(NEWEST)]
    assert [d["path"] for d in nodes[ARCHIVE]["dependencyKeys"]] == [list(SOURCE)]
    assert nodes[SOURCE]["dataVersionByPartition"] == [digest(site, d) for d in DAYS[:2]]
    assert nodes[NEWEST]["dataVersion"] == digest(site, DAYS[1])
    assert nodes[ARCHIVE]["assetPartitionStatuses"]["unmaterializedPartitions"] == DAYS[:2]
    assert set(checks_of(nodes[SOURCE])) == {"bundle_valid"}
    assert set(checks_of(nodes[ARCHIVE])) == set(CHECKS)


def test_2_a_publish_run_materializes_each_bundle_partition_with_its_digest(site: Site) -> None:
    run = site.run([], job="publish_reports_daily")
    assert run["status"] == "SUCCESS", site.server.log_text()
    nodes = site.assets(DAYS[:2])
    for key in (ARCHIVE, SITE):
        node = nodes[key]
        assert sorted(node["assetPartitionStatuses"]["materializedPartitions"]) == DAYS[:2], key
        assert node["dataVersionByPartition"] == [digest(site, d) for d in DAYS[:2]], key
        assert node["staleStatusByPartition"] == ["FRESH", "FRESH"], key
        for name, check in checks_of(node).items():
            statuses = check["partitionStatuses"]
            assert sorted(statuses["succeededPartitions"]) == DAYS[:2] and statuses["failedPartitions"] == [], name
    latest = nodes[LATEST]
    assert latest["dataVersion"] == digest(site, DAYS[1]) and latest["staleStatus"] == "FRESH"
    assert (site.root / "out" / "site" / "2026-06-07" / "report.html").is_file()


def test_3_a_reissued_older_bundle_makes_exactly_its_partition_stale(site: Site) -> None:
    day(site.root, DAYS[0], "corrected", hours=1)  # a new created time, still older than 2026-06-08
    tick = site.sensor_tick()
    (request,) = tick.run_requests
    assert request.partition_key == DAYS[0]
    nodes = site.assets(DAYS[:2])
    assert nodes[SOURCE]["dataVersionByPartition"] == [digest(site, d) for d in DAYS[:2]]
    for key in (ARCHIVE, SITE):
        node = nodes[key]
        assert node["staleStatusByPartition"] == ["STALE", "FRESH"], key
        (cause,), () = node["staleCausesByPartition"]
        assert (cause["key"]["path"], cause["partitionKey"], cause["category"]) == (list(SOURCE), DAYS[0], "DATA")
    # the fixed destination holds the newest bundle, which did not change
    assert nodes[LATEST]["staleStatus"] == "FRESH" and nodes[NEWEST]["dataVersion"] == digest(site, DAYS[1])


def test_4_materializing_one_partition_of_one_destination_runs_only_its_steps(site: Site) -> None:
    run = site.run([ARCHIVE], partition=DAYS[0])
    assert run["status"] == "SUCCESS", site.server.log_text()
    assert sorted(run["stepKeysToExecute"]) == [
        "reports_daily.discover", "reports_daily.publish_archive", "reports_daily.validate"
    ]
    nodes = site.assets(DAYS[:2])
    assert nodes[ARCHIVE]["staleStatusByPartition"] == ["FRESH", "FRESH"]
    assert nodes[ARCHIVE]["dataVersionByPartition"][0] == digest(site, DAYS[0])
    assert nodes[SITE]["staleStatusByPartition"] == ["STALE", "FRESH"]  # not published by this run
    assert "corrected" in (site.root / "out" / "archive" / DAYS[0] / "report.md").read_text()


def test_5_a_corrupt_bundle_fails_only_its_source_check(site: Site) -> None:
    corrupt = day(site.root, DAYS[2], "third")
    (corrupt / "report.md").write_text("# 2026-06-09\n\nTHIRD\n")  # same size, other bytes
    tick = site.sensor_tick()
    # a run of the bundle's partition, and one of the fixed destination: the newest bundle changed
    assert sorted(r.partition_key or "" for r in tick.run_requests) == ["", DAYS[2]]
    run = site.run([ARCHIVE, SITE], partition=DAYS[2])
    assert run["status"] == "SUCCESS", site.server.log_text()
    nodes = site.assets(DAYS[:3])
    source_check = checks_of(nodes[SOURCE])["bundle_valid"]["partitionStatuses"]
    assert source_check["failedPartitions"] == [DAYS[2]]
    (evaluation, *_) = site.check_history(SOURCE, "bundle_valid", DAYS[2])
    assert evaluation.metadata["file"].value == "report.md"
    assert evaluation.metadata["expected"].value != evaluation.metadata["actual"].value
    for key in (ARCHIVE, SITE):
        node = nodes[key]
        assert node["assetPartitionStatuses"]["failedPartitions"] == [], key
        assert DAYS[2] in node["assetPartitionStatuses"]["unmaterializedPartitions"], key
        for name, check in checks_of(node).items():
            assert check["partitionStatuses"]["failedPartitions"] == [], (key, name)
    assert not (site.root / "out" / "archive" / DAYS[2]).exists()
    # the destination partitions the run targeted say why nothing is there (no unanswered checks)
    (evaluation, *_) = site.check_history(ARCHIVE, "state_valid", DAYS[2])
    assert evaluation.passed and "failed validation" in evaluation.description
    assert evaluation.metadata["published"].value is False
    # the fixed destination would take the corrupt bundle: its run publishes nothing, and the
    # newest view's check says why "latest" is behind
    latest_run = site.run([LATEST])
    assert latest_run["status"] == "SUCCESS", site.server.log_text()
    (newest_check, *_) = site.check_history(NEWEST, "bundle_valid", None)
    assert newest_check.passed is False and "report.md" in newest_check.description
    latest = site.assets()[LATEST]
    assert latest["staleStatus"] == "STALE" and latest["dataVersion"] == digest(site, DAYS[1])


def test_6_checks_never_vouch_for_a_refused_publication(site: Site) -> None:
    day(site.root, DAYS[3], "fourth")
    in_the_way = site.root / "out" / "site" / DAYS[3] / "index.html"
    in_the_way.parent.mkdir(parents=True)
    in_the_way.write_text("<p>not published by distributor</p>\n")
    site.sensor_tick()
    run = site.run([SITE], partition=DAYS[3])
    assert run["status"] == "FAILURE"
    node = site.assets(DAYS)[SITE]
    assert node["assetPartitionStatuses"]["failedPartitions"] == [DAYS[3]]
    checks = checks_of(node)
    assert DAYS[3] in checks["no_unmanaged_content"]["partitionStatuses"]["failedPartitions"]
    assert DAYS[3] in checks["state_valid"]["partitionStatuses"]["failedPartitions"]
    (evaluation, *_) = site.check_history(SITE, "no_unmanaged_content", DAYS[3])
    assert [r.data["path"] for r in evaluation.metadata["unmanaged_entries"].value.records] == ["index.html"]
    assert in_the_way.read_text() == "<p>not published by distributor</p>\n"


SCAFFOLD = """
query Scaffold($selector: PipelineSelector!) {
  runConfigSchemaOrError(selector: $selector) { ... on RunConfigSchema { rootDefaultYaml } }
}
"""
SETTINGS = {"bundle_path": "", "destinations": [], "dry_run": False, "force": False, "republish": False}


def files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_7_the_launchpad_shows_the_run_settings_once_and_a_dry_run_launched_there_writes_nothing(site: Site) -> None:
    """Issue 37 item 1: the launchpad of the publish job, and of a Materialize of destinations from
    both graphs, scaffolds the settings once (``resources.publish.config``) with their defaults; a
    run config in the old per-graph shape is refused at launch naming the new one; a dry run
    launched there plans every destination, the fixed one included, and writes nothing."""
    job = {"repositoryLocationName": site.server.location, "repositoryName": REPOSITORY,
           "pipelineName": "publish_reports_daily"}
    materialize = {**job, "pipelineName": ASSET_JOB,
                   "assetSelection": [{"path": list(ARCHIVE)}, {"path": list(LATEST)}]}
    for selector in (job, materialize):
        scaffold = yaml.safe_load(site.server.graphql(SCAFFOLD, {"selector": selector})
                                  ["runConfigSchemaOrError"]["rootDefaultYaml"])
        assert scaffold["resources"] == {"publish": {"config": SETTINGS}}
        assert not scaffold.get("ops"), scaffold  # no graph takes settings of its own

    before = files(site.root / "out")
    runs = len(site.server.graphql(RUNS)["runsOrError"]["results"])
    old = {"ops": {"reports_daily__newest": {"config": {"dry_run": True}}}}
    response = httpx.post(f"{site.server.url}/graphql", timeout=120, json={"query": LAUNCH, "variables": {"params": {
        "selector": job, "mode": "default", "runConfigData": old}}})
    refused = response.json()["data"]["launchPipelineExecution"]
    assert refused["__typename"] == "PythonError"
    assert ("the run config ops.reports_daily__newest.config is no longer read (the shape of earlier releases): "
            "a publish run takes its "
            "settings once, for every step of every graph, as resources.publish.config; write "
            "{resources: {publish: {config: {dry_run: true}}}} instead") in refused["message"]
    assert len(site.server.graphql(RUNS)["runsOrError"]["results"]) == runs

    # the newest bundle (2026-06-10) is published nowhere yet: a real run would write archive and latest
    dry = {"resources": {"publish": {"config": {"dry_run": True, "destinations": ["archive", "latest"]}}}}
    run_id = site.server.launch([], run_config=dry, job="publish_reports_daily")
    assert site.server.wait_run(run_id)["status"] == "SUCCESS", site.server.log_text()
    assert files(site.root / "out") == before
    with dg.DagsterInstance.from_config(str(site.home)) as instance:
        records = instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.ASSET_OBSERVATION).records
        planned = [r.event_log_entry.dagster_event.event_specific_data.asset_observation for r in records]
    seen = {(tuple(o.asset_key.path), o.partition, o.metadata["action"].value, o.metadata["dry_run"].value)
            for o in planned if "action" in o.metadata}  # the destinations' (not the source's)
    assert (LATEST, None, "replace_older", True) in seen
    assert (ARCHIVE, DAYS[3], "publish_new", True) in seen
    assert all(dry_run for *_, dry_run in seen)

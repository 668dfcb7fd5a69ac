"""The asset graph as the UI sees it (issue 12): a real ``dagster-webserver`` on 127.0.0.1 loading
the repository's ``workspace.yaml``, queried and driven through its GraphQL API. Destination assets
are materializable with the source asset upstream; Materialize on one destination publishes only
it, with its checks evaluated in the same run and the bundle digest as data version; "Execute
checks" alone touches nothing; a source observed with a newer bundle shows the destination
unsynced."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from distributor_core.bundle import build_manifest, load_manifest, write_manifest
from tests.dagster.conftest import REPO, copy_example_bundle, write_config
from tests.peers.webserver import INSTANCE_YAML, Webserver, running_webserver

pytestmark = pytest.mark.dagster

CONFIG = """\
pipelines:
  - id: reports.daily
    source: {backend: local, path: source}
    destinations:
      - {id: archive, backend: local, path: out/archive}
      - id: site
        backend: local
        path: out/site
        publish: {source: false, html: true}
        transform: {markdown_to_html: {enabled: true}}
"""
SOURCE = ("reports_daily",)
ARCHIVE = ("reports_daily", "archive")
SITE = ("reports_daily", "site")
CHECKS = ("state_valid", "managed_outputs_present", "no_unmanaged_content")

ASSETS = """
query Assets($keys: [AssetKeyInput!]) {
  assetNodes(assetKeys: $keys) {
    assetKey { path }
    isMaterializable isObservable jobNames
    dependencyKeys { path }
    dataVersion staleStatus
    staleCauses { key { path } reason category }
    assetMaterializations(limit: 10) { runId tags { key value } }
    assetChecksOrError {
      ... on AssetChecks {
        checks {
          name blocking
          executionForLatestMaterialization { runId status evaluation { success severity } }
        }
      }
    }
  }
}
"""


@dataclass
class Site:
    root: Path
    server: Webserver

    def assets(self) -> dict[tuple[str, ...], dict]:
        nodes = self.server.graphql(ASSETS, {"keys": [{"path": list(k)} for k in (SOURCE, ARCHIVE, SITE)]})
        return {tuple(node["assetKey"]["path"]): node for node in nodes["assetNodes"]}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    root = tmp_path_factory.mktemp("webserver")
    copy_example_bundle(root / "source")
    config = write_config(root, CONFIG)
    home = root / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text(INSTANCE_YAML)
    with running_webserver(REPO / "workspace.yaml", home, {"DISTRIBUTOR_CONFIG": str(config)},
                           root / "webserver.log") as server:
        yield Site(root, server)


def checks_of(node: dict) -> dict[str, dict]:
    return {check["name"]: check for check in node["assetChecksOrError"]["checks"]}


def tags(event: dict) -> dict[str, str]:
    return {tag["key"]: tag["value"] for tag in event["tags"]}


def test_destination_assets_are_materializable_with_the_source_upstream(site: Site) -> None:
    nodes = site.assets()
    source = nodes[SOURCE]
    assert source["isObservable"] and not source["isMaterializable"]
    for key in (ARCHIVE, SITE):
        node = nodes[key]
        assert node["isMaterializable"], key
        assert "publish_reports_daily" in node["jobNames"]
        assert [dep["path"] for dep in node["dependencyKeys"]] == [list(SOURCE)]
        checks = checks_of(node)
        assert set(checks) == set(CHECKS)
        assert {name for name, check in checks.items() if check["blocking"]} == {"managed_outputs_present"}


def test_materialize_publishes_the_destination_and_evaluates_its_checks_then_a_new_bundle_unsyncs_it(
    site: Site,
) -> None:
    digest = load_manifest(site.root / "source").digest
    # what Materialize on the archive asset sends: the asset and its checks
    run_id = site.server.launch([ARCHIVE], [(ARCHIVE, name) for name in CHECKS])
    run = site.server.wait_run(run_id)
    assert run["status"] == "SUCCESS", site.server.log_text()
    assert sorted(p.name for p in (site.root / "out" / "archive").iterdir()) == [
        ".distributor.json", "report.md", "summary.txt"
    ]
    assert not (site.root / "out" / "site").exists()

    nodes = site.assets()
    archive = nodes[ARCHIVE]
    (materialization,) = archive["assetMaterializations"]
    assert materialization["runId"] == run_id
    assert tags(materialization)["dagster/data_version"] == digest
    assert archive["dataVersion"] == digest and archive["staleStatus"] == "FRESH"
    for name, check in checks_of(archive).items():
        execution = check["executionForLatestMaterialization"]
        assert (execution["runId"], execution["status"], execution["evaluation"]["success"]) == (
            run_id, "SUCCEEDED", True), name
    assert nodes[SITE]["assetMaterializations"] == [] and nodes[SITE]["staleStatus"] == "MISSING"
    assert nodes[SOURCE]["dataVersion"] == digest  # observed by the run's discover step

    # "Execute checks" alone: the checks run again, nothing is published
    checks_run = site.server.launch([], [(ARCHIVE, name) for name in CHECKS])
    assert site.server.wait_run(checks_run)["status"] == "SUCCESS", site.server.log_text()
    archive = site.assets()[ARCHIVE]
    assert [m["runId"] for m in archive["assetMaterializations"]] == [run_id]
    assert {c["executionForLatestMaterialization"]["runId"] for c in checks_of(archive).values()} == {checks_run}

    # the producer writes a newer bundle; observing the source shows the destination unsynced
    (site.root / "source" / "summary.txt").write_text("a newer summary\n")
    files = [entry.path for entry in load_manifest(site.root / "source").files]
    write_manifest(site.root / "source", build_manifest(site.root / "source", id="example", files=files),
                   overwrite=True)
    newer = load_manifest(site.root / "source").digest
    observe = site.server.launch([SOURCE])
    assert site.server.wait_run(observe)["status"] == "SUCCESS", site.server.log_text()
    nodes = site.assets()
    assert nodes[SOURCE]["dataVersion"] == newer
    archive = nodes[ARCHIVE]
    assert archive["dataVersion"] == digest
    assert archive["staleStatus"] == "STALE"
    assert [(c["key"]["path"], c["category"]) for c in archive["staleCauses"]] == [(list(SOURCE), "DATA")]

"""Publishing by materializing destination assets from the command line, as a data team does
(issues 12, 24): ``dagster asset materialize --select <key> --partition <bundle path>`` and
``dg launch --assets ... --partition ...`` publish exactly that bundle to exactly the selected
destination of a two-destination pipeline (only that destination's steps run), evaluate its checks
in the same run and record the bundle digest as data version; an unchanged re-run writes nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from distributor_core.bundle import load_manifest
from tests.dagster.conftest import copy_example_bundle, write_config

pytestmark = pytest.mark.dagster

BIN = Path(sys.executable).parent
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
ARCHIVE = dg.AssetKey(["reports_daily", "archive"])
SITE = dg.AssetKey(["reports_daily", "site"])


@pytest.fixture
def home(tmp_path: Path) -> Path:
    copy_example_bundle(tmp_path / "source")
    write_config(tmp_path, CONFIG)
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    with dg.DagsterInstance.from_config(str(home)) as instance:
        # what the watch sensor's first tick does (test_watch_sensor): the bundle becomes a partition
        # of the source and of the destinations
        instance.add_dynamic_partitions("reports_daily__bundles", [ROOT])
        instance.add_dynamic_partitions("reports_daily__published", [ROOT])
    return home


def launch(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DAGSTER_HOME": str(home), "DISTRIBUTOR_CONFIG": str(home.parent / "distributor.yml")}
    return subprocess.run(args, capture_output=True, text=True, env=env, cwd=home.parent, timeout=600, check=False)


#: the example bundle sits at the source root: its partition key is "."
ROOT = "."


def materialize(home: Path, selection: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return launch(home, str(BIN / "dagster"), "asset", "materialize", "--select", selection,
                  "--partition", ROOT, "-m", "distributor_dagster.definitions", *extra)


def only_run(instance: dg.DagsterInstance) -> dg.DagsterRun:
    (run,) = instance.get_runs(limit=2)
    return run


def run_events(instance: dg.DagsterInstance, run_id: str, kind: dg.DagsterEventType) -> list[dg.EventLogEntry]:
    return [record.event_log_entry for record in instance.get_records_for_run(run_id, of_type=kind).records]


def assert_published_only_archive(home: Path) -> None:
    digest = load_manifest(home.parent / "source").digest
    assert sorted(p.name for p in (home.parent / "out" / "archive").iterdir()) == [
        ".distributor.json", "report.md", "summary.txt"
    ]
    assert not (home.parent / "out" / "site").exists()
    with dg.DagsterInstance.from_config(str(home)) as instance:
        run = only_run(instance)
        assert run.tags["distributor/pipeline"] == "reports.daily"
        assert run.tags["dagster/partition"] == ROOT
        # the site's step is not even in the run: a one-destination run is a subset (issue 24 item 6)
        started = {e.step_key for e in run_events(instance, run.run_id, dg.DagsterEventType.STEP_START)}
        assert started == {"reports_daily.discover", "reports_daily.validate", "reports_daily.publish_archive"}
        (materialization,) = instance.fetch_materializations(ARCHIVE, limit=10).records
        assert materialization.run_id == run.run_id
        event = materialization.asset_materialization
        assert event.partition == ROOT
        assert event.tags["dagster/data_version"] == digest
        assert event.tags["dagster/input_data_version/reports_daily"] == digest
        assert event.metadata["source_digest"].value == digest
        assert instance.fetch_materializations(SITE, limit=10).records == []
        checks = run_events(instance, run.run_id, dg.DagsterEventType.ASSET_CHECK_EVALUATION)
        evaluated = {
            (e.dagster_event.event_specific_data.asset_key, e.dagster_event.event_specific_data.check_name):
                e.dagster_event.event_specific_data.passed
            for e in checks
        }
        assert evaluated == {
            (ARCHIVE, "state_valid"): True, (ARCHIVE, "managed_outputs_present"): True,
            (ARCHIVE, "no_unmanaged_content"): True, (dg.AssetKey(["reports_daily"]), "bundle_valid"): True,
        }
        observed = instance.fetch_observations(dg.AssetKey(["reports_daily"]), limit=10).records
        assert [(o.asset_observation.partition, o.asset_observation.tags["dagster/data_version"])
                for o in observed] == [(ROOT, digest)]


def tree_stat(root: Path) -> dict[str, tuple[int, int, int]]:
    """Every file under ``root`` with inode, mtime and size (directories change their mtime when
    the destination lock comes and goes, which a skip takes too)."""
    return {
        str(p.relative_to(root)): (p.stat().st_ino, p.stat().st_mtime_ns, p.stat().st_size)
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_dagster_asset_materialize_publishes_only_the_selected_destination(home: Path) -> None:
    done = materialize(home, "reports_daily/archive")
    assert done.returncode == 0, done.stdout + done.stderr
    assert_published_only_archive(home)

    # an unchanged re-run writes nothing: same files, same inodes and times (no lock left); the
    # partition it targeted is materialized again with the same data version (a skip_same)
    before = tree_stat(home.parent / "out")
    again = materialize(home, "reports_daily/archive")
    assert again.returncode == 0, again.stdout + again.stderr
    assert tree_stat(home.parent / "out") == before
    with dg.DagsterInstance.from_config(str(home)) as instance:
        skip, first = (r.asset_materialization for r in instance.fetch_materializations(ARCHIVE, limit=10).records)
        assert skip.metadata["action"].value == "skip_same" and skip.metadata["bytes_written"].value == 0
        assert skip.tags["dagster/data_version"] == first.tags["dagster/data_version"]
        assert skip.tags["dagster/data_version"] == load_manifest(home.parent / "source").digest


def test_dg_launch_assets_publishes_only_the_selected_destination(home: Path) -> None:
    done = launch(home, str(BIN / "dg"), "launch", "--assets", "reports_daily/archive", "--partition", ROOT,
                  "-m", "distributor_dagster.definitions")
    assert done.returncode == 0, done.stdout + done.stderr
    assert_published_only_archive(home)


def test_materialize_takes_the_publication_run_config(home: Path) -> None:
    """``force``/``republish`` on one selected asset need no ``destinations``; on two they are refused."""
    assert materialize(home, "reports_daily/archive").returncode == 0
    republish = '{"resources": {"publish": {"config": {"republish": true}}}}'
    both = materialize(home, "reports_daily/archive,reports_daily/site", "--config-json", republish)
    assert both.returncode != 0
    assert "republish requires a run that targets exactly one destination" in both.stdout + both.stderr
    assert not (home.parent / "out" / "site").exists()
    one = materialize(home, "reports_daily/archive", "--config-json", republish)
    assert one.returncode == 0, one.stdout + one.stderr
    with dg.DagsterInstance.from_config(str(home)) as instance:
        latest = instance.fetch_materializations(ARCHIVE, limit=1).records[0].asset_materialization
        assert latest.metadata["action"].value == "replace_older"
        assert latest.metadata["reason"].value == "republish of same source requested"

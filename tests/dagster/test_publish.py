"""``publish_<pipeline>`` (the asset job of a pipeline's destination assets) executed in process:
same bytes as ``distributor run``, asset events with data versions per bundle partition
(resolutions E2, issues 12 and 24), independent destinations, an invalid bundle failing only the
source's check, selectors (E1, B3), the write steps' pools."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from distributor_core.app.publication import execute_destination, plan_destination
from distributor_core.app.run import DestinationPool, RunOptions, run_config
from distributor_core.bundle import load_manifest
from distributor_core.config import Environment, load_config
from distributor_core.source import SourceBundle
from distributor_core.storage.local import LocalStorage
from distributor_dagster import build_definitions
from distributor_dagster.publish.events import Provenance, partition_events
from distributor_dagster.publish.model import Item
from tests.dagster.conftest import (
    FROZEN,
    copy_example_bundle,
    events_of,
    frozen_clock,
    make_bundle,
    materializations,
    meta,
    observations,
    write_config,
)

pytestmark = pytest.mark.dagster

DISTRIBUTOR = Path(sys.executable).parent / "distributor"
DAGSTER = Path(sys.executable).parent / "dagster"

CONFIG = """\
pipelines:
  - id: reports.daily
    source:
      backend: local
      path: source
    destinations:
      - id: archive
        backend: local
        path: {out}/archive
      - id: html-site
        backend: local
        path: {out}/site
        publish: {{source: true, html: true}}
        transform: {{markdown_to_html: {{enabled: true, mode: sidecar}}}}
        links: {{base_url: "https://reports.example.com/site/"}}
      - id: latest
        backend: local
        path: {out}/latest
        path_mapping: {{mode: fixed}}
"""


@pytest.fixture
def source(tmp_path: Path) -> Path:
    root = tmp_path / "source"
    copy_example_bundle(root / "2026-06-07")
    make_bundle(root / "2026-06-08", "reports.daily", {"report.md": "# Day two\n\nText.\n", "data/x.csv": "a,b\n1,2\n"})
    return root


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def without_times(data: bytes) -> object:
    def strip(value: object) -> object:
        if isinstance(value, dict):
            return {k: ("<time>" if k.endswith("_at") else strip(v)) for k, v in value.items()}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return strip(json.loads(data))


GRAPH = "reports_daily"
#: the graph of the fixed destination ``latest`` (the pipeline also has per-bundle destinations)
NEWEST_GRAPH = "reports_daily__newest"
SOURCE = dg.AssetKey([GRAPH])


def step(name: str, graph: str = GRAPH) -> str:
    return f"{graph}.{name}"


def cfg(**config: object) -> dict:
    """Run config of the publication as docs/dagster.md prints it: the run's settings, once."""
    return {"resources": {"publish": {"config": config}}}


def check_evaluations(result: dg.ExecuteInProcessResult) -> list[dg.AssetCheckEvaluation]:
    return [e.event_specific_data for e in result.all_events if e.event_type_value == "ASSET_CHECK_EVALUATION"]


def destination_observations(result: dg.ExecuteInProcessResult) -> list[dg.AssetObservation]:
    """Observations of destination assets (not of the source or its newest bundle view)."""
    return [o for o in observations(result) if len(o.asset_key.path) == 2 and o.asset_key.path[-1] != "newest"]


def publish(config: Path, run_config: dict | None = None, **options: object) -> dg.ExecuteInProcessResult:
    defs = build_definitions(config, clock=frozen_clock, **options)
    job = defs.resolve_job_def("publish_reports_daily")
    return job.execute_in_process(run_config=run_config or {}, raise_on_error=False)


def test_publish_job_writes_what_distributor_run_writes(tmp_path: Path, source: Path) -> None:
    dagster_config = write_config(tmp_path, CONFIG.format(out="dagster"), "dagster.yml")
    cli_config = write_config(tmp_path, CONFIG.format(out="cli"), "cli.yml")

    result = publish(dagster_config)
    assert result.success
    completed = subprocess.run(
        [str(DISTRIBUTOR), "run", "--config", str(cli_config)], capture_output=True, text=True, check=False
    )
    assert completed.returncode == 0, completed.stderr

    dagster_files, cli_files = tree(tmp_path / "dagster"), tree(tmp_path / "cli")
    assert sorted(dagster_files) == sorted(cli_files)
    assert "site/2026-06-08/report.html" in dagster_files and "latest/.distributor.json" in dagster_files
    for path, data in cli_files.items():
        if path.endswith(".distributor.json"):
            assert without_times(dagster_files[path]) == without_times(data), path
        else:
            assert dagster_files[path] == data, path


def test_dagster_job_execute_writes_what_distributor_run_writes_and_an_unchanged_rerun_writes_nothing(
    tmp_path: Path, source: Path
) -> None:
    """The CLI way in, as the docs show it: ``dagster job execute -j publish_<p>`` in a subprocess
    against a real instance, next to ``distributor run``; then the same job again touches no file."""
    dagster_config = write_config(tmp_path, CONFIG.format(out="dagster"), "dagster.yml")
    cli_config = write_config(tmp_path, CONFIG.format(out="cli"), "cli.yml")
    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    env = {**os.environ, "DAGSTER_HOME": str(home), "DISTRIBUTOR_CONFIG": str(dagster_config)}
    command = [str(DAGSTER), "job", "execute", "-m", "distributor_dagster.definitions", "-j", "publish_reports_daily"]

    first = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path, check=False)
    assert first.returncode == 0, first.stdout + first.stderr
    cli = subprocess.run([str(DISTRIBUTOR), "run", "--config", str(cli_config)], capture_output=True, text=True)
    assert cli.returncode == 0, cli.stderr
    dagster_files, cli_files = tree(tmp_path / "dagster"), tree(tmp_path / "cli")
    assert sorted(dagster_files) == sorted(cli_files)
    for path, data in cli_files.items():
        if path.endswith(".distributor.json"):
            assert without_times(dagster_files[path]) == without_times(data), path
        else:
            assert dagster_files[path] == data, path

    def stats() -> dict[str, tuple[int, int, int]]:
        files = sorted(p for p in (tmp_path / "dagster").rglob("*") if p.is_file())
        return {str(p): (p.stat().st_ino, p.stat().st_mtime_ns, p.stat().st_size) for p in files}

    before = stats()
    again = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path, check=False)
    assert again.returncode == 0, again.stdout + again.stderr
    assert stats() == before
    with dg.DagsterInstance.from_config(str(home)) as instance:
        archive = dg.AssetKey([GRAPH, "archive"])
        # both bundles are partitions; the second run found them published: the same data versions again
        events = [r.asset_materialization for r in instance.fetch_materializations(archive, limit=10).records]
        assert sorted((e.partition, e.metadata["action"].value) for e in events) == [
            ("2026-06-07", "publish_new"), ("2026-06-07", "skip_same"),
            ("2026-06-08", "publish_new"), ("2026-06-08", "skip_same"),
        ]
        assert instance.get_materialized_partitions(archive) == {"2026-06-07", "2026-06-08"}
        # the fixed destination is materialized once (the newest bundle); the re-run is an observation
        latest = dg.AssetKey([GRAPH, "latest"])
        assert len(instance.fetch_materializations(latest, limit=10).records) == 1
        (skip,) = instance.fetch_observations(latest, limit=10).records
        assert skip.asset_observation.metadata["action"].value == "skip_same"


def test_publish_job_state_is_byte_identical_to_the_library_run_with_the_same_clock(
    tmp_path: Path, source: Path
) -> None:
    dagster_config = write_config(tmp_path, CONFIG.format(out="dagster"), "dagster.yml")
    library_config = write_config(tmp_path, CONFIG.format(out="library"), "library.yml")
    assert publish(dagster_config).success
    report = run_config(load_config(library_config), RunOptions(clock=frozen_clock))
    assert report.ok
    assert tree(tmp_path / "dagster") == tree(tmp_path / "library")


def test_materialization_carries_the_publication(tmp_path: Path, source: Path) -> None:
    config = write_config(tmp_path, CONFIG.format(out="out"))
    result = publish(config)
    assert result.success
    events = materializations(result)
    keys = sorted(e.asset_key.to_user_string() for e in events)
    # two bundles for each preserve_relative destination, the newest one for the fixed destination
    assert keys == ["reports_daily/archive"] * 2 + ["reports_daily/html_site"] * 2 + ["reports_daily/latest"]
    site = [e for e in events if e.asset_key.path[-1] == "html_site" and meta(e, "source_bundle_path") == "2026-06-08"]
    (event,) = site
    assert event.partition == "2026-06-08"
    digest = load_manifest(tmp_path / "source" / "2026-06-08").digest
    assert event.tags["dagster/data_version"] == digest
    assert event.tags["dagster/input_data_version/reports_daily"] == digest
    assert event.tags["dagster/code_version"].startswith("0.1.0-")
    (latest,) = [e for e in events if e.asset_key.path[-1] == "latest"]
    assert latest.partition is None and meta(latest, "source_bundle_path") == "2026-06-08"
    assert latest.tags["dagster/input_data_version/reports_daily/newest"] == digest
    assert meta(event, "action") == "publish_new"
    assert meta(event, "reason") == "destination state is absent"
    assert meta(event, "dry_run") is False
    assert meta(event, "source_id") == "reports.daily"
    assert str(meta(event, "source_digest")).startswith("sha256:")
    assert isinstance(event.metadata["source_created"], dg.TimestampMetadataValue)
    assert meta(event, "source_created") == FROZEN.timestamp()
    assert meta(event, "destination_path") == "2026-06-08"
    assert meta(event, "pipeline_id") == "reports.daily" and meta(event, "destination_id") == "html-site"
    rows = {r.data["path"]: r.data for r in event.metadata["outputs"].value.records}
    assert set(rows) == {"report.md", "report.html", "data/x.csv"}
    assert rows["report.html"]["kind"] == "generated"
    written = tmp_path / "out" / "site" / "2026-06-08"
    assert rows["data/x.csv"]["size"] == (written / "data" / "x.csv").stat().st_size
    assert meta(event, "outputs_count") == 3
    assert meta(event, "bytes_written") == sum(p.stat().st_size for p in written.rglob("*")
                                                if p.is_file() and p.name != ".distributor.json")
    assert isinstance(event.metadata["primary_url"], dg.UrlMetadataValue)
    assert meta(event, "primary_url") == "https://reports.example.com/site/2026-06-08/report.html"
    assert destination_observations(result) == []


def test_dry_runs_are_observations_and_an_unchanged_rerun_keeps_every_data_version(
    tmp_path: Path, source: Path
) -> None:
    config = write_config(tmp_path, CONFIG.format(out="out"))
    dry = publish(config, cfg(dry_run=True))
    assert dry.success
    assert materializations(dry) == []
    assert not (tmp_path / "out").exists()
    planned = destination_observations(dry)
    assert len(planned) == 5
    assert {meta(e, "action") for e in planned} == {"publish_new"}
    assert all(meta(e, "dry_run") is True and meta(e, "status") == "planned" for e in planned)
    assert all(meta(e, "outputs_count") > 0 for e in planned)

    first = publish(config)
    assert first.success
    again = publish(config)
    assert again.success
    # the partitions the run targeted hold their bundles: materialized again with the same data
    # version and nothing written; the fixed destination's skip stays an observation (E2)
    versions = {(e.asset_key, e.partition): e.tags["dagster/data_version"] for e in materializations(first)}
    repeated = materializations(again)
    assert len(repeated) == 4
    assert {(e.asset_key, e.partition): e.tags["dagster/data_version"] for e in repeated} == {
        key: value for key, value in versions.items() if key[1] is not None
    }
    assert all(meta(e, "action") == "skip_same" and meta(e, "bytes_written") == 0 for e in repeated)
    (skipped,) = destination_observations(again)
    assert skipped.asset_key.path[-1] == "latest" and meta(skipped, "action") == "skip_same"
    assert skipped.tags["dagster/data_version"] == versions[(dg.AssetKey([GRAPH, "latest"]), None)]


def test_a_failing_destination_fails_its_own_step_and_the_others_still_publish(tmp_path: Path, source: Path) -> None:
    config = write_config(tmp_path, CONFIG.format(out="out"))
    unmanaged = tmp_path / "out" / "archive" / "2026-06-07" / "report.md"
    unmanaged.parent.mkdir(parents=True)
    unmanaged.write_text("not published by distributor\n")

    result = publish(config)
    assert not result.success
    failed = {e.step_key for e in events_of(result, "STEP_FAILURE")}
    assert failed == {step("publish_archive")}
    succeeded = {e.step_key for e in events_of(result, "STEP_SUCCESS")}
    assert {step("publish_html_site"), step("publish_latest", NEWEST_GRAPH)} <= succeeded
    # the other bundle of the failing destination is still published, like the CLI
    assert (tmp_path / "out" / "archive" / "2026-06-08" / ".distributor.json").is_file()
    assert unmanaged.read_text() == "not published by distributor\n"
    failures = [e for e in destination_observations(result) if meta(e, "status") == "failed"]
    (failure,) = failures
    assert meta(failure, "action") == "fail_unmanaged"
    assert meta(failure, "source_bundle_path") == "2026-06-07"
    assert meta(failure, "error") == "fail_unmanaged: destination has content but no distributor state"
    assert failure.partition == "2026-06-07"
    assert (tmp_path / "out" / "site" / "2026-06-07" / "report.html").is_file()
    # the checks of the refused partition do not vouch for it (issue 24 item 5)
    archive = dg.AssetKey([GRAPH, "archive"])
    refused = {e.check_name: e for e in check_evaluations(result)
               if e.asset_key == archive and e.partition == "2026-06-07"}
    assert {name: e.passed for name, e in refused.items()} == {
        "state_valid": False, "managed_outputs_present": False, "no_unmanaged_content": False,
    }
    rows = refused["no_unmanaged_content"].metadata["unmanaged_entries"].value.records
    assert [row.data["path"] for row in rows] == ["report.md"]
    assert "report.md" in refused["no_unmanaged_content"].description
    published = {e.check_name: e.passed for e in check_evaluations(result)
                 if e.asset_key == archive and e.partition == "2026-06-08"}
    assert published == {"state_valid": True, "managed_outputs_present": True, "no_unmanaged_content": True}


def test_an_invalid_bundle_fails_only_its_source_check_and_the_valid_ones_publish(
    tmp_path: Path, source: Path
) -> None:
    """Issue 24 item 4: a bundle that fails validation is the source's problem. The source check
    names the file and both digests for that partition; no destination step fails and nothing of
    that bundle is written; the other bundle is published as usual."""
    config = write_config(tmp_path, CONFIG.format(out="out"))
    manifest = load_manifest(source / "2026-06-08")
    (source / "2026-06-08" / "report.md").write_text("# Day TWO\n\nText.\n")  # same size, other bytes
    result = publish(config)
    assert result.success
    assert events_of(result, "STEP_FAILURE") == []
    # validated once for the per-bundle destinations, once as the newest bundle for the fixed one
    failed = [e for e in check_evaluations(result) if e.asset_key == SOURCE and not e.passed]
    assert {(e.check_name, e.partition) for e in failed} == {("bundle_valid", "2026-06-08")}
    bad = failed[0]
    expected = next(f.sha256 for f in manifest.files if f.path == "report.md")
    assert bad.metadata["file"].value == "report.md"
    assert bad.metadata["expected"].value == expected
    assert bad.metadata["actual"].value not in ("", expected)
    assert "report.md" in bad.description and expected in bad.description
    good = [e for e in check_evaluations(result) if e.asset_key == SOURCE and e.passed]
    assert {e.partition for e in good} == {"2026-06-07"}
    assert not (tmp_path / "out" / "archive" / "2026-06-08").exists()
    assert (tmp_path / "out" / "archive" / "2026-06-07" / ".distributor.json").is_file()
    assert {(e.asset_key.path[-1], e.partition) for e in materializations(result)} == {
        ("archive", "2026-06-07"), ("html_site", "2026-06-07"),
    }
    # the fixed destination would take the newest bundle, the invalid one: it publishes nothing
    assert not (tmp_path / "out" / "latest").exists()


def test_selectors_restrict_the_run(tmp_path: Path, source: Path) -> None:
    config = write_config(tmp_path, CONFIG.format(out="out"))
    result = publish(config, cfg(destinations=["html-site"], bundle_path="2026-06-07"))
    assert result.success
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["site"]
    assert sorted(p.name for p in (tmp_path / "out" / "site").iterdir()) == ["2026-06-07"]
    # the other destinations' steps run (no step skips, see PUBLISH_EXECUTOR) but publish nothing
    assert events_of(result, "STEP_SKIPPED") == []
    assert {meta(e, "destination_id") for e in destination_observations(result)} <= {"html-site"}
    assert [(meta(e, "destination_id"), e.partition) for e in materializations(result)] == [("html-site", "2026-06-07")]


def test_force_and_republish_need_exactly_one_destination(tmp_path: Path, source: Path) -> None:
    config = write_config(tmp_path, CONFIG.format(out="out"))
    for flag in ("force", "republish"):
        result = publish(config, cfg(**{flag: True}))
        assert not result.success
        error = events_of(result, "STEP_FAILURE")[0].event_specific_data.error.message
        assert f"{flag} requires a run that targets exactly one destination" in error
    assert not (tmp_path / "out").exists()
    assert publish(config).success
    forced = publish(config, cfg(destinations=["archive"], republish=True))
    assert forced.success
    assert {meta(e, "action") for e in materializations(forced)} == {"replace_older"}
    assert {meta(e, "reason") for e in materializations(forced)} == {"republish of same source requested"}


def test_an_unknown_destination_fails_the_run_before_anything_is_written(tmp_path: Path, source: Path) -> None:
    """``destinations`` names destination assets the run selects: another name fails every
    ``discover`` step, listing what the run selects, and nothing is published."""
    config = write_config(tmp_path, CONFIG.format(out="out"))
    result = publish(config, cfg(destinations=["nope"]))
    assert not result.success
    failed = {e.step_key: e.event_specific_data.error.message for e in events_of(result, "STEP_FAILURE")}
    assert set(failed) == {step("discover"), step("discover", NEWEST_GRAPH)}
    assert all("destinations: 'nope' is not among the destination assets selected for this run (it selects "
               "reports.daily/archive, reports.daily/html-site, reports.daily/latest)" in m for m in failed.values())
    assert materializations(result) == [] and destination_observations(result) == []
    assert not (tmp_path / "out").exists()
    # named as <pipeline id>/<destination id> it selects that one
    result = publish(config, cfg(destinations=["reports.daily/latest"]))
    assert result.success
    assert [meta(e, "destination_id") for e in materializations(result)] == ["latest"]


def test_a_destination_added_to_the_config_is_offered_after_a_reload(tmp_path: Path, source: Path) -> None:
    """A code server reloads a config in the same process: the new destination can be named
    (Dagster keeps config types for the life of the process)."""
    two = CONFIG.format(out="out").split("      - id: latest")[0]
    assert publish(write_config(tmp_path, two, "two.yml"), cfg(destinations=["archive"])).success
    three = write_config(tmp_path, CONFIG.format(out="out"), "three.yml")
    result = publish(three, cfg(destinations=["latest"]))
    assert result.success
    assert [meta(e, "destination_id") for e in materializations(result)] == ["latest"]


SHARED = """\
pipelines:
  - id: site
    source: {backend: local, path: source}
    destinations:
      - id: copy
        backend: local
        path: out/root
        state: {mode: shared_root}
        publish: {source: true, html: false}
      - id: other
        backend: local
        path: out/elsewhere
      - id: html
        backend: local
        path: out/root
        state: {mode: shared_root}
        publish: {source: false, html: true}
        transform: {markdown_to_html: {enabled: true}}
"""


def test_execute_steps_sharing_a_root_share_a_pool_and_run_in_config_order(tmp_path: Path) -> None:
    copy_example_bundle(tmp_path / "source")
    config = write_config(tmp_path, SHARED)
    job = build_definitions(config).resolve_job_def("publish_site")
    with dg.instance_for_test() as instance:
        result = job.execute_in_process(instance=instance, raise_on_error=False)
        assert result.success
        # the pool each step of the run claims, as the run queue and the executor read it from the
        # run's stored plan (the op definition is shared: the pool is the step's tag)
        plan = instance.get_execution_plan_snapshot(result.dagster_run.execution_plan_snapshot_id)
        pools = {s.key: s.pool or s.tags.get("dagster/concurrency_key") for s in plan.steps}
    root = f"distributor/local:{tmp_path / 'out' / 'root'}"
    elsewhere = f"distributor/local:{tmp_path / 'out' / 'elsewhere'}"
    assert pools == {"site.discover": None, "site.validate": None, "site.publish_copy": root,
                     "site.publish_other": elsewhere, "site.publish_html": root}
    order = [(e.event_type_value, e.step_key) for e in result.all_events
             if e.event_type_value in ("STEP_START", "STEP_SUCCESS") and e.step_key.startswith("site.publish_")]
    assert order == [
        ("STEP_START", "site.publish_copy"), ("STEP_SUCCESS", "site.publish_copy"),
        ("STEP_START", "site.publish_other"), ("STEP_SUCCESS", "site.publish_other"),
        ("STEP_START", "site.publish_html"), ("STEP_SUCCESS", "site.publish_html"),
    ]
    state = json.loads((tmp_path / "out" / "root" / ".distributor.json").read_text())
    assert {o["destination_id"] for o in state["owners"]} == {"copy", "html"}


def test_runs_carry_the_pipeline_tag(tmp_path: Path, source: Path) -> None:
    config = write_config(tmp_path, CONFIG.format(out="out"))
    job = build_definitions(config).resolve_job_def("publish_reports_daily")
    assert job.tags["distributor/pipeline"] == "reports.daily"
    result = job.execute_in_process(run_config=cfg(dry_run=True))
    assert result.dagster_run.tags["distributor/pipeline"] == "reports.daily"


def test_execute_records_both_actions_when_the_plan_changed_before_the_lock(tmp_path: Path) -> None:
    copy_example_bundle(tmp_path / "source")
    config_path = write_config(
        tmp_path, "pipelines:\n  - id: p\n    source: {backend: local, path: source}\n"
        "    destinations:\n      - {id: d, backend: local, path: out}\n",
    )
    config = load_config(config_path)
    pipeline = config.pipeline("p")
    (destination,) = pipeline.destinations
    source = LocalStorage(tmp_path / "source")
    bundles = [SourceBundle("", load_manifest(tmp_path / "source"))]
    with DestinationPool(Environment.from_config(config), dry_run=True) as pool:
        planned = plan_destination(pipeline, destination, source, bundles, pool=pool, options=RunOptions())
    assert [entry.action for entry in planned] == ["publish_new"]

    assert run_config(config).ok  # another writer publishes between plan and execute

    with DestinationPool(Environment.from_config(config), dry_run=False) as pool:
        (entry,) = execute_destination(
            pipeline, destination, source, bundles, pool=pool, options=RunOptions(), planned=planned
        )
    assert (entry.action, entry.planned_action) == ("skip_same", "publish_new")
    digest = bundles[0].manifest.digest
    provenance = Provenance("v1", dg.AssetKey(["p"]), lambda partition, digest: 7)
    events = partition_events(
        [(Item(""), entry)], {"": bundles[0].manifest}, asset_key=dg.AssetKey(["p", "d"]),
        provenance=provenance, dry_run=False, root=destination.storage,
    )
    (event,) = events.logged
    assert events.final is None and isinstance(event, dg.AssetMaterialization)
    assert meta(event, "action") == "skip_same" and meta(event, "planned_action") == "publish_new"
    # the partition holds the bundle: its data version, and the source partition it answers
    assert event.partition == "."
    assert event.tags["dagster/data_version"] == digest
    assert event.tags["dagster/input_data_version/p"] == digest
    assert event.tags["dagster/input_event_pointer/p"] == "7"


def test_a_run_over_a_range_of_partitions_publishes_each_bundle_as_its_own_partition(
    tmp_path: Path, source: Path
) -> None:
    """What a backfill's runs are (the assets' backfill policy: up to ``bundles_per_run`` bundles
    in one run): each bundle of the range published, materialized and checked as its partition."""
    config = write_config(tmp_path, CONFIG.format(out="out"))
    defs = build_definitions(config, clock=frozen_clock)
    job = defs.resolve_implicit_global_asset_job_def().get_subset(
        asset_selection={dg.AssetKey([GRAPH, "archive"]), dg.AssetKey([GRAPH, "html_site"])}
    )
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("reports_daily__published", ["2026-06-07", "2026-06-08"])
        result = job.execute_in_process(
            instance=instance,
            tags={"dagster/asset_partition_range_start": "2026-06-07",
                  "dagster/asset_partition_range_end": "2026-06-08"},
        )
        assert result.success
        assert sorted((e.asset_key.path[-1], e.partition) for e in materializations(result)) == [
            ("archive", "2026-06-07"), ("archive", "2026-06-08"),
            ("html_site", "2026-06-07"), ("html_site", "2026-06-08"),
        ]
        checked = {(e.asset_key.path[-1], e.partition) for e in check_evaluations(result) if e.asset_key != SOURCE}
        assert checked == {(d, p) for d in ("archive", "html_site") for p in ("2026-06-07", "2026-06-08")}
        assert instance.get_materialized_partitions(dg.AssetKey([GRAPH, "archive"])) == {"2026-06-07", "2026-06-08"}
    assert (tmp_path / "out" / "site" / "2026-06-08" / "report.html").is_file()
    assert not (tmp_path / "out" / "latest").exists()  # not selected

"""One run, one config (issue 37 item 1): a publish run takes its settings once
(``resources.publish.config``) and every step of every graph of the run obeys them.

A site with one pipeline of each job shape (per-bundle destinations only, a ``fixed`` destination
only, both, and an ``http_upload`` pipeline), each holding a first publication, then a new bundle
(or upload) a real run would write: a dry run through every entry point (``dagster job execute``,
``dg launch``, ``dagster asset materialize``, a sensor's run request) plans every destination it
targets and leaves every destination and the staging area byte for byte as they were. The run
config of the shape before issue 37 is refused before a run is created, naming the new shape.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import dagster as dg
import pytest
import yaml

from distributor_core import staging as sg
from distributor_dagster import build_definitions
from tests.dagster.conftest import FROZEN, REPO, apply_tick, make_bundle, write_config
from tests.dagster.reconstruct import reconstructable_job
from tests.dagster.test_upload_sensor import TOKEN, archive, serving

pytestmark = pytest.mark.dagster

BIN = Path(sys.executable).parent
CONFIG = """\
server:
  http: {bind: "127.0.0.1:0", staging_root: staging, retention: 24h}
upload_tokens:
  - {id: producer, token_env: TEST_UPLOAD_TOKEN, allow_pipelines: [uploads]}
pipelines:
  - id: bundles
    source: {backend: local, path: src/bundles}
    destinations:
      - {id: archive, backend: local, path: out/bundles/archive}
      - id: site
        backend: local
        path: out/bundles/site
        publish: {source: false, html: true}
        transform: {markdown_to_html: {enabled: true}}
  - id: latest
    source: {backend: local, path: src/latest}
    destinations:
      - {id: latest, backend: local, path: out/latest/latest, path_mapping: {mode: fixed}}
  - id: mixed
    source: {backend: local, path: src/mixed}
    destinations:
      - {id: archive, backend: local, path: out/mixed/archive}
      - {id: latest, backend: local, path: out/mixed/latest, path_mapping: {mode: fixed}}
  - id: uploads
    source: {backend: http_upload}
    destinations:
      - {id: archive, backend: local, path: out/uploads/archive}
      - {id: mirror, backend: local, path: out/uploads/mirror}
"""
#: each job shape and the destinations a real run of its publish job would write now
SHAPES = {
    "bundles": ("archive", "site"),  # per-bundle destinations only: one partitioned graph
    "latest": ("latest",),  # a fixed destination only: one unpartitioned graph
    "mixed": ("archive", "latest"),  # both: the graphs mixed and mixed__newest
    "uploads": ("archive", "mirror"),  # an http_upload pipeline: its graph with the report step
}
DRY = {"resources": {"publish": {"config": {"dry_run": True}}}}
DAY1, DAY2 = "2026-06-07", "2026-06-08"


@dataclass
class Site:
    root: Path
    home: Path
    config: Path
    cursors: dict[str, str | None]

    def files(self) -> dict[str, bytes]:
        """Every file of every destination and of the staging area, with its bytes."""
        return {str(p.relative_to(self.root)): p.read_bytes() for top in ("out", "staging")
                for p in sorted((self.root / top).rglob("*")) if p.is_file()}

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "DAGSTER_HOME": str(self.home), "DISTRIBUTOR_CONFIG": str(self.config)}
        return subprocess.run(args, capture_output=True, text=True, env=env, cwd=self.root, timeout=600, check=False)

    def instance(self) -> dg.DagsterInstance:
        return dg.DagsterInstance.from_config(str(self.home))

    def last_run(self) -> dg.DagsterRun:
        with self.instance() as instance:
            return instance.get_runs(limit=1)[0]


def stage_upload(site_root: Path, config: Path, instance: dg.DagsterInstance, index: int) -> str:
    """One upload admitted by the real upload server (dagster publisher): its run id."""
    bundle = make_bundle(site_root / "uploaded" / str(index), "uploads.report", {"r.md": f"# {index}\n"},
                         created=FROZEN + timedelta(days=index))
    with serving(config, instance) as client:
        response = client.post("/v1/pipelines/uploads/upload", content=archive(bundle),
                               headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/gzip"})
    assert response.status_code == 202, response.text
    return response.json()["run_id"]


def day(site_root: Path, pipeline: str, name: str, offset: int) -> None:
    make_bundle(site_root / "src" / pipeline / name, f"{pipeline}.report",
                {"report.md": f"# {pipeline} {name}\n\nText.\n"}, created=FROZEN + timedelta(days=offset))


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Site:
    root = tmp_path_factory.mktemp("dry-run")
    config = write_config(root, CONFIG)
    home = root / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    for pipeline in ("bundles", "latest", "mixed"):
        day(root, pipeline, DAY1, 0)
    defs = build_definitions(config)
    cursors: dict[str, str | None] = {}
    with dg.DagsterInstance.from_config(str(home)) as instance:
        stage_upload(root, config, instance, 0)
        for pipeline in SHAPES:  # the first publication, for real
            result = defs.resolve_job_def(f"publish_{pipeline}").execute_in_process(instance=instance)
            assert result.success, pipeline
        for pipeline in ("mixed", "uploads"):  # the sensors have seen it all
            sensor = f"watch_{pipeline}" if pipeline != "uploads" else "uploads_uploads"
            tick = defs.resolve_sensor_def(sensor)(dg.build_sensor_context(instance=instance, definitions=defs))
            apply_tick(instance, tick)
            cursors[sensor] = tick.cursor
        # what a real run would write now: a newer bundle in every source, a new upload waiting
        for pipeline in ("bundles", "latest", "mixed"):
            day(root, pipeline, DAY2, 1)
        stage_upload(root, config, instance, 1)
        for pipeline in ("bundles", "mixed"):  # what the watch sensor's tick adds: a partition of the
            for partitions in ("bundles", "published"):  # source and of the destinations
                instance.add_dynamic_partitions(f"{pipeline}__{partitions}", [DAY2])
    assert (root / "out" / "mixed" / "latest" / "report.md").read_text() == f"# mixed {DAY1}\n\nText.\n"
    return Site(root, home, config, cursors)


def planned(run_id: str, site: Site) -> dict[tuple[str, str | None], set[tuple[str, str, bool]]]:
    """Per destination asset and partition of a run: its (action, status, dry_run) observations."""
    found: dict[tuple[str, str | None], set[tuple[str, str, bool]]] = {}
    with site.instance() as instance:
        records = instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.ASSET_OBSERVATION).records
        materialized = instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION)
        assert materialized.records == [], "a dry run materialized"
    for record in records:
        observation = record.event_log_entry.dagster_event.event_specific_data.asset_observation
        if "action" in observation.metadata:  # a destination's (the source's carry no action)
            key = ("/".join(observation.asset_key.path), observation.partition)
            found.setdefault(key, set()).add(tuple(observation.metadata[m].value for m in ("action", "status",
                                                                                         "dry_run")))
    return found


def assert_dry(site: Site, before: dict[str, bytes], run_id: str, expected: dict[tuple[str, str | None], str]) -> None:
    """Nothing written anywhere, and each expected destination (partition) planned its action (a
    bundle already there is ``skipped``, anything else ``planned``), as a dry run."""
    assert site.files() == before
    seen = planned(run_id, site)
    assert seen == {key: {(action, "skipped" if action == "skip_same" else "planned", True)}
                    for key, action in expected.items()}


def expected_plans(pipeline: str) -> dict[tuple[str, str | None], str]:
    """What a dry run of ``publish_<pipeline>`` plans now (every bundle, the newest for fixed)."""
    plans: dict[tuple[str, str | None], str] = {}
    for destination in SHAPES[pipeline]:
        key = f"{pipeline}/{destination}"
        if pipeline == "uploads" or destination == "latest":
            plans[(key, None)] = "replace_older"  # the waiting upload, the newest bundle: newer than what is there
        else:
            plans[(key, DAY1)] = "skip_same"
            plans[(key, DAY2)] = "publish_new"
    return plans


@pytest.mark.parametrize("pipeline", list(SHAPES))
def test_dagster_job_execute_dry_run_writes_nothing(site: Site, pipeline: str) -> None:
    """The run config docs/dagster.md prints for a dry run, through the command of the bug report."""
    dry = site.root / "dry.yaml"
    dry.write_text("resources:\n  publish:\n    config:\n      dry_run: true\n")
    before = site.files()
    done = site.cli(str(BIN / "dagster"), "job", "execute", "-m", "distributor_dagster.definitions",
                    "-j", f"publish_{pipeline}", "-c", str(dry))
    assert done.returncode == 0, done.stdout + done.stderr
    assert_dry(site, before, site.last_run().run_id, expected_plans(pipeline))


@pytest.mark.parametrize("pipeline", ["mixed", "uploads"])
def test_dg_launch_dry_run_writes_nothing(site: Site, pipeline: str) -> None:
    before = site.files()
    done = site.cli(str(BIN / "dg"), "launch", "--job", f"publish_{pipeline}", "-m", "distributor_dagster.definitions",
                    "--config-json", json.dumps(DRY))
    assert done.returncode == 0, done.stdout + done.stderr
    assert_dry(site, before, site.last_run().run_id, expected_plans(pipeline))


@pytest.mark.parametrize(("select", "partition", "expected"), [
    ("mixed/latest", None, {("mixed/latest", None): "replace_older"}),
    ("bundles/archive,bundles/site", DAY2, {("bundles/archive", DAY2): "publish_new",
                                             ("bundles/site", DAY2): "publish_new"}),
], ids=["fixed-of-two-graphs", "partition"])
def test_dagster_asset_materialize_dry_run_writes_nothing(
    site: Site, select: str, partition: str | None, expected: dict
) -> None:
    before = site.files()
    args = ["--partition", partition] if partition else []
    done = site.cli(str(BIN / "dagster"), "asset", "materialize", "-m", "distributor_dagster.definitions",
                    "--select", select, *args, "--config-json", json.dumps(DRY))
    assert done.returncode == 0, done.stdout + done.stderr
    assert_dry(site, before, site.last_run().run_id, expected)


def test_a_sensors_run_requests_with_the_dry_run_setting_write_nothing(site: Site) -> None:
    """The run requests of the watch sensor (a new bundle's partition, the fixed destinations'
    run) and of the uploads sensor (a batch, whose settings name its uploads), each launched as the
    daemon launches it with the dry-run setting added to the request's run config. A dry run
    before them records no observation of the source, so the sensor still finds the new bundle."""
    defs = build_definitions(site.config)
    before = site.files()
    with site.instance() as instance:
        assert defs.resolve_job_def("publish_mixed").execute_in_process(run_config=DRY, instance=instance).success
        requests = []
        for sensor in ("watch_mixed", "uploads_uploads"):
            context = dg.build_sensor_context(instance=instance, definitions=defs, cursor=site.cursors[sensor])
            tick = defs.resolve_sensor_def(sensor)(context)
            requests += [(sensor, request) for request in tick.run_requests]
        assert len(requests) == 3
        runs = []
        for sensor, request in requests:
            settings = (request.run_config or {}).get("resources", {}).get("publish", {}).get("config", {})
            run_config = {"resources": {"publish": {"config": {**settings, "dry_run": True}}}}
            if request.asset_selection is not None:
                job = defs.resolve_implicit_global_asset_job_def().get_subset(
                    asset_selection=set(request.asset_selection))
            else:
                job = defs.resolve_job_def("publish_uploads")
            result = job.execute_in_process(run_config=run_config, instance=instance, tags=request.tags,
                                            partition_key=request.partition_key)
            assert result.success, sensor
            runs.append(result.run_id)
    assert site.files() == before
    assert [planned(run_id, site) for run_id in runs] == [
        {("mixed/archive", DAY2): {("publish_new", "planned", True)}},
        {("mixed/latest", None): {("replace_older", "planned", True)}},
        {(f"uploads/{d}", None): {("replace_older", "planned", True)} for d in SHAPES["uploads"]},
    ]
    records = [sg.read_record(site.root / "staging" / "uploads", run_id) for run_id in
               requests[2][1].run_config["resources"]["publish"]["config"]["upload_run_ids"]]
    assert [record.status for record in records] == ["accepted"]


def test_the_run_config_of_before_issue_37_is_refused_naming_the_new_shape(site: Site) -> None:
    """A saved run config in the per-graph shape (``ops.<graph>.config``) is refused before a run
    is created, and the message shows the settings in the new shape: a saved dry run never
    becomes a real run."""
    old = site.root / "old.yaml"
    old.write_text("ops:\n  mixed:\n    config:\n      dry_run: true\n")
    before = site.files()
    with site.instance() as instance:
        runs = len(instance.get_runs())
    done = site.cli(str(BIN / "dagster"), "job", "execute", "-m", "distributor_dagster.definitions",
                    "-j", "publish_mixed", "-c", str(old))
    assert done.returncode != 0
    assert ("the run config ops.mixed.config is no longer read (the shape of earlier releases): a publish run "
            "takes its settings once, "
            "for every step of every graph, as resources.publish.config; write "
            "{resources: {publish: {config: {dry_run: true}}}} instead") in done.stdout + done.stderr
    assert site.files() == before
    with site.instance() as instance:
        assert len(instance.get_runs()) == runs


def test_the_run_config_docs_dagster_md_prints_is_the_one_publish_runs_take(site: Site) -> None:
    """docs/dagster.md "Run config": its scaffold and its command lines' configs are accepted as
    printed by a publish job and by Materialize, and the refusal it quotes is the one a run gets."""
    text = (REPO / "docs" / "dagster.md").read_text()
    section = text[text.index("### Run config"):text.index("### Asset events and metadata")]
    blocks = re.findall(r"```(\w+)\n(.*?)```", section, flags=re.S)
    scaffold = yaml.safe_load(next(body for kind, body in blocks if kind == "yaml"))
    configs = [scaffold, *(json.loads(c) for c in re.findall(r"--config-json '(.*?)'", section))]
    forced = re.search(r"printf '(.*?)' > force.yaml", section)
    assert forced is not None
    configs.append(yaml.safe_load(forced.group(1).encode().decode("unicode_escape")))
    assert len(configs) == 4
    defs = build_definitions(site.config)
    for job in (defs.resolve_job_def("publish_mixed"), defs.resolve_implicit_global_asset_job_def()):
        for config in configs:
            dg.validate_run_config(job, config)
    quoted = " ".join(next(body for kind, body in blocks if kind == "text").split())
    with pytest.raises(dg.DagsterInvariantViolationError) as refused:
        defs.resolve_job_def("publish_mixed").execute_in_process(
            run_config={"ops": {"mixed__newest": {"config": {"dry_run": True}}}})
    assert str(refused.value).replace("mixed__newest", "reports__newest") == quoted


def test_a_reexecution_under_other_settings_fails_rather_than_mix_them(tmp_path: Path) -> None:
    """Re-execute from failure reuses what the parent run's ``discover`` decided: launched with
    other settings (here a dry run after a real one) the re-executed steps refuse, and write nothing,
    instead of half obeying each run config."""
    config = write_config(tmp_path, """\
        pipelines:
          - id: mixed
            source: {backend: local, path: src}
            destinations:
              - {id: archive, backend: local, path: out/archive}
              - {id: latest, backend: local, path: out/latest, path_mapping: {mode: fixed}}
        """)
    make_bundle(tmp_path / "src" / DAY1, "mixed.report", {"report.md": "# one\n"})
    stray = tmp_path / "out" / "archive" / DAY1 / "report.md"
    stray.parent.mkdir(parents=True)
    stray.write_text("not published by distributor\n")
    with dg.instance_for_test() as instance:
        with dg.execute_job(reconstructable_job(config, "publish_mixed"), instance) as first:
            assert not first.success  # archive refuses the unmanaged file; latest publishes
            failed_run = first.run_id
        stray.unlink()
        with dg.execute_job(
            reconstructable_job(config, "publish_mixed"), instance, run_config=DRY,
            reexecution_options=dg.ReexecutionOptions.from_failure(failed_run, instance),
        ) as again:
            assert not again.success
            (failure,) = [e for e in again.all_events if e.event_type_value == "STEP_FAILURE"]
    assert failure.step_key == "mixed.publish_archive"
    assert ("this run's settings (dry_run=True, force=False, republish=False) differ from those its discover step "
            "decided with (dry_run=False") in failure.event_specific_data.error.message
    assert sorted(p.name for p in (tmp_path / "out" / "archive" / DAY1).iterdir()) == []

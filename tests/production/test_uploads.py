"""``distributor serve --publisher dagster`` with the daemon on PostgreSQL (issue 13, item 3): an
upload becomes exactly one run launched by the daemon's ``uploads_<p>`` sensor; ``GET /runs``
follows it to ``succeeded``; a replayed idempotency key launches nothing; a failed upload run
re-executed from failure (what the UI's button sends, through the webserver's GraphQL API)
finishes the same upload record."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import dagster as dg
import httpx
import pytest

from distributor_core import staging as sg
from distributor_core.bundle import MAX_ID_BYTES
from distributor_dagster.tags import MAX_TAG_VALUE_BYTES
from distributor_dagster.upload_status import upload_tag
from tests.bundle.conftest import REPORT, SUMMARY
from tests.production.harness import (
    Deployment,
    lifecycle,
    reexecute_from_failure,
    runs_tagged,
    sensor_ticks,
    wait_finished,
    wait_for,
    wait_ticks_after,
)
from tests.server.harness import TOKEN, bundle_archive, bundle_dir, published, tar_of_dir, upload, write_setup

pytestmark = pytest.mark.dagster

AUTH = {"Authorization": f"Bearer {TOKEN}"}
SENSOR = "uploads_reports"


def _status(http: httpx.Client, run_id: str, wanted: set[str]) -> dict:
    def view() -> dict | None:
        body = http.get(f"/runs/{run_id}", headers=AUTH).json()
        return body if body["status"] in wanted else None

    return wait_for(view, message=f"upload {run_id} to be {wanted}")


def test_an_upload_is_published_by_exactly_one_daemon_run(deployment: Deployment) -> None:
    setup = write_setup(deployment.root / "site")
    deployment.use_config(setup.config_path, setup.environ)
    archive = bundle_archive(deployment.root)
    with deployment.instance() as instance, deployment.running(serve=True) as up, \
            httpx.Client(base_url=up.serve_url, timeout=30) as http:
        first = upload(http, "reports", archive, key="nightly-1")
        assert first.status_code == 202
        run_id = first.json()["run_id"]
        view = _status(http, run_id, {"succeeded", "failed"})
        assert view["status"] == "succeeded", view
        runs = runs_tagged(instance, upload_run_id=run_id)
        assert [r.run_id for r in runs] == [view["dagster_run_id"]]
        # the record says succeeded once the report step wrote it; the run ends a moment later
        run = wait_finished(instance, [runs[0].run_id])[0].dagster_run
        assert run.status == dg.DagsterRunStatus.SUCCESS and run.job_name == "publish_reports"
        assert run.tags["distributor/pipeline"] == "reports" and run.tags["dagster/sensor_name"] == SENSOR
        # the run went through the queue: enqueued, then dequeued by the daemon
        life = lifecycle(instance, run)
        assert life.enqueued <= life.dequeued <= life.started <= life.finished
        record = sg.read_record(setup.staging("reports"), run_id)
        assert (record.status, record.dagster_run_id) == ("succeeded", run.run_id)
        assert not sg.bundle_dir(setup.staging("reports"), run_id).exists()
        assert published(setup.destinations["reports/dest1"]) == {"report.md": REPORT, "summary.txt": SUMMARY}

        # the same idempotency key again: the stored 202, and no new run on the following ticks
        replay_at = time.time()
        again = upload(http, "reports", archive, key="nightly-1")
        assert again.status_code == 202 and again.json() == first.json()
        wait_ticks_after(instance, SENSOR, replay_at, count=1)
        assert [r.run_id for r in instance.get_runs(filters=dg.RunsFilter(job_name="publish_reports"))] == [
            run.run_id]
        assert http.get(f"/runs/{run_id}", headers=AUTH).json()["dagster_run_id"] == run.run_id


def test_a_failed_upload_run_re_executed_from_failure_finishes_the_same_record(deployment: Deployment) -> None:
    setup = write_setup(deployment.root / "site")
    deployment.use_config(setup.config_path, setup.environ)
    destination = setup.destinations["reports/dest1"]
    # the destination root cannot be created: a regular file stands where its parent should be
    destination.parent.parent.mkdir(parents=True)
    destination.parent.write_text("not a directory\n")
    with deployment.instance() as instance, deployment.running(webserver=True, serve=True) as up, \
            httpx.Client(base_url=up.serve_url, timeout=30) as http:
        run_id = upload(http, "reports", bundle_archive(deployment.root)).json()["run_id"]
        failed = _status(http, run_id, {"succeeded", "failed"})
        assert failed["status"] == "failed", failed
        parent = failed["dagster_run_id"]
        assert wait_finished(instance, [parent])[0].dagster_run.status == dg.DagsterRunStatus.FAILURE
        assert failed["error"] and str(deployment.root) not in failed["error"]
        record = sg.read_record(setup.staging("reports"), run_id)
        assert (record.status, record.dagster_run_id) == ("failed", parent)
        assert sg.bundle_dir(setup.staging("reports"), run_id).is_dir()  # kept for a re-run

        destination.parent.unlink()  # the operator fixes the destination
        child = reexecute_from_failure(up.web_url, parent)
        [finished] = wait_finished(instance, [child])
        assert finished.dagster_run.status == dg.DagsterRunStatus.SUCCESS
        assert finished.dagster_run.parent_run_id == parent
        assert finished.dagster_run.tags["distributor/upload_run_id"] == run_id
        # only the failed step and what follows it ran again
        rerun = lifecycle(instance, finished.dagster_run)
        assert set(rerun.steps) == {"reports.publish_dest1", "reports.report"}, rerun.steps

        record = sg.read_record(setup.staging("reports"), run_id)
        assert (record.status, record.dagster_run_id, record.error) == ("succeeded", child, "")
        assert record.report["actions"][0]["action"] == "publish_new"
        assert not sg.bundle_dir(setup.staging("reports"), run_id).exists()
        view = http.get(f"/runs/{run_id}", headers=AUTH).json()
        assert (view["status"], view["dagster_run_id"]) == ("succeeded", child)
        assert published(destination) == {"report.md": REPORT, "summary.txt": SUMMARY}
        # the uploads sensor never launched a second run for the record
        assert {r.run_id for r in runs_tagged(instance, upload_run_id=run_id)} == {parent, child}


def test_a_long_bundle_id_is_bounded_at_admission_and_in_every_run_tag(deployment: Deployment) -> None:
    """Issue 35, item 6: an id over the admission limit is refused with ``400`` (a 4,000-character
    one failed the sensor tick on PostgreSQL, ``index row size ... exceeds maximum 2704``, and the
    retry launched the run without its tags); an id at the limit is published by one run whose
    every tag value fits the index (the bundle id shortened with its hash), found by its upload
    tag, the full id kept in the materialization metadata and the destination state."""
    setup = write_setup(deployment.root / "site")
    deployment.use_config(setup.config_path, setup.environ)
    at_limit = "reports." + "é" * ((MAX_ID_BYTES - len("reports.")) // 2)
    assert len(at_limit.encode()) == MAX_ID_BYTES
    with deployment.instance() as instance, deployment.running(serve=True) as up, \
            httpx.Client(base_url=up.serve_url, timeout=30) as http:
        refused = upload(http, "reports", _archive_with_id(deployment.root / "long", "r" * 4000))
        assert (refused.status_code, refused.json()) == (400, {"error": (
            f"invalid source bundle: manifest id is 4000 bytes; the limit is {MAX_ID_BYTES} bytes (UTF-8)")})
        run_id = upload(http, "reports", _archive_with_id(deployment.root / "at-limit", at_limit)).json()["run_id"]
        view = _status(http, run_id, {"succeeded", "failed"})
        assert view["status"] == "succeeded", view
        [run] = runs_tagged(instance, upload_run_id=run_id)
        assert [r.run_id for r in instance.get_runs(filters=dg.RunsFilter(tags=dict([upload_tag(run_id)])))] == [
            run.run_id] == [view["dagster_run_id"]]
        assert run.tags["dagster/sensor_name"] == SENSOR
        assert all(len(value.encode()) <= MAX_TAG_VALUE_BYTES for value in run.tags.values()), run.tags
        shown = run.tags["distributor/bundle_id"]
        assert shown.endswith("…sha256:" + hashlib.sha256(at_limit.encode()).hexdigest())
        assert at_limit.startswith(shown.split("…sha256:")[0]) and len(shown) > 100
        # every tick of the sensor succeeded or skipped: none failed on the index
        assert {t.status.value for t in sensor_ticks(instance, SENSOR)} <= {"SUCCESS", "SKIPPED"}
        event = instance.get_latest_materialization_event(dg.AssetKey(["reports", "dest1"]))
        assert event is not None and event.asset_materialization is not None
        assert event.asset_materialization.metadata["source_id"].value == at_limit
    state = json.loads((setup.destinations["reports/dest1"] / ".distributor.json").read_text())
    assert state["source"]["manifest"]["id"] == at_limit


def _archive_with_id(root: Path, bundle_id: str) -> bytes:
    bundle_dir(root, bundle_id=bundle_id)
    return tar_of_dir(root)

"""Batched upload runs (issue 28 item 3): one run publishes a batch of uploads in admission order,
each upload's record gets its own outcome and the run's id (one failing upload fails only
itself), and "Re-execute from failure" publishes only the uploads not yet published."""

from __future__ import annotations

import shutil
from datetime import timedelta
from pathlib import Path

import dagster as dg
import pytest

from distributor_core import staging as sg
from distributor_dagster import build_definitions
from tests.dagster.conftest import FROZEN, events_of, make_bundle, write_config
from tests.dagster.reconstruct import reconstructable_job
from tests.dagster.test_upload_sensor import CONFIG, TOKEN, serving, tick, upload

pytestmark = pytest.mark.dagster


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return write_config(tmp_path, CONFIG)


def stage(tmp_path: Path, config: Path, instance: dg.DagsterInstance, bundles: list[tuple[str, int]]) -> list[str]:
    """Uploads admitted by the real server: ``(bundle id, version)`` each, with ``r.md`` naming both."""
    run_ids = []
    with serving(config, instance) as client:
        for index, (bundle_id, version) in enumerate(bundles):
            bundle = make_bundle(tmp_path / "bundles" / str(index), bundle_id, {"r.md": f"{bundle_id} {version}\n"},
                                 created=FROZEN + timedelta(minutes=version))
            response = upload(client, bundle)
            assert response.status_code == 202, response.text
            run_ids.append(response.json()["run_id"])
    return run_ids


def test_a_batch_records_each_upload_and_a_re_execution_publishes_only_the_unfinished_one(
    tmp_path: Path, config: Path, instance: dg.DagsterInstance
) -> None:
    # three versions of one bundle, and between them a bundle with another id, which the
    # destinations (holding reports.daily at their root) refuse
    v0, other, v1, v2 = stage(tmp_path, config, instance,
                              [("reports.daily", 0), ("reports.other", 0), ("reports.daily", 1), ("reports.daily", 2)])
    staging_path = tmp_path / "staging" / "reports.daily"
    (request,) = tick(build_definitions(config, bundles_per_run=5), None, instance).run_requests
    assert request.run_config["resources"]["publish"]["config"]["upload_run_ids"] == [v0, other, v1, v2]
    with dg.execute_job(
        reconstructable_job(config, "publish_reports_daily"), instance, run_config=request.run_config, tags=request.tags
    ) as result:
        assert not result.success
        parent = result.run_id
    records = {run_id: sg.read_record(staging_path, run_id) for run_id in (v0, other, v1, v2)}
    assert {run_id: (r.status, r.dagster_run_id) for run_id, r in records.items()} == {
        v0: ("succeeded", parent), other: ("failed", parent), v1: ("succeeded", parent), v2: ("succeeded", parent)}
    # each record holds its own report: the refused upload's names its own failure only
    assert records[other].error.startswith("2 destination(s) failed: reports.daily/archive [.]: fail_conflict")
    assert [a["status"] for a in records[other].report["actions"]] == ["failed", "failed"]
    for run_id in (v0, v1, v2):
        assert records[run_id].error == ""
        assert [a["status"] for a in records[run_id].report["actions"]] == ["completed", "completed"]
        assert not sg.bundle_dir(staging_path, run_id).exists()
    assert sg.bundle_dir(staging_path, other).is_dir()  # kept for a re-run
    for name in ("archive", "mirror"):  # published in admission order: the last version is there
        assert (tmp_path / "out" / name / "r.md").read_text() == "reports.daily 2\n"

    # the operator clears the destinations for the other bundle, then re-executes from failure
    for name in ("archive", "mirror"):
        shutil.rmtree(tmp_path / "out" / name)
    with dg.execute_job(
        reconstructable_job(config, "publish_reports_daily"), instance,
        reexecution_options=dg.ReexecutionOptions.from_failure(parent, instance),
    ) as rerun:
        assert rerun.success
        started = {e.step_key for e in events_of(rerun, "STEP_START")}
        assert not started & {"reports_daily.discover", "reports_daily.validate"}
        child = rerun.run_id
    # its steps publish and record the one upload not yet published; they pass over the others
    messages = [entry.user_message for entry in instance.all_logs(child)]
    assert f"upload {other}: succeeded" in messages
    for run_id in (v0, v1, v2):
        assert f"upload {run_id}: succeeded" not in messages
        assert f"upload {run_id} was already published (Dagster run {parent})" in messages
    again = {run_id: sg.read_record(staging_path, run_id) for run_id in (v0, other, v1, v2)}
    assert {run_id: (r.status, r.dagster_run_id) for run_id, r in again.items()} == {
        v0: ("succeeded", parent), other: ("succeeded", child), v1: ("succeeded", parent), v2: ("succeeded", parent)}
    for run_id in (v0, v1, v2):  # the finished records are left as they were
        assert again[run_id] == records[run_id]
    assert again[other].error == ""
    assert [a["action"] for a in again[other].report["actions"]] == ["publish_new", "publish_new"]
    for name in ("archive", "mirror"):
        assert (tmp_path / "out" / name / "r.md").read_text() == "reports.other 0\n"
    # the re-execution carries the batch's tags: GET /runs/<id> follows it for every upload
    tags = instance.get_run_by_id(child).tags
    assert tags[f"distributor/upload.{other.removeprefix('reports.daily.')}"] == "reports.daily"


def test_a_batch_passes_over_an_upload_another_run_is_publishing(
    tmp_path: Path, config: Path, instance: dg.DagsterInstance
) -> None:
    first, second = stage(tmp_path, config, instance, [("reports.daily", 0), ("reports.daily", 1)])
    staging_path = tmp_path / "staging" / "reports.daily"
    job = build_definitions(config).resolve_job_def("publish_reports_daily")
    # a run not finished (created, not started) owns the first upload
    busy = instance.create_run_for_job(job, run_config={"resources": {"publish": {"config": {}}}})
    sg.mark_running(staging_path, first, dagster_run_id=busy.run_id)
    result = job.execute_in_process(
        run_config={"resources": {"publish": {"config": {"upload_run_ids": [first, second]}}}}, instance=instance
    )
    assert result.success
    assert (sg.read_record(staging_path, first).status, sg.read_record(staging_path, first).dagster_run_id) == (
        "running", busy.run_id)
    record = sg.read_record(staging_path, second)
    assert (record.status, record.dagster_run_id) == ("succeeded", result.run_id)
    assert (tmp_path / "out" / "archive" / "r.md").read_text() == "reports.daily 1\n"


def test_get_runs_follows_the_batch_run_of_each_upload(
    tmp_path: Path, config: Path, instance: dg.DagsterInstance
) -> None:
    """``GET /runs/<id>`` (the dagster publisher's overlay) finds the batch run by the upload's own
    tag while the run is queued, before the run has written the record."""
    first, second = stage(tmp_path, config, instance, [("reports.daily", 0), ("reports.daily", 1)])
    (request,) = tick(build_definitions(config), None, instance).run_requests
    job = build_definitions(config).resolve_job_def("publish_reports_daily")
    queued = instance.create_run_for_job(job, run_config=request.run_config, tags=request.tags)  # not started
    with serving(config, instance) as client:
        for run_id in (first, second):
            view = client.get(f"/runs/{run_id}", headers={"Authorization": f"Bearer {TOKEN}"}).json()
            assert (view["status"], view["dagster_run_id"]) == ("queued", queued.run_id)


def test_one_upload_of_a_batch_that_cannot_be_published_does_not_stop_the_others(
    tmp_path: Path, config: Path, instance: dg.DagsterInstance
) -> None:
    gone, kept = stage(tmp_path, config, instance, [("reports.daily", 0), ("reports.daily", 1)])
    staging_path = tmp_path / "staging" / "reports.daily"
    shutil.rmtree(sg.bundle_dir(staging_path, gone))  # e.g. removed by the failed-uploads quota
    expired = "reports.daily.20260101T000000Z.0000abcd"
    result = build_definitions(config).resolve_job_def("publish_reports_daily").execute_in_process(
        run_config={"resources": {"publish": {"config": {"upload_run_ids": [expired, gone, kept]}}}},
        instance=instance,
    )
    assert result.success
    messages = [entry.user_message for entry in instance.all_logs(result.run_id)]
    assert f"upload {expired} is not in the staging area of pipeline reports.daily (expired?)" in messages
    record = sg.read_record(staging_path, gone)
    assert (record.status, record.dagster_run_id) == ("failed", result.run_id)
    assert record.error == f"the staged bundle of upload {gone} is gone"
    record = sg.read_record(staging_path, kept)
    assert (record.status, record.dagster_run_id) == ("succeeded", result.run_id)
    assert (tmp_path / "out" / "archive" / "r.md").read_text() == "reports.daily 1\n"

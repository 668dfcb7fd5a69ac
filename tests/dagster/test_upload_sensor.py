"""The upload path in ``--publisher dagster`` mode: the real FastAPI app stages uploads under
uvicorn, ``uploads_<pipeline>`` requests exactly one run per accepted upload (none on the next
tick), and the publish run writes the record's status and report (resolutions D1)."""

from __future__ import annotations

import io
import json
import socket
import tarfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

import dagster as dg
import httpx
import pytest
import uvicorn

from distributor_core import staging as sg
from distributor_core.config import Environment, load_config
from distributor_core.server import create_app
from distributor_dagster import build_definitions
from distributor_dagster.upload_status import DagsterRunLookup
from tests.dagster.conftest import FROZEN, events_of, make_bundle, write_config
from tests.dagster.reconstruct import reconstructable_job

pytestmark = pytest.mark.dagster

TOKEN = "upload-secret"
CONFIG = """\
server:
  http: {bind: "127.0.0.1:0", staging_root: staging, retention: 24h}
upload_tokens:
  - {id: producer, token_env: TEST_UPLOAD_TOKEN, allow_pipelines: [reports.daily]}
pipelines:
  - id: reports.daily
    source: {backend: http_upload}
    destinations:
      - {id: archive, backend: local, path: out/archive}
      - {id: mirror, backend: local, path: out/mirror}
"""


@contextmanager
def serving(config_path: Path, instance: dg.DagsterInstance) -> Iterator[httpx.Client]:
    """The real upload app (dagster publisher) under uvicorn on 127.0.0.1."""
    app = create_app(
        load_config(config_path), env=Environment({"TEST_UPLOAD_TOKEN": TOKEN}), publisher="dagster",
        lookup_dagster_run=DagsterRunLookup(instance),
    )
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.01)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{sock.getsockname()[1]}", timeout=30) as client:
            yield client
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()


def archive(bundle: Path) -> bytes:
    manifest = json.loads((bundle / "manifest.json").read_text())
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
        for name in ["manifest.json", *[f["path"] for f in manifest["files"]]]:
            tar.add(bundle / name, arcname=name, recursive=False)
    return buffer.getvalue()


def upload(client: httpx.Client, bundle: Path) -> httpx.Response:
    return client.post(
        "/v1/pipelines/reports.daily/upload", content=archive(bundle),
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/gzip"},
    )


def tick(defs: dg.Definitions, cursor: str | None, instance: dg.DagsterInstance) -> dg.SensorResult:
    sensor = defs.resolve_sensor_def("uploads_reports_daily")
    return sensor(dg.build_sensor_context(cursor=cursor, instance=instance, definitions=defs))


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return write_config(tmp_path, CONFIG)


def staged_uploads(
    tmp_path: Path, config: Path, instance: dg.DagsterInstance, count: int, *, bundle_id: str | None = None
) -> list[str]:
    """``count`` uploads admitted by the real server; with ``bundle_id`` they are successive
    versions of one bundle (one minute apart), which can replace each other in one destination."""
    run_ids = []
    with serving(config, instance) as client:
        for index in range(count):
            created = FROZEN + timedelta(minutes=index) if bundle_id else None
            bundle = make_bundle(tmp_path / f"bundle{index}", bundle_id or f"reports.b{index}",
                                 {"r.md": f"# {index}\n"}, created=created)
            response = upload(client, bundle)
            assert response.status_code == 202, response.text
            run_ids.append(response.json()["run_id"])
        rejected = client.post("/v1/pipelines/reports.daily/upload", content=b"not a tar",
                               headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/gzip"})
        assert rejected.status_code == 400
    return run_ids


def test_a_tick_requests_runs_of_at_most_bundles_per_run_uploads_and_none_on_the_next_tick(
    tmp_path: Path, config: Path, instance: dg.DagsterInstance
) -> None:
    run_ids = staged_uploads(tmp_path, config, instance, 7)
    defs = build_definitions(config, bundles_per_run=3)
    first = tick(defs, None, instance)
    batches = [run_ids[0:3], run_ids[3:6], run_ids[6:]]
    assert [r.run_key for r in first.run_requests] == [f"{b[0]}..{b[-1]}" for b in batches[:2]] + [run_ids[6]]
    assert [r.run_config for r in first.run_requests] == [
        {"resources": {"publish": {"config": {"upload_run_ids": batch}}}} for batch in batches
    ]
    request = first.run_requests[0]
    # each upload of a batch is named by its own tag (GET /runs/<id> and the UI's tag filter find the run)
    assert request.tags == {
        "distributor/pipeline": "reports.daily",
        "distributor/uploads": "3",
        **{f"distributor/upload.{run_id.removeprefix('reports.daily.')}": "reports.daily" for run_id in batches[0]},
    }
    # a run of one upload also carries the upload run id and bundle id as before
    single = first.run_requests[2]
    assert single.tags["distributor/upload_run_id"] == run_ids[6]
    assert single.tags["distributor/bundle_id"] == "reports.b6"
    # the tick observes the source asset (the staging area): the newest upload's digest
    (observation,) = first.asset_events
    newest = sg.read_record(tmp_path / "staging" / "reports.daily", run_ids[-1])
    assert observation.asset_key == dg.AssetKey(["reports_daily"])
    assert observation.tags["dagster/data_version"] == newest.manifest["digest"]
    assert observation.metadata["newest_upload"].value == run_ids[-1]
    assert observation.metadata["uploads_admitted"].value == 7
    second = tick(defs, first.cursor, instance)
    assert second.run_requests == [] and second.asset_events == []
    assert second.skip_reason is not None and second.skip_reason.skip_message == "no new uploads"

    more = staged_uploads(tmp_path / "later", config, instance, 1)
    third = tick(defs, second.cursor, instance)
    assert [r.run_key for r in third.run_requests] == more
    assert third.run_requests[0].run_config == {"resources": {"publish": {"config": {"upload_run_ids": more}}}}
    assert tick(defs, third.cursor, instance).run_requests == []


def test_the_publish_run_records_its_status_and_report_in_the_upload(
    tmp_path: Path, config: Path, instance: dg.DagsterInstance
) -> None:
    (run_id,) = staged_uploads(tmp_path, config, instance, 1)
    staging_path = tmp_path / "staging" / "reports.daily"
    defs = build_definitions(config)
    (request,) = tick(defs, None, instance).run_requests
    result = defs.resolve_job_def("publish_reports_daily").execute_in_process(
        run_config=request.run_config, tags=request.tags, instance=instance
    )
    assert result.success
    record = sg.read_record(staging_path, run_id)
    assert record.status == "succeeded" and record.error == ""
    assert record.dagster_run_id == result.run_id
    assert record.started_at is not None and record.finished_at is not None
    assert [a["action"] for a in record.report["actions"]] == ["publish_new", "publish_new"]
    assert record.report["actions"][0]["bundle_path"] == ""
    assert not (staging_path / run_id / "bundle").exists()
    for name in ("archive", "mirror"):
        assert (tmp_path / "out" / name / "r.md").read_text() == "# 0\n"
    with serving(config, instance) as client:
        status = client.get(f"/runs/{run_id}", headers={"Authorization": f"Bearer {TOKEN}"}).json()
    assert status["status"] == "succeeded" and status["dagster_run_id"] == result.run_id


def test_a_failed_destination_fails_the_upload_and_keeps_its_bundle_for_a_rerun(
    tmp_path: Path, config: Path, instance: dg.DagsterInstance
) -> None:
    (run_id,) = staged_uploads(tmp_path, config, instance, 1)
    staging_path = tmp_path / "staging" / "reports.daily"
    stray = tmp_path / "out" / "mirror" / "stray.txt"
    stray.parent.mkdir(parents=True)
    stray.write_text("unmanaged\n")
    (request,) = tick(build_definitions(config), None, instance).run_requests
    with dg.execute_job(
        reconstructable_job(config, "publish_reports_daily"), instance, run_config=request.run_config, tags=request.tags
    ) as result:
        assert not result.success
        # the publish executor runs the report after a failed destination: it records the upload's
        # outcome, then the refused destination's blocking check fails it too (no vouching for it)
        assert {e.step_key for e in events_of(result, "STEP_FAILURE")} == {
            "reports_daily.publish_mirror", "reports_daily.report"
        }
        checks = {(e.event_specific_data.asset_key.path[-1], e.event_specific_data.check_name):
                  e.event_specific_data.passed for e in events_of(result, "ASSET_CHECK_EVALUATION")}
        assert checks[("mirror", "no_unmanaged_content")] is False and checks[("archive", "state_valid")] is True
        failed_run = result.run_id
    record = sg.read_record(staging_path, run_id)
    assert record.status == "failed" and record.dagster_run_id == failed_run
    assert record.error.startswith("1 destination(s) failed: reports.daily/mirror [.]: fail_unmanaged")
    assert [a["status"] for a in record.report["actions"]] == ["completed", "failed"]
    assert (staging_path / run_id / "bundle" / "r.md").is_file()
    assert (tmp_path / "out" / "archive" / "r.md").is_file()

    stray.unlink()
    # "Re-execute from failure": the failed publish step publishes again, then report and the checks
    with dg.execute_job(
        reconstructable_job(config, "publish_reports_daily"), instance,
        reexecution_options=dg.ReexecutionOptions.from_failure(failed_run, instance),
    ) as rerun:
        assert rerun.success
        started = {e.step_key for e in events_of(rerun, "STEP_START")}
        assert {"reports_daily.publish_mirror", "reports_daily.report"} <= started
        assert not started & {"reports_daily.discover", "reports_daily.validate", "reports_daily.publish_archive"}
        assert instance.get_run_by_id(rerun.run_id).tags["distributor/upload_run_id"] == run_id
    record = sg.read_record(staging_path, run_id)
    assert record.status == "succeeded" and record.error == "" and record.dagster_run_id == rerun.run_id
    # archive's entry comes from the parent run, mirror's from the re-execution
    assert [a["action"] for a in record.report["actions"]] == ["publish_new", "publish_new"]
    assert (tmp_path / "out" / "mirror" / "r.md").read_text() == "# 0\n"
    assert not (staging_path / run_id / "bundle").exists()
    # a succeeded upload is never published again: a batch passes it over, a run naming it alone
    # (the launchpad's upload_run_id) is refused
    job = build_definitions(config).resolve_job_def("publish_reports_daily")
    batch = job.execute_in_process(run_config=request.run_config, instance=instance)
    assert batch.success and events_of(batch, "ASSET_MATERIALIZATION") == []
    assert sg.read_record(staging_path, run_id).dagster_run_id == rerun.run_id
    again = job.execute_in_process(
        run_config={"resources": {"publish": {"config": {"upload_run_id": run_id}}}}, instance=instance,
        raise_on_error=False,
    )
    assert not again.success
    error = events_of(again, "STEP_FAILURE")[0].event_specific_data.error.message
    assert f"upload {run_id} was already published" in error
    both = job.execute_in_process(
        run_config={"resources": {"publish": {"config": {"upload_run_id": run_id, "upload_run_ids": [run_id]}}}},
        instance=instance, raise_on_error=False,
    )
    error = events_of(both, "STEP_FAILURE")[0].event_specific_data.error.message
    assert "set upload_run_id (one upload) or upload_run_ids (a batch)" in error


def test_a_dry_run_of_an_upload_leaves_its_record_alone(
    tmp_path: Path, config: Path, instance: dg.DagsterInstance
) -> None:
    (run_id,) = staged_uploads(tmp_path, config, instance, 1)
    staging_path = tmp_path / "staging" / "reports.daily"
    before = (staging_path / run_id / "upload.json").read_bytes()
    result = build_definitions(config).resolve_job_def("publish_reports_daily").execute_in_process(
        run_config={"resources": {"publish": {"config": {"upload_run_id": run_id, "dry_run": True}}}},
        instance=instance,
    )
    assert result.success
    assert (staging_path / run_id / "upload.json").read_bytes() == before
    assert not (tmp_path / "out").exists()


def test_an_upload_launched_by_hand_is_tagged_and_linked_and_materialize_publishes_the_waiting_ones(
    tmp_path: Path, config: Path, instance: dg.DagsterInstance
) -> None:
    """Issue 24 item 6: Materialize (a run without ``upload_run_id``) publishes the uploads still
    waiting, in admission order, each recorded with its outcome and the run; with none waiting it
    publishes nothing and succeeds. A run named after an upload publishes that one."""
    first, second = staged_uploads(tmp_path, config, instance, 2, bundle_id="reports.daily")
    defs = build_definitions(config)
    job = defs.resolve_job_def("publish_reports_daily")
    staging_path = tmp_path / "staging" / "reports.daily"

    # launched by hand (no sensor tags) for one upload: the run tags itself and the record links it
    result = job.execute_in_process(
        run_config={"resources": {"publish": {"config": {"upload_run_id": first}}}}, instance=instance
    )
    assert result.success
    tags = instance.get_run_by_id(result.run_id).tags
    assert tags["distributor/upload_run_id"] == first and tags["distributor/pipeline"] == "reports.daily"
    record = sg.read_record(staging_path, first)
    assert record.dagster_run_id == result.run_id and record.status == "succeeded"
    found = instance.get_run_records(dg.RunsFilter(tags={"distributor/upload_run_id": first}))
    assert [r.dagster_run.run_id for r in found] == [result.run_id]
    assert sg.read_record(staging_path, second).status == "accepted"

    waiting = job.execute_in_process(instance=instance)  # Materialize: no launchpad, no upload id
    assert waiting.success
    record = sg.read_record(staging_path, second)
    assert record.status == "succeeded" and record.dagster_run_id == waiting.run_id
    assert (tmp_path / "out" / "mirror" / "r.md").read_text() == "# 1\n"
    assert sg.read_record(staging_path, first).dagster_run_id == result.run_id  # untouched

    nothing = job.execute_in_process(instance=instance)
    assert nothing.success
    assert [e for e in events_of(nothing, "ASSET_MATERIALIZATION")] == []


def test_a_finished_upload_record_never_carries_host_paths(
    tmp_path: Path, config: Path, instance: dg.DagsterInstance
) -> None:
    from distributor_dagster.publish import uploads

    (run_id,) = staged_uploads(tmp_path, config, instance, 1)
    loaded = load_config(config)
    pipeline = loaded.pipeline("reports.daily")
    mirror = pipeline.destination("mirror").storage.resolved_path
    uploads.mark_finished(
        loaded, pipeline, run_id, "dagster-run-1", error=f"cannot write {mirror}/r.md: disk full"
    )
    record = sg.read_record(tmp_path / "staging" / "reports.daily", run_id)
    assert record.status == "failed"
    # an operator's text stays in the run's log; the record keeps what a producer may read (issue 35)
    assert record.error == "failed: the publication failed (the server's log has the details)"
    assert str(tmp_path).encode() not in sg.record_bytes(record)

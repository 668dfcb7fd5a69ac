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
from tests.dagster.conftest import events_of, make_bundle, write_config
from tests.dagster.reconstruct import job_from_environment

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


def staged_uploads(tmp_path: Path, config: Path, instance: dg.DagsterInstance, count: int) -> list[str]:
    run_ids = []
    with serving(config, instance) as client:
        for index in range(count):
            bundle = make_bundle(tmp_path / f"bundle{index}", f"reports.b{index}", {"r.md": f"# {index}\n"})
            response = upload(client, bundle)
            assert response.status_code == 202, response.text
            run_ids.append(response.json()["run_id"])
        rejected = client.post("/v1/pipelines/reports.daily/upload", content=b"not a tar",
                               headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/gzip"})
        assert rejected.status_code == 400
    return run_ids


def test_one_run_per_accepted_upload_and_none_on_the_next_tick(
    tmp_path: Path, config: Path, instance: dg.DagsterInstance
) -> None:
    run_ids = staged_uploads(tmp_path, config, instance, 3)
    defs = build_definitions(config)
    first = tick(defs, None, instance)
    assert [r.run_key for r in first.run_requests] == run_ids
    request = first.run_requests[0]
    assert request.run_config == {"ops": {"discover": {"config": {"upload_run_id": run_ids[0]}}}}
    assert request.tags == {
        "distributor/upload_run_id": run_ids[0],
        "distributor/pipeline": "reports.daily",
        "distributor/bundle_id": "reports.b0",
    }
    second = tick(defs, first.cursor, instance)
    assert second.run_requests == []
    assert second.skip_reason is not None and second.skip_reason.skip_message == "no new uploads"

    more = staged_uploads(tmp_path / "later", config, instance, 1)
    third = tick(defs, second.cursor, instance)
    assert [r.run_key for r in third.run_requests] == more
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
    tmp_path: Path, config: Path, instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    (run_id,) = staged_uploads(tmp_path, config, instance, 1)
    staging_path = tmp_path / "staging" / "reports.daily"
    stray = tmp_path / "out" / "mirror" / "stray.txt"
    stray.parent.mkdir(parents=True)
    stray.write_text("unmanaged\n")
    monkeypatch.setenv("DISTRIBUTOR_CONFIG", str(config))
    monkeypatch.setenv("DISTRIBUTOR_TEST_JOB", "publish_reports_daily")
    (request,) = tick(build_definitions(config), None, instance).run_requests
    with dg.execute_job(
        dg.reconstructable(job_from_environment), instance, run_config=request.run_config, tags=request.tags
    ) as result:
        assert not result.success
        assert {e.step_key for e in events_of(result, "STEP_FAILURE")} == {"execute_mirror"}
        assert "report" in {e.step_key for e in events_of(result, "STEP_SUCCESS")}
        failed_run = result.run_id
    record = sg.read_record(staging_path, run_id)
    assert record.status == "failed" and record.dagster_run_id == failed_run
    assert record.error.startswith("1 destination(s) failed: reports.daily/mirror [.]: fail_unmanaged")
    assert [a["status"] for a in record.report["actions"]] == ["completed", "failed"]
    assert (staging_path / run_id / "bundle" / "r.md").is_file()
    assert (tmp_path / "out" / "archive" / "r.md").is_file()

    stray.unlink()
    with dg.execute_job(
        dg.reconstructable(job_from_environment), instance, run_config=request.run_config, tags=request.tags
    ) as rerun:
        assert rerun.success
    record = sg.read_record(staging_path, run_id)
    assert record.status == "succeeded" and record.error == ""
    assert [a["action"] for a in record.report["actions"]] == ["skip_same", "publish_new"]
    assert not (staging_path / run_id / "bundle").exists()
    # a succeeded upload is never published again
    again = build_definitions(config).resolve_job_def("publish_reports_daily").execute_in_process(
        run_config=request.run_config, instance=instance, raise_on_error=False
    )
    assert not again.success
    error = events_of(again, "STEP_FAILURE")[0].event_specific_data.error.message
    assert f"upload {run_id} was already published" in error


def test_a_dry_run_of_an_upload_leaves_its_record_alone(
    tmp_path: Path, config: Path, instance: dg.DagsterInstance
) -> None:
    (run_id,) = staged_uploads(tmp_path, config, instance, 1)
    staging_path = tmp_path / "staging" / "reports.daily"
    before = (staging_path / run_id / "upload.json").read_bytes()
    result = build_definitions(config).resolve_job_def("publish_reports_daily").execute_in_process(
        run_config={"ops": {"discover": {"config": {"upload_run_id": run_id, "dry_run": True}}}}, instance=instance
    )
    assert result.success
    assert (staging_path / run_id / "upload.json").read_bytes() == before
    assert not (tmp_path / "out").exists()


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
    assert record.error == "cannot write <destination mirror>/r.md: disk full"
    assert str(tmp_path) not in json.dumps(record.to_dict())

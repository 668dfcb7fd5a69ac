"""One unreadable upload record stops nothing (issue 35, item 3), through uvicorn and the Python
client. With one garbage record in the shared S3 staging store a replica's queue counts stopped
updating (a warning every 2 s), uploads got ``503`` although nothing was waiting, and ``serve``
refused to start (``upload record is not valid JSON...``) without naming the record. Now the first
reader sets it aside (``quarantine/<run id>.json``; locally ``.quarantine/<run id>/``), names it in
the log and in ``/healthz`` (``quarantined_records``), and everything else keeps working."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from distributor_core.lease import LeaseRecord, RecordState
from distributor_core.staging.ordering import marker_name
from distributor_core.upload import UploadClient
from tests.peers.moto import MotoServer
from tests.server.harness import TOKEN, bundle_archive, serve_setup, upload, wait_status, write_setup
from tests.server.shared import STAGING_PREFIX, write_shared_setup

BAD = "reports.20260101T000000Z.0badf00d"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _publishes_past_the_queue_size(server, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """More uploads than ``queue_size`` (2), one after another: each is admitted and published."""
    with server.client() as http, UploadClient(server.url, TOKEN) as client:
        assert http.get("/healthz").json() == {"status": "ok", "quarantined_records": 1}
        for _ in range(3):
            answer = upload(http, "reports", bundle_archive(tmp_path))
            assert answer.status_code == 202, answer.text
            assert wait_status(http, answer.json()["run_id"], {"succeeded", "failed"})["status"] == "succeeded"
        assert http.get(f"/runs/{BAD}", headers=AUTH).json() == {"error": "run not found"}
        assert client.status(answer.json()["run_id"]).status == "succeeded"


def test_a_garbage_record_in_the_bucket_is_set_aside_and_everything_else_works(
    tmp_path: Path, moto_serial_server: MotoServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="distributor")
    setup = write_shared_setup(tmp_path / "site", moto_serial_server, http={"queue_size": 2})
    marker = LeaseRecord(state=RecordState.FREE, epoch="0badcafe", generation=1).to_bytes()
    s3 = moto_serial_server.client()
    try:
        s3.put_object(Bucket=setup.bucket, Key=f"{STAGING_PREFIX}/reports/records/{BAD}.json", Body=b"{not json\n")
        s3.put_object(Bucket=setup.bucket, Key=f"{STAGING_PREFIX}/reports/pending/{marker_name(1, BAD)}",
                      Body=marker)
    finally:
        s3.close()
    with serve_setup(setup) as server:  # it starts, one bad record or not
        _publishes_past_the_queue_size(server, tmp_path)
    objects = setup.staging_objects()
    assert f"quarantine/{BAD}.json" in objects and f"records/{BAD}.json" not in objects
    assert f"quarantined upload record {BAD} of pipeline reports (moved to quarantine/{BAD}.json): upload " \
           "record is not valid JSON" in caplog.text
    assert "listing the staging store's queue failed" not in caplog.text


def test_a_garbage_record_in_a_staging_directory_is_set_aside_at_start(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="distributor")
    setup = write_setup(tmp_path / "site", http={"queue_size": 2})
    staging = setup.staging("reports")
    (staging / BAD).mkdir(parents=True)
    (staging / BAD / "upload.json").write_text('{"schema_version": 1, "run_id": 7}\n')
    with serve_setup(setup) as server:
        _publishes_past_the_queue_size(server, tmp_path)
    assert not (staging / BAD).exists()
    assert (staging / ".quarantine" / BAD / "upload.json").read_text() == '{"schema_version": 1, "run_id": 7}\n'
    assert f"quarantined upload record {BAD} of pipeline reports (moved to {staging / '.quarantine' / BAD})" \
        in caplog.text

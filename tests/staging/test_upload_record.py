"""``<run id>/upload.json`` reads back as written (issue 27 item 1): the same record, the same
bytes after a read/write round trip, and a malformed record refused naming the field."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from distributor_core import staging as sg

RUN_ID = "reports.20260603T120000Z.0000abcd"
AT = datetime(2026, 6, 3, 12, 0, tzinfo=UTC)


def _written(area: Path) -> Path:
    (area / RUN_ID / sg.BUNDLE_DIR).mkdir(parents=True, exist_ok=True)
    record = sg.UploadRecord(
        run_id=RUN_ID, seq=7, pipeline_id="reports", token_id="reporter", idempotency_key="key-1",
        manifest={"schema_version": 1, "id": "reports.daily", "files": [{"path": "a.txt", "size": 3}]},
        response={"run_id": RUN_ID, "status_url": f"/runs/{RUN_ID}"}, status=sg.FAILED, accepted_at=AT,
        started_at=AT.replace(minute=1), finished_at=AT.replace(minute=2), error="disk full",
        dagster_run_id="d-1", report={"summary": {"failed": 1}},
    )
    sg.write_record(area, record, durable=False)
    assert sg.read_record(area, RUN_ID) == record
    assert sg.read_record(area, RUN_ID).report == record.report
    return area / RUN_ID / sg.RECORD_NAME


def test_a_written_record_reads_back_equal_and_rewrites_to_the_same_bytes(tmp_path: Path) -> None:
    path = _written(tmp_path)
    before = path.read_bytes()
    document = json.loads(before)
    assert list(document)[:3] == ["schema_version", "run_id", "seq"]
    assert document["accepted_at"] == "2026-06-03T12:00:00Z"
    assert document["status"] == "failed"
    sg.write_record(tmp_path, sg.read_record(tmp_path, RUN_ID), durable=False)
    assert path.read_bytes() == before
    assert sg.record_bytes(sg.parse_record(before)) == before


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"seq": "7"}, "upload record seq must be a positive integer"),
        ({"seq": 0}, "upload record seq must be a positive integer"),
        ({"status": "paused"}, "upload record status 'paused' is not known"),
        ({"run_id": None}, "upload record run_id must be a string"),
        ({"schema_version": 2}, "upload record schema_version must be 1"),
        ({"accepted_at": "yesterday"}, "upload record is malformed: .*yesterday"),
    ],
)
def test_a_malformed_record_is_refused_naming_the_field(tmp_path: Path, change: dict, message: str) -> None:
    path = _written(tmp_path)
    document = json.loads(path.read_bytes())
    document.update(change)
    path.write_text(json.dumps(document))
    with pytest.raises(sg.RecordError, match=message):
        sg.read_record(tmp_path, RUN_ID)


def test_a_record_without_a_run_id_is_refused_naming_it(tmp_path: Path) -> None:
    path = _written(tmp_path)
    document = json.loads(path.read_bytes())
    del document["run_id"]
    path.write_text(json.dumps(document))
    with pytest.raises(sg.RecordError, match="upload record is malformed: 'run_id'"):
        sg.read_record(tmp_path, RUN_ID)

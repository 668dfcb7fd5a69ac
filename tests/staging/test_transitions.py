"""The upload status table (issue 16 item 2): every status change written to ``upload.json`` is one
the table lists; every other pair is refused and leaves the record as it was."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime
from pathlib import Path

import pytest

from distributor_core import staging as sg
from distributor_core.staging import TRANSITIONS, UploadStatus

RUN_ID = "reports.20260603T120000Z.0000abcd"
AT = datetime(2026, 6, 3, 12, 0, tzinfo=UTC)


def _record(area: Path, status: UploadStatus) -> sg.UploadRecord:
    (area / RUN_ID / sg.BUNDLE_DIR).mkdir(parents=True, exist_ok=True)
    record = sg.UploadRecord(
        run_id=RUN_ID, seq=1, pipeline_id="reports", token_id="reporter", idempotency_key="k",
        manifest={"id": "reports.daily"}, response={"run_id": RUN_ID}, status=status, accepted_at=AT,
    )
    sg.write_record(area, record, durable=False)
    return record


def test_the_table_covers_every_status_and_finished_uploads_never_change() -> None:
    sources = {source for source, _ in TRANSITIONS}
    targets = {target for _, target in TRANSITIONS}
    assert sources == set(UploadStatus) - {UploadStatus.SUCCEEDED}
    assert targets == set(UploadStatus)
    assert not [pair for pair in TRANSITIONS if pair[0] == UploadStatus.SUCCEEDED]
    assert all(isinstance(event, str) and event for event in TRANSITIONS.values())


@pytest.mark.parametrize(("current", "new"), list(itertools.product(UploadStatus, UploadStatus)),
                         ids=lambda s: str(s))
def test_every_pair_is_allowed_exactly_when_the_table_lists_it(tmp_path: Path, current: UploadStatus,
                                                                new: UploadStatus) -> None:
    _record(tmp_path, current)
    before = (tmp_path / RUN_ID / sg.RECORD_NAME).read_bytes()
    if (current, new) in TRANSITIONS:
        assert sg.check_transition(RUN_ID, current, new) == TRANSITIONS[(current, new)]
        assert sg.transition(tmp_path, RUN_ID, status=new).status == new
        assert sg.read_record(tmp_path, RUN_ID).status == new
    else:
        with pytest.raises(sg.StatusTransitionError, match=f"cannot change from {current} to {new}"):
            sg.transition(tmp_path, RUN_ID, status=new)
        assert (tmp_path / RUN_ID / sg.RECORD_NAME).read_bytes() == before


@pytest.mark.parametrize(
    ("operation", "allowed_from"),
    [
        (lambda area: sg.mark_queued(area, RUN_ID), {"accepted", "running"}),
        (lambda area: sg.mark_running(area, RUN_ID), {"accepted", "queued", "running", "failed"}),
        (lambda area: sg.hand_back(area, RUN_ID), {"queued", "running"}),
        (lambda area: sg.mark_finished(area, RUN_ID, error="boom"), {"accepted", "queued", "running", "failed"}),
        (lambda area: sg.mark_finished(area, RUN_ID), {"running", "failed"}),
    ],
    ids=["mark_queued", "mark_running", "hand_back", "mark_finished failed", "mark_finished succeeded"],
)
def test_named_operations_follow_the_table(tmp_path: Path, operation: object, allowed_from: set[str]) -> None:
    for status in UploadStatus:
        area = tmp_path / str(status)
        _record(area, status)
        if status in allowed_from:
            operation(area)  # type: ignore[operator]
        else:
            with pytest.raises(sg.StatusTransitionError):
                operation(area)  # type: ignore[operator]
            assert sg.read_record(area, RUN_ID).status == status


def test_re_execution_of_a_failed_run_updates_the_same_record(tmp_path: Path) -> None:
    _record(tmp_path, UploadStatus.RUNNING)
    failed = sg.mark_finished(tmp_path, RUN_ID, error=sg.PublicText("destination locked"), dagster_run_id="run-1")
    assert (failed.status, failed.error) == ("failed", "destination locked")
    assert sg.bundle_dir(tmp_path, RUN_ID).is_dir()  # a failed upload keeps its bundle
    again = sg.mark_running(tmp_path, RUN_ID, dagster_run_id="run-2")
    assert (again.status, again.error, again.finished_at) == ("running", "", None)
    done = sg.mark_finished(tmp_path, RUN_ID, dagster_run_id="run-2")
    assert (done.run_id, done.seq, done.status, done.dagster_run_id) == (RUN_ID, 1, "succeeded", "run-2")
    assert not sg.bundle_dir(tmp_path, RUN_ID).exists()
    assert [r.run_id for r in sg.list_records(tmp_path)] == [RUN_ID]
    with pytest.raises(sg.StatusTransitionError):
        sg.mark_running(tmp_path, RUN_ID, dagster_run_id="run-3")  # a succeeded upload is never published again

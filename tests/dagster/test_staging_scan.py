"""The upload sensor's scan of the staging area: what it requests and where the cursor goes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from distributor_core import staging as sg
from distributor_core.staging.accepted import UploadCursor, batches, scan_staging
from tests.dagster.conftest import add_record

pytestmark = pytest.mark.dagster

T0 = datetime(2026, 6, 1, 12, 0, 0, tzinfo=UTC)


def at(seconds: int) -> datetime:
    return T0 + timedelta(seconds=seconds)


@pytest.fixture
def area(tmp_path: Path) -> Path:
    path = tmp_path / "reports.daily"
    path.mkdir()
    return path


def test_only_accepted_records_are_requested_in_seq_order(area: Path) -> None:
    done = add_record(area, 1, at(1), "succeeded")
    mine = add_record(area, 2, at(2), "running", dagster_run_id="abc")
    first = add_record(area, 3, at(3), "accepted")
    second = add_record(area, 4, at(3), "accepted")
    scan = scan_staging(area, UploadCursor(), max_requests=10)
    assert [r.run_id for r in scan.pending] == [first, second]
    assert (scan.cursor.seq, scan.cursor.stamp) == (4, "20260601T120003Z")
    assert done and mine
    again = scan_staging(area, scan.cursor, max_requests=10)
    assert again.idle and again.pending == [] and again.read == 0


def test_records_older_than_the_window_are_not_read(area: Path) -> None:
    add_record(area, 1, at(0), "accepted")
    cursor = scan_staging(area, UploadCursor(), max_requests=10).cursor
    assert cursor.seq == 1
    for seq in range(2, 6):
        add_record(area, seq, at(3600 + seq), "succeeded")
    add_record(area, 6, at(7200), "accepted")
    middle = scan_staging(area, cursor, max_requests=10)
    assert [r.seq for r in middle.pending] == [6] and middle.read == 6
    add_record(area, 7, at(7300), "accepted")
    late = scan_staging(area, middle.cursor, max_requests=10)
    assert [r.seq for r in late.pending] == [7]
    assert late.read == 2  # seq 6 and 7: inside the 5-minute window of the cursor's stamp


def test_the_request_bound_resumes_on_the_next_tick(area: Path) -> None:
    ids = [add_record(area, seq, at(seq), "accepted") for seq in range(1, 6)]
    first = scan_staging(area, UploadCursor(), max_requests=2)
    second = scan_staging(area, first.cursor, max_requests=2)
    third = scan_staging(area, second.cursor, max_requests=2)
    assert [r.run_id for r in first.pending + second.pending + third.pending] == ids
    assert scan_staging(area, third.cursor, max_requests=2).idle


def test_an_exhausted_read_budget_continues_after_the_last_name_read(area: Path) -> None:
    ids = [add_record(area, seq, at(seq), "accepted") for seq in range(1, 8)]
    ticks = iter(range(100))

    def clock() -> float:  # each record read costs one "second"
        return float(next(ticks))

    first = scan_staging(area, UploadCursor(), max_requests=10, budget=2.5, clock=clock)
    assert first.partial and first.cursor.resume == ids[2]  # the first name is read before the clock is
    requested = [r.run_id for r in first.pending]
    cursor = first.cursor
    while cursor.resume:
        scan = scan_staging(area, cursor, max_requests=10, budget=2.5, clock=clock)
        requested += [r.run_id for r in scan.pending]
        cursor = scan.cursor
    assert requested == ids
    assert cursor.seq == 7


def test_a_listing_that_alone_outlasts_the_budget_still_moves_the_cursor(area: Path) -> None:
    """On a loaded host listing a large staging area can take longer than the whole budget: each
    tick must still read a name and resume after it, or every tick would start over forever."""
    ids = [add_record(area, seq, at(seq), "accepted") for seq in range(1, 5)]
    ticks = iter(range(0, 1000, 10))

    def clock() -> float:  # every look at the clock is past the previous deadline
        return float(next(ticks))

    requested: list[str] = []
    cursor = UploadCursor()
    for _ in range(len(ids) + 1):
        scan = scan_staging(area, cursor, max_requests=10, budget=1.0, clock=clock)
        assert scan.read == 1
        requested += [r.run_id for r in scan.pending]
        cursor = scan.cursor
        if not cursor.resume:
            break
    assert requested == ids
    assert cursor.seq == 4 and not cursor.resume


def test_records_of_the_inline_publisher_hold_the_cursor_until_handed_over(area: Path) -> None:
    add_record(area, 1, at(1), "succeeded")
    inline = add_record(area, 2, at(2), "queued")
    later = add_record(area, 3, at(3), "accepted")
    scan = scan_staging(area, UploadCursor(), max_requests=10)
    assert [r.run_id for r in scan.pending] == [later]
    assert scan.cursor.seq == 1

    # serve restarts with --publisher dagster: the queued record is handed back as accepted
    sg.transition(area, inline, status=sg.ACCEPTED)
    handed = scan_staging(area, scan.cursor, max_requests=10)
    assert [r.run_id for r in handed.pending] == [inline, later]  # the repeat has the same run key
    assert handed.cursor.seq == 3


def _runs(area: Path, cursor: UploadCursor, size: int) -> tuple[list[list[str]], UploadCursor]:
    scan = scan_staging(area, cursor, max_requests=100)
    runs, after = batches(scan.pending, cursor, scan.cursor, size)
    return [[record.run_id for record in run] for run in runs], UploadCursor.parse(after.format())


def test_uploads_the_cursor_passes_go_in_batches_of_the_bound_in_order(area: Path) -> None:
    ids = [add_record(area, seq, at(seq), "accepted") for seq in range(1, 8)]
    runs, cursor = _runs(area, UploadCursor(), 3)
    assert runs == [ids[0:3], ids[3:6], ids[6:]]
    assert cursor.seq == 7 and cursor.single == 0
    assert _runs(area, cursor, 3)[0] == []


def test_uploads_after_one_the_inline_publisher_holds_are_each_requested_alone_until_passed(area: Path) -> None:
    """Offered again by every tick until the held record is handed over, they keep runs of their
    own (run key: the upload run id), so Dagster launches each once; a batch never repeats one."""
    first = add_record(area, 1, at(1), "accepted")
    inline = add_record(area, 2, at(2), "queued")
    later = [add_record(area, seq, at(seq), "accepted") for seq in (3, 4)]
    runs, cursor = _runs(area, UploadCursor(), 5)
    assert runs == [[first], [later[0]], [later[1]]]
    assert (cursor.seq, cursor.single) == (1, 4)
    runs, cursor = _runs(area, cursor, 5)  # still held: the same single requests again
    assert runs == [[later[0]], [later[1]]]

    sg.transition(area, inline, status=sg.ACCEPTED)  # serve restarts with --publisher dagster
    newer = [add_record(area, seq, at(seq), "accepted") for seq in (5, 6)]
    runs, cursor = _runs(area, cursor, 5)
    assert runs == [[inline], [later[0]], [later[1]], newer]
    assert (cursor.seq, cursor.single) == (6, 0)

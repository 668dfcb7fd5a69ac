"""Finding the uploads a tick must request, cheaply (resolutions D1).

The server admits an upload under a per-pipeline lock: it takes the time, builds the run id
``<pipeline>.<YYYYMMDDTHHMMSSZ>.<hex>`` from it, issues the next ``seq`` (recorded in ``.seq``) and
renames the record into place. So run id stamps follow ``seq`` order, and a record never becomes
visible after a record with a higher ``seq``.

The cursor holds the highest ``seq`` handled and the stamp of its run id. A tick:

1. reads ``.seq``; when it is not above the cursor, nothing was admitted and the tick ends;
2. lists record directory names (no file reads) and keeps those whose stamp is at most
   :data:`STAMP_MARGIN` older than the cursor's stamp (older ones were handled by earlier ticks;
   the margin absorbs clock adjustments between admissions);
3. reads those records in stamp order, within a time budget, and requests the ``accepted`` ones
   above the cursor's ``seq`` in ``seq`` order (``queued`` records belong to the inline publisher).

When the budget runs out (a first tick over a large staging area), the cursor also remembers the
last name read and the next tick continues after it, so every tick stays short.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path

from distributor_core import staging
from distributor_dagster.sources import Seen, SourceSnapshot, seen_upload

CURSOR_VERSION = 1
#: Records whose run id stamp is this much older than the cursor's are not read again.
STAMP_MARGIN = timedelta(minutes=5)
#: Seconds a tick may spend listing and reading records before it continues on the next tick.
READ_BUDGET = 0.4
_STAMP_FORMAT = "%Y%m%dT%H%M%SZ"


@dataclass(frozen=True)
class UploadCursor:
    """``seq``/``stamp``: the last record handled; ``resume``: the last name read by a tick that
    ran out of time (empty when the previous scan completed); ``single``: the highest ``seq``
    requested in a run of its own because a record the inline publisher owns held the cursor
    before it (0: none), so the next ticks request it under the same run key again."""

    seq: int = 0
    stamp: str = ""
    resume: str = ""
    single: int = 0

    @classmethod
    def parse(cls, text: str | None) -> UploadCursor:
        if not text:
            return cls()
        try:
            data = json.loads(text)
            if data.get("v") != CURSOR_VERSION:
                return cls()
            return cls(int(data.get("seq", 0)), str(data.get("stamp", "")), str(data.get("resume", "")),
                       int(data.get("single", 0)))
        except (ValueError, TypeError, AttributeError):
            return cls()

    def format(self) -> str:
        data: dict[str, object] = {"v": CURSOR_VERSION, "seq": self.seq, "stamp": self.stamp}
        if self.resume:
            data["resume"] = self.resume
        if self.single:
            data["single"] = self.single
        return json.dumps(data, separators=(",", ":"))


def run_id_stamp(run_id: str) -> str:
    """The ``YYYYMMDDTHHMMSSZ`` of a run id (``<pipeline>.<stamp>.<8 hex>``), ``""`` for other names."""
    if not staging.is_run_id(run_id):
        return ""
    return run_id[-25:-9]


def _sort_key(run_id: str) -> tuple[str, str]:
    # names come from staging.iter_run_ids, which only yields valid run ids
    return (run_id[-25:-9], run_id)


def window_start(stamp: str) -> str:
    """The oldest run id stamp a tick still reads (stamps sort as text)."""
    if not stamp:
        return ""
    try:
        moment = datetime.strptime(stamp, _STAMP_FORMAT) - STAMP_MARGIN
    except ValueError:
        return ""
    return moment.strftime(_STAMP_FORMAT)


def issued_seq(staging_path: Path) -> int | None:
    """The highest ``seq`` the server ever issued for this staging path (``None`` when unknown)."""
    try:
        return int((staging_path / staging.SEQ_NAME).read_text(encoding="ascii").strip())
    except (OSError, ValueError):
        return None


@dataclass
class UploadScan:
    pending: list[staging.UploadRecord] = field(default_factory=list)
    cursor: UploadCursor = field(default_factory=UploadCursor)
    read: int = 0
    errors: list[tuple[str, str]] = field(default_factory=list)
    #: ``.seq`` showed nothing new: no name was listed, no record read
    idle: bool = False
    #: the read budget ran out; the next tick continues after ``cursor.resume``
    partial: bool = False


def inline_owned(record: staging.UploadRecord) -> bool:
    """Queued or running under the inline publisher (not a Dagster run). When ``serve`` restarts
    with ``--publisher dagster`` it hands such records back as ``accepted``, so the cursor must not
    pass them: it stays before the first one, and later records are offered again (their run keys
    make Dagster skip the repeats)."""
    return record.status == staging.QUEUED or (record.status == staging.RUNNING and not record.dagster_run_id)


def _candidates(staging_path: Path, cursor: UploadCursor) -> list[str]:
    names = staging.iter_run_ids(staging_path)
    if cursor.resume:
        after = _sort_key(cursor.resume)
        chosen = [name for name in names if _sort_key(name) > after]
    else:
        since = window_start(cursor.stamp)
        chosen = [name for name in names if name[-25:-9] >= since]
    chosen.sort(key=_sort_key)
    return chosen


def scan_staging(
    staging_path: Path,
    cursor: UploadCursor,
    *,
    max_requests: int,
    budget: float = READ_BUDGET,
    clock: Callable[[], float] = time.monotonic,
) -> UploadScan:
    """``accepted`` records admitted after ``cursor``, in ``seq`` order (at most ``max_requests``),
    and the cursor after them. Records that are running in Dagster or finished are passed over;
    records the inline publisher owns hold the cursor (:func:`inline_owned`)."""
    deadline = clock() + budget  # listing the names counts against the budget too
    if not cursor.resume:
        issued = issued_seq(staging_path)
        if issued is not None and issued <= cursor.seq:
            return UploadScan(cursor=cursor, idle=True)
    scan = UploadScan(cursor=cursor)
    records: list[staging.UploadRecord] = []
    last_read = ""
    for run_id in _candidates(staging_path, cursor):
        # at least one name is read per tick, so a listing that alone outlasts the budget (a large
        # staging area on a loaded host) still moves the cursor instead of starting over each tick
        if last_read and clock() > deadline:
            scan.partial = True
            break
        last_read = run_id
        try:
            record = staging.read_record(staging_path, run_id)
        except FileNotFoundError:
            continue  # expired, or being promoted: a later tick sees it
        except (OSError, staging.RecordError) as exc:
            scan.errors.append((run_id, str(exc)))
            continue
        scan.read += 1
        if record.seq > cursor.seq:
            records.append(record)
    records.sort(key=lambda r: (r.seq, r.run_id))
    seq, stamp = cursor.seq, cursor.stamp
    full = held = False
    for record in records:
        if record.status == staging.ACCEPTED:
            if len(scan.pending) >= max_requests:
                full = True
                break
            scan.pending.append(record)
        elif inline_owned(record):
            held = True
        if not held:
            seq, stamp = record.seq, run_id_stamp(record.run_id)
    resume = last_read if scan.partial and not full else ""
    scan.cursor = UploadCursor(seq, stamp, resume, cursor.single)
    return scan


def batches(
    pending: Sequence[staging.UploadRecord], before: UploadCursor, after: UploadCursor, size: int
) -> tuple[list[list[staging.UploadRecord]], UploadCursor]:
    """``pending`` (``seq`` order) cut into the runs a tick requests, and the cursor to store.

    Records the cursor passes (``after.seq``) are never offered again: they go in batches of at
    most ``size``, in order. A record above it (a record the inline publisher owns holds the
    cursor before it) is offered again by the next ticks, so it gets a run of its own, keyed by its
    run id, which Dagster does not launch twice; it keeps that run until the cursor has passed it
    (``single``)."""
    runs: list[list[staging.UploadRecord]] = []
    batch: list[staging.UploadRecord] | None = None
    for record in pending:
        if record.seq > after.seq or record.seq <= before.single:
            runs.append([record])
            continue
        if batch is None or len(batch) >= size:
            batch = []
            runs.append(batch)
        batch.append(record)
    above = [record.seq for record in pending if record.seq > after.seq]
    if before.single > after.seq:
        above.append(before.single)
    return runs, replace(after, single=max(above, default=0))


def staged_records(staging_path: Path, *, errors: list[tuple[str, str]]) -> list[staging.UploadRecord]:
    """Every upload record of a staging area in admission order (unreadable ones into ``errors``)."""
    return staging.list_records(staging_path, errors=errors)


def uploads_view(records: Sequence[staging.UploadRecord], admitted: int | None = None) -> SourceSnapshot:
    """The staging area as observed through ``records`` (admission order): the newest upload is
    the last one with a readable manifest identity; ``admitted`` defaults to the highest ``seq``."""
    seen = [s for s in (seen_upload(r.run_id, r.manifest) for r in records) if s is not None]
    last: Seen | None = seen[-1] if seen else None
    count = admitted if admitted is not None else max((r.seq for r in records), default=0)
    return SourceSnapshot(count, last, noun="upload")

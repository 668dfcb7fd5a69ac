"""The uploads a Dagster sensor tick must request, cheaply, wherever they are staged (resolutions
D1; issue 29). Moved here from ``distributor_dagster.sensors.staging_scan`` so each
:class:`~.store.UploadStore` answers :meth:`~.store.UploadStore.scan_accepted` itself; the sensor
never looks behind the store.

**A local staging path** (:func:`scan_local`). The server admits an upload under a per-pipeline
lock: it takes the time, builds the run id ``<pipeline>.<YYYYMMDDTHHMMSSZ>.<hex>`` from it, issues
the next ``seq`` (recorded in ``.seq``) and renames the record into place. So run id stamps follow
``seq`` order, and a record never becomes visible after a record with a higher ``seq``.

The cursor holds the highest ``seq`` handled and the stamp of its run id. A tick:

1. reads ``.seq``; when it is not above the cursor, nothing was admitted and the tick ends;
2. lists record directory names (no file reads) and keeps those whose stamp is at most
   :data:`STAMP_MARGIN` older than the cursor's stamp (older ones were handled by earlier ticks;
   the margin absorbs clock adjustments between admissions);
3. reads those records in stamp order, within a time budget, and requests the ``accepted`` ones
   above the cursor's ``seq`` in ``seq`` order (``queued`` records belong to the inline publisher).

When the budget runs out (a first tick over a large staging area), the cursor also remembers the
last name read and the next tick continues after it, so every tick stays short.

**A shared object store** (:func:`scan_pending`). Replicas admit concurrently, so a slower one
may make an upload visible after a later one: there is no "highest number handled". A tick lists
the store's pending markers (one per unfinished upload) and requests the ``accepted`` uploads the
cursor (:class:`~.pending.PendingCursor`) has not handed out yet, so an upload admitted late is
requested at the next tick all the same.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from distributor_core.staging.layout import RecordError
from distributor_core.staging.pending import PendingCursor
from distributor_core.staging.records import UploadRecord, read_record
from distributor_core.staging.runids import is_run_id
from distributor_core.staging.scan import issued_seq, iter_run_ids
from distributor_core.staging.status import ACCEPTED, QUEUED, RUNNING

if TYPE_CHECKING:
    from distributor_core.staging.objectstore import ObjectStagingStore

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
    if not is_run_id(run_id):
        return ""
    return run_id[-25:-9]


def _sort_key(run_id: str) -> tuple[str, str]:
    # names come from iter_run_ids, which only yields valid run ids
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


@dataclass
class UploadScan:
    pending: list[UploadRecord] = field(default_factory=list)
    cursor: UploadCursor = field(default_factory=UploadCursor)
    read: int = 0
    errors: list[tuple[str, str]] = field(default_factory=list)
    #: ``.seq`` showed nothing new: no name was listed, no record read
    idle: bool = False
    #: the read budget ran out; the next tick continues after ``cursor.resume``
    partial: bool = False


def inline_owned(record: UploadRecord) -> bool:
    """Queued or running under the inline publisher (not a Dagster run). When ``serve`` restarts
    with ``--publisher dagster`` it hands such records back as ``accepted``, so the cursor must not
    pass them: it stays before the first one, and later records are offered again (their run keys
    make Dagster skip the repeats)."""
    return record.status == QUEUED or (record.status == RUNNING and not record.dagster_run_id)


def _candidates(staging_path: Path, cursor: UploadCursor) -> list[str]:
    names = iter_run_ids(staging_path)
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
    records: list[UploadRecord] = []
    last_read = ""
    for run_id in _candidates(staging_path, cursor):
        # at least one name is read per tick, so a listing that alone outlasts the budget (a large
        # staging area on a loaded host) still moves the cursor instead of starting over each tick
        if last_read and clock() > deadline:
            scan.partial = True
            break
        last_read = run_id
        try:
            record = read_record(staging_path, run_id)
        except FileNotFoundError:
            continue  # expired, or being promoted: a later tick sees it
        except (OSError, RecordError) as exc:
            scan.errors.append((run_id, str(exc)))
            continue
        scan.read += 1
        if record.seq > cursor.seq:
            records.append(record)
    records.sort(key=lambda r: (r.seq, r.run_id))
    seq, stamp = cursor.seq, cursor.stamp
    full = held = False
    for record in records:
        if record.status == ACCEPTED:
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
    pending: Sequence[UploadRecord], before: UploadCursor, after: UploadCursor, size: int
) -> tuple[list[list[UploadRecord]], UploadCursor]:
    """``pending`` (``seq`` order) cut into the runs a tick requests, and the cursor to store.

    Records the cursor passes (``after.seq``) are never offered again: they go in batches of at
    most ``size``, in order. A record above it (a record the inline publisher owns holds the
    cursor before it) is offered again by the next ticks, so it gets a run of its own, keyed by its
    run id, which Dagster does not launch twice; it keeps that run until the cursor has passed it
    (``single``)."""
    runs: list[list[UploadRecord]] = []
    batch: list[UploadRecord] | None = None
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




@dataclass
class AcceptedScan:
    """One sensor tick's answer from an upload store: the runs to request and the cursor to keep."""

    #: the runs to request, each a batch of ``accepted`` uploads in admission order
    runs: list[list[UploadRecord]] = field(default_factory=list)
    #: every upload of ``runs``, in admission order
    offered: list[UploadRecord] = field(default_factory=list)
    #: the sensor's next cursor (opaque text)
    cursor: str = ""
    #: uploads admitted so far, when the store counts them (a local staging path's ``seq``)
    admitted: int | None = None
    #: records read by the tick
    read: int = 0
    #: ``(run id, reason)`` of records that could not be read
    errors: list[tuple[str, str]] = field(default_factory=list)
    #: nothing new was admitted since the last tick
    idle: bool = False
    #: the tick ran out of time; the next one continues the scan
    partial: bool = False
    #: run ids of admissions that died before their upload was accepted (their markers removed)
    abandoned: list[str] = field(default_factory=list)


def scan_local(staging_path: Path, cursor: str | None, *, limit: int, batch_size: int) -> AcceptedScan:
    """A tick over a local staging path: :func:`scan_staging` from the cursor text, cut into runs of
    at most ``batch_size`` (:func:`batches`)."""
    before = UploadCursor.parse(cursor)
    scan = scan_staging(staging_path, before, max_requests=limit)
    runs, after = batches(scan.pending, before, scan.cursor, batch_size)
    return AcceptedScan(
        runs=runs, offered=scan.pending, cursor=after.format(), admitted=scan.cursor.seq, read=scan.read,
        errors=scan.errors, idle=scan.idle, partial=scan.partial,
    )


def scan_pending(store: ObjectStagingStore, cursor: str | None, *, limit: int, batch_size: int) -> AcceptedScan:
    """A tick over a shared store: the ``accepted`` uploads among its pending markers that the
    cursor has not handed out (at most ``limit``, admission order), in runs of at most
    ``batch_size``. Every marker is listed at every tick, so an upload a slow replica admitted
    after later ones is requested at the next tick."""
    scan = store.pending(PendingCursor.parse(cursor), limit=limit)
    offered = list(scan.offered)
    size = max(1, batch_size)
    return AcceptedScan(
        runs=[offered[i:i + size] for i in range(0, len(offered), size)], offered=offered,
        cursor=scan.cursor.format(), admitted=None, read=len(offered), errors=list(scan.errors),
        idle=not offered, abandoned=list(scan.abandoned),
    )

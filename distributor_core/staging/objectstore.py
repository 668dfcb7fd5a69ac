"""Staging in an object store that any number of ``serve`` replicas share (issue 29).

Built on a :class:`~distributor_core.storage.Storage` with conditional writes and revisions (S3:
``If-None-Match: *`` and ``If-Match: <ETag>``), so no replica needs a lock, a shared disk or a
shared counter. One store per pipeline, rooted at its own prefix::

    records/<run id>.json             the upload record (schema 1); created with If-None-Match,
                                      every later change a compare-and-swap on its ETag (If-Match)
    bundles/<run id>/<bundle path>    the validated bundle, streamed file by file (multipart parts
                                      of bounded size); removed when the upload succeeds
    keys/<token id>/<sha256 of key>   a lease record (:mod:`distributor_core.lease`) held by the
                                      admitting run, created with If-None-Match, settled ``done``
                                      once its record exists: the one admission of an idempotency
                                      scope, whichever replica gets the request
    pending/<number>.<run id>         a lease record, removed once the upload finished: the listing
                                      of unfinished uploads (:mod:`.pending`); held by the admission
                                      until it is complete, then free (empty, in earlier releases),
                                      then held by the inline publisher that publishes it
    quarantine/<run id>.json          a record that could not be read (not JSON, not a schema-1
                                      record, another run's), set aside by the first reader
                                      (issue 35, item 3); its marker then goes as a marker without
                                      a record, its bundle with the retention

Admission (:meth:`ObjectStagingStore.put_bundle`, :meth:`claim_key`, :meth:`admit`): the
bundle first, then the key claim, the pending marker (held by the admission), the record, the
key claim settled (a compare-and-swap: it fails when the claim was taken over meanwhile) and
the marker given free; only then is the upload accepted and visible to publishers. An admission
that another replica has seen stall for ``abandon_after`` (on that replica's monotonic clock; at
once when its process on the same host is gone) loses its claim or its marker: its record is
removed (by itself when it resumes, or by the replica that took the marker over, which publishes
it instead when its key was settled: a retry of the key is answered with it). A marker without a
record is removed the same way; bundles without a record by :meth:`expire` once older than the
retention.

Status changes go through the transition table (:mod:`.status`) and are compare-and-swap on the
record's revision: two replicas that both try to start the same upload cannot both succeed.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from distributor_core.config.models import ServerHTTP, default_of
from distributor_core.lease import GRANTED, Act, Found, Lease, LeaseLost, Observer, RecordState
from distributor_core.lease import parse_record as parse_lease_record
from distributor_core.staging.index import key_sha256
from distributor_core.staging.layout import RecordError
from distributor_core.staging.ordering import AdmissionClock, marker_name, parse_marker
from distributor_core.staging.pending import PendingCursor, PendingScan
from distributor_core.staging.records import MAX_RECORD_SIZE, UploadRecord, parse_record, record_bytes
from distributor_core.staging.runids import is_run_id, run_id_stamp
from distributor_core.staging.status import (
    ACCEPTED,
    FAILED,
    FINISHED_STATUSES,
    RUNNING,
    SUCCEEDED,
    UploadStatus,
    check_transition,
)
from distributor_core.storage import (
    Entry,
    Feature,
    Storage,
    StorageError,
    is_already_exists,
    is_conflict,
    is_not_found,
    iter_chunks,
)

log = logging.getLogger("distributor.staging")

RECORDS = "records"
BUNDLES = "bundles"
KEYS = "keys"
PENDING = "pending"
QUARANTINE = "quarantine"
#: default time after which an admission without its record is considered dead (``server.http.admission_lease``)
DEFAULT_ABANDON_AFTER: timedelta = default_of(ServerHTTP, "admission_lease")
#: default lease of an inline publication (``server.http.publication_lease``)
DEFAULT_LEASE: timedelta = default_of(ServerHTTP, "publication_lease")
#: holder of a pending marker while its upload is being admitted
ADMISSION = "admission of "
#: read-modify-write attempts of an unconditional update before giving up
MAX_UPDATE_ATTEMPTS = 20
_KEY_ENTRY_SIZE = 4096
#: entries one listing may return (records are expired after ``server.http.retention``)
_LIST_LIMIT = 1_000_000


class StoreConflict(Exception):
    """Another replica changed the record (or took the key) first; the message says which."""


@dataclass(frozen=True)
class Versioned:
    """A record as read, with the revision a compare-and-swap must name (S3: its ETag)."""

    record: UploadRecord
    version: str


@dataclass(frozen=True)
class KeyClaim:
    """The result of :meth:`ObjectStagingStore.claim_key`: ``claimed`` by this admission (its
    ``lease``, settled by :meth:`ObjectStagingStore.admit`), or held by ``holder`` whose settled
    ``record`` exists (a replay or a conflict) or is not settled yet (in flight: answer 409)."""

    claimed: bool
    holder: str
    record: UploadRecord | None = None
    lease: Lease | None = None


class ObjectStagingStore:
    """One pipeline's staging area in an object store shared by several replicas."""

    def __init__(
        self,
        storage: Storage,
        pipeline_id: str,
        *,
        clock: AdmissionClock | None = None,
        abandon_after: timedelta = DEFAULT_ABANDON_AFTER,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        observer: Observer | None = None,
    ) -> None:
        missing = {Feature.CONDITIONAL_WRITES, Feature.EXCLUSIVE_CREATE, Feature.REVISIONS} - storage.capabilities.flags
        if missing:
            names = ", ".join(sorted(str(f) for f in missing))
            raise ValueError(f"a shared staging store needs conditional writes; {storage!r} lacks {names}")
        self.storage = storage
        self.pipeline_id = pipeline_id
        self.clock = clock or AdmissionClock()
        self.abandon_after = abandon_after
        self._now = now
        #: how long this process has seen each key claim, lease and marker unchanged
        self.observer = observer or Observer()
        #: run ids whose record this store object set aside (:meth:`read`), in order
        self.quarantined: list[str] = []

    # ------------------------------------------------------------------ names

    @staticmethod
    def record_path(run_id: str) -> str:
        if not is_run_id(run_id):
            raise RecordError(f"{run_id!r} is not a run id")
        return f"{RECORDS}/{run_id}.json"

    @staticmethod
    def bundle_prefix(run_id: str) -> str:
        """Where the bundle of ``run_id`` is staged, relative to the store's root: the source
        (bundle path ``""``) of its publication."""
        if not is_run_id(run_id):
            raise RecordError(f"{run_id!r} is not a run id")
        return f"{BUNDLES}/{run_id}"

    @staticmethod
    def key_path(token_id: str, key_hash: str) -> str:
        return f"{KEYS}/{token_id}/{key_hash}"

    # ------------------------------------------------------------------ idempotency keys

    def claim_key(self, token_id: str, key: str, run_id: str) -> KeyClaim:
        """Make ``run_id`` the one admission of the scope ``(token, key)`` in this pipeline, or
        say who holds it. A claim not settled for ``abandon_after`` (seen unchanged that long by
        this process) belongs to an admission that died before its record: it is taken over."""
        path = self.key_path(token_id, key_sha256(key))
        for _ in range(MAX_UPDATE_ATTEMPTS):
            lease = self._lease(path, run_id, self.abandon_after, f"upload {run_id} idempotency key")
            act = lease.try_acquire()
            if act in GRANTED:
                return KeyClaim(True, run_id, lease=lease)
            holder = lease.found.holder if lease.found is not None else ""
            if act == Act.WAIT:
                if lease.found is not None:
                    return KeyClaim(False, holder)
                continue  # created or removed by another replica meanwhile: look again
            found = self.read(holder) if is_run_id(holder) else None
            if found is not None:
                return KeyClaim(False, holder, found.record)
            self.release_key(token_id, key, holder)  # settled for a record that is gone (expired)
        raise StoreConflict(f"idempotency key of upload {run_id} kept changing; try again")

    def key_holder(self, token_id: str, key: str) -> str | None:
        """The run id a scope was settled for (``None`` when free or still being admitted)."""
        found = self._read_small(self.key_path(token_id, key_sha256(key)))
        record = parse_lease_record(found[0]) if found is not None else None
        return record.holder if record is not None and record.state == RecordState.DONE else None

    def release_key(self, token_id: str, key: str, run_id: str) -> None:
        """Remove the scope's entry if it still names ``run_id`` (a refused or expired upload)."""
        path = self.key_path(token_id, key_sha256(key))
        found = self._read_small(path)
        if found is None or parse_lease_record(found[0]).holder != run_id:
            return
        self._delete(path)

    # ------------------------------------------------------------------ admission

    def next_number(self) -> int:
        """This replica's next admission number (the record's ``seq``): time-ordered, no counter
        shared with other replicas (:mod:`.ordering`)."""
        return self.clock.next()

    def put_bundle(self, run_id: str, directory: Path, files: Iterable[tuple[str, int | None, str | None]]) -> int:
        """Stream the extracted bundle in ``directory`` into the store: ``files`` are
        ``(bundle path, size, "sha256:<hex>")`` (size and digest checked while streaming when
        given). Large files go up as multipart uploads of bounded part size, so memory does not
        grow with the upload. Returns the bytes written."""
        prefix = self.bundle_prefix(run_id)
        total = 0
        for relative, size, digest in files:
            with open(directory / relative, "rb") as stream:
                entry = self.storage.write_stream(
                    f"{prefix}/{relative}",
                    iter_chunks(stream),
                    overwrite=True,
                    expected_size=size,
                    expected_sha256=digest,
                )
            total += entry.size
        return total

    def admit(self, record: UploadRecord, *, claim: Lease | None = None) -> Versioned:
        """Make ``record`` (status ``accepted``, ``seq`` from :meth:`next_number`) the accepted
        upload: its pending marker, held by this admission; the record (If-None-Match); its key
        ``claim`` settled; the marker given free to publishers. An admission slower than
        ``abandon_after`` may have lost its key claim or its marker to another replica: its record
        is removed again (:class:`StoreConflict`), unless its key was settled first (then another
        replica publishes it). A record that already exists under that run id is a
        :class:`StoreConflict` too (the caller picks another run id)."""
        if record.status != ACCEPTED:
            raise RecordError(f"upload {record.run_id} must be admitted as accepted, not {record.status}")
        path = self.record_path(record.run_id)
        marker = self._lease(self._marker(record), f"{ADMISSION}{record.run_id}", self.abandon_after,
                             f"upload {record.run_id} pending marker")
        if marker.try_acquire() not in GRANTED:
            raise StoreConflict(f"upload {record.run_id} is already being admitted")
        written = settled = False
        try:
            if claim is not None:
                claim.ensure()
            try:
                entry = self.storage.write_bytes(path, record_bytes(record), overwrite=False)
            except StorageError as exc:
                if is_already_exists(exc):
                    raise StoreConflict(f"upload record {record.run_id} already exists") from None
                raise
            written = True
            if claim is not None:
                claim.settle(RecordState.DONE)
            settled = True
            marker.settle(RecordState.FREE)
        except BaseException as exc:
            if settled and isinstance(exc, LeaseLost):  # taken over with its key settled: published elsewhere
                return Versioned(record, self._written_revision(path, entry))
            if written:
                self._delete(path)
            marker.release()
            if isinstance(exc, LeaseLost):
                raise StoreConflict(str(exc)) from None
            raise
        return Versioned(record, self._written_revision(path, entry))

    def _marker(self, record: UploadRecord) -> str:
        return f"{PENDING}/{marker_name(record.seq, record.run_id)}"

    def _admitted(self, record: UploadRecord) -> bool:
        """Whether an admission that stopped before giving its marker free got as far as settling
        its key (a retry of the key is answered with this upload): then it is published."""
        key = record.idempotency_key
        return key is not None and self.key_holder(record.token_id, key) == record.run_id

    def _reclaim(self, lease: Lease, run_id: str) -> Versioned | None:
        """``lease`` just took a pending marker over from an admission that stalled or died: its
        upload, made visible, when the admission settled its key; otherwise (no ``202`` was sent)
        its record and bundle are removed with the marker, and ``None``."""
        current = self.read(run_id)
        if current is not None and current.record.status == ACCEPTED and self._admitted(current.record):
            return current
        if current is not None and current.record.status == ACCEPTED:
            self._delete(self.record_path(run_id))
            self.storage.delete_prefix(self.bundle_prefix(run_id), prune_empty_dirs=False)
        if current is None or current.record.status == ACCEPTED:
            lease.release()
            return None
        return current

    # ------------------------------------------------------------------ records

    def read(self, run_id: str) -> Versioned | None:
        """The record and its revision; ``None`` when there is none. The revision is read
        before the content, so a compare-and-swap from it never overwrites a newer record.

        A record that is not a valid one (broken JSON, another schema, another run's) is set aside
        (:meth:`_quarantine`) and read as none: one bad object never stops a listing, a queue
        count, a publisher or a start (issue 35, item 3)."""
        found = self._read_small(self.record_path(run_id), MAX_RECORD_SIZE)
        if found is None:
            return None
        data, version, _ = found
        try:
            record = parse_record(data)
            if record.run_id != run_id:
                raise RecordError(f"upload record {run_id} names run {record.run_id}")
        except RecordError as exc:
            self._quarantine(run_id, data, str(exc))
            return None
        return Versioned(record, version)

    def _quarantine(self, run_id: str, data: bytes, reason: str) -> None:
        """Copy an unreadable record to ``quarantine/<run id>.json`` and delete it, logging it.
        Replicas that read it at once each copy the same bytes; the deletes are idempotent."""
        aside = f"{QUARANTINE}/{run_id}.json"
        self.storage.write_bytes(aside, data, overwrite=True)
        self._delete(self.record_path(run_id))
        self.quarantined.append(run_id)
        log.warning("distributor: quarantined upload record %s of pipeline %s (moved to %s): %s", run_id,
                    self.pipeline_id, aside, reason)

    def transition(self, run_id: str, *, expect: Versioned | None = None, fence: Callable[[], None] | None = None,
                   **changes: Any) -> Versioned:
        """Apply ``changes`` (record fields) as a compare-and-swap; ``fence`` (a publication
        lease's check) is called right before each write and stops it when the lease was lost.

        With ``expect`` (a record as read) exactly one attempt is made from that revision: when
        another replica changed the record first, :class:`StoreConflict` (e.g. two replicas
        starting the same upload: one wins). Without it the record is re-read and the change
        re-applied until it lands; a status change the table does not allow from the status
        found is :class:`~.status.StatusTransitionError` either way. A finished upload's pending
        marker is removed; a succeeded one's bundle too."""
        for _ in range(MAX_UPDATE_ATTEMPTS):
            current = expect or self.read(run_id)
            if current is None:
                raise FileNotFoundError(f"upload record {run_id} does not exist")
            if fence is not None:
                fence()
            if "status" in changes:
                changes["status"] = UploadStatus(changes["status"])
                check_transition(run_id, current.record.status, changes["status"])
            record = replace(current.record, **changes)
            try:
                entry = self.storage.write_bytes(
                    self.record_path(run_id), record_bytes(record), overwrite=True, if_revision=current.version
                )
            except StorageError as exc:
                if not is_conflict(exc):
                    raise
                if expect is not None:
                    raise StoreConflict(f"upload {run_id} was changed by another replica") from None
                continue
            if record.status in FINISHED_STATUSES:
                self._settle_finished(record)
            return Versioned(record, self._written_revision(self.record_path(record.run_id), entry))
        raise StoreConflict(f"upload {run_id} kept changing; gave up after {MAX_UPDATE_ATTEMPTS} attempts")

    def _settle_finished(self, record: UploadRecord) -> None:
        self._delete(f"{PENDING}/{marker_name(record.seq, record.run_id)}")
        if record.status == SUCCEEDED:
            self.storage.delete_prefix(self.bundle_prefix(record.run_id), prune_empty_dirs=False)

    def records(self, errors: list[tuple[str, str]] | None = None) -> list[UploadRecord]:
        """Every readable record, in admission order (``seq``, then run id)."""
        found: list[UploadRecord] = []
        for entry in self._list(RECORDS):
            name = entry.path.rsplit("/", 1)[-1]
            run_id = name.removesuffix(".json")
            if entry.is_dir or not name.endswith(".json") or not is_run_id(run_id):
                continue
            try:
                versioned = self.read(run_id)
            except (StorageError, RecordError) as exc:
                if errors is not None:
                    errors.append((run_id, str(exc)))
                continue
            if versioned is not None:
                found.append(versioned.record)
        found.sort(key=lambda r: (r.seq, r.run_id))
        return found

    # ------------------------------------------------------------------ unfinished uploads

    def pending(self, cursor: PendingCursor = PendingCursor(), *, limit: int | None = None) -> PendingScan:
        """The ``accepted`` uploads not handed out yet (admission order, at most ``limit``) and
        the cursor including them. Every pending marker is listed at every call, so an upload
        a slow replica made visible after later ones is offered at the next call all the same.

        Uploads still being admitted are not offered (their marker is held by the admission); one
        whose admission stalled or died is taken over (:meth:`_reclaim`). Markers whose record is
        missing after ``abandon_after`` and markers of finished records (a crash between the
        two writes) are removed."""
        scan = PendingScan()
        listed: set[str] = set()
        for name, versioned in self._pending_entries(scan):
            listed.add(name)
            record = versioned.record
            if record.status != ACCEPTED or name in cursor.handed:
                continue
            if limit is not None and len(scan.offered) >= limit:
                continue
            if self._admitting(f"{PENDING}/{name}", record.run_id):
                continue
            scan.offered.append(record)
        offered = {marker_name(r.seq, r.run_id) for r in scan.offered}
        scan.cursor = PendingCursor(frozenset((cursor.handed & listed) | offered))
        return scan

    def _admitting(self, path: str, run_id: str, *, orphan: bool = False) -> bool:
        """Whether the marker ``path`` stays out of sight: held by a live admission, or (``orphan``,
        no record) not yet idle. An admission's marker this process has seen unchanged for
        ``abandon_after`` (or whose process on this host is gone) is taken over and settled by
        :meth:`_reclaim`; so is any orphan marker idle that long, which then goes."""
        lease = self._lease(path, f"reclaim {run_id}", self.abandon_after, f"upload {run_id} pending marker")
        found, admitting = lease.peek(), _admission(lease)
        idle = found in (Found.EXPIRED, Found.DEAD) or (orphan and found in (Found.FREE, Found.DONE) and (
            self.observer.age(path, lease.seen or b"") >= self.abandon_after.total_seconds()))
        if not idle or not (admitting or orphan) or lease.try_acquire() not in GRANTED:
            return orphan or (admitting and found == Found.LIVE)
        if self._reclaim(lease, run_id) is None:
            return True
        lease.settle(RecordState.FREE)
        return False

    def pending_run_ids(self) -> list[str]:
        """Run ids of the pending markers, in admission order: one listing, no record read (an
        admission in flight has its marker a moment before its record)."""
        found: list[str] = []
        for entry in sorted(self._list(PENDING), key=lambda e: e.path):
            parsed = parse_marker(entry.path.rsplit("/", 1)[-1])
            if not entry.is_dir and parsed is not None and is_run_id(parsed[1]):
                found.append(parsed[1])
        return found

    def unfinished(self, errors: list[tuple[str, str]] | None = None) -> list[Versioned]:
        """Every upload not finished yet (accepted, queued, running), in admission order."""
        scan = PendingScan()
        found = [versioned for _, versioned in self._pending_entries(scan)]
        if errors is not None:
            errors.extend(scan.errors)
        return found

    def _pending_entries(self, scan: PendingScan) -> Iterator[tuple[str, Versioned]]:
        entries = [e for e in self._list(PENDING) if not e.is_dir]
        entries.sort(key=lambda e: e.path)
        for entry in entries:
            name = entry.path.rsplit("/", 1)[-1]
            parsed = parse_marker(name)
            if parsed is None or not is_run_id(parsed[1]):
                continue
            run_id = parsed[1]
            try:
                versioned = self.read(run_id)
            except (StorageError, RecordError) as exc:
                scan.errors.append((run_id, str(exc)))
                continue
            if versioned is None:  # an admission in flight, or one that left its marker behind
                self._admitting(entry.path, run_id, orphan=True)
                if not self.storage.exists(entry.path):
                    scan.abandoned.append(run_id)
                continue
            if versioned.record.status in FINISHED_STATUSES:
                self._settle_finished(versioned.record)
                continue
            yield name, versioned

    # ------------------------------------------------------------------ publication leases

    def claim_next(
        self, owner: str, duration: timedelta = DEFAULT_LEASE, *, in_order: bool = False
    ) -> tuple[Lease, Versioned] | None:
        """Take the first unfinished upload (admission order) that no other replica holds a live
        lease on and no Dagster run owns, and start it (``running``): the lease and the record as
        written. ``None`` when there is nothing to take.

        ``in_order``: only the first unfinished upload may be taken, so the pipeline publishes
        one upload at a time, in admission order, whichever replicas publish (the inline
        publisher); while another owner holds it, nothing is taken."""
        scan = PendingScan()
        for name, versioned in self._pending_entries(scan):
            record = versioned.record
            if record.dagster_run_id and record.status == RUNNING:
                if in_order:
                    return None
                continue
            claimed = self.claim(record.run_id, owner, duration, marker=f"{PENDING}/{name}")
            if claimed is not None or in_order:
                return claimed
        return None

    def claim(
        self, run_id: str, owner: str, duration: timedelta = DEFAULT_LEASE, *, marker: str | None = None
    ) -> tuple[Lease, Versioned] | None:
        """Lease the publication of ``run_id`` (its pending marker) and mark it ``running``;
        ``None`` when another replica holds a live lease, the upload finished, or another replica
        won either write. An expired lease is taken over (``running`` → ``running``)."""
        current = self.read(run_id)
        if current is None or current.record.status in FINISHED_STATUSES:
            return None
        path = marker or f"{PENDING}/{marker_name(current.record.seq, run_id)}"
        lease = self._lease(path, owner, duration, f"upload {run_id} publication")
        if lease.try_acquire() not in GRANTED:
            return None
        # the record as it is now (taken over from an admission that stalled or died: as it decides);
        # finished meanwhile, or changed by a replica that raced us: give the lease back
        latest = self._reclaim(lease, run_id) if _admission(lease) else self.read(run_id)
        try:
            if latest is None or latest.record.status in FINISHED_STATUSES:
                raise StoreConflict(f"upload {run_id} finished meanwhile")
            started = self.transition(run_id, expect=latest, fence=lease.check, status=RUNNING,
                                      started_at=_whole_seconds(self._now()), finished_at=None, error="", report=None)
        except (StoreConflict, LeaseLost):
            with contextlib.suppress(StorageError):
                lease.settle(RecordState.FREE)
            return None
        return lease, started

    # ------------------------------------------------------------------ expiry

    def expire(self, retention: timedelta) -> list[str]:
        """Remove finished records older than ``retention`` with their key entries and bundles,
        and the bundles of admissions that died before their record was written, once older
        than ``retention`` (an admission may still be streaming a large bundle before that), and
        ``accepted`` records left without a pending marker (a rollback of an admission that failed
        half way: no ``202`` was sent, no publisher sees it).

        A record can only be due when its run id's time (when its admission began) is older
        than ``retention``, so one listing of ``records/`` and ``bundles/`` and a read of those
        old records is all an expiry costs, however many uploads the retention holds."""
        now = self._now()
        expired: list[str] = []
        names = self._run_ids(RECORDS, suffix=".json")
        pending: set[str] | None = None
        for run_id in names:
            if not _older_than(run_id, retention, now):
                continue
            versioned = self.read(run_id)
            if versioned is None:
                continue
            record = versioned.record
            if record.status == ACCEPTED:
                pending = set(self.pending_run_ids()) if pending is None else pending
                if run_id in pending:
                    continue
            elif record.status not in FINISHED_STATUSES or not _due(record.finished_at, retention, now):
                continue
            if record.idempotency_key is not None:
                self.release_key(record.token_id, record.idempotency_key, record.run_id)
            self.storage.delete_prefix(self.bundle_prefix(record.run_id), prune_empty_dirs=False)
            self._delete(self.record_path(record.run_id))
            expired.append(record.run_id)
        known = set(names) - set(expired)
        for run_id in self._run_ids(BUNDLES):
            if run_id in known or not _older_than(run_id, max(retention, self.abandon_after), now):
                continue
            if self.read(run_id) is None:  # an admission killed while streaming its bundle
                self.storage.delete_prefix(self.bundle_prefix(run_id), prune_empty_dirs=False)
        return expired

    def failed_with_bundle(self) -> list[UploadRecord]:
        """The failed uploads whose staged bundle is still kept (for the byte quotas): the run ids
        under ``bundles/`` that have no pending marker (a succeeded upload's bundle is removed),
        each record read once."""
        pending = set(self.pending_run_ids())
        found: list[UploadRecord] = []
        for run_id in self._run_ids(BUNDLES):
            if run_id in pending:
                continue
            versioned = self.read(run_id)
            if versioned is not None and versioned.record.status == FAILED:
                found.append(versioned.record)
        return found

    def _run_ids(self, prefix: str, *, suffix: str = "") -> list[str]:
        """Run ids named by the entries directly under ``prefix`` (files ending in ``suffix``, or
        directories without one)."""
        found: list[str] = []
        for entry in self._list(prefix):
            name = entry.path.rstrip("/").rsplit("/", 1)[-1]
            if suffix:
                if entry.is_dir or not name.endswith(suffix):
                    continue
                name = name.removesuffix(suffix)
            if is_run_id(name):
                found.append(name)
        return found

    # ------------------------------------------------------------------ helpers

    def _lease(self, path: str, holder: str, length: timedelta, name: str) -> Lease:
        return Lease(self.storage, path, holder=holder, length=length.total_seconds(), name=name,
                     observer=self.observer, now=self._now)

    def _read_small(self, path: str, limit: int = _KEY_ENTRY_SIZE) -> tuple[bytes, str, datetime | None] | None:
        """``(content, revision, last modified)`` of a small object, ``None`` when it is missing.
        The revision is taken first (see :meth:`read`)."""
        try:
            entry = self.storage.stat(path)
            data = self.storage.read_bytes(path, max_size=limit)
        except StorageError as exc:
            if is_not_found(exc):
                return None
            raise
        return data, _revision(entry.revision), entry.mtime

    def _written_revision(self, path: str, entry: Entry) -> str:
        """The revision a write produced; backends that do not return it (local) are asked."""
        return _revision(entry.revision or self.storage.stat(path).revision)

    def _list(self, prefix: str) -> list[Entry]:
        return self.storage.walk(prefix, recursive=False, include_reserved=True, limit=_LIST_LIMIT)

    def _delete(self, path: str) -> None:
        try:
            self.storage.delete_file(path)
        except StorageError as exc:
            if not is_not_found(exc):
                raise


def _older_than(run_id: str, age: timedelta, now: datetime) -> bool:
    """Whether the admission of ``run_id`` began more than ``age`` before ``now`` (its run id
    carries the second it began)."""
    stamp = run_id_stamp(run_id)
    if not stamp:
        return False
    return now - datetime.strptime(stamp, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC) >= age


def _admission(lease: Lease) -> bool:
    """Whether the record ``lease`` found (before taking it, if it did) was an admission's hold."""
    found = lease.found
    return found is not None and found.state == RecordState.HELD and found.holder.startswith(ADMISSION)


def _due(finished_at: datetime | None, retention: timedelta, now: datetime) -> bool:
    return finished_at is not None and finished_at + retention <= now


def _whole_seconds(value: datetime) -> datetime:
    return value.replace(microsecond=0)


def _revision(value: str | None) -> str:
    if not value:
        raise RecordError("the staging store returned no revision for a write")
    return value



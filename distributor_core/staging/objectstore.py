"""Staging in an object store that any number of ``serve`` replicas share (issue 29).

Built on a :class:`~distributor_core.storage.Storage` with conditional writes and revisions (S3:
``If-None-Match: *`` and ``If-Match: <ETag>``), so no replica needs a lock, a shared disk or a
shared counter. One store per pipeline, rooted at its own prefix::

    records/<run id>.json             the upload record (schema 1); created with If-None-Match,
                                      every later change a compare-and-swap on its ETag (If-Match)
    bundles/<run id>/<bundle path>    the validated bundle, streamed file by file (multipart parts
                                      of bounded size); removed when the upload succeeds
    keys/<token id>/<sha256 of key>   "<run id>\\n", created with If-None-Match: the one admission
                                      of an idempotency scope, whichever replica gets the request
    pending/<number>.<run id>         empty; written before the record and removed once the upload
                                      finished: the listing of unfinished uploads (:mod:`.pending`)

Admission (:meth:`ObjectStagingStore.put_bundle`, :meth:`claim_key`, :meth:`admit`): the
bundle first, then the key entry, the marker and last the record, so the key is held only for
three small writes however long the bundle took. The upload is accepted once its record exists;
a crash before that leaves at most a bundle, a key entry and a marker without a record: the key is
taken over and the marker removed once they are ``abandon_after`` old, the bundle by
:meth:`expire` once it is older than the retention. An admission that took longer than half of
``abandon_after`` since it claimed its key gives up before writing its record, so a key is never
taken over from an admission that still completes.

Status changes go through the transition table (:mod:`.status`) and are compare-and-swap on the
record's revision: two replicas that both try to start the same upload cannot both succeed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from distributor_core.staging.index import key_sha256
from distributor_core.staging.layout import RecordError
from distributor_core.staging.leases import DEFAULT_LEASE, Lease, LeaseLost, held_by_other, lease_bytes
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

RECORDS = "records"
BUNDLES = "bundles"
KEYS = "keys"
PENDING = "pending"
#: default time after which an admission without its record is considered dead
DEFAULT_ABANDON_AFTER = timedelta(minutes=2)
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
    """The result of :meth:`ObjectStagingStore.claim_key`: ``claimed`` by this admission (with
    ``since``, the monotonic time of the claim), or held by ``holder`` whose ``record`` exists
    (a replay or a conflict) or does not yet (an admission in flight: answer 409)."""

    claimed: bool
    holder: str
    record: UploadRecord | None = None
    since: float = 0.0


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
        monotonic: Callable[[], float] = time.monotonic,
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
        self._monotonic = monotonic

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
        say who holds it. A holder without a record that is ``abandon_after`` old died before
        its upload was accepted: its entry is taken over (compare-and-swap on its revision)."""
        path = self.key_path(token_id, key_sha256(key))
        data = f"{run_id}\n".encode()
        for _ in range(MAX_UPDATE_ATTEMPTS):
            since = self._monotonic()
            try:
                self.storage.write_bytes(path, data, overwrite=False)
                return KeyClaim(True, run_id, since=since)
            except StorageError as exc:
                if not is_already_exists(exc):
                    raise
            found = self._read_small(path)
            if found is None:
                continue  # removed meanwhile (expired): try to create it again
            text, entry_version, written = found
            holder = text.decode("utf-8", "replace").strip()
            record = self.read(holder) if is_run_id(holder) else None
            if record is not None:
                return KeyClaim(False, holder, record.record)
            if written is not None and self._now() - written < self.abandon_after:
                return KeyClaim(False, holder)
            try:  # the holder's admission is dead: take the scope over
                self.storage.write_bytes(path, data, overwrite=True, if_revision=entry_version)
                return KeyClaim(True, run_id, since=self._monotonic())
            except StorageError as exc:
                if not is_conflict(exc):
                    raise
        raise StoreConflict(f"idempotency key of upload {run_id} kept changing; try again")

    def key_holder(self, token_id: str, key: str) -> str | None:
        found = self._read_small(self.key_path(token_id, key_sha256(key)))
        return found[0].decode("utf-8", "replace").strip() if found is not None else None

    def release_key(self, token_id: str, key: str, run_id: str) -> None:
        """Remove the scope's entry if it still names ``run_id`` (a refused or expired upload)."""
        path = self.key_path(token_id, key_sha256(key))
        found = self._read_small(path)
        if found is None or found[0].decode("utf-8", "replace").strip() != run_id:
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

    def admit(self, record: UploadRecord, *, since: float | None = None) -> Versioned:
        """Make ``record`` (status ``accepted``, ``seq`` from :meth:`next_number`) the accepted
        upload: its pending marker, then the record itself (created with If-None-Match).

        ``since`` is the monotonic time its key was claimed: an admission slower than half of
        ``abandon_after`` gives up (:class:`StoreConflict`) rather than race a takeover of its
        key. A record that already exists under that run id is a :class:`StoreConflict` too
        (the caller picks another run id)."""
        if record.status != ACCEPTED:
            raise RecordError(f"upload {record.run_id} must be admitted as accepted, not {record.status}")
        marker = f"{PENDING}/{marker_name(record.seq, record.run_id)}"
        self.storage.write_bytes(marker, b"", overwrite=True)
        if since is not None and self._monotonic() - since > self.abandon_after.total_seconds() / 2:
            self._delete(marker)
            raise StoreConflict(f"admission of upload {record.run_id} took too long; its key may be taken over")
        try:
            entry = self.storage.write_bytes(self.record_path(record.run_id), record_bytes(record), overwrite=False)
        except StorageError as exc:
            self._delete(marker)
            if is_already_exists(exc):
                raise StoreConflict(f"upload record {record.run_id} already exists") from None
            raise
        return Versioned(record, self._written_revision(self.record_path(record.run_id), entry))

    # ------------------------------------------------------------------ records

    def read(self, run_id: str) -> Versioned | None:
        """The record and its revision; ``None`` when there is none. The revision is read
        before the content, so a compare-and-swap from it never overwrites a newer record."""
        found = self._read_small(self.record_path(run_id), MAX_RECORD_SIZE)
        if found is None:
            return None
        data, version, _ = found
        record = parse_record(data)
        if record.run_id != run_id:
            raise RecordError(f"upload record {run_id} names run {record.run_id}")
        return Versioned(record, version)

    def transition(self, run_id: str, *, expect: Versioned | None = None, **changes: Any) -> Versioned:
        """Apply ``changes`` (record fields) as a compare-and-swap.

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

        Markers whose record is missing after ``abandon_after`` (an admission that died before
        its upload was accepted) and markers of finished records (a crash between the two
        writes) are removed."""
        scan = PendingScan()
        listed: set[str] = set()
        for name, versioned in self._pending_entries(scan):
            listed.add(name)
            record = versioned.record
            if record.status != ACCEPTED or name in cursor.handed:
                continue
            if limit is not None and len(scan.offered) >= limit:
                continue
            scan.offered.append(record)
        offered = {marker_name(r.seq, r.run_id) for r in scan.offered}
        scan.cursor = PendingCursor(frozenset((cursor.handed & listed) | offered))
        return scan

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
            if versioned is None:
                if entry.mtime is not None and self._now() - entry.mtime >= self.abandon_after:
                    self._delete(entry.path)
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
        """Lease the publication of ``run_id`` and mark it ``running``; ``None`` when another
        replica holds a live lease, the upload finished, or another replica won either write.
        An expired lease is taken over (the record goes ``running`` → ``running``)."""
        current = self.read(run_id)
        if current is None or current.record.status in FINISHED_STATUSES:
            return None
        path = marker or f"{PENDING}/{marker_name(current.record.seq, run_id)}"
        found = self._read_small(path)
        if found is None:
            return None
        data, version, _ = found
        now = self._now()
        if held_by_other(data, owner, now):
            return None
        until = now + duration
        try:
            entry = self.storage.write_bytes(path, lease_bytes(owner, until), overwrite=True, if_revision=version)
        except StorageError as exc:
            if is_conflict(exc) or is_not_found(exc):
                return None
            raise
        lease = Lease(run_id, owner, until, path, self._written_revision(path, entry))
        # the record as it is now: finished meanwhile (its marker is removed right after), or
        # changed by a replica that raced us before the lease: give the lease back
        latest = self.read(run_id)
        if latest is None or latest.record.status in FINISHED_STATUSES:
            self.release(lease)
            return None
        try:
            started = self.transition(run_id, expect=latest, status=RUNNING, started_at=_whole_seconds(now),
                                      finished_at=None, error="", report=None)
        except StoreConflict:
            self.release(lease)
            return None
        return lease, started

    def renew(self, lease: Lease, duration: timedelta = DEFAULT_LEASE) -> Lease:
        """Extend a held lease; :class:`~.leases.LeaseLost` when it was lost (expired and taken
        over, or the upload finished): the publication must then not report its result."""
        until = self._now() + duration
        try:
            entry = self.storage.write_bytes(lease.marker, lease_bytes(lease.owner, until), overwrite=True,
                                             if_revision=lease.version)
        except StorageError as exc:
            if is_conflict(exc) or is_not_found(exc):
                raise LeaseLost(f"the publication lease of upload {lease.run_id} was lost") from None
            raise
        return replace(lease, until=until, version=self._written_revision(lease.marker, entry))

    def release(self, lease: Lease) -> None:
        """Give a lease back without finishing (the marker becomes free again, if still ours)."""
        try:
            self.storage.write_bytes(lease.marker, b"", overwrite=True, if_revision=lease.version)
        except StorageError as exc:
            if not (is_conflict(exc) or is_not_found(exc)):
                raise

    # ------------------------------------------------------------------ expiry

    def expire(self, retention: timedelta) -> list[str]:
        """Remove finished records older than ``retention`` with their key entries and bundles,
        and the bundles of admissions that died before their record was written, once older
        than ``retention`` (an admission may still be streaming a large bundle before that).

        A record can only be due when its run id's time (when its admission began) is older
        than ``retention``, so one listing of ``records/`` and ``bundles/`` and a read of those
        old records is all an expiry costs, however many uploads the retention holds."""
        now = self._now()
        expired: list[str] = []
        names = self._run_ids(RECORDS, suffix=".json")
        for run_id in names:
            if not _older_than(run_id, retention, now):
                continue
            versioned = self.read(run_id)
            if versioned is None:
                continue
            record = versioned.record
            if record.status not in FINISHED_STATUSES or record.finished_at is None:
                continue
            if record.finished_at + retention > now:
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


def _whole_seconds(value: datetime) -> datetime:
    return value.replace(microsecond=0)


def _revision(value: str | None) -> str:
    if not value:
        raise RecordError("the staging store returned no revision for a write")
    return value



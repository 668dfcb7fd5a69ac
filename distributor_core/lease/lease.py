"""One lease over a storage's compare-and-swap (issue 34; Chubby, etcd: observed expiry, fencing).

A :class:`Lease` names one record (``path`` in ``storage``). Every operation is one step of
:mod:`.table`: read the record, classify it, do what the table says. Writes are the storage's
compare-and-swap: on S3 ``If-None-Match: *`` and ``If-Match: <ETag>``; on backends with an atomic
rename (local disk, SFTP) a takeover first renames the record aside (one mover wins), checks it
is the record it judged and links the new one in without clobbering, so two contenders never both
take one record; a holder rewrites its own record by revision, which nobody else may change
while its lease runs.

Expiry is observed: :class:`Observer` remembers when this process first saw each record (its
revision and bytes) and judges it expired once it has stayed the same for the holder's lease
length on this process's monotonic clock. A record whose ``host`` is this host and whose
process is gone is free at once, and so is one of this process that none of its leases holds
(a release that failed): facts of this host, no clock involved.

The holder knows how long its grant is safe without asking: until a quarter of the lease before
the earliest moment an observer could take it over (the last renewal *sent* plus the lease).
:meth:`Lease.ensure` costs nothing while that holds and renews at once when it ran out (a
process that stalled); :meth:`Lease.check` re-reads the record, the fence before a commit.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime

import msgspec

from distributor_core import paths as lp
from distributor_core.lease.record import LeaseRecord, RecordState, parse_record
from distributor_core.lease.table import TABLE, Act, Found, Op
from distributor_core.storage.base import Entry, Storage
from distributor_core.storage.capabilities import Feature
from distributor_core.storage.errors import ErrorKind, StorageError
from distributor_core.timefmt import format_precise

#: share of the lease after the last renewal was sent during which the holder works unasked
SAFE_SHARE = 0.75
#: the renew loop rewrites the record every this share of the lease
RENEW_SHARE = 0.25
_MAX_RECORD = 64 * 1024
#: a write whose temporary a concurrent sweep removed is tried again this often
_VANISHED_RETRIES = 5


#: serials of the records this process's leases hold right now
_HELD: set[str] = set()
_HELD_LOCK = threading.Lock()


def _hold(old: LeaseRecord | None, new: LeaseRecord | None) -> None:
    with _HELD_LOCK:
        if old is not None:
            _HELD.discard(old.serial)
        if new is not None:
            _HELD.add(new.serial)


def hostname() -> str:
    return os.uname().nodename


def pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists on this host (one of another user's counts)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except PermissionError:
        return True
    except OSError:
        return False
    return True


class LeaseLost(StorageError):
    """The lease is not this holder's any more: nothing of its work may become visible."""


class LeaseBusy(StorageError):
    """Another holder keeps the lease (``record``) past the wait."""

    def __init__(self, op: str, backend: str, path: str, message: str, record: LeaseRecord | None) -> None:
        super().__init__(op, backend, path, ErrorKind.CONFLICT, message=message)
        self.record = record


class Observer:
    """When this process first saw each record unchanged (one per process and store, shared by
    its leases, so a replica polling every few seconds keeps its judgement between polls)."""

    def __init__(self, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.monotonic = monotonic
        self._seen: dict[str, tuple[bytes, float, float]] = {}
        self._lock = threading.Lock()

    def age(self, key: str, fingerprint: bytes) -> float:
        """Seconds ``key`` has been seen as ``fingerprint`` without a change (0 at first sight)."""
        now = self.monotonic()
        with self._lock:
            seen = self._seen.get(key)
            first = seen[1] if seen is not None and seen[0] == fingerprint else now
            self._seen[key] = (fingerprint, first, now)
            if len(self._seen) > 10_000:  # forget what was not looked at for an hour
                self._seen = {k: v for k, v in self._seen.items() if now - v[2] < 3600}
        return now - first


def _utcnow() -> datetime:
    return datetime.now(UTC)


class Lease:
    """One holder's side of the lease on ``path``; ``name`` words it in errors ("destination x
    lock")."""

    def __init__(self, storage: Storage, path: str, *, holder: str, length: float, name: str,
                 observer: Observer | None = None, now: Callable[[], datetime] = _utcnow) -> None:
        self.storage, self.path, self.holder, self.length, self.name = storage, path, holder, length, name
        self.observer = observer or Observer()
        self.now = now
        self.host, self.pid = hostname(), os.getpid()
        self.record: LeaseRecord | None = None  #: the grant, as last written
        self.found: LeaseRecord | None = None  #: another holder's record at the last look
        self.seen: bytes | None = None  #: its revision and bytes
        self.took_over = False
        self.lost: str | None = None
        self._written: bytes | None = None
        self._revision: str | None = None
        self._safe_until = float("-inf")
        self._io = threading.RLock()

    @property
    def held(self) -> bool:
        return self.record is not None and self.lost is None

    @property
    def grant(self) -> tuple[str, int]:
        """``(epoch, generation)`` of this holder's grant, the fencing token."""
        return (self.record.epoch, self.record.generation) if self.record else ("", 0)

    # ------------------------------------------------------------------ steps of the table

    def _look(self) -> tuple[Found, str | None, bytes]:
        self.found = self.seen = None
        try:
            entry = self.storage.stat(self.path)
            data = self.storage.read_bytes(self.path, max_size=_MAX_RECORD)
        except StorageError as exc:
            if exc.kind == ErrorKind.NOT_FOUND:
                return Found.ABSENT, None, b""
            raise
        if self._written is not None and data == self._written:
            return Found.MINE, entry.revision, data
        found = self.found = parse_record(data)
        self.seen = (entry.revision or "").encode() + b"\0" + data
        if found.state != RecordState.HELD:
            return Found(found.state.value), entry.revision, data
        if found.host == self.host and (found.serial not in _HELD if found.pid == self.pid else
                                        not pid_alive(found.pid)):
            return Found.DEAD, entry.revision, data
        age = self.observer.age(self.path, self.seen)
        return (Found.EXPIRED if age >= (found.lease_seconds or self.length) else Found.LIVE), entry.revision, data

    def _step(self, op: Op, state: RecordState | None = RecordState.HELD) -> Act:
        with self._io:
            quick = self._quick(op, state)
            if quick is not None:
                return quick
            found, revision, data = self._look()
            act = TABLE[op][found]
            if act == Act.CREATE:
                self._put(LeaseRecord(epoch=os.urandom(4).hex(), generation=1), None, b"", create=True)
            elif act == Act.TAKE:
                previous = self.found or LeaseRecord()
                self._put(LeaseRecord(epoch=previous.epoch or os.urandom(4).hex(),
                                      generation=previous.generation + 1), revision, data, exclusive=True)
                self.took_over = found in (Found.EXPIRED, Found.DEAD)
            elif act in (Act.KEEP, Act.DROP) and state is not None:
                # the holder's own record: nobody may take it over while its grant is safe, so a
                # compare-and-swap by revision will do; after a stall, the exclusive one
                assert self.record is not None
                self._put(msgspec.structs.replace(self.record, state=state), revision, data,
                          exclusive=time.monotonic() >= self._safe_until)
            elif act == Act.DROP:
                self.storage.delete_file(self.path)
                self.storage.prune_empty_parents(self.path)
            elif act == Act.LOST:
                self._lose()
            return act

    def _quick(self, op: Op, state: RecordState | None) -> Act | None:
        """The step without reading first where the write itself is the check: a first attempt
        creates the record (``ABSENT``), a holder rewrites its own record by the revision it
        wrote while its grant is safe (``MINE``). A refused write falls back to the full step."""
        try:
            if op == Op.ACQUIRE and self.seen is None and self.record is None:
                self._put(LeaseRecord(epoch=os.urandom(4).hex(), generation=1), None, b"", create=True)
                return Act.CREATE
            if (op in (Op.RENEW, Op.SETTLE, Op.RELEASE) and state is not None and self.record is not None
                    and self._revision and self.lost is None and time.monotonic() < self._safe_until):
                self._put(msgspec.structs.replace(self.record, state=state), self._revision, self._written or b"")
                return TABLE[op][Found.MINE]
        except _Raced:
            pass
        return None

    def peek(self) -> Found:
        """What the record is to this holder now (:attr:`found` says whose), without acting."""
        with self._io:
            return self._look()[0]

    def _put(self, grant: LeaseRecord, revision: str | None, expected: bytes, *, create: bool = False,
             exclusive: bool = False) -> None:
        """Write ``grant`` as this holder's record in place of ``expected`` (at ``revision``)."""
        now = format_precise(self.now())
        record = msgspec.structs.replace(
            grant, holder=self.holder if grant.state != RecordState.FREE else "", host=self.host, pid=self.pid,
            lease_seconds=self.length,
            acquired_at=grant.acquired_at or now, renewed_at=now, serial=os.urandom(4).hex())
        data = record.to_bytes()
        sent = time.monotonic()
        _hold(None, record)  # before it is visible: this process never mistakes it for an orphan
        try:
            if create:
                entry = self._write(data, overwrite=False)
            elif exclusive and Feature.ATOMIC_RENAME in self.storage.capabilities:
                entry = self._swap_aside(expected, data)
            else:
                entry = self._write(data, overwrite=True, if_revision=revision)
        except BaseException as exc:
            _hold(record, None)
            if not isinstance(exc, StorageError) or exc.kind not in (ErrorKind.CONFLICT, ErrorKind.ALREADY_EXISTS):
                raise
            raise _Raced() from exc
        _hold(self.record, None)
        self.record, self._written, self.lost = record, data, None
        self._revision = entry.revision
        self._safe_until = sent + SAFE_SHARE * self.length

    def _swap_aside(self, expected: bytes, data: bytes) -> Entry:
        """Compare-and-swap by rename: move the record aside (one mover wins), check it is
        ``expected``, link ``data`` in without clobbering; a wrong one is put back."""
        grave = lp.sibling_temp_path(self.path)
        try:
            self.storage.rename(self.path, grave, overwrite=True)
        except StorageError as exc:
            if exc.kind != ErrorKind.NOT_FOUND:
                raise
            raise StorageError("lease", self.storage.backend, self.path, ErrorKind.CONFLICT, "record gone") from exc
        try:
            moved = self.storage.read_bytes(grave, max_size=_MAX_RECORD)
            if moved != expected:
                with contextlib.suppress(StorageError):
                    self.storage.rename(grave, self.path, overwrite=False)
                raise StorageError("lease", self.storage.backend, self.path, ErrorKind.CONFLICT, "record changed")
            return self._write(data, overwrite=False)
        finally:
            with contextlib.suppress(StorageError):
                self.storage.delete_file(grave)

    def _write(self, data: bytes, *, overwrite: bool, if_revision: str | None = None) -> Entry:
        for attempt in range(_VANISHED_RETRIES + 1):
            try:
                return self.storage.write_bytes(self.path, data, overwrite=overwrite, if_revision=if_revision)
            except StorageError as exc:  # a temporary swept by a holder's recovery: write it again
                if exc.kind != ErrorKind.NOT_FOUND or attempt == _VANISHED_RETRIES:
                    raise
        raise AssertionError("unreachable")

    def _lose(self) -> None:
        _hold(self.record, None)
        who = f" ({self.found.holder})" if self.found is not None and self.found.holder else ""
        self.lost = self.lost or f"{self.name} was taken over by another writer{who}"
        raise LeaseLost("lease", self.storage.backend, self.path, ErrorKind.CONFLICT, message=self.lost)

    # ------------------------------------------------------------------ operations

    def try_acquire(self) -> Act:
        """One attempt: ``CREATE``/``TAKE``/``KEEP`` (granted), ``WAIT`` or ``SETTLED`` (see
        :attr:`found`)."""
        try:
            return self._step(Op.ACQUIRE)
        except _Raced:  # another writer won the race: look at its record
            return Act.SETTLED if self.peek() == Found.DONE else Act.WAIT

    def acquire(self, wait: float, *, on_refused: Callable[[], None] | None = None) -> None:
        """Wait up to ``wait`` seconds for the lease. Past ``wait`` (unless it is 0: no wait at
        all) it waits on only while the record it watches stays unchanged: a live holder renews
        within a quarter of its lease (then :class:`LeaseBusy`), a dead one does not and is taken
        over once expired."""
        deadline = time.monotonic() + wait
        delay, watched = 0.05, None
        while True:
            act = self.try_acquire()
            if act in (Act.CREATE, Act.TAKE, Act.KEEP):
                return
            if act == Act.WAIT and self.found is None and on_refused is not None:
                on_refused()  # a refused create without a record to read
            current = self.seen
            if time.monotonic() >= deadline:
                if act == Act.SETTLED or current is None or wait <= 0 or watched not in (None, current):
                    raise self.busy()
                watched = current
            # an Event's timed wait rather than time.sleep: the same wait, and one that also works
            # under libfaketime with its monotonic clock left alone (the skew tests), where
            # clock_nanosleep fails with EINVAL
            threading.Event().wait(delay)
            delay = min(delay * 2, 1.0, max(0.05, self.length / 8))

    def busy(self) -> LeaseBusy:
        who = self.found.holder if self.found is not None and self.found.holder else "an unknown writer"
        since = self.found.acquired_at if self.found is not None and self.found.acquired_at else "an unknown time"
        return LeaseBusy("lock", self.storage.backend, self.path, f"{self.name} is held by {who} since {since}",
                         self.found)

    def renew(self) -> None:
        """Rewrite the record (:class:`LeaseLost` when it is not ours any more)."""
        if self.lost:
            raise LeaseLost("lease", self.storage.backend, self.path, ErrorKind.CONFLICT, message=self.lost)
        try:
            self._step(Op.RENEW)
        except _Raced:
            self._lose()

    def ensure(self) -> None:
        """Raise :class:`LeaseLost` unless the grant is still safe: free while the last renewal
        is recent enough, a renewal at once when it is not (a stall)."""
        if self.lost is None and time.monotonic() < self._safe_until:
            return
        with self._io:
            if self.lost is None and time.monotonic() < self._safe_until:
                return
            self.renew()

    def check(self) -> None:
        """The fence before a commit: the grant is safe and the record is still ours."""
        self.ensure()
        self._step(Op.CHECK)

    def settle(self, state: RecordState) -> None:
        """Write the record ``free`` or ``done`` (a compare-and-swap; :class:`LeaseLost` if it
        is not ours)."""
        try:
            self._step(Op.SETTLE if state == RecordState.DONE else Op.RELEASE, state)
        except _Raced:
            self._lose()
        _hold(self.record, None)
        self.record = None

    def release(self) -> None:
        """Delete the record if it is still ours; never raises."""
        with self._io:
            if self.record is not None and self.lost is None:
                with contextlib.suppress(StorageError, _Raced):
                    self._step(Op.RELEASE, None)
            _hold(self.record, None)
            self.record = self._written = None

    @contextlib.contextmanager
    def kept(self) -> Iterator[Lease]:
        """The renew loop: rewrites the record every quarter of the lease while the block runs;
        :attr:`lost` says whether it was lost meanwhile."""
        stop = threading.Event()

        def loop() -> None:
            interval = self.length * RENEW_SHARE
            while not stop.wait(interval):
                try:
                    self.renew()
                    interval = self.length * RENEW_SHARE
                except LeaseLost:
                    return
                except Exception:  # a store hiccup: sooner again, well before the grant runs out
                    interval = self.length * RENEW_SHARE / 2

        thread = threading.Thread(target=loop, name=f"distributor-lease {self.path}", daemon=True)
        thread.start()
        try:
            yield self
        finally:
            stop.set()
            thread.join()


class _Raced(Exception):
    """A compare-and-swap lost to another writer."""


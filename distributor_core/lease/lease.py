"""One lease over a storage's compare-and-swap (issue 34; as in Chubby and etcd). Each operation
is one step of :mod:`.table`. A takeover on a storage that renames atomically (local, SFTP) renames
the record aside (one mover wins), checks it and links its own in; S3 uses ``If-Match``. Expiry is
observed (:class:`Observer`), never compared; a record of a gone process of this host (or of this
process, held by none of its leases) is free at once. A grant is safe until three quarters of the
lease after its last renewal was *sent*: :meth:`Lease.ensure` is free until then and renews at
once after (a stall); :meth:`Lease.check` also re-reads the record, the fence before a commit."""

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

SAFE_SHARE, RENEW_SHARE = 0.75, 0.25
GRANTED = (Act.CREATE, Act.TAKE, Act.KEEP)
#: serials of the records this process's leases hold or are writing right now
_HELD: set[str] = set()


def pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists on this host (one of another user's counts)."""
    try:
        os.kill(pid, 0) if pid > 0 else None
    except PermissionError:
        return True
    except OSError:
        return False
    return pid > 0


class LeaseLost(StorageError):
    """The lease is not this holder's any more: nothing of its work may become visible."""


class Observer:
    """When this process first saw each record as it is now (one per store: kept between looks)."""

    def __init__(self, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.monotonic, self._seen = monotonic, dict[str, tuple[bytes, float]]()

    def age(self, key: str, fingerprint: bytes) -> float:
        """Seconds ``key`` has been seen as ``fingerprint`` (0 at first sight of it)."""
        now, seen = self.monotonic(), self._seen.get(key)
        if seen is None or seen[0] != fingerprint:
            if len(self._seen) > 10_000:
                self._seen.clear()  # judgements begun again: one more lease of waiting, nothing else
            seen = self._seen[key] = (fingerprint, now)
        return now - seen[1]


class Lease:
    """One holder's side of the lease on ``path``; ``name`` (``destination x``) words its errors."""

    def __init__(self, storage: Storage, path: str, *, holder: str, length: float, name: str,
                 observer: Observer | None = None, now: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self.storage, self.path, self.holder, self.length, self.name = storage, path, holder, length, name
        self.observer, self.now, self.host, self.pid = observer or Observer(), now, os.uname().nodename, os.getpid()
        self.record: LeaseRecord | None = None  #: the grant, as last written
        self.found: LeaseRecord | None = None  #: another holder's record at the last look ...
        self.seen: bytes | None = None  #: ... its revision and bytes
        self.took_over, self.lost, self._io = False, None, threading.RLock()
        self._written, self._revision, self._safe_until = b"", None, float("-inf")

    @property
    def held(self) -> bool:
        return self.record is not None and self.lost is None

    @property
    def grant(self) -> tuple[str, int]:  # the fencing token
        return (self.record.epoch, self.record.generation) if self.record else ("", 0)

    def _look(self) -> tuple[Found, str | None, bytes]:
        self.found = self.seen = None
        try:
            revision = self.storage.stat(self.path).revision
            data = self.storage.read_bytes(self.path, max_size=64 * 1024)
        except StorageError as exc:
            if exc.kind == ErrorKind.NOT_FOUND:
                return Found.ABSENT, None, b""
            raise
        if self.record is not None and data == self._written:
            return Found.MINE, revision, data
        found = self.found = parse_record(data)
        self.seen = (revision or "").encode() + b"\0" + data
        gone = found.serial not in _HELD if found.pid == self.pid else not pid_alive(found.pid)
        if found.state != RecordState.HELD:
            return Found(found.state.value), revision, data
        if found.host == self.host and gone:
            return Found.DEAD, revision, data
        expired = self.observer.age(self.path, self.seen) >= (found.lease_seconds or self.length)
        return Found.EXPIRED if expired else Found.LIVE, revision, data

    def _step(self, op: Op, state: RecordState | None = RecordState.HELD) -> Act:
        with self._io:
            safe = self.lost is None and time.monotonic() < self._safe_until
            if op == Op.ACQUIRE and self.seen is None and self.record is None:  # a first attempt: create
                if self._put(LeaseRecord(epoch=os.urandom(4).hex(), generation=1), None):
                    return Act.CREATE
            elif op != Op.CHECK and state and self.record and self._revision and safe and self._put(
                    msgspec.structs.replace(self.record, state=state), self._revision,
                    by=self._safe_until):  # our own, known
                return TABLE[op][Found.MINE]
            looked = time.monotonic()
            found, revision, data = self._look()
            act = TABLE[op][found]
            if act in (Act.CREATE, Act.TAKE):
                old = self.found or LeaseRecord(epoch=os.urandom(4).hex())
                if not self._put(LeaseRecord(epoch=old.epoch or os.urandom(4).hex(), generation=old.generation + 1),
                                 revision, data if act == Act.TAKE else None):
                    return Act.SETTLED if self._look()[0] == Found.DONE else Act.WAIT  # another writer won
                self.took_over = found in (Found.EXPIRED, Found.DEAD)
            elif act in (Act.KEEP, Act.DROP) and state and self.record:
                if not self._put(msgspec.structs.replace(self.record, state=state), revision, None if safe else data,
                                 by=looked + SAFE_SHARE * self.length):
                    self._lose()
            elif act == Act.DROP:
                self.storage.delete_file(self.path)
                self.storage.prune_empty_parents(self.path)
            elif act == Act.LOST:
                self._lose()
            return act

    def _put(self, grant: LeaseRecord, revision: str | None, aside: bytes | None = None, *,
             by: float | None = None) -> bool:
        """Write ``grant`` as ours: created, by ``revision``, or renamed in for ``aside``; ``False``:
        another writer's compare-and-swap came first. ``by``: when a rewrite of our own record
        must have landed (monotonic): past it, another writer may have seen the old record expire,
        taken it over and let it go before ours landed, so the grant is not trusted (lost)."""
        now = format_precise(self.now())
        record = msgspec.structs.replace(
            grant, holder="" if grant.state == RecordState.FREE else self.holder, host=self.host, pid=self.pid,
            lease_seconds=self.length, acquired_at=grant.acquired_at or now, renewed_at=now,
            serial=os.urandom(4).hex())
        data, sent = record.to_bytes(), time.monotonic()
        _HELD.add(record.serial)  # before it is visible: this process never takes it for an orphan
        try:
            if aside is not None and Feature.ATOMIC_RENAME in self.storage.capabilities:
                entry = self._swap_aside(aside, data)
            else:
                entry = self._write(data, revision)
        except StorageError as exc:
            _HELD.discard(record.serial)
            if exc.kind in (ErrorKind.CONFLICT, ErrorKind.ALREADY_EXISTS):
                return False
            raise
        _HELD.discard(self.record.serial if self.record else "")
        self.record, self._written, self._revision, self.lost = record, data, entry.revision, None
        self._safe_until = sent + SAFE_SHARE * self.length
        if by is not None and (landed := time.monotonic()) >= by:
            took = landed - sent
            self._lose(f"{self.name} lock's lease ran out while this writer stalled (one renewal took {took:.1f} s, "
                       f"lease {self.length:g} s): another writer may have taken it over meanwhile")
        return True

    def _swap_aside(self, expected: bytes, data: bytes) -> Entry:
        grave = lp.sibling_temp_path(self.path)
        try:
            self.storage.rename(self.path, grave, overwrite=True)
        except StorageError as exc:
            raise StorageError("lease", self.storage.backend, self.path, ErrorKind.CONFLICT, exc) from exc
        try:
            if self.storage.read_bytes(grave, max_size=64 * 1024) != expected:
                with contextlib.suppress(StorageError):
                    self.storage.rename(grave, self.path, overwrite=False)
                raise StorageError("lease", self.storage.backend, self.path, ErrorKind.CONFLICT, "record changed")
            return self._write(data, None)
        finally:
            with contextlib.suppress(StorageError):
                self.storage.delete_file(grave)

    def _write(self, data: bytes, revision: str | None, attempts: int = 6) -> Entry:
        try:
            return self.storage.write_bytes(self.path, data, overwrite=revision is not None, if_revision=revision)
        except StorageError as exc:  # a temporary swept by a holder's recovery: write it again
            if exc.kind != ErrorKind.NOT_FOUND or attempts <= 1:
                raise
        return self._write(data, revision, attempts - 1)

    def _lose(self, why: str = "") -> None:
        _HELD.discard(self.record.serial if self.record else "")
        who = f" ({self.found.holder})" if self.found is not None and self.found.holder else ""
        self.lost = self.lost or why or f"{self.name} lock was taken over by another writer{who}"
        raise LeaseLost("lease", self.storage.backend, self.path, ErrorKind.CONFLICT, message=self.lost)

    def try_acquire(self) -> Act:
        """One attempt: granted (``CREATE``, ``TAKE``, ``KEEP``), ``WAIT`` or ``SETTLED`` (:attr:`found`)."""
        return self._step(Op.ACQUIRE)

    def acquire(self, wait: float, on_refused: Callable[[], None] = lambda: None) -> None:
        """Wait ``wait`` seconds for a live holder (one that renews), longer (unless 0) only while the
        record does not change: a dead holder's is taken over once expired."""
        deadline, delay, watched = time.monotonic() + wait, 0.05, None
        while (act := self.try_acquire()) not in GRANTED:
            if self.found is None:
                on_refused()  # a refused create and no record to read
            if time.monotonic() >= deadline:
                if act == Act.SETTLED or self.seen is None or wait <= 0 or watched not in (None, self.seen):
                    who = self.found.holder if self.found and self.found.holder else "an unknown writer"
                    since = self.found.acquired_at if self.found and self.found.acquired_at else "an unknown time"
                    raise StorageError("lock", self.storage.backend, self.path, ErrorKind.CONFLICT,
                                       message=f"{self.name} is locked by {who} since {since}")
                watched = self.seen
            threading.Event().wait(delay)  # not time.sleep: it fails under libfaketime (the skew tests)
            delay = min(delay * 2, 1.0, max(0.05, self.length / 8))

    def peek(self) -> Found:
        """What the record is to this holder now (:attr:`found` says whose), without acting."""
        with self._io:
            return self._look()[0]

    def renew(self) -> None:
        """Rewrite the record; :class:`LeaseLost` when it is not ours any more."""
        if self.lost is not None:
            self._lose()
        self._step(Op.RENEW)

    def ensure(self) -> None:
        """:class:`LeaseLost` unless the grant is still safe (a renewal at once after a stall)."""
        if self.lost is not None or time.monotonic() >= self._safe_until:
            with self._io:
                if self.lost is not None or time.monotonic() >= self._safe_until:
                    self.renew()

    def check(self) -> None:
        """The fence before a commit: the grant is safe and the record is still ours."""
        self.ensure()
        self._step(Op.CHECK)

    def settle(self, state: RecordState) -> None:
        """Write the record ``done`` (:class:`LeaseLost` if it is not ours) or ``free``."""
        try:
            self._step(Op.SETTLE if state == RecordState.DONE else Op.RELEASE, state)
        finally:
            self.release(delete=False)

    def release(self, *, delete: bool = True) -> None:
        """Delete the record if it is still ours (never raises); forget the grant."""
        with self._io:
            if delete and self.record is not None:  # lost too: a record still byte for byte ours goes
                with contextlib.suppress(StorageError):
                    self._step(Op.RELEASE, None)
            _HELD.discard(self.record.serial if self.record else "")
            self.record = None

    @contextlib.contextmanager
    def kept(self) -> Iterator[Lease]:
        """The renew loop: the record rewritten every quarter of the lease while the block runs."""
        stop = threading.Event()

        def loop() -> None:
            while not stop.wait(self.length * RENEW_SHARE):
                with contextlib.suppress(Exception):  # a store hiccup: again a quarter later, still safe
                    self.renew()

        thread = threading.Thread(target=loop, name=f"distributor-lease {self.path}", daemon=True)
        thread.start()
        try:
            yield self
        finally:
            stop.set()
            thread.join()

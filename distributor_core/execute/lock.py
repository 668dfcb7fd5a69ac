"""The destination lock (resolutions A3): the core's one lease (:mod:`distributor_core.lease`) on
``<bundle path>/.distributor.lock``, held by every writer of a bundle path (runs, prune, repair).

Acquired by exclusive create; another writer's lock is taken over once this writer has seen it
unchanged for the holder's lease (renewed every quarter of it while the holder works), or at
once when its holder is a process of this host that is gone. A contender waits ``wait`` seconds
for a live holder, longer only while the lock it watches does not change (a dead holder, taken
over when expired). Writes under the lock go through :meth:`DestinationLock.fenced`, so a holder
that lost the lock writes nothing more. A bundle path (or destination root) that exists but is
not a directory is an ``invalid_path`` error naming it (after a second refusal, so a release
racing an S3 key of that name is not mistaken for it).
"""

from __future__ import annotations

import contextlib
from datetime import datetime

from distributor_core import paths as lp
from distributor_core.lease import FencedStorage, Lease, LeaseBusy
from distributor_core.storage.base import Storage
from distributor_core.storage.errors import ErrorKind, StorageError
from distributor_core.timefmt import Clock, system_clock

#: seconds a lock lasts without renewal (``lock_lease`` of a destination)
DEFAULT_LEASE = 60.0
DEFAULT_WAIT = 30.0


class DestinationLock:
    """Context manager holding ``<bundle>/.distributor.lock`` for the duration of a write."""

    def __init__(self, storage: Storage, bundle_path: str, *, holder: str, lease: float = DEFAULT_LEASE,
                 wait: float = DEFAULT_WAIT, clock: Clock | None = None, renew: bool = True) -> None:
        self.storage = storage
        self.bundle_path = bundle_path
        self.path = lp.lock_path(bundle_path)
        self.wait = wait
        self.renew_enabled = renew
        now: Clock = clock or system_clock
        self.lease = Lease(storage, self.path, holder=holder, length=lease, name=f"destination {self._display()} lock",
                           now=lambda: _utc(now()))
        self._not_directory = 0
        self._renewing = contextlib.ExitStack()

    @property
    def holder(self) -> str:
        return self.lease.holder

    @property
    def held(self) -> bool:
        return self.lease.held

    @property
    def broke_stale(self) -> bool:
        """Whether the lock was taken over from a holder that expired or died."""
        return self.lease.took_over

    @property
    def lost(self) -> str | None:
        return self.lease.lost

    def _display(self) -> str:
        root = self.storage.root_display.rstrip("/") or "."
        if self.bundle_path:
            return f"{root}/{self.bundle_path}" if root != "." else self.bundle_path
        return root

    def acquire(self) -> None:
        try:
            self.lease.acquire(self.wait, on_refused=self._refused)
        except LeaseBusy as busy:
            found = busy.record
            who = found.holder if found is not None and found.holder else "an unknown writer"
            since = found.acquired_at if found is not None and found.acquired_at else "an unknown time"
            raise StorageError("lock", self.storage.backend, self.path, ErrorKind.CONFLICT,
                               message=f"destination {self._display()} is locked by {who} since {since}") from None
        if self.renew_enabled:
            self._renewing.enter_context(self.lease.kept())

    def _refused(self) -> None:
        """A create was refused with no lock to read: released meanwhile, or the directory is
        something else; twice in a row over a non-directory is conclusive."""
        try:
            entry = self.storage.stat(self.bundle_path)
        except StorageError:
            entry = None
        if entry is None or entry.type == "directory":
            self._not_directory = 0
            return
        self._not_directory += 1
        if self._not_directory > 1:
            what = "destination root" if self.bundle_path == "" else "destination bundle path"
            raise StorageError("lock", self.storage.backend, self.path, ErrorKind.INVALID_PATH,
                               message=f"{what} {self._display()} is not a directory")

    def fenced(self, storage: Storage | None = None) -> Storage:
        """``storage`` (the destination) writing only while this lock is held."""
        return FencedStorage(storage or self.storage, self.lease)

    def ensure_held(self) -> None:
        """Raise a ``conflict`` error when the lock was lost (free unless the holder stalled)."""
        self.lease.ensure()

    def still_held(self) -> bool:
        """Whether the lock is still this writer's as far as it can tell without asking (a
        renewal at once after a stall); ``False`` once it was lost."""
        try:
            self.lease.ensure()
        except StorageError:
            return self.lease.lost is None
        return True

    def confirm(self) -> bool:
        """Re-read the lock: ``False`` (and :attr:`lost` set) when another writer took it over."""
        try:
            self.lease.check()
        except StorageError:
            return self.lease.lost is None
        return True

    def release(self) -> None:
        self._renewing.close()
        self.lease.release()

    def __enter__(self) -> DestinationLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _utc(value: datetime) -> datetime:
    return value if value.tzinfo is not None else value.astimezone()

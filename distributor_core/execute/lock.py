"""The destination lock (resolutions A3): the core's one lease on ``<bundle path>/.distributor.lock``
for every writer of a bundle path, renewed while it works; writes under it go through
:meth:`DestinationLock.fenced`. A bundle path that is not a directory is an ``invalid_path`` error
(after a second refusal, so a release racing an S3 key of that name is not mistaken for it)."""

from __future__ import annotations

import contextlib

from distributor_core import paths as lp
from distributor_core.config.models import Destination, default_of
from distributor_core.lease import FencedStorage, Lease
from distributor_core.storage.base import Storage
from distributor_core.storage.errors import ErrorKind, StorageError
from distributor_core.timefmt import Clock

#: seconds a lock lasts without renewal (a destination's ``lock_lease``)
DEFAULT_LEASE: float = default_of(Destination, "lock_lease").total_seconds()
#: seconds an acquirer waits for a held lock
DEFAULT_WAIT = 30.0


class DestinationLock(Lease):
    """Context manager holding ``<bundle>/.distributor.lock`` for the duration of a write."""

    def __init__(self, storage: Storage, bundle_path: str, *, holder: str, lease: float = DEFAULT_LEASE,
                 wait: float = DEFAULT_WAIT, clock: Clock | None = None, renew: bool = True) -> None:
        root = storage.root_display.rstrip("/") or "."
        self.display = (f"{root}/{bundle_path}" if root != "." else bundle_path) if bundle_path else root
        super().__init__(storage, lp.lock_path(bundle_path), holder=holder, length=lease,
                         name=f"destination {self.display}", **({"now": clock} if clock else {}))
        self.bundle_path, self.wait, self.renew_enabled = bundle_path, wait, renew
        self._refusals, self._renewing = 0, contextlib.ExitStack()

    def acquire(self) -> None:  # type: ignore[override]
        super().acquire(self.wait, self._refused)
        if self.renew_enabled:
            self._renewing.enter_context(self.kept())

    def _refused(self) -> None:
        """A create refused with no lock to read: released meanwhile, or the directory is
        something else; twice in a row over a non-directory is conclusive."""
        try:
            kind = self.storage.stat(self.bundle_path).type
        except StorageError:
            kind = "directory"
        self._refusals = 0 if kind == "directory" else self._refusals + 1
        if self._refusals > 1:
            what = "destination root" if self.bundle_path == "" else "destination bundle path"
            raise StorageError("lock", self.storage.backend, self.path, ErrorKind.INVALID_PATH,
                               message=f"{what} {self.display} is not a directory")

    def fenced(self, storage: Storage | None = None) -> Storage:
        """``storage`` (the destination) writing only while this lock is held."""
        return FencedStorage(storage or self.storage, self)

    def release(self, *, delete: bool = True) -> None:
        self._renewing.close()
        super().release(delete=delete)

    def __enter__(self) -> DestinationLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

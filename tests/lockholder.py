"""A destination lock held by a live writer on another host, for tests that need one: it renews
its lock every quarter of its (short) lease like any writer, so a contender that waits sees it
change and gives up, under a host name that is not this one, so no process here can tell whether
it is alive. A lock file written by hand instead is a writer that stopped renewing: a contender
takes it over once it has seen it unchanged for the lease."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from distributor_core.execute.lock import DestinationLock
from distributor_core.storage import Storage
from distributor_core.timefmt import Clock


@contextmanager
def held_lock(storage: Storage, bundle_path: str = "", *, holder: str = "another writer", host: str = "elsewhere",
              lease: float = 0.4, clock: Clock | None = None) -> Iterator[DestinationLock]:
    lock = DestinationLock(storage, bundle_path, holder=holder, lease=lease, wait=5, clock=clock)
    lock.host = host
    with lock:
        yield lock

"""Publication leases of the shared staging store (issue 29): which replica's inline publisher is
publishing an unfinished upload, and until when.

A lease lives in the upload's pending marker (``pending/<number>.<run id>``, see
:mod:`.objectstore`), not in the record, so the record schema is unchanged: an empty marker is
free; a leased one holds ``{"owner": ..., "until": ...}``. Taking, renewing and releasing a lease
are compare-and-swap writes of the marker on its revision, so one replica holds it at a time. A
replica killed mid-publication stops renewing; once ``until`` passed, another replica takes the
upload over (``running`` → ``running``: "a new run took over an interrupted publication").
Replicas compare ``until`` with their own clocks: keep the lease far longer than their skew.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

#: default lease of an inline publication; renewed every third of it while the publication runs
DEFAULT_LEASE = timedelta(seconds=60)


@dataclass(frozen=True)
class Lease:
    """A publication lease held by ``owner`` until ``until`` (the marker's ``version`` after the
    write that took or renewed it)."""

    run_id: str
    owner: str
    until: datetime
    marker: str
    version: str


def lease_bytes(owner: str, until: datetime) -> bytes:
    return json.dumps({"owner": owner, "until": until.isoformat(timespec="milliseconds")},
                      separators=(",", ":")).encode()


def parse_lease(data: bytes) -> tuple[str, datetime] | None:
    """``(owner, until)`` of a marker's content; ``None`` for a free marker (empty, released or
    unreadable: an unreadable lease protects nothing)."""
    if not data.strip():
        return None
    try:
        obj = json.loads(data)
        until = datetime.fromisoformat(str(obj["until"]))
        if until.tzinfo is None:
            return None
        return str(obj["owner"]), until
    except (ValueError, KeyError, TypeError):
        return None


def held_by_other(data: bytes, owner: str, now: datetime) -> bool:
    """Whether a marker's lease belongs to another owner and has not expired."""
    lease = parse_lease(data)
    return lease is not None and lease[0] != owner and lease[1] > now


class LeaseKeeper:
    """Renews a held lease in a background thread every third of its duration while a
    publication runs (``with LeaseKeeper(store, lease): publish()``). ``lost`` turns true when a
    renewal found the lease taken over or the upload finished: the publication must then not
    report its result, because another replica owns the upload."""

    def __init__(self, store: Renewer, lease: Lease, duration: timedelta = DEFAULT_LEASE) -> None:
        self.store = store
        self.lease = lease
        self.duration = duration
        self.lost = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"lease-{lease.run_id}", daemon=True)

    def __enter__(self) -> LeaseKeeper:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        interval = self.duration.total_seconds() / 3
        while not self._stop.wait(interval):
            try:
                self.lease = self.store.renew(self.lease, self.duration)
            except LeaseLost:
                self.lost = True
                return
            except Exception:  # a store hiccup: try again at the next interval, before expiry
                continue


class LeaseLost(Exception):
    """The lease expired and another replica took the upload over, or the upload finished."""


class Renewer(Protocol):
    def renew(self, lease: Lease, duration: timedelta = ...) -> Lease: ...

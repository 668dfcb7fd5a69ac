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
from dataclasses import dataclass
from datetime import datetime, timedelta

from distributor_core.timefmt import format_seconds, parse_rfc3339

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
    return json.dumps({"owner": owner, "until": format_seconds(until)}, separators=(",", ":")).encode()


def parse_lease(data: bytes) -> tuple[str, datetime] | None:
    """``(owner, until)`` of a marker's content; ``None`` for a free marker (empty, released or
    unreadable: an unreadable lease protects nothing)."""
    if not data.strip():
        return None
    try:
        obj = json.loads(data)
        return str(obj["owner"]), parse_rfc3339(str(obj["until"]))
    except (ValueError, KeyError, TypeError):
        return None


def held_by_other(data: bytes, owner: str, now: datetime) -> bool:
    """Whether a marker's lease belongs to another owner and has not expired."""
    lease = parse_lease(data)
    return lease is not None and lease[0] != owner and lease[1] > now

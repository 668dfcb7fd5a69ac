"""The one lease of the core (issue 34): a claim shared across processes and hosts, kept as a small
record in a storage and changed only by its compare-and-swap. It is the destination lock
(``execute.lock``), the publication lease of an upload in shared staging and the claim of an
idempotency key (``staging.objectstore``).

- :mod:`.record`: the record (holder, generation, epoch, lease length; wall times for people only)
  and how the records of earlier releases read.
- :mod:`.table`: what to do with what was found, per operation: decisions as data.
- :mod:`.lease`: :class:`Lease` (one attempt, a wait, the renew loop, the fence checks) and the
  :class:`Observer` that judges expiry by elapsed time on this process's monotonic clock.
- :mod:`.fenced`: :class:`FencedStorage`, a storage whose writes stop once the lease is lost.

Must not know: bundles, state, plans, uploads. Expiry is observed, never compared: another
holder's record is expired once this process has seen it unchanged for the holder's lease length.
"""

from distributor_core.lease.fenced import FencedStorage
from distributor_core.lease.lease import Lease, LeaseBusy, LeaseLost, Observer, hostname, pid_alive
from distributor_core.lease.record import LeaseRecord, RecordState, parse_record
from distributor_core.lease.table import Act, Found, Op

__all__ = [
    "Act",
    "FencedStorage",
    "Found",
    "Lease",
    "LeaseBusy",
    "LeaseLost",
    "LeaseRecord",
    "Observer",
    "Op",
    "RecordState",
    "hostname",
    "parse_record",
    "pid_alive",
]

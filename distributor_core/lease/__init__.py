"""The one lease of the core (issue 34): the destination lock, an upload's publication lease and an
admission's key claim, kept as a record in a storage and changed only by compare-and-swap; expiry
observed on this process's monotonic clock. Must not know: bundles, state, plans, uploads."""

from distributor_core.lease.fenced import FencedStorage
from distributor_core.lease.lease import GRANTED, Lease, LeaseLost, Observer, pid_alive
from distributor_core.lease.record import LeaseRecord, RecordState, parse_record
from distributor_core.lease.table import Act, Found, Op

__all__ = ["GRANTED", "Act", "FencedStorage", "Found", "Lease", "LeaseLost", "LeaseRecord", "Observer", "Op",
           "RecordState", "parse_record", "pid_alive"]

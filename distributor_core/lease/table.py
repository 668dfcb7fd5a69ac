"""What a lease does with what it found: one table for every operation (h11 style).

A step reads the record, classifies it (:class:`Found`), looks up ``TABLE[op][found]`` and does
that :class:`Act`. ``EXPIRED`` is the observer's judgement (the same record seen unchanged for
the holder's lease length on this process's monotonic clock), ``DEAD`` a fact of this host (the
holder's process is gone); no wall-clock time decides anything.
"""

from __future__ import annotations

from enum import StrEnum


class Found(StrEnum):
    ABSENT = "absent"
    FREE = "free"
    DONE = "done"
    #: the record this lease last wrote, byte for byte
    MINE = "mine"
    LIVE = "live"
    EXPIRED = "expired"
    DEAD = "dead"


class Op(StrEnum):
    ACQUIRE = "acquire"
    RENEW = "renew"
    #: settle for good (``done``): a key claim confirmed after its record was written
    SETTLE = "settle"
    RELEASE = "release"
    #: the fence before a commit: still ours?
    CHECK = "check"


class Act(StrEnum):
    #: write the record where there is none (exclusive create): generation 1 of a new epoch
    CREATE = "create"
    #: replace the record found (compare-and-swap): the next generation, this holder's
    TAKE = "take"
    #: rewrite this holder's record (compare-and-swap), same generation
    KEEP = "keep"
    #: another holder's live record: not now
    WAIT = "wait"
    #: settled for good by another holder: answer from it
    SETTLED = "settled"
    #: not this holder's any more: stop, nothing of it may become visible
    LOST = "lost"
    #: give it back (delete it, or write it free or done)
    DROP = "drop"
    NOTHING = "nothing"


F, A = Found, Act
TABLE: dict[Op, dict[Found, Act]] = {
    Op.ACQUIRE: {F.ABSENT: A.CREATE, F.FREE: A.TAKE, F.DONE: A.SETTLED, F.MINE: A.KEEP, F.LIVE: A.WAIT,
                 F.EXPIRED: A.TAKE, F.DEAD: A.TAKE},
    Op.RENEW: {F.ABSENT: A.LOST, F.FREE: A.LOST, F.DONE: A.LOST, F.MINE: A.KEEP, F.LIVE: A.LOST,
               F.EXPIRED: A.LOST, F.DEAD: A.LOST},
    Op.SETTLE: {F.ABSENT: A.LOST, F.FREE: A.LOST, F.DONE: A.LOST, F.MINE: A.DROP, F.LIVE: A.LOST,
                F.EXPIRED: A.LOST, F.DEAD: A.LOST},
    Op.RELEASE: {F.ABSENT: A.NOTHING, F.FREE: A.NOTHING, F.DONE: A.NOTHING, F.MINE: A.DROP,
                 F.LIVE: A.NOTHING, F.EXPIRED: A.NOTHING, F.DEAD: A.NOTHING},
    Op.CHECK: {F.ABSENT: A.LOST, F.FREE: A.LOST, F.DONE: A.LOST, F.MINE: A.NOTHING, F.LIVE: A.LOST,
               F.EXPIRED: A.LOST, F.DEAD: A.LOST},
}
del F, A

if set(TABLE) != set(Op) or any(set(row) != set(Found) for row in TABLE.values()):
    raise AssertionError("the lease table must give an act for every operation and every finding")

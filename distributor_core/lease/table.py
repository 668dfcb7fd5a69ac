"""What a lease does with what it found (h11 style): a step reads the record, classifies it, looks
up ``TABLE[op][found]`` and does that. No wall-clock time decides anything."""

from __future__ import annotations

from enum import StrEnum

#: mine: byte for byte what this holder last wrote; expired: another's, seen unchanged for its
#: lease on this process's monotonic clock; dead: its process on this host is gone
Found = StrEnum("Found", "ABSENT FREE DONE MINE LIVE EXPIRED DEAD")
#: settle: done for good (a key claim, after its record); check: the fence before a commit
Op = StrEnum("Op", "ACQUIRE RENEW SETTLE RELEASE CHECK")
#: take: compare-and-swap, the next generation; keep: rewrite our own; drop: delete, or write free/done
Act = StrEnum("Act", "CREATE TAKE KEEP WAIT SETTLED LOST DROP NOTHING")

_OTHERS = (Found.ABSENT, Found.FREE, Found.DONE, Found.LIVE, Found.EXPIRED, Found.DEAD)
TABLE: dict[Op, dict[Found, Act]] = {
    Op.ACQUIRE: {Found.ABSENT: Act.CREATE, Found.FREE: Act.TAKE, Found.DONE: Act.SETTLED, Found.MINE: Act.KEEP,
                 Found.LIVE: Act.WAIT, Found.EXPIRED: Act.TAKE, Found.DEAD: Act.TAKE},
    Op.RENEW: {**dict.fromkeys(_OTHERS, Act.LOST), Found.MINE: Act.KEEP},
    Op.SETTLE: {**dict.fromkeys(_OTHERS, Act.LOST), Found.MINE: Act.DROP},
    Op.RELEASE: {**dict.fromkeys(_OTHERS, Act.NOTHING), Found.MINE: Act.DROP},
    Op.CHECK: {**dict.fromkeys(_OTHERS, Act.LOST), Found.MINE: Act.NOTHING},
}

if set(TABLE) != set(Op) or any(set(row) != set(Found) for row in TABLE.values()):
    raise AssertionError("the lease table must give an act for every operation and every finding")

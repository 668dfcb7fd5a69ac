"""The lease record, rewritten whole by every change. ``(epoch, generation)`` is the grant (the
fencing token); ``lease_seconds`` the holder's promise to rewrite it every quarter of that;
``serial`` changes with every write (revisions may have whole seconds: SFTP). Times are for people.
Earlier releases' records read as: empty (a pending marker) free, ``"<run id>\\n"`` (a key entry)
done, a lock or a lease held with no lease length (the observer's own applies)."""

from __future__ import annotations

import re
from enum import StrEnum

import msgspec


class RecordState(StrEnum):
    HELD = "held"
    FREE = "free"  #: given back: the next grant takes it at once
    DONE = "done"  #: settled for good (a confirmed key claim): never taken over


class LeaseRecord(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    holder: str = ""
    host: str = ""
    pid: int = 0
    epoch: str = ""
    generation: int = 0
    lease_seconds: float = 0.0
    state: RecordState = RecordState.HELD
    acquired_at: str = ""
    renewed_at: str = ""
    serial: str = ""

    def to_bytes(self) -> bytes:
        return msgspec.json.encode(self)


_RUN_ID = re.compile(rb"[A-Za-z0-9._-]{1,200}")
_decode = msgspec.json.Decoder(LeaseRecord).decode


def parse_record(data: bytes) -> LeaseRecord:
    """What ``data`` says, as well as it can be read; never raises. (A record of an earlier
    release decodes too: unknown keys are ignored, missing ones take their defaults.)"""
    text = data.strip()
    if text in (b"", b"{}"):
        return LeaseRecord(state=RecordState.FREE)
    if _RUN_ID.fullmatch(text):
        return LeaseRecord(holder=text.decode(), state=RecordState.DONE)
    try:
        return _decode(text)
    except (msgspec.ValidationError, msgspec.DecodeError):
        return LeaseRecord()

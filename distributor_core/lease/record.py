"""The record a lease keeps in the storage: one small JSON object, rewritten whole by every change.

``generation`` grows with every grant (the fencing token; ``epoch`` names the record's life since
it was last created, so ``(epoch, generation)`` orders grants even after a release deleted it).
``lease_seconds`` is the holder's promise: it rewrites the record at least every quarter of it,
so another process that sees the same record unchanged that long may take it over. ``serial``
changes with every write, so every renewal is a visible change even where a storage's revision
has whole seconds (SFTP). The times are for people: nothing compares them.

Records of earlier releases read as: an empty object (a pending marker) is free; ``"<run id>\\n"``
(a key entry) is done; a lock ``{holder, host, pid, ...}`` or a lease ``{owner, until}`` is held,
with no lease length (the observer's own applies); anything else is held by someone unknown.
"""

from __future__ import annotations

import re
from enum import StrEnum

import msgspec


class RecordState(StrEnum):
    HELD = "held"
    #: given back: the next grant takes it over at once (generation + 1)
    FREE = "free"
    #: settled for good (a confirmed key claim): nobody takes it over
    DONE = "done"


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


_decode = msgspec.json.Decoder(LeaseRecord).decode
_TOKEN = re.compile(rb"[A-Za-z0-9._-]{1,200}")


def parse_record(data: bytes) -> LeaseRecord:
    """What ``data`` says, as well as it can be read; never raises."""
    text = data.strip()
    if not text or text == b"{}":
        return LeaseRecord(state=RecordState.FREE)
    if not text.startswith(b"{"):
        if _TOKEN.fullmatch(text):  # a key entry of an earlier release: its run id
            return LeaseRecord(holder=text.decode(), state=RecordState.DONE)
        return LeaseRecord()
    try:
        return _decode(text)
    except (msgspec.ValidationError, msgspec.DecodeError):
        pass
    try:
        obj = msgspec.json.decode(text)
    except msgspec.DecodeError:
        return LeaseRecord()
    if not isinstance(obj, dict):
        return LeaseRecord()
    pid = obj.get("pid")
    return LeaseRecord(
        holder=str(obj.get("holder") or obj.get("owner") or ""),
        host=str(obj.get("host") or ""),
        pid=pid if isinstance(pid, int) and not isinstance(pid, bool) else 0,
        acquired_at=str(obj.get("acquired_at") or ""),
    )

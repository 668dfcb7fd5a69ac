"""The uploads sensor's cursor over an object-store staging area (issue 29).

Replicas admit uploads concurrently and a slower one may make its upload visible after a faster
one's later upload, so "everything after the highest number seen" would skip it. The store keeps
one empty marker per unfinished upload (``pending/<number>.<run id>``) and a tick lists them all:
their count is bounded by the uploads waiting or running, not by history. The cursor only
remembers which of the listed markers were already handed out, so a late marker is simply a
marker the cursor does not hold yet.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from distributor_core.staging.records import UploadRecord

CURSOR_VERSION = 2


@dataclass(frozen=True)
class PendingCursor:
    """Markers (``<number>.<run id>``) of ``accepted`` uploads already handed out and still
    pending. Markers that are no longer listed (the upload finished or expired) are dropped at
    the next tick, so the cursor stays as small as the set of unfinished uploads."""

    handed: frozenset[str] = frozenset()

    @classmethod
    def parse(cls, text: str | None) -> PendingCursor:
        """A cursor from :meth:`format`'s text; anything else (another version, garbage) is the
        empty cursor, which hands every pending upload out again (run keys make that harmless)."""
        if not text:
            return cls()
        try:
            data = json.loads(text)
            if not isinstance(data, dict) or data.get("v") != CURSOR_VERSION:
                return cls()
            handed = data.get("handed", [])
            if not isinstance(handed, list) or not all(isinstance(name, str) for name in handed):
                return cls()
            return cls(frozenset(handed))
        except ValueError:
            return cls()

    def format(self) -> str:
        return json.dumps({"v": CURSOR_VERSION, "handed": sorted(self.handed)}, separators=(",", ":"))


@dataclass
class PendingScan:
    """One listing of the pending markers: the ``accepted`` uploads not handed out before, in
    admission order, and the cursor that includes them."""

    offered: list[UploadRecord] = field(default_factory=list)
    cursor: PendingCursor = field(default_factory=PendingCursor)
    #: markers whose admission never completed (no record after ``abandon_after``), removed
    abandoned: list[str] = field(default_factory=list)
    #: ``(run id, reason)`` of records that could not be read
    errors: list[tuple[str, str]] = field(default_factory=list)

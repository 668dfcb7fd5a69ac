"""Failed uploads' staged bundles within byte quotas (issue 26, item 4).

A failed upload keeps its staged bundle until its record expires (``server.http.retention``), so
it can be inspected and published by hand (resolutions 7). A token can make its own publications
fail at will (same ``created``, another bundle id: ``fail_conflict``), so without a bound each
failure kept up to ``max_upload_size`` on disk for a day. Two quotas bound the bundles kept:
``max_failed_bytes_per_token`` (a token's own oldest failed bundles go first) and
``max_failed_bytes`` (all tokens together: the oldest failed bundle of the token holding the most
failed bytes goes first, so one token's failures never push out another's within its quota).

Only the bundle is removed: the record stays, answers ``GET /runs/<id>`` as ``failed`` until it
expires, and its ``error`` says the bundle was removed and which quota removed it.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

from distributor_core.staging.fsio import remove_tree
from distributor_core.staging.layout import BUNDLE_DIR, INCOMING_DIR, RecordError, bundle_dir
from distributor_core.staging.records import UploadRecord, read_record, write_record
from distributor_core.staging.status import FAILED

PER_TOKEN_KNOB = "server.http.max_failed_bytes_per_token"
TOTAL_KNOB = "server.http.max_failed_bytes"
MANIFEST_NAME = "manifest.json"


@dataclass(frozen=True)
class KeptBundle:
    """A failed upload whose staged bundle is still on disk, and what it costs."""

    run_id: str
    pipeline_id: str
    token_id: str
    size: int
    #: oldest first: when it failed, then when it was accepted, then admission order (times have
    #: whole seconds)
    finished_at: datetime
    accepted_at: datetime
    seq: int

    @property
    def age_key(self) -> tuple[datetime, datetime, int, str]:
        return (self.finished_at, self.accepted_at, self.seq, self.run_id)


def staged_size(staging_path: str | os.PathLike[str], record: UploadRecord) -> int | None:
    """Bytes of a record's staged bundle: the files its manifest lists and ``manifest.json``
    (one ``lstat``); ``None`` when the bundle is gone."""
    try:
        manifest = os.lstat(bundle_dir(staging_path, record.run_id) / MANIFEST_NAME).st_size
    except (FileNotFoundError, NotADirectoryError):
        return None
    return manifest + listed_size(record)


def listed_size(record: UploadRecord) -> int:
    """Bytes of the files a record's manifest lists."""
    return sum(f.get("size", 0) for f in record.manifest.get("files", []) if isinstance(f.get("size"), int))


def dropped_note(knob: str) -> str:
    """What a failed record's ``error`` gains when its staged bundle is removed by a quota."""
    return f"staged {BUNDLE_DIR} removed to stay within {knob}"


def kept_bundle(staging_path: str | os.PathLike[str], record: UploadRecord) -> KeptBundle | None:
    """The :class:`KeptBundle` of a failed record whose bundle is still staged, else ``None``."""
    if record.status != FAILED or record.finished_at is None:
        return None
    size = staged_size(staging_path, record)
    if size is None:
        return None
    return KeptBundle(record.run_id, record.pipeline_id, record.token_id, size, record.finished_at,
                      record.accepted_at, record.seq)


def over_quota(kept: Iterable[KeptBundle], *, per_token: int, total: int) -> list[tuple[KeptBundle, str]]:
    """Which bundles to remove, and the knob of the quota that removes each, so that every token
    keeps at most ``per_token`` bytes and all of them at most ``total``: per token its oldest
    first; then, while the total is over, the oldest of the token holding the most."""
    by_token: dict[str, list[KeptBundle]] = {}
    for bundle in sorted(kept, key=lambda b: b.age_key):
        by_token.setdefault(bundle.token_id, []).append(bundle)
    held = {token: sum(b.size for b in bundles) for token, bundles in by_token.items()}
    removed: list[tuple[KeptBundle, str]] = []
    for token, bundles in by_token.items():
        while bundles and held[token] > per_token:
            oldest = bundles.pop(0)
            held[token] -= oldest.size
            removed.append((oldest, PER_TOKEN_KNOB))
    overall = sum(held.values())
    while overall > total:
        # the most bytes; on a tie the token whose oldest bundle is oldest (tokens are in that order)
        token = max((t for t in by_token if by_token[t]), key=held.__getitem__)
        oldest = by_token[token].pop(0)
        held[token] -= oldest.size
        overall -= oldest.size
        removed.append((oldest, TOTAL_KNOB))
    return removed


def drop_bundle(staging_path: str | os.PathLike[str], run_id: str, knob: str) -> bool:
    """Remove a failed record's staged bundle (moved into ``.incoming`` first, out of sight of
    readers, then deleted; a leftover is swept at the next start) and say so in the record's
    ``error``. False when the record or its bundle is already gone."""
    path = Path(staging_path)
    trash = path / INCOMING_DIR / f"dropped-{secrets.token_hex(8)}"
    try:
        os.rename(bundle_dir(path, run_id), trash)
    except (FileNotFoundError, NotADirectoryError):
        return False
    try:
        record = read_record(path, run_id)
        note = dropped_note(knob)
        write_record(path, replace(record, error=f"{record.error}; {note}" if record.error else note))
    except (FileNotFoundError, RecordError):
        pass  # expired meanwhile: nothing to say it to
    remove_tree(trash)
    return True

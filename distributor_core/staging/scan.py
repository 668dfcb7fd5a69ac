"""Listing a staging path cheaply: record directory names, records in admission order, the
highest sequence number issued. No hashing; one small JSON read per record."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from distributor_core.staging.layout import SEQ_NAME, RecordError
from distributor_core.staging.records import UploadRecord, read_record
from distributor_core.staging.runids import is_run_id


def iter_run_ids(staging_path: str | os.PathLike[str]) -> Iterator[str]:
    """Names of record directories (run ids) in a staging path, in no particular order."""
    try:
        entries = os.scandir(staging_path)
    except FileNotFoundError:
        return
    with entries:
        for entry in entries:
            if is_run_id(entry.name) and entry.is_dir(follow_symlinks=False):
                yield entry.name


def list_records(
    staging_path: str | os.PathLike[str],
    *,
    statuses: Iterable[str] | None = None,
    errors: list[tuple[str, str]] | None = None,
) -> list[UploadRecord]:
    """Every readable record of a staging path, in ``seq`` order (admission order).

    ``statuses`` filters (e.g. ``{"accepted"}`` for a sensor). Unreadable records are skipped;
    when ``errors`` is given, ``(run id, reason)`` is appended for each.
    """
    wanted = frozenset(statuses) if statuses is not None else None
    records: list[UploadRecord] = []
    for run_id in iter_run_ids(staging_path):
        try:
            record = read_record(staging_path, run_id)
        except FileNotFoundError:
            continue  # being expired or still being promoted
        except (OSError, RecordError) as exc:
            if errors is not None:
                errors.append((run_id, str(exc)))
            continue
        if wanted is None or record.status in wanted:
            records.append(record)
    records.sort(key=lambda r: (r.seq, r.run_id))
    return records


def issued_seq(staging_path: str | os.PathLike[str]) -> int | None:
    """The highest ``seq`` the server ever issued for this staging path (``None`` when unknown)."""
    try:
        return int((Path(staging_path) / SEQ_NAME).read_text(encoding="ascii").strip())
    except (OSError, ValueError):
        return None

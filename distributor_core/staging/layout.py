"""Names and paths of the staging layout (resolutions D1).

One pipeline's ``staging_path``::

    .serve.lock                      held (flock) by the one ``serve`` process using this path
    .seq                             highest admission sequence number ever issued (never decreases)
    .incoming/<random>/              requests being received and extracted (swept at startup)
    .idempotency/<token id>/<sha256 of key>   -> "<run id>\\n"
    .quarantine/<run id>/            a run directory whose upload.json could not be read, set aside
    <run id>/upload.json             the upload record (schema_version 1)
    <run id>/bundle/                 the validated bundle; removed when its run succeeds
"""

from __future__ import annotations

import os
from pathlib import Path

from distributor_core.staging.runids import is_run_id

RECORD_NAME = "upload.json"
BUNDLE_DIR = "bundle"
INCOMING_DIR = ".incoming"
IDEMPOTENCY_DIR = ".idempotency"
#: run directories whose record is unreadable, set aside at startup (issue 35, item 3)
QUARANTINE_DIR = ".quarantine"
LOCK_NAME = ".serve.lock"
SEQ_NAME = ".seq"
#: temporary siblings of ``upload.json`` and of idempotency entries while they are replaced
TEMP_PREFIX = ".upload.json.tmp-"
SEQ_TEMP_PREFIX = ".seq.tmp-"


class RecordError(ValueError):
    """An ``upload.json`` is missing, unreadable or not a valid schema-1 record, or a status change
    that the transition table does not allow was asked for."""


def record_dir(staging_path: str | os.PathLike[str], run_id: str) -> Path:
    if not is_run_id(run_id):
        raise RecordError(f"{run_id!r} is not a run id")
    return Path(staging_path) / run_id


def record_path(staging_path: str | os.PathLike[str], run_id: str) -> Path:
    return record_dir(staging_path, run_id) / RECORD_NAME


def bundle_dir(staging_path: str | os.PathLike[str], run_id: str) -> Path:
    """The staged bundle of a record (the local source to publish with bundle path ``""``)."""
    return record_dir(staging_path, run_id) / BUNDLE_DIR


def idempotency_path(staging_path: str | os.PathLike[str], token_id: str, key_sha256: str) -> Path:
    return Path(staging_path) / IDEMPOTENCY_DIR / token_id / key_sha256

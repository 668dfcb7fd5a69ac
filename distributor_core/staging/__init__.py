"""The durable upload staging area (resolutions D1), below both shells: the upload server
(``distributor_core.server``) writes it, the Dagster upload sensor and publish runs
(``distributor_dagster``) read it and report progress into it.

Owns: the on-disk layout (:mod:`.layout`), run ids (:mod:`.runids`), upload records and their
status transitions (:mod:`.records`, :mod:`.status` — the table every status change is checked
against), the idempotency index (:mod:`.index`), cheap listing (:mod:`.scan`), host-path
scrubbing (:mod:`.redact`), crash-safe file helpers (:mod:`.fsio`), the byte quotas of failed
uploads' staged bundles (:mod:`.failed`) and what only the one ``serve`` process does to a staging
path: lock, sweep, place and settle admissions, retire (:mod:`.area`).

Shared staging for several ``serve`` replicas (issue 29): :mod:`.objectstore` (records, keys,
bundles and pending markers in an object store, every change a conditional write), admission
numbers without a shared counter (:mod:`.ordering`) and the uploads sensor's cursor over it
(:mod:`.pending`); its key claims and publication leases are the core's one lease
(:mod:`distributor_core.lease`). :mod:`.store` is the one interface publishers and the Dagster
side use over either kind of staging.

Must not know: HTTP, FastAPI, uvicorn or Dagster. It depends only on the config models, the JSON
and time helpers of the core, and (:mod:`.objectstore`) the storage protocol.
"""

from __future__ import annotations

from distributor_core.staging.area import (
    PipelineStaging,
    Placement,
    PromotedError,
    StagingSetupError,
    SweepReport,
    check_private_dir,
    ensure_private_dir,
)
from distributor_core.staging.failed import (
    KeptBundle,
    drop_bundle,
    dropped_note,
    kept_bundle,
    listed_size,
    over_quota,
    staged_size,
)
from distributor_core.staging.fsio import atomic_write, fsync_dir, remove_tree, sync_paths, sync_tree
from distributor_core.staging.index import key_sha256, read_index, remove_index, write_index
from distributor_core.staging.layout import (
    BUNDLE_DIR,
    IDEMPOTENCY_DIR,
    INCOMING_DIR,
    LOCK_NAME,
    QUARANTINE_DIR,
    RECORD_NAME,
    SEQ_NAME,
    TEMP_PREFIX,
    RecordError,
    bundle_dir,
    idempotency_path,
    record_dir,
    record_path,
)
from distributor_core.staging.records import (
    MAX_RECORD_SIZE,
    SCHEMA_VERSION,
    PublicText,
    UploadRecord,
    hand_back,
    mark_finished,
    mark_queued,
    mark_running,
    parse_record,
    read_record,
    record_bytes,
    report_failed,
    transition,
    write_record,
)
from distributor_core.staging.redact import host_redactions, scrub, staging_redactions
from distributor_core.staging.runids import (
    RUN_ID_RE,
    RandomSuffix,
    is_run_id,
    new_run_id,
    random_suffix,
    run_id_pipeline,
    run_id_stamp,
)
from distributor_core.staging.scan import issued_seq, iter_run_ids, list_records
from distributor_core.staging.status import (
    ACCEPTED,
    FAILED,
    FINISHED_STATUSES,
    PENDING_STATUSES,
    QUEUED,
    RUNNING,
    STATUSES,
    SUCCEEDED,
    TRANSITIONS,
    StatusTransitionError,
    UploadStatus,
    check_transition,
)

__all__ = [
    "ACCEPTED",
    "BUNDLE_DIR",
    "FAILED",
    "FINISHED_STATUSES",
    "IDEMPOTENCY_DIR",
    "INCOMING_DIR",
    "LOCK_NAME",
    "MAX_RECORD_SIZE",
    "PENDING_STATUSES",
    "QUARANTINE_DIR",
    "QUEUED",
    "RECORD_NAME",
    "RUNNING",
    "RUN_ID_RE",
    "SCHEMA_VERSION",
    "SEQ_NAME",
    "STATUSES",
    "SUCCEEDED",
    "TEMP_PREFIX",
    "TRANSITIONS",
    "KeptBundle",
    "PipelineStaging",
    "Placement",
    "PromotedError",
    "PublicText",
    "RandomSuffix",
    "RecordError",
    "StagingSetupError",
    "StatusTransitionError",
    "SweepReport",
    "UploadRecord",
    "UploadStatus",
    "atomic_write",
    "bundle_dir",
    "check_private_dir",
    "check_transition",
    "drop_bundle",
    "dropped_note",
    "ensure_private_dir",
    "fsync_dir",
    "hand_back",
    "host_redactions",
    "idempotency_path",
    "is_run_id",
    "issued_seq",
    "iter_run_ids",
    "kept_bundle",
    "key_sha256",
    "list_records",
    "listed_size",
    "mark_finished",
    "mark_queued",
    "mark_running",
    "new_run_id",
    "over_quota",
    "parse_record",
    "random_suffix",
    "read_index",
    "read_record",
    "record_bytes",
    "record_dir",
    "record_path",
    "remove_index",
    "remove_tree",
    "report_failed",
    "run_id_pipeline",
    "run_id_stamp",
    "scrub",
    "staged_size",
    "staging_redactions",
    "sync_paths",
    "sync_tree",
    "transition",
    "write_index",
    "write_record",
]

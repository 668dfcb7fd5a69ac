"""The durable upload staging area on disk (resolutions D1), shared by ``serve`` and Dagster.

Layout of one pipeline's ``staging_path``::

    .serve.lock                      held (flock) by the one ``serve`` process using this path
    .seq                             highest admission sequence number ever issued (never decreases)
    .incoming/<random>/              requests being received and extracted (swept at startup)
    .idempotency/<token id>/<sha256 of key>   -> "<run id>\\n"
    <run id>/upload.json             the upload record (schema_version 1)
    <run id>/bundle/                 the validated bundle; removed when its run succeeds

``upload.json`` is always replaced by temp + rename (``.upload.json.tmp-<hex>`` in the same
directory), so a reader sees either the old or the new record. Everything here is plain file
I/O with no FastAPI or Dagster import: the Dagster upload sensor lists records with
:func:`list_records` (no hashing, one small JSON read per record) and the Dagster publish run
reports progress with :func:`mark_running` and :func:`mark_finished`.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from distributor_core import jsonfmt
from distributor_core.timefmt import Clock, format_seconds, now_seconds, parse_rfc3339

SCHEMA_VERSION = 1
RECORD_NAME = "upload.json"
BUNDLE_DIR = "bundle"
INCOMING_DIR = ".incoming"
IDEMPOTENCY_DIR = ".idempotency"
LOCK_NAME = ".serve.lock"
SEQ_NAME = ".seq"
TEMP_PREFIX = ".upload.json.tmp-"

ACCEPTED = "accepted"
QUEUED = "queued"
RUNNING = "running"
SUCCEEDED = "succeeded"
FAILED = "failed"
STATUSES = (ACCEPTED, QUEUED, RUNNING, SUCCEEDED, FAILED)
PENDING_STATUSES = frozenset({ACCEPTED, QUEUED})
FINISHED_STATUSES = frozenset({SUCCEEDED, FAILED})

#: ``<pipeline id>.<YYYYMMDDTHHMMSSZ>.<8 lowercase hex>``
RUN_ID_RE = re.compile(r"(?P<pipeline>[A-Za-z0-9][A-Za-z0-9._-]*)\.(?P<stamp>[0-9]{8}T[0-9]{6}Z)\.[0-9a-f]{8}")

_FILE_MODE = 0o600
MAX_RECORD_SIZE = 64 * 1024 * 1024


class RecordError(ValueError):
    """An ``upload.json`` is missing, unreadable or not a valid schema-1 record."""


def is_run_id(value: str) -> bool:
    return RUN_ID_RE.fullmatch(value) is not None


def run_id_pipeline(run_id: str) -> str | None:
    """The pipeline id a run id was issued for, or ``None`` when it is not a run id."""
    match = RUN_ID_RE.fullmatch(run_id)
    return match["pipeline"] if match else None


@dataclass(frozen=True)
class UploadRecord:
    """One ``upload.json``. Times are UTC, second precision."""

    run_id: str
    seq: int
    pipeline_id: str
    token_id: str
    idempotency_key: str | None
    #: normalised manifest identity: schema_version, id, digest, created, files
    manifest: dict[str, Any]
    #: the original 202 body, returned verbatim to idempotent replays
    response: dict[str, Any]
    status: str
    accepted_at: datetime
    started_at: datetime | None = None
    finished_at: datetime | None = None
    error: str = ""
    dagster_run_id: str | None = None
    report: dict[str, Any] | None = field(default=None, compare=False)

    @property
    def bundle_id(self) -> str:
        return str(self.manifest.get("id", ""))

    @property
    def finished(self) -> bool:
        return self.status in FINISHED_STATUSES

    @property
    def pending(self) -> bool:
        return self.status in PENDING_STATUSES

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "run_id": self.run_id,
            "seq": self.seq,
            "pipeline_id": self.pipeline_id,
            "token_id": self.token_id,
            "idempotency_key": self.idempotency_key,
            "manifest": self.manifest,
            "response": self.response,
            "status": self.status,
            "accepted_at": format_seconds(self.accepted_at),
            "started_at": _time_or_none(self.started_at),
            "finished_at": _time_or_none(self.finished_at),
            "error": self.error,
            "dagster_run_id": self.dagster_run_id,
            "report": self.report,
        }

    def status_view(self) -> dict[str, Any]:
        """The ``GET /runs/<id>`` body: unknown times, an empty error and no report are omitted."""
        view: dict[str, Any] = {
            "run_id": self.run_id,
            "pipeline_id": self.pipeline_id,
            "status": self.status,
            "accepted_at": format_seconds(self.accepted_at),
        }
        if self.started_at is not None:
            view["started_at"] = format_seconds(self.started_at)
        if self.finished_at is not None:
            view["finished_at"] = format_seconds(self.finished_at)
        if self.error:
            view["error"] = self.error
        if self.dagster_run_id:
            view["dagster_run_id"] = self.dagster_run_id
        if self.report is not None:
            view["report"] = self.report
        return view

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any]) -> UploadRecord:
        try:
            if obj.get("schema_version") != SCHEMA_VERSION:
                raise RecordError(f"upload record schema_version must be {SCHEMA_VERSION}")
            status = obj["status"]
            if status not in STATUSES:
                raise RecordError(f"upload record status {status!r} is not known")
            run_id = _str(obj, "run_id")
            if not is_run_id(run_id):
                raise RecordError(f"upload record run_id {run_id!r} is not a run id")
            seq = obj["seq"]
            if not jsonfmt.is_json_int(seq) or seq < 1:
                raise RecordError("upload record seq must be a positive integer")
            key = obj.get("idempotency_key")
            if key is not None and not isinstance(key, str):
                raise RecordError("upload record idempotency_key must be a string or null")
            manifest = obj["manifest"]
            response = obj["response"]
            report = obj.get("report")
            if not isinstance(manifest, dict) or not isinstance(response, dict):
                raise RecordError("upload record manifest and response must be objects")
            if report is not None and not isinstance(report, dict):
                raise RecordError("upload record report must be an object or null")
            dagster_run_id = obj.get("dagster_run_id")
            return cls(
                run_id=run_id,
                seq=seq,
                pipeline_id=_str(obj, "pipeline_id"),
                token_id=_str(obj, "token_id"),
                idempotency_key=key,
                manifest=manifest,
                response=response,
                status=status,
                accepted_at=parse_rfc3339(_str(obj, "accepted_at")),
                started_at=_time(obj.get("started_at")),
                finished_at=_time(obj.get("finished_at")),
                error=str(obj.get("error") or ""),
                dagster_run_id=str(dagster_run_id) if dagster_run_id else None,
                report=report,
            )
        except RecordError:
            raise
        except (KeyError, TypeError, ValueError) as exc:
            raise RecordError(f"upload record is malformed: {exc}") from None


def _str(obj: Mapping[str, Any], key: str) -> str:
    value = obj[key]
    if not isinstance(value, str):
        raise RecordError(f"upload record {key} must be a string")
    return value


def _time(value: Any) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise RecordError("upload record times must be RFC 3339 strings")
    return parse_rfc3339(value)


def _time_or_none(value: datetime | None) -> str | None:
    return None if value is None else format_seconds(value)


# --- paths ------------------------------------------------------------------------------------


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


# --- low-level file helpers -------------------------------------------------------------------


def fsync_dir(path: str | os.PathLike[str]) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes, *, temp_prefix: str = TEMP_PREFIX, durable: bool = True) -> None:
    """Replace ``path`` with ``data`` through a temporary sibling and ``rename``."""
    temp = path.parent / f"{temp_prefix}{secrets.token_hex(8)}"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, _FILE_MODE)
    try:
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    if durable:
        fsync_dir(path.parent)


def sync_tree(root: Path, extra: Iterable[Path] = ()) -> None:
    """Make everything below ``root`` (and the ``extra`` files) durable: every file and directory
    below ``root``, each of ``extra`` and its directory are fsynced. Targeted on purpose: a
    ``syncfs`` would also wait for every other writer on the filesystem."""
    directories = {root}
    for dirpath, dirnames, filenames in os.walk(root):
        directories.update(Path(dirpath) / d for d in dirnames)
        for name in filenames:
            _fsync_path(Path(dirpath) / name)
    for path in extra:
        _fsync_path(path)
        directories.add(path.parent)
    for directory in directories:
        fsync_dir(directory)


def _fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def remove_tree(path: Path) -> None:
    """Remove a directory tree; a missing tree is fine."""
    with contextlib.suppress(FileNotFoundError):
        shutil.rmtree(path)


# --- reading ----------------------------------------------------------------------------------


def parse_record(data: bytes) -> UploadRecord:
    try:
        obj = jsonfmt.loads_object(data)
    except jsonfmt.JSONFormatError as exc:
        raise RecordError(f"upload record is not valid JSON: {exc.detail}") from None
    return UploadRecord.from_dict(obj)


def read_record(staging_path: str | os.PathLike[str], run_id: str) -> UploadRecord:
    """Read one record; :class:`FileNotFoundError` when there is none, :class:`RecordError` when
    it is malformed or belongs to another run id."""
    fd = os.open(record_path(staging_path, run_id), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as stream:
        data = stream.read(MAX_RECORD_SIZE)
    record = parse_record(data)
    if record.run_id != run_id:
        raise RecordError(f"upload record in {run_id} names run {record.run_id}")
    return record


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

    Cheap: one small JSON read per record, no bundle hashing. ``statuses`` filters (e.g.
    ``{"accepted"}`` for a sensor). Unreadable records are skipped; when ``errors`` is given,
    ``(run id, reason)`` is appended for each.
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


# --- writing and status transitions -----------------------------------------------------------


def write_record(staging_path: str | os.PathLike[str], record: UploadRecord, *, durable: bool = True) -> None:
    """Replace ``<run id>/upload.json`` (temp + rename)."""
    atomic_write(record_path(staging_path, record.run_id), jsonfmt.dumps_indented_bytes(record.to_dict()),
                 durable=durable)


def transition(
    staging_path: str | os.PathLike[str], run_id: str, *, durable: bool = True, **changes: Any
) -> UploadRecord:
    """Read a record, apply ``changes`` (dataclass fields) and write it back."""
    record = replace(read_record(staging_path, run_id), **changes)
    write_record(staging_path, record, durable=durable)
    return record


def mark_queued(staging_path: str | os.PathLike[str], run_id: str) -> UploadRecord:
    """``accepted`` → ``queued`` (inline publisher). Not fsynced: after a crash both statuses are
    re-queued alike."""
    return transition(staging_path, run_id, durable=False, status=QUEUED)


def mark_running(
    staging_path: str | os.PathLike[str],
    run_id: str,
    *,
    dagster_run_id: str | None = None,
    clock: Clock | None = None,
) -> UploadRecord:
    """Record that the publication of ``run_id`` started (inline worker or Dagster run)."""
    changes: dict[str, Any] = {"status": RUNNING, "started_at": now_seconds(clock), "finished_at": None,
                               "error": "", "report": None}
    if dagster_run_id is not None:
        changes["dagster_run_id"] = dagster_run_id
    return transition(staging_path, run_id, **changes)


def report_failed(report: Any) -> tuple[bool, str]:
    """``(failed, message)`` for a run report object (``.ok``/``.error_message()``) or its dict."""
    if report is None:
        return False, ""
    if hasattr(report, "ok"):
        return (not report.ok), ("" if report.ok else report.error_message() or "run failed")
    failed = bool(report.get("summary", {}).get("failed")) or any(
        p.get("error") for p in report.get("pipelines", [])
    )
    return failed, "run failed" if failed else ""


def mark_finished(
    staging_path: str | os.PathLike[str],
    run_id: str,
    *,
    report: Any = None,
    error: str = "",
    dagster_run_id: str | None = None,
    clock: Clock | None = None,
    redact: Iterable[tuple[str, str]] = (),
) -> UploadRecord:
    """Record the end of a publication and, when it succeeded, remove the staged bundle.

    The run succeeded iff ``error`` is empty and ``report`` (a ``RunReport`` or its dict) is ok;
    a failed report without ``error`` takes the report's error message. ``redact`` lists
    ``(host path, placeholder)`` pairs scrubbed from the error and report, in addition to the
    staging path itself (records never carry host paths, resolutions D2).
    """
    failed, message = report_failed(report)
    error = error or message
    status = FAILED if (error or failed) else SUCCEEDED
    report_obj = report.to_dict() if hasattr(report, "to_dict") else report
    pairs = [*redact, *staging_redactions(staging_path, run_id)]
    changes: dict[str, Any] = {
        "status": status,
        "finished_at": now_seconds(clock),
        "error": scrub(error, pairs),
        "report": scrub(report_obj, pairs) if report_obj is not None else None,
    }
    if dagster_run_id is not None:
        changes["dagster_run_id"] = dagster_run_id
    current = read_record(staging_path, run_id)
    if current.started_at is None:
        changes["started_at"] = changes["finished_at"]
    record = replace(current, **changes)
    write_record(staging_path, record)
    if status == SUCCEEDED:
        remove_tree(bundle_dir(staging_path, run_id))
    return record


# --- host-path scrubbing ----------------------------------------------------------------------


def staging_redactions(staging_path: str | os.PathLike[str], run_id: str | None = None) -> list[tuple[str, str]]:
    pairs: list[tuple[str, str]] = []
    if run_id is not None:
        pairs.append((str(bundle_dir(staging_path, run_id)), "<upload>"))
        pairs.append((str(record_dir(staging_path, run_id)), "<upload>"))
    pairs.append((str(Path(staging_path)), "<staging>"))
    return pairs


def scrub(value: Any, pairs: Iterable[tuple[str, str]]) -> Any:
    """Replace host paths in every string of ``value`` (longest path first)."""
    ordered = sorted({(p, r) for p, r in pairs if p and p != "/"}, key=lambda item: -len(item[0]))
    if not ordered:
        return value
    return _scrub(value, ordered)


def _scrub(value: Any, pairs: list[tuple[str, str]]) -> Any:
    if isinstance(value, str):
        for path, placeholder in pairs:
            if path in value:
                value = value.replace(path, placeholder)
        return value
    if isinstance(value, dict):
        return {k: _scrub(v, pairs) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub(v, pairs) for v in value]
    return value

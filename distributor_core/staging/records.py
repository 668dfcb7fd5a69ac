"""Upload records: ``<run id>/upload.json`` (schema_version 1, resolutions D1).

``upload.json`` is always replaced by temp + rename (``.upload.json.tmp-<hex>`` in the same
directory), so a reader sees either the old or the new record. Every status change goes through
:func:`transition`, which enforces :data:`~distributor_core.staging.status.TRANSITIONS`: the inline
publisher and the Dagster publish runs use :func:`mark_queued`, :func:`mark_running`,
:func:`mark_finished` and :func:`hand_back`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from datetime import datetime
from typing import Any

import msgspec

from distributor_core import jsonfmt
from distributor_core.staging.fsio import atomic_write, remove_tree
from distributor_core.staging.layout import TEMP_PREFIX, RecordError, bundle_dir, record_path
from distributor_core.staging.outcome import publication_outcome
from distributor_core.staging.redact import scrub, staging_redactions
from distributor_core.staging.runids import is_run_id
from distributor_core.staging.status import (
    ACCEPTED,
    FAILED,
    FINISHED_STATUSES,
    PENDING_STATUSES,
    QUEUED,
    RUNNING,
    SUCCEEDED,
    UploadStatus,
    check_transition,
)
from distributor_core.timefmt import Clock, format_seconds, now_seconds, parse_rfc3339

SCHEMA_VERSION = 1
MAX_RECORD_SIZE = 64 * 1024 * 1024


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
    status: UploadStatus
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

    def status_view(self) -> dict[str, Any]:
        """The ``GET /runs/<id>`` body: unknown times, an empty error and no report are omitted; a
        succeeded run's report adds ``published`` and, when a destination holds a newer bundle,
        ``note`` (:mod:`distributor_core.staging.outcome`)."""
        view: dict[str, Any] = {
            "run_id": self.run_id,
            "pipeline_id": self.pipeline_id,
            "status": str(self.status),
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
            if self.status == SUCCEEDED:  # a succeeded run may still have published nothing: say so
                view.update(publication_outcome(self.report))
            view["report"] = self.report
        return view


class RecordWire(msgspec.Struct, kw_only=True):
    """``upload.json`` as JSON carries it, each field once in file order (what
    :func:`record_bytes` writes and :func:`parse_record` decodes). Times are RFC 3339 strings;
    ``error`` and ``dagster_run_id`` take any JSON value, as the record reader always has."""

    schema_version: Any = None
    run_id: str
    seq: int
    pipeline_id: str
    token_id: str
    idempotency_key: str | None = None
    manifest: dict[str, Any]
    response: dict[str, Any]
    status: UploadStatus
    accepted_at: str
    started_at: str | None = None
    finished_at: str | None = None
    error: Any = ""
    dagster_run_id: Any = None
    report: dict[str, Any] | None = None


_DECODER = msgspec.json.Decoder(type=RecordWire)
_MODEL_FIELDS = tuple(f.name for f in fields(UploadRecord))
#: the fields whose wire form differs from the model's, and the conversions each way
_FROM_WIRE: dict[str, Callable[[Any], Any]] = {
    "accepted_at": parse_rfc3339,
    "started_at": lambda value: None if value is None else parse_rfc3339(value),
    "finished_at": lambda value: None if value is None else parse_rfc3339(value),
    "error": lambda value: str(value or ""),
    "dagster_run_id": lambda value: str(value) if value else None,
}
_TO_WIRE: dict[str, Callable[[Any], Any]] = {
    "accepted_at": format_seconds,
    "started_at": lambda value: None if value is None else format_seconds(value),
    "finished_at": lambda value: None if value is None else format_seconds(value),
}


def _same(value: Any) -> Any:
    return value


def record_to_wire(record: UploadRecord) -> RecordWire:
    return RecordWire(
        schema_version=SCHEMA_VERSION,
        **{name: _TO_WIRE.get(name, _same)(getattr(record, name)) for name in _MODEL_FIELDS},
    )


def record_from_wire(wire: RecordWire) -> UploadRecord:
    """The model of a decoded record; :class:`RecordError` (unworded: see :func:`parse_record`)
    or :class:`ValueError` for a value its type admits but the record does not."""
    if wire.schema_version != SCHEMA_VERSION or not is_run_id(wire.run_id) or wire.seq < 1:
        raise RecordError("upload record is malformed")
    return UploadRecord(**{name: _FROM_WIRE.get(name, _same)(getattr(wire, name)) for name in _MODEL_FIELDS})


# --- reading ----------------------------------------------------------------------------------


def parse_record(data: bytes) -> UploadRecord:
    """Decode ``upload.json`` with the typed decoder; a document it refuses is read again by the
    exact walk (:func:`_explain`), which words the error naming the field."""
    try:
        return record_from_wire(_DECODER.decode(data))
    except (msgspec.ValidationError, msgspec.DecodeError, RecordError, ValueError) as exc:
        first = exc
    try:
        obj = jsonfmt.loads_object(data)
    except jsonfmt.JSONFormatError as exc:
        raise RecordError(f"upload record is not valid JSON: {exc.detail}") from None
    _explain(obj)
    # only a generic reader takes it (an integer beyond 64 bits, a lone surrogate): convert the
    # normalised document
    try:
        return record_from_wire(msgspec.convert(obj, RecordWire))
    except (msgspec.ValidationError, RecordError, ValueError):
        raise RecordError(f"upload record is malformed: {first}") from None


def _explain(obj: Mapping[str, Any]) -> None:
    """The exact walk: raise the :class:`RecordError` that names the first wrong field."""
    try:
        if obj.get("schema_version") != SCHEMA_VERSION:
            raise RecordError(f"upload record schema_version must be {SCHEMA_VERSION}")
        try:
            UploadStatus(obj["status"])
        except ValueError:
            raise RecordError(f"upload record status {obj['status']!r} is not known") from None
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
        _str(obj, "pipeline_id")
        _str(obj, "token_id")
        parse_rfc3339(_str(obj, "accepted_at"))
        _time(obj.get("started_at"))
        _time(obj.get("finished_at"))
    except RecordError:
        raise
    except (KeyError, TypeError, ValueError) as exc:
        raise RecordError(f"upload record is malformed: {exc}") from None


def _str(obj: Mapping[str, Any], key: str) -> str:
    value = obj[key]
    if not isinstance(value, str):
        raise RecordError(f"upload record {key} must be a string")
    return value


def _time(value: Any) -> None:
    if value is None:
        return
    if not isinstance(value, str):
        raise RecordError("upload record times must be RFC 3339 strings")
    parse_rfc3339(value)


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


# --- writing and status transitions -----------------------------------------------------------


def record_bytes(record: UploadRecord) -> bytes:
    return jsonfmt.dumps_indented_bytes(msgspec.to_builtins(record_to_wire(record)))


def write_record(staging_path: str | os.PathLike[str], record: UploadRecord, *, durable: bool = True) -> None:
    """Replace ``<run id>/upload.json`` (temp + rename). No status check: see :func:`transition`."""
    atomic_write(record_path(staging_path, record.run_id), record_bytes(record), temp_prefix=TEMP_PREFIX,
                 durable=durable)


def transition(
    staging_path: str | os.PathLike[str], run_id: str, *, durable: bool = True, **changes: Any
) -> UploadRecord:
    """Read a record, apply ``changes`` (dataclass fields) and write it back. A ``status`` change
    must be listed in the transition table (:class:`StatusTransitionError` otherwise)."""
    current = read_record(staging_path, run_id)
    return _apply(staging_path, current, changes, durable=durable)


def _apply(
    staging_path: str | os.PathLike[str], current: UploadRecord, changes: dict[str, Any], *, durable: bool = True
) -> UploadRecord:
    if "status" in changes:
        changes["status"] = UploadStatus(changes["status"])
        check_transition(current.run_id, current.status, changes["status"])
    record = replace(current, **changes)
    write_record(staging_path, record, durable=durable)
    return record


def mark_queued(staging_path: str | os.PathLike[str], run_id: str) -> UploadRecord:
    """→ ``queued`` (inline publisher). Not fsynced: after a crash both statuses are re-queued
    alike."""
    return transition(staging_path, run_id, durable=False, status=QUEUED)


def hand_back(staging_path: str | os.PathLike[str], run_id: str) -> UploadRecord:
    """``queued`` or an interrupted inline ``running`` → ``accepted``, for the Dagster sensor."""
    return transition(staging_path, run_id, status=ACCEPTED, started_at=None)


def mark_running(
    staging_path: str | os.PathLike[str],
    run_id: str,
    *,
    dagster_run_id: str | None = None,
    clock: Clock | None = None,
) -> UploadRecord:
    """Record that the publication of ``run_id`` started (inline worker or Dagster run)."""
    return transition(staging_path, run_id, **running_changes(dagster_run_id=dagster_run_id, clock=clock))


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


class PublicText(str):
    """An error text a producer may read as it is: a fixed text of distributor's naming only what
    the producer sent (a run id, a quota knob). Any other ``str`` given as a publication's
    ``error`` is the operator's and is not shown to producers (issue 35, item 7)."""


def finished_changes(
    current: UploadRecord,
    *,
    report: Any = None,
    error: str | BaseException = "",
    dagster_run_id: str | None = None,
    clock: Clock | None = None,
    redact: Iterable[tuple[str, str]] = (),
) -> dict[str, Any]:
    """The record fields that end a publication, wherever the record is kept: the run succeeded
    iff there is no ``error`` and ``report`` (a ``RunReport`` or its dict) is ok.

    What the record keeps is what ``GET /runs/<id>`` shows producers
    (:mod:`distributor_core.app.public`): the failure class and a short reason of each failed
    destination, of an ``error`` that is an exception, or a :class:`PublicText` as it is; an
    ``error`` that is any other text (the operator's) becomes a generic line; the report without
    what belongs to the server's hosts. The caller logs the operator's detail (the server log,
    the Dagster run). ``redact`` lists ``(host path, placeholder)`` pairs scrubbed on top
    (records never carry host paths, resolutions D2)."""
    from distributor_core.app import public
    from distributor_core.app.report import RunReport

    failed, _ = report_failed(report)
    status = FAILED if (error or failed) else SUCCEEDED
    parts: list[str] = []
    if failed:
        parts.append(public.report_error(report) if isinstance(report, RunReport) else public.dict_error(report))
    if isinstance(error, BaseException):
        parts.append(public.exception_error(error))
    elif isinstance(error, PublicText):
        parts.append(str(error))
    elif error:
        parts.append(public.GENERIC)
    report_obj = public.report_dict(report) if report is not None else None
    pairs = list(redact)
    changes: dict[str, Any] = {
        "status": status,
        "finished_at": now_seconds(clock),
        "error": scrub("; ".join(dict.fromkeys(parts)), pairs),
        "report": scrub(report_obj, pairs) if report_obj is not None else None,
    }
    if dagster_run_id is not None:
        changes["dagster_run_id"] = dagster_run_id
    if current.started_at is None:
        changes["started_at"] = changes["finished_at"]
    return changes


def running_changes(*, dagster_run_id: str | None = None, clock: Clock | None = None) -> dict[str, Any]:
    """The record fields that start a publication (inline worker or Dagster run)."""
    changes: dict[str, Any] = {"status": RUNNING, "started_at": now_seconds(clock), "finished_at": None,
                               "error": "", "report": None}
    if dagster_run_id is not None:
        changes["dagster_run_id"] = dagster_run_id
    return changes


def mark_finished(
    staging_path: str | os.PathLike[str],
    run_id: str,
    *,
    report: Any = None,
    error: str | BaseException = "",
    dagster_run_id: str | None = None,
    clock: Clock | None = None,
    redact: Iterable[tuple[str, str]] = (),
) -> UploadRecord:
    """Record the end of a publication (:func:`finished_changes`; the staging path itself is
    scrubbed too) and, when it succeeded, remove the staged bundle."""
    current = read_record(staging_path, run_id)
    changes = finished_changes(current, report=report, error=error, dagster_run_id=dagster_run_id, clock=clock,
                               redact=[*redact, *staging_redactions(staging_path, run_id)])
    record = _apply(staging_path, current, changes)
    if record.status == SUCCEEDED:
        remove_tree(bundle_dir(staging_path, run_id))
    return record

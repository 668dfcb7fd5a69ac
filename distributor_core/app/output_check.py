"""Re-read outputs and compare them with what state (or a plan) says they are (issue 18).

``check_file`` looks at one path: missing, not a regular file, size mismatch (no bytes read), or
the sha256 of its content, which the storage answers (``Storage.sha256``: each backend hashes its
own best way, streaming in large chunks and never holding the whole file; S3 answers from a
``ChecksumSHA256`` it stored and verified, ``Feature.STORED_SHA256``, and reads nothing).

``check_outputs`` checks many on a few threads (the storage's declared ``read_threads``, when the
files are large enough for threads to pay: hashlib and reads release the GIL), keeps their
order, and raises the first storage error other than *not found* in that order, as a loop would.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from distributor_core import paths as lp
from distributor_core.parallel import run_ordered
from distributor_core.state import (
    AnyOutputRecord,
    OwnerScope,
    SharedOutputRecord,
    SharedRootState,
    StateDocument,
    check_owner,
)
from distributor_core.storage.base import BytesCallback, Storage
from distributor_core.storage.errors import ErrorKind, StorageError

OK = "ok"
MISSING = "missing"
NOT_A_FILE = "not_a_file"
SIZE_MISMATCH = "size_mismatch"
DIGEST_MISMATCH = "digest_mismatch"
#: every status, in the order reports count them
STATUSES = (OK, MISSING, NOT_A_FILE, SIZE_MISMATCH, DIGEST_MISMATCH)

READ = "read"
STORED_CHECKSUM = "stored_checksum"


class OutputCheck(msgspec.Struct, frozen=True):
    """What one recorded (or planned) output actually is. ``size``/``sha256`` are the expected
    values; ``actual_*`` are set where they were measured and differ or could be told."""

    path: str
    status: str
    size: int
    sha256: str
    owner: OwnerScope | None = None
    actual_size: int | None = None
    actual_sha256: str | None = None
    checked_by: str = ""
    entry_type: str = ""
    #: storage revision seen by the stat before the bytes were read (never serialised)
    revision: str | None = None
    bytes_read: int = 0

    @property
    def ok(self) -> bool:
        return self.status == OK

    def to_dict(self, *, status_key: str = "status") -> dict[str, Any]:
        data: dict[str, Any] = {"path": self.path}
        if self.owner is not None:
            data["owner_scope"] = self.owner.to_dict()
        data[status_key] = self.status
        data["size"] = self.size
        data["sha256"] = self.sha256
        if self.entry_type:
            data["type"] = self.entry_type
        if self.actual_size is not None:
            data["actual_size"] = self.actual_size
        if self.actual_sha256 is not None:
            data["actual_sha256"] = self.actual_sha256
        if self.checked_by:
            data["checked_by"] = self.checked_by
        return data

    def text_fields(self) -> dict[str, Any]:
        fields: dict[str, Any] = {"path": self.path, "status": self.status}
        if self.owner is not None:
            fields["owner"] = str(self.owner)
        fields["size"] = self.size
        fields["sha256"] = self.sha256
        if self.entry_type:
            fields["type"] = self.entry_type
        if self.actual_size is not None:
            fields["actual_size"] = self.actual_size
        if self.actual_sha256 is not None:
            fields["actual_sha256"] = self.actual_sha256
        return fields


def outputs_in_scope(document: StateDocument, scope: OwnerScope, *, all_owners: bool) -> tuple[AnyOutputRecord, ...]:
    """The recorded outputs a repair or audit of ``scope`` looks at: single-owner state must
    belong to ``scope`` (``state owner is <sp>/<sd>, not <p>/<d>``) and gives all its outputs; a
    shared root gives ``scope``'s, or every owner's with ``all_owners``."""
    if isinstance(document, SharedRootState):
        return document.outputs if all_owners else tuple(o for o in document.outputs if o.scope == scope)
    check_owner(document, scope)
    return document.outputs


def check_file(
    storage: Storage,
    target: str,
    *,
    path: str,
    size: int,
    sha256: str,
    owner: OwnerScope | None = None,
    on_bytes: BytesCallback | None = None,
) -> OutputCheck:
    """Check storage path ``target`` (reported as ``path``) against ``size`` and ``sha256``.
    Not found is ``missing``; any other storage error is raised."""

    def result(status: str, **extra: Any) -> OutputCheck:
        return OutputCheck(path, status, size, sha256, owner, **extra)

    try:
        entry = storage.stat(target)
    except StorageError as exc:
        if exc.kind == ErrorKind.NOT_FOUND:
            return result(MISSING)
        raise
    if entry.type != "file":
        return result(NOT_A_FILE, entry_type=entry.type, revision=entry.revision)
    if entry.size != size:
        return result(SIZE_MISMATCH, actual_size=entry.size, revision=entry.revision)
    try:
        content = storage.sha256(target, on_bytes=on_bytes)
    except StorageError as exc:
        if exc.kind == ErrorKind.NOT_FOUND:
            return result(MISSING)
        if exc.kind == ErrorKind.UNSUPPORTED:  # replaced by a directory or symlink since the stat
            return result(NOT_A_FILE, entry_type="other")
        raise
    extra: dict[str, Any] = {"revision": entry.revision}
    if content.stored:
        extra["checked_by"] = STORED_CHECKSUM
    else:
        extra |= {"checked_by": READ, "bytes_read": content.size}
    if content.size != size:  # changed between the stat and the hash
        return result(SIZE_MISMATCH, actual_size=content.size, **extra)
    if content.sha256 != sha256:
        return result(DIGEST_MISMATCH, actual_sha256=content.sha256, **extra)
    return result(OK, **extra)


def _serialised(callback: Callable[[Any], None] | None, lock: threading.Lock | None) -> Any:
    """``callback`` called under ``lock`` (for callbacks fed by several threads)."""
    if callback is None or lock is None:
        return callback

    def locked(value: Any) -> None:
        with lock:
            callback(value)

    return locked


def check_outputs(
    storage: Storage,
    bundle_path: str,
    records: Sequence[AnyOutputRecord],
    *,
    on_bytes: BytesCallback | None = None,
    on_file: Callable[[OutputCheck], None] | None = None,
) -> list[OutputCheck]:
    """Check every recorded output of a bundle path; results in record order."""
    results: list[OutputCheck | None] = [None] * len(records)
    threads = storage.capabilities.read_threads(len(records), sum(max(record.size, 0) for record in records))
    lock = threading.Lock() if threads > 1 else None
    report_bytes = _serialised(on_bytes, lock)
    report_file = _serialised(on_file, lock)

    def one(index: int) -> None:
        record = records[index]
        check = check_file(
            storage,
            lp.join(bundle_path, record.path),
            path=record.path,
            size=record.size,
            sha256=record.sha256,
            owner=record.scope if isinstance(record, SharedOutputRecord) else None,
            on_bytes=report_bytes,
        )
        results[index] = check
        if report_file is not None:
            report_file(check)

    run_ordered(len(records), one, threads=threads, name="distributor-audit")
    return [check for check in results if check is not None]

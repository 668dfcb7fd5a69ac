"""Re-read outputs and compare them with what state (or a plan) says they are (issue 18).

``check_file`` looks at one path: missing, not a regular file, size mismatch (no bytes read), or
the sha256 of its bytes, streamed through the storage protocol in large chunks (never the whole
file in memory). Where the backend stores a sha256 it vouches for (S3 ``ChecksumSHA256`` of the
whole object: backends declaring ``Feature.STORED_SHA256``, see ``Storage.stat_with_sha256``)
that is compared instead and nothing is read.

A local file of at least :data:`MAP_MIN_SIZE` is hashed from a read-only memory map, window by
window (:data:`MAP_WINDOW` at a time, unmapped before the next): the page cache's bytes are
hashed where they lie instead of being copied into a buffer first, which cuts the CPU of hashing
a warm 1 GiB by about a fifth (bench P11). Only one window is ever mapped per file, so memory stays
bounded as with reads. Each window is sized to the file's length at that moment (``fstat``), so a
file that shrinks stops the hash at its new end. A file truncated *while* a window is being
hashed would make the kernel kill the process with ``SIGBUS`` (what ``b3sum`` documents for its
memory maps too), so only files nobody else can truncate are mapped (issue 26, item 8): files
owned by the current user and writable by neither group nor others; and adoption, which hashes
files other tools wrote, never maps (``check_file(..., map_files=False)``). ``DISTRIBUTOR_MMAP=off``
makes every hash read into a buffer. What is left: a process of the same user (or root)
truncating a file of that user in place while ``audit`` or ``reconcile-state --audit`` hashes it.

``check_outputs`` checks many on a few threads (the storage's declared ``read_threads``, when the
files are large enough for threads to pay: hashlib and reads release the GIL), keeps their
order, and raises the first storage error other than *not found* in that order, as a loop would.
"""

from __future__ import annotations

import hashlib
import io
import mmap
import os
import threading
from collections.abc import Callable, Sequence
from typing import Any, BinaryIO

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
from distributor_core.storage.base import CHUNK_SIZE, Storage, iter_chunks
from distributor_core.storage.capabilities import Feature
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

#: read buffer of a local file (reused; 1 MiB stays in the CPU cache between read and hash,
#: measured faster than 256 KiB and 4 MiB here)
LOCAL_READ_SIZE = 1024 * 1024

#: local files at least this large are hashed from memory maps (smaller ones are read: mapping
#: costs more than it saves there)
MAP_MIN_SIZE = 4 * 1024 * 1024
#: bytes mapped at a time (one window per file being hashed)
MAP_WINDOW = 16 * 1024 * 1024
#: ``DISTRIBUTOR_MMAP=off`` (or ``0``, ``false``, ``no``): never hash from a memory map
MMAP_ENV = "DISTRIBUTOR_MMAP"

#: called with the number of bytes just verified (read and hashed, or vouched for by a checksum)
BytesCallback = Callable[[int], None]


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


def mmap_enabled() -> bool:
    """False when ``DISTRIBUTOR_MMAP`` switches memory-mapped hashing off."""
    return os.environ.get(MMAP_ENV, "").strip().lower() not in ("off", "0", "false", "no")


def mappable(info: os.stat_result) -> bool:
    """A file large enough to be hashed from a map that only the current user (or root) can
    truncate: owned by the current user, writable by neither group nor others."""
    return info.st_size >= MAP_MIN_SIZE and info.st_uid == os.geteuid() and not info.st_mode & 0o022


def _hash_mapped(fd: int, hasher: Any, on_bytes: BytesCallback | None) -> tuple[int, bool]:
    """Hash ``fd`` from offset 0 through read-only maps of :data:`MAP_WINDOW` bytes, each sized to
    the file's length when it is mapped. ``(bytes hashed, finished)``: ``finished`` is false when
    a map could not be made (e.g. a file system without ``mmap``); the caller reads the rest."""
    offset = 0
    while True:
        length = min(MAP_WINDOW, os.fstat(fd).st_size - offset)
        if length <= 0:
            return offset, True
        try:
            mapped = mmap.mmap(fd, length, access=mmap.ACCESS_READ, offset=offset)
        except (OSError, ValueError):
            return offset, False
        with mapped:
            view = memoryview(mapped)
            try:
                for start in range(0, length, LOCAL_READ_SIZE):
                    hasher.update(view[start : start + LOCAL_READ_SIZE])
                    if on_bytes is not None:
                        on_bytes(min(LOCAL_READ_SIZE, length - start))
            finally:
                view.release()
        offset += length


def hash_stream(
    stream: BinaryIO, on_bytes: BytesCallback | None = None, *, map_files: bool = True
) -> tuple[int, str]:
    """``(size, "sha256:<hex>")`` of a stream from its start, read in large chunks (a local file:
    through memory maps when ``map_files`` and it is large and :func:`mappable`, else into a
    reused buffer)."""
    hasher = hashlib.sha256()
    size = 0
    if isinstance(stream, io.FileIO):
        fd = stream.fileno()
        if map_files and mmap_enabled() and mappable(os.fstat(fd)):
            size, finished = _hash_mapped(fd, hasher, on_bytes)
            if finished:
                return size, "sha256:" + hasher.hexdigest()
            stream.seek(size)
        buffer = bytearray(LOCAL_READ_SIZE)
        view = memoryview(buffer)
        while True:
            count = stream.readinto(buffer)
            if not count:
                break
            hasher.update(view[:count])
            size += count
            if on_bytes is not None:
                on_bytes(count)
    else:
        for chunk in iter_chunks(stream, CHUNK_SIZE):
            hasher.update(chunk)
            size += len(chunk)
            if on_bytes is not None:
                on_bytes(len(chunk))
    return size, "sha256:" + hasher.hexdigest()


def check_file(
    storage: Storage,
    target: str,
    *,
    path: str,
    size: int,
    sha256: str,
    owner: OwnerScope | None = None,
    on_bytes: BytesCallback | None = None,
    map_files: bool = True,
) -> OutputCheck:
    """Check storage path ``target`` (reported as ``path``) against ``size`` and ``sha256``.
    Not found is ``missing``; any other storage error is raised. ``map_files=False``: never hash
    from a memory map (:func:`hash_stream`)."""

    def result(status: str, **extra: Any) -> OutputCheck:
        return OutputCheck(path, status, size, sha256, owner, **extra)

    try:
        if Feature.STORED_SHA256 in storage.capabilities:
            entry, stored = storage.stat_with_sha256(target)
        else:
            entry, stored = storage.stat(target), None
    except StorageError as exc:
        if exc.kind == ErrorKind.NOT_FOUND:
            return result(MISSING)
        raise
    if entry.type != "file":
        return result(NOT_A_FILE, entry_type=entry.type, revision=entry.revision)
    if entry.size != size:
        return result(SIZE_MISMATCH, actual_size=entry.size, revision=entry.revision)
    if stored is not None:
        if on_bytes is not None:
            on_bytes(size)
        if stored != sha256:
            return result(DIGEST_MISMATCH, actual_sha256=stored, checked_by=STORED_CHECKSUM, revision=entry.revision)
        return result(OK, checked_by=STORED_CHECKSUM, revision=entry.revision)
    try:
        with storage.open_read(target) as stream:
            actual_size, digest = hash_stream(stream, on_bytes, map_files=map_files)
    except StorageError as exc:
        if exc.kind == ErrorKind.NOT_FOUND:
            return result(MISSING)
        if exc.kind == ErrorKind.UNSUPPORTED:  # replaced by a directory or symlink since the stat
            return result(NOT_A_FILE, entry_type="other")
        raise
    extra: dict[str, Any] = {"checked_by": READ, "revision": entry.revision, "bytes_read": actual_size}
    if actual_size != size:  # changed between the stat and the read
        return result(SIZE_MISMATCH, actual_size=actual_size, **extra)
    if digest != sha256:
        return result(DIGEST_MISMATCH, actual_sha256=digest, **extra)
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

"""Source bundles inside any storage backend (core-semantics §0.1, §1, §4.4.4).

A source bundle is a directory holding ``manifest.json``; its bundle path is that directory
relative to the backend root (``""`` at the root). Discovery walks the tree once, ignores
reserved names, and does not look for bundles inside a bundle. Loading and validation go through
the storage protocol only, streaming each listed file once.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

import msgspec

from distributor_core import paths as lp
from distributor_core.bundle import (
    MANIFEST_NAME,
    MAX_MANIFEST_SIZE,
    BundleValidationError,
    Manifest,
    ProgressCallback,
    ValidManifest,
    check_content,
    digest_chunks,
    parse_manifest,
    validate_manifest,
    verify,
)
from distributor_core.parallel import run_ordered
from distributor_core.storage.base import CHUNK_SIZE, Entry, FileIdentity, Storage, iter_chunks
from distributor_core.storage.capabilities import Feature
from distributor_core.storage.errors import ErrorKind, StorageError
from distributor_core.validation_cache import ValidationCache

#: Bound on the entries a discovery walk may visit (resolutions B2 uses the same order of size).
DISCOVERY_LIMIT = 1_000_000

__all__ = [
    "DISCOVERY_LIMIT",
    "FileCheck",
    "SourceBundle",
    "ValidatedContent",
    "bundles_in_listing",
    "check_source_files",
    "discover_bundles",
    "load_source_manifest",
    "manifest_path",
    "select_newest",
    "validate_source_bundle",
]


class ValidatedContent:
    """Bytes of small source files exactly as validation hashed them, keyed by storage path.

    Publishing writes these instead of reading each file a second time (the write still hashes
    and verifies them), so a run touches a small source file once. Bounded: files up to
    ``max_file`` bytes, ``budget`` bytes in all; anything else is read again when published.
    """

    __slots__ = ("_data", "_lock", "budget", "max_file", "used")

    def __init__(self, *, budget: int = 32 * 1024 * 1024, max_file: int = 256 * 1024) -> None:
        self._data: dict[str, bytes] = {}
        self._lock = threading.Lock()
        self.budget = budget
        self.max_file = max_file
        self.used = 0

    def wants(self, size: int) -> bool:
        return size <= self.max_file and self.used + size <= self.budget

    def keep(self, path: str, data: bytes) -> None:
        with self._lock:
            if self.wants(len(data)) and path not in self._data:
                self._data[path] = data
                self.used += len(data)

    def get(self, path: str) -> bytes | None:
        return self._data.get(path)

    def __len__(self) -> int:
        return len(self._data)


class SourceBundle(msgspec.Struct, frozen=True):
    """A discovered bundle: its source-root-relative path, its parsed manifest and, when
    validation kept them, the validated bytes of its small files."""

    path: str
    manifest: Manifest
    content: ValidatedContent | None = None


def manifest_path(bundle_path: str) -> str:
    """Storage path of a bundle's ``manifest.json``."""
    return lp.join_prefix(bundle_path, MANIFEST_NAME)


def _file_path(bundle_path: str, rel: str) -> str:
    return lp.join_prefix(bundle_path, rel)


def _file_paths(bundle_path: str, records) -> list[str]:
    """``_file_path`` of every record of a validated manifest: its paths are valid bundle paths,
    so once the prefix is checked the joins need no further checks."""
    lp.validate_prefix(bundle_path)
    if bundle_path == "":
        return [record.path for record in records]
    return [f"{bundle_path}/{record.path}" for record in records]


def discover_bundles(storage: Storage, prefix: str = "", *, limit: int = DISCOVERY_LIMIT) -> list[str]:
    """Bundle paths under ``prefix`` (relative to the backend root), sorted.

    A bundle path is a directory that holds an entry named ``manifest.json`` (a symlinked or
    special one is found too, so that loading reports it); directories below a
    bundle are part of it and are not searched for further bundles. Reserved names
    (``.distributor-tmp-*`` staging directories, state files, ...) are ignored. Listing more
    than ``limit`` entries raises ``StorageError`` (``limit_exceeded``).

    A backend with ``RECURSIVE_LISTING`` (S3: a few paged requests for a whole prefix) is walked
    in one listing; any other is listed directory by directory, and a bundle's directories are
    never listed, so discovery costs one listing per directory above the bundles, not one entry
    per bundle file.
    """
    lp.validate_prefix(prefix)
    if Feature.RECURSIVE_LISTING in storage.capabilities:
        return bundles_in_listing(storage.walk(prefix, limit=limit, include_dirs=False), prefix)
    return sorted(_bundles_by_directory(storage, prefix, limit))


def bundles_in_listing(entries: Iterable[Entry], prefix: str = "") -> list[str]:
    """The bundle paths of a finished recursive walk of ``prefix`` (files, reserved names left
    out), sorted: what :func:`discover_bundles` finds, for a caller that walked already."""
    candidates = {lp.parent(e.path) for e in entries if not e.is_dir and lp.basename(e.path) == MANIFEST_NAME}
    return sorted(path for path in candidates if not _inside_another(path, candidates, prefix))


def _bundles_by_directory(storage: Storage, prefix: str, limit: int) -> list[str]:
    bundles: list[str] = []
    listed = 0
    pending = [prefix]
    while pending:
        directory = pending.pop()
        children = [
            entry for entry in storage.list(directory) if not lp.is_reserved_path(lp.relative_to(entry.path, prefix))
        ]
        listed += len(children)
        if listed > limit:
            raise storage.error("walk", prefix, ErrorKind.LIMIT_EXCEEDED, f"walk limit of {limit} entries exceeded")
        if any(not entry.is_dir and lp.basename(entry.path) == MANIFEST_NAME for entry in children):
            bundles.append(directory)
        else:
            pending.extend(entry.path for entry in children if entry.is_dir)
    return bundles


def _inside_another(path: str, candidates: set[str], prefix: str) -> bool:
    directory = path
    while directory != prefix and directory != "":
        directory = lp.parent(directory)
        if directory in candidates:
            return True
    return False


def _bundle_error(rel: str, exc: StorageError) -> BundleValidationError | None:
    """Translate storage errors that mean "this bundle is broken" into bundle errors."""
    cause = str(exc.cause) if exc.cause is not None else exc.kind.value
    if exc.kind == ErrorKind.NOT_FOUND:
        return verify.missing(rel)
    if exc.kind == ErrorKind.UNSUPPORTED:
        return BundleValidationError(f"file {rel} is not a regular file ({cause})")
    if exc.kind == ErrorKind.INVALID_PATH:
        return BundleValidationError(f"file {rel} is not a valid bundle file: {cause}")
    if exc.kind == ErrorKind.LIMIT_EXCEEDED:
        return BundleValidationError(f"file {rel} is too large: {cause}")
    return None


def load_source_manifest(storage: Storage, bundle_path: str) -> ValidManifest:
    """Read and parse ``<bundle_path>/manifest.json`` through the storage protocol.

    A missing, non-regular or oversized manifest raises ``BundleValidationError``; content
    problems raise ``ManifestError``; transport failures stay ``StorageError``.
    """
    try:
        data = storage.read_bytes(manifest_path(bundle_path), max_size=MAX_MANIFEST_SIZE)
    except StorageError as exc:
        error = _bundle_error(MANIFEST_NAME, exc)
        if error is None:
            raise
        raise BundleValidationError(str(error).replace(f"file {MANIFEST_NAME}", MANIFEST_NAME, 1)) from exc
    return parse_manifest(data)


def validate_source_bundle(
    storage: Storage,
    bundle_path: str,
    manifest: Manifest,
    *,
    progress: ProgressCallback | None = None,
    keep: ValidatedContent | None = None,
    cache: ValidationCache | None = None,
) -> ValidManifest:
    """Validate ``manifest`` and every listed file of the bundle at ``bundle_path``.

    A :class:`~distributor_core.bundle.ValidManifest` (what :func:`load_source_manifest`
    returns) is not checked again; a plain ``Manifest`` is validated first.

    Each file must be a regular file (``storage.stat``), have the recorded size, and hash to the
    recorded sha256; its bytes are streamed once through ``storage.open_read``. Messages name
    the file relative to the bundle. ``progress`` is called with the bytes hashed per chunk.

    Storages that declare parallel reads (local, for large files) have several files streamed
    at once (hashing releases the GIL); the error raised is still the one of the first broken
    file in manifest order, and every file before it has been checked. ``keep`` collects the
    validated bytes of small files for publishing (:class:`ValidatedContent`).

    ``cache``: on a storage declaring ``Feature.FILE_IDENTITY`` (local disk), a file whose
    identity (device, inode, size, mtime, ctime) and recorded size and sha256 match the cache
    entry is not read at all (nor kept: publishing reads and verifies it); every other file is
    hashed as without a cache and, when it matches, recorded (``distributor_core.validation_cache``).
    """
    manifest = validate_manifest(manifest)
    records = manifest.files
    capabilities = storage.capabilities
    threads = capabilities.read_threads(len(records), sum(_size(r) for r in records))
    open_first = Feature.NONBLOCKING_OPEN in capabilities
    targets = _file_paths(bundle_path, records)
    found: list[FileIdentity | None] | None = None
    if cache is not None and Feature.FILE_IDENTITY in capabilities and records:
        try:
            found = storage.file_identities(targets)
        except StorageError:
            found = None  # hash everything, as without a cache
    callback = progress
    if threads > 1 and progress is not None:
        report = threading.Lock()

        def callback(done: int) -> None:
            with report:
                progress(done)

    if found is None or cache is None:
        run_ordered(
            len(records),
            lambda index: _validate_file(storage, targets[index], records[index], callback, keep, open_first),
            threads=threads,
            name="distributor-validate",
        )
        return manifest
    pending = cache.untrusted(targets, found, records)
    if not pending:
        return manifest
    if len(pending) < len(records):
        threads = capabilities.read_threads(len(pending), sum(_size(records[i]) for i in pending))

    def check(position: int) -> None:
        index = pending[position]
        record = records[index]
        _validate_file(storage, targets[index], record, callback, keep, open_first)
        cache.record(targets[index], found[index], record.sha256)

    run_ordered(len(pending), check, threads=threads, name="distributor-validate")
    return manifest


def _validate_file(
    storage: Storage,
    target: str,
    record,
    progress: ProgressCallback | None,
    keep: ValidatedContent | None = None,
    open_first: bool = False,
) -> None:
    try:
        stream = None
        if open_first and record.size <= _OPEN_FIRST_SIZE:
            # small file on a storage whose open_read returns at once for anything that is not
            # a regular file (NONBLOCKING_OPEN): open it straight away and let the bytes read
            # give the size. Any failure takes the stat-first sequence below, which words the
            # error as before.
            try:
                stream = storage.open_read(target)
            except StorageError:
                stream = None
        if stream is None:
            entry = storage.stat(target)
            if entry.type != "file":
                raise verify.not_regular(record.path, entry.type)
            verify.check_size(record, entry.size)
            stream = storage.open_read(target)
        with stream:
            if keep is not None and keep.wants(record.size):
                chunks = list(iter_chunks(stream, _read_size(record.size)))
                check_content(record, chunks, progress)
                keep.keep(target, chunks[0] if len(chunks) == 1 else b"".join(chunks))
            else:
                check_content(record, iter_chunks(stream, _read_size(record.size)), progress)
    except StorageError as exc:
        error = _bundle_error(record.path, exc)
        if error is None:
            raise
        raise error from exc


#: files up to this size are opened without a stat first where that is safe (a size mismatch
#: is then found from the bytes read: at most this much is read before it is reported)
_OPEN_FIRST_SIZE = 1024 * 1024


def _size(record) -> int:
    size = record.size
    return size if isinstance(size, int) and size > 0 else 0


def _read_size(size: int) -> int:
    """Chunk size for a file of ``size`` bytes: the whole file plus one byte in one read when
    small (no 4 MiB buffer per small file), the storage chunk size otherwise."""
    return size + 1 if size < CHUNK_SIZE else CHUNK_SIZE


def select_newest(bundles: Iterable[SourceBundle]) -> SourceBundle | None:
    """The bundle a ``fixed`` destination publishes: newest manifest ``created``, ties broken by
    ascending bundle path. ``None`` when there are no bundles."""
    newest: SourceBundle | None = None
    for candidate in bundles:
        if newest is None:
            newest = candidate
            continue
        if candidate.manifest.created > newest.manifest.created or (
            candidate.manifest.created == newest.manifest.created and candidate.path < newest.path
        ):
            newest = candidate
    return newest


class FileCheck(msgspec.Struct, frozen=True):
    """What one listed file of a bundle actually is (``distributor inspect``).

    ``size`` and ``sha256`` are measured from the bytes (``None`` when the file could not be
    read); ``error`` is the message :func:`validate_source_bundle` gives for this file, ``None``
    when the file matches its record.
    """

    path: str
    size: int | None
    sha256: str | None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def check_source_files(
    storage: Storage,
    bundle_path: str,
    manifest: Manifest,
    *,
    progress: ProgressCallback | None = None,
) -> list[FileCheck]:
    """Stream every listed file once and report its actual size and sha256 next to its record.

    Unlike :func:`validate_source_bundle` this goes on after a broken file, and hashes a file
    whose size differs too, so every readable file's actual size and digest are known. The
    first error in manifest order is the one ``validate_source_bundle`` raises for the bundle.
    """
    records = manifest.files
    targets = _file_paths(bundle_path, records)
    return [_check_file(storage, target, record, progress) for target, record in zip(targets, records, strict=True)]


def _check_file(storage: Storage, target: str, record, progress: ProgressCallback | None) -> FileCheck:
    try:
        entry = storage.stat(target)
        if entry.type != "file":
            return FileCheck(record.path, None, None, str(verify.not_regular(record.path, entry.type)))
        with storage.open_read(target) as stream:
            size, digest = digest_chunks(iter_chunks(stream, _read_size(entry.size)), progress)
    except StorageError as exc:
        error = _bundle_error(record.path, exc)
        return FileCheck(record.path, None, None, str(exc if error is None else error))
    problem = None
    if size != record.size:
        problem = verify.size_mismatch(record.path, size, record.size)
    elif digest != record.sha256:
        problem = verify.sha256_mismatch(record.path, digest, record.sha256)
    return FileCheck(record.path, size, digest, None if problem is None else str(problem))

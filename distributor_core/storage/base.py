"""The one storage protocol every backend implements (core-semantics §8, resolutions A4).

Backends implement a small set of primitives (``stat``, ``open_read``, ``_write_stream``,
``rename``, ``delete_file``, ``_iter_entries``, ``_remove_dir_if_empty``) and declare what they
can do (``capabilities``, see :mod:`.capabilities`); everything else (sorted bounded walks,
has-any, managed deletes, prefix deletes, hashing a file) is implemented here once on top of
them. Backends may override a generic method for speed (S3 batches deletes and answers
``sha256`` from a checksum it stored; local disk hashes through a reused buffer).

``write_stream`` is written once here: it checks the path and the ``in_place`` arguments and
hands the backend a :class:`WriteRequest`; each backend's ``_write_stream`` does only what
differs.

All paths are logical paths (see :mod:`distributor_core.paths`), validated before any I/O.
"""

from __future__ import annotations

import hashlib
import io
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any, BinaryIO, Literal

import msgspec

from distributor_core import paths as lp
from distributor_core.storage.capabilities import Capabilities, Feature
from distributor_core.storage.errors import ErrorKind, StorageError

EntryType = Literal["file", "directory", "symlink", "other"]

#: ``(st_dev, st_ino, st_size, st_mtime_ns, st_ctime_ns)`` of a regular file (``Storage.file_identities``)
FileIdentity = tuple[int, int, int, int, int]

#: Read/write buffer for streaming copies. Large buffers keep per-call overhead low.
CHUNK_SIZE = 4 * 1024 * 1024
#: Called with the number of bytes just hashed (or vouched for by a stored checksum).
BytesCallback = Callable[[int], None]
#: Default bound for walks that must not run away (core-semantics §7.1.1, resolutions B2).
DEFAULT_WALK_LIMIT = 10_000


class Entry(msgspec.Struct, frozen=True):
    """One stored entry. ``revision`` identifies the stored version when the backend has one
    (S3 ETag; local/SFTP ``<mtime_ns>-<size>``) and is used for conditional writes."""

    path: str
    type: EntryType
    size: int = 0
    mtime: datetime | None = None
    revision: str | None = None

    @property
    def is_dir(self) -> bool:
        return self.type == "directory"

    @property
    def is_file(self) -> bool:
        return self.type == "file"


class ScanResult(msgspec.Struct):
    entries: list[Entry] = msgspec.field(default_factory=list)
    truncated: bool = False


def iter_chunks(stream: BinaryIO, size: int = CHUNK_SIZE) -> Iterator[bytes]:
    """Yield a binary stream's content in chunks of at most ``size`` bytes."""
    while True:
        chunk = stream.read(size)
        if not chunk:
            return
        yield chunk


class ContentDigest(msgspec.Struct, frozen=True):
    """What :meth:`Storage.sha256` answers: the ``sha256:<hex>`` of a file's whole content and
    the bytes it covers. ``stored``: the backend answered from a checksum it stored and verified
    itself (``Feature.STORED_SHA256``), and no bytes were read."""

    size: int
    sha256: str
    stored: bool = False


class WriteRequest(msgspec.Struct, frozen=True):
    """The options of one :meth:`Storage.write_stream` call, checked, as a backend's
    ``_write_stream`` receives them (see ``write_stream`` for their meaning)."""

    overwrite: bool
    expected_size: int | None = None
    expected_sha256: str | None = None
    content_type: str | None = None
    if_revision: str | None = None
    in_place: bool = False


class ReadStream(io.RawIOBase):
    """Base of the backends' read streams (what ``open_read`` returns): subclasses implement
    ``read``; ``readinto`` fills a caller's buffer from it."""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        data = self.read(len(view))
        view[: len(data)] = data
        return len(data)


class HashingVerifier:
    """Counts and hashes bytes as they pass; :meth:`check` compares with expectations."""

    __slots__ = ("_hash", "expected_sha256", "expected_size", "size")

    def __init__(self, expected_size: int | None, expected_sha256: str | None) -> None:
        self._hash = hashlib.sha256()
        self.size = 0
        self.expected_size = expected_size
        self.expected_sha256 = expected_sha256

    def update(self, chunk: bytes | memoryview) -> None:
        self._hash.update(chunk)
        self.size += len(chunk)

    def exceeded(self) -> bool:
        return self.expected_size is not None and self.size > self.expected_size

    @property
    def digest(self) -> str:
        return "sha256:" + self._hash.hexdigest()

    def problem(self) -> str | None:
        if self.expected_size is not None and self.size != self.expected_size:
            return f"size {self.size} does not match expected size {self.expected_size}"
        if self.expected_sha256 is not None and self.digest != self.expected_sha256:
            return f"sha256 {self.digest} does not match expected {self.expected_sha256}"
        return None


def hash_chunks(chunks: Iterable[bytes | memoryview], on_bytes: BytesCallback | None = None) -> ContentDigest:
    """Hash ``chunks`` once, reporting each chunk's length to ``on_bytes``."""
    hasher = HashingVerifier(None, None)
    for chunk in chunks:
        hasher.update(chunk)
        if on_bytes is not None:
            on_bytes(len(chunk))
    return ContentDigest(hasher.size, hasher.digest)


class Storage(ABC):
    """Abstract storage backend rooted at a configured location.

    Subclasses set ``backend`` (``local``, ``ssh``, ``s3``) and ``root_display`` (the configured
    root shown in reports: local/ssh path, s3 prefix; ``.`` when empty), and state their
    ``capabilities`` (a class attribute or a property; a subclass that does not cannot be
    instantiated, so a wrapper cannot drop the declaration of what it wraps).
    """

    backend: str = "abstract"
    root_display: str = "."

    @property
    @abstractmethod
    def capabilities(self) -> Capabilities:
        """What this backend can do; callers branch on it (never on ``backend``)."""

    # ------------------------------------------------------------------ primitives

    @abstractmethod
    def stat(self, path: str) -> Entry:
        """Entry for ``path`` without following a final symlink; missing → ``not_found``."""

    @abstractmethod
    def open_read(self, path: str) -> BinaryIO:
        """Open a regular file for streaming reads (caller closes). Symlinks, directories,
        special files and symlinked ancestors are refused; missing → ``not_found``."""

    def write_stream(
        self,
        path: str,
        chunks: Iterable[bytes],
        *,
        overwrite: bool,
        expected_size: int | None = None,
        expected_sha256: str | None = None,
        content_type: str | None = None,
        if_revision: str | None = None,
        in_place: bool = False,
    ) -> Entry:
        """Stream ``chunks`` to ``path``, creating parent directories.

        The content becomes visible under ``path`` only complete and verified: size and sha256
        are checked while writing and a mismatch raises ``integrity`` with nothing left under
        ``path`` (local/SFTP write a reserved temporary sibling and rename; S3 verifies before
        completing the upload and aborts multipart uploads on failure). With ``overwrite`` false
        an existing target raises ``already_exists`` and is never clobbered, even by a racing
        writer. ``if_revision`` makes the write conditional on the current revision of ``path``
        (``conflict`` when it differs). An exception from the ``chunks`` iterator propagates
        after cleanup.

        ``in_place`` (backends declaring ``Feature.IN_PLACE_WRITES``, others refuse it with
        ``unsupported``): ``path`` is a name the caller owns, such as the executor's reserved
        staging temporary. It is created exclusively (an existing entry: ``already_exists``) and
        written directly, without a temporary of the backend's own, so partial content is
        visible under ``path`` while the write runs; on any failure the file is removed again.
        It creates a new file, so ``overwrite`` and ``if_revision`` must not be given with it.
        """
        if in_place:
            if Feature.IN_PLACE_WRITES not in self.capabilities:
                raise self.error("write", path, ErrorKind.UNSUPPORTED,
                                 f"in-place writes are not supported by {self.backend}")
            if overwrite or if_revision is not None:
                raise ValueError("an in-place write creates a new file: overwrite and if_revision do not apply")
        self._check_path("write", path)
        request = WriteRequest(overwrite, expected_size, expected_sha256, content_type, if_revision, in_place)
        return self._write_stream(path, chunks, request)

    @abstractmethod
    def _write_stream(self, path: str, chunks: Iterable[bytes], request: WriteRequest) -> Entry:
        """The backend's part of :meth:`write_stream`: ``path`` is valid, and an ``in_place``
        request is one the backend declared it can do."""

    @abstractmethod
    def rename(self, src: str, dst: str, *, overwrite: bool) -> None:
        """Move ``src`` to ``dst`` (same backend). With ``overwrite`` false an existing ``dst``
        raises ``already_exists``; with true it is replaced atomically where the backend can."""

    @abstractmethod
    def delete_file(self, path: str) -> None:
        """Delete one non-directory entry. Missing → ``not_found``; directory → ``unsupported``."""

    @abstractmethod
    def _iter_entries(self, prefix: str, recursive: bool) -> Iterator[Entry]:
        """Every entry below ``prefix`` (not the prefix itself), in any order. Directories are
        included where the backend has them. A missing prefix yields nothing."""

    def _remove_dir_if_empty(self, path: str) -> bool:
        """Remove directory ``path`` when empty; return whether it was removed. Object stores
        have no directories and keep the default no-op."""
        return False

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections and other resources."""

    def __enter__(self) -> Storage:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ helpers

    def error(
        self, op: str, path: str, kind: ErrorKind | str, cause: BaseException | str | None = None
    ) -> StorageError:
        return StorageError(op, self.backend, path, kind, cause)

    def _check_path(self, op: str, path: str) -> str:
        problem = lp.check_path(path)
        if problem:
            raise self.error(op, path, ErrorKind.INVALID_PATH, problem)
        return path

    def _check_prefix(self, op: str, prefix: str) -> str:
        if prefix == "":
            return prefix
        return self._check_path(op, prefix)

    # ------------------------------------------------------------------ generic operations

    def exists(self, path: str) -> bool:
        try:
            self.stat(path)
        except StorageError as exc:
            if exc.kind == ErrorKind.NOT_FOUND:
                return False
            raise
        return True

    def sha256(self, path: str, *, on_bytes: BytesCallback | None = None) -> ContentDigest:
        """The sha256 of regular file ``path``'s whole content (rclone's ``Object.Hash``), as the
        backend knows it best: here, streamed through :meth:`open_read` in chunks of
        :data:`CHUNK_SIZE` (never the whole file in memory); backends declaring
        ``Feature.STORED_SHA256`` answer from a checksum they stored where the object has one.
        ``on_bytes`` is called with the bytes hashed (or vouched for) as they go. Errors are
        :meth:`open_read`'s: missing → ``not_found``, not a regular file → ``unsupported``."""
        with self.open_read(path) as stream:
            return hash_chunks(iter_chunks(stream, CHUNK_SIZE), on_bytes)

    def file_identities(self, paths: Sequence[str]) -> list[FileIdentity | None]:
        """``(st_dev, st_ino, st_size, st_mtime_ns, st_ctime_ns)`` of each path, or ``None`` where
        the path is not a regular file reached without a symlink (missing, a directory, a
        symlink, ...: the caller then takes its usual checks, which word the error). Only
        backends declaring ``Feature.FILE_IDENTITY`` answer; others refuse it with
        ``unsupported``."""
        raise self.error("stat", paths[0] if paths else "", ErrorKind.UNSUPPORTED,
                         f"file identities are not supported by {self.backend}")

    def read_bytes(self, path: str, *, max_size: int | None = None) -> bytes:
        """Whole content of a small file (state files, journals, locks)."""
        with self.open_read(path) as stream:
            if max_size is None:
                return stream.read()
            data = stream.read(max_size + 1)
        if len(data) > max_size:
            raise self.error("read", path, ErrorKind.LIMIT_EXCEEDED, f"file is larger than {max_size} bytes")
        return data

    def write_bytes(
        self,
        path: str,
        data: bytes,
        *,
        overwrite: bool,
        content_type: str | None = None,
        if_revision: str | None = None,
    ) -> Entry:
        return self.write_stream(
            path,
            [data],
            overwrite=overwrite,
            expected_size=len(data),
            content_type=content_type,
            if_revision=if_revision,
        )

    def scan(
        self,
        prefix: str = "",
        *,
        limit: int = DEFAULT_WALK_LIMIT,
        recursive: bool = True,
        include_reserved: bool = False,
        include_dirs: bool = True,
    ) -> ScanResult:
        """Entries under ``prefix`` sorted by path, at most ``limit`` of them.

        Reserved names (``.distributor.json``, journals, locks, temporaries, backups) are left
        out unless ``include_reserved``; ``truncated`` says the bound was hit.
        """
        self._check_prefix("walk", prefix)
        entries: list[Entry] = []
        truncated = False
        for entry in self._iter_entries(prefix, recursive):
            if not include_dirs and entry.is_dir:
                continue
            if not include_reserved and lp.is_reserved_path(lp.relative_to(entry.path, prefix)):
                continue
            if len(entries) >= limit:
                truncated = True
                break
            entries.append(entry)
        entries.sort(key=lambda e: e.path)
        return ScanResult(entries, truncated)

    def walk(
        self,
        prefix: str = "",
        *,
        limit: int = DEFAULT_WALK_LIMIT,
        recursive: bool = True,
        include_reserved: bool = False,
        include_dirs: bool = True,
    ) -> list[Entry]:
        """Like :meth:`scan` but exceeding ``limit`` fails with ``limit_exceeded``."""
        result = self.scan(
            prefix,
            limit=limit,
            recursive=recursive,
            include_reserved=include_reserved,
            include_dirs=include_dirs,
        )
        if result.truncated:
            raise self.error("walk", prefix, ErrorKind.LIMIT_EXCEEDED, f"walk limit of {limit} entries exceeded")
        return result.entries

    def list(self, prefix: str = "") -> list[Entry]:
        """Direct children of ``prefix``, sorted."""
        return self.walk(prefix, recursive=False, include_reserved=True)

    def has_any(self, prefix: str = "") -> bool:
        """True iff a non-directory, non-reserved entry exists under ``prefix``."""
        self._check_prefix("has any", prefix)
        for entry in self._iter_entries(prefix, True):
            if entry.is_dir:
                continue
            if lp.is_reserved_path(lp.relative_to(entry.path, prefix)):
                continue
            return True
        return False

    def prune_empty_parents(self, path: str, *, stop_at: str = "") -> None:
        """Remove now-empty parent directories of ``path`` up to, not including, ``stop_at``
        (never the backend root)."""
        directory = lp.parent(path)
        while directory and directory != stop_at and lp.is_under(directory, stop_at):
            if not self._remove_dir_if_empty(directory):
                return
            directory = lp.parent(directory)

    def delete_paths(
        self,
        targets: list[str],
        *,
        op: str,
        ignore_missing: bool = True,
        prune_empty_dirs: bool = True,
    ) -> list[str]:
        """Delete already-validated targets one at a time, stopping at the first error.

        Returns the targets actually removed (missing ones skipped under ``ignore_missing``
        are not included). Earlier deletions are not rolled back.
        """
        deleted: list[str] = []
        for target in targets:
            if target == "":
                raise self.error(op, target, ErrorKind.INVALID_PATH, "refusing to delete the backend root")
            try:
                entry = self.stat(target)
            except StorageError as exc:
                if exc.kind == ErrorKind.NOT_FOUND:
                    if ignore_missing:
                        continue
                    raise self.error(op, target, ErrorKind.NOT_FOUND) from exc
                raise
            if entry.is_dir:
                raise self.error(op, target, ErrorKind.UNSUPPORTED, "target is a directory")
            try:
                self.delete_file(target)
            except StorageError as exc:
                if exc.kind == ErrorKind.NOT_FOUND and ignore_missing:
                    continue
                raise
            deleted.append(target)
            if prune_empty_dirs:
                self.prune_empty_parents(target)
        return deleted

    def _managed_targets(self, op: str, bundle: str, outputs: Iterable[str], *, with_state: bool) -> list[str]:
        try:
            if with_state:
                return lp.managed_bundle_targets(bundle, outputs)
            return lp.managed_output_targets(bundle, outputs)
        except lp.PathError as exc:
            raise self.error(op, bundle, ErrorKind.INVALID_PATH, str(exc)) from exc

    def delete_managed_outputs(
        self,
        bundle: str,
        outputs: Iterable[str],
        *,
        ignore_missing: bool = True,
        prune_empty_dirs: bool = True,
    ) -> list[str]:
        """Delete ``bundle/<output>`` for each output (never the state file)."""
        op = "delete managed outputs"
        targets = self._managed_targets(op, bundle, outputs, with_state=False)
        return self.delete_paths(targets, op=op, ignore_missing=ignore_missing, prune_empty_dirs=prune_empty_dirs)

    def delete_managed_bundle(
        self,
        bundle: str,
        outputs: Iterable[str],
        *,
        ignore_missing: bool = True,
        prune_empty_dirs: bool = True,
    ) -> list[str]:
        """Delete the managed outputs, then ``bundle/.distributor.json``."""
        op = "delete managed bundle"
        targets = self._managed_targets(op, bundle, outputs, with_state=True)
        return self.delete_paths(targets, op=op, ignore_missing=ignore_missing, prune_empty_dirs=prune_empty_dirs)

    def delete_prefix(
        self,
        prefix: str,
        *,
        ignore_missing: bool = True,
        prune_empty_dirs: bool = True,
        keep: Callable[[str], bool] | None = None,
        limit: int = 1_000_000,
    ) -> list[str]:
        """Delete every non-directory entry under ``prefix`` (whole segments; ``""`` clears the
        root's contents, never the root). Locks and journals are kept by default so a held
        lock is never removed. Returns the deleted paths."""
        op = "delete prefix"
        self._check_prefix(op, prefix)
        keep = keep or _keep_locks_and_journals
        entries = self.walk(prefix, limit=limit, include_reserved=True, include_dirs=False)
        targets = [e.path for e in entries if not keep(e.path)]
        deleted = self.delete_paths(targets, op=op, ignore_missing=ignore_missing, prune_empty_dirs=False)
        if prune_empty_dirs:
            self._prune_empty_tree(prefix)
        return deleted

    def _prune_empty_tree(self, prefix: str) -> None:
        """Remove empty directories below ``prefix`` (deepest first), keeping ``prefix`` itself
        when it is the root."""
        dirs = [e.path for e in self._iter_entries(prefix, True) if e.is_dir]
        for directory in sorted(dirs, key=lambda p: p.count("/"), reverse=True):
            self._remove_dir_if_empty(directory)
        if prefix:
            self._remove_dir_if_empty(prefix)


def _keep_locks_and_journals(path: str) -> bool:
    return lp.basename(path) in (lp.LOCK_NAME, lp.JOURNAL_NAME)

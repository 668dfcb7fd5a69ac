"""Local filesystem backend (interfaces §5.2).

The configured root may itself be reached through a symlink; below it, every ancestor of a
target is ``lstat``-ed and a symlink is refused, so no operation can escape the root. Writes go
to a reserved temporary sibling (``.distributor-tmp-<16 hex>``) and are renamed into place only
after their size and sha256 were verified; ``overwrite=False`` publishes with ``link()``, which
never clobbers a file a racing writer created. ``in_place`` writes (the executor's own staging
temporaries) create the named file exclusively and write it directly.
"""

from __future__ import annotations

import errno
import os
import stat as st
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from distributor_core import paths as lp
from distributor_core.storage.base import (
    BytesCallback,
    ContentDigest,
    Entry,
    EntryType,
    FileIdentity,
    HashingVerifier,
    Storage,
    WriteRequest,
    hash_chunks,
)
from distributor_core.storage.capabilities import Capabilities, Feature
from distributor_core.storage.errors import ErrorKind, StorageError

if TYPE_CHECKING:  # imported where a large write needs it: concurrent.futures imports logging
    from concurrent.futures import ThreadPoolExecutor

_DIR_MODE = 0o755
_FILE_MODE = 0o644



def _entry_type(mode: int) -> EntryType:
    if st.S_ISREG(mode):
        return "file"
    if st.S_ISDIR(mode):
        return "directory"
    if st.S_ISLNK(mode):
        return "symlink"
    return "other"


def _revision(info: os.stat_result) -> str:
    return f"{info.st_mtime_ns}-{info.st_size}-{info.st_ino}"


def _kind_for(exc: OSError) -> ErrorKind:
    code = exc.errno
    if code in (errno.ENOENT, errno.ENOTDIR):
        return ErrorKind.NOT_FOUND
    if code == errno.EEXIST:
        return ErrorKind.ALREADY_EXISTS
    if code in (errno.EACCES, errno.EPERM, errno.EROFS):
        return ErrorKind.PERMISSION
    if code == errno.ENOTEMPTY:
        return ErrorKind.NOT_EMPTY
    if code in (errno.EISDIR, errno.ELOOP):
        return ErrorKind.UNSUPPORTED
    return ErrorKind.OTHER


def _cause(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


#: O_NONBLOCK: opening a FIFO must not wait for a writer (the fstat then refuses it); reads of
#: regular files ignore it (as in bundle.disk)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | _NONBLOCK | getattr(os, "O_CLOEXEC", 0)
_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


#: read buffer of ``sha256`` (one per file, reused: 1 MiB stays in the CPU cache between the read
#: and the hash; measured as fast as hashing from a memory map of a warm file, issue 27)
HASH_READ_SIZE = 1024 * 1024

#: chunks at least this large are hashed on a helper thread while they are written (hashlib
#: and os.write both release the GIL, so one large file keeps two cores busy)
_OVERLAP_MIN = 1024 * 1024


def _read_reused(stream: BinaryIO, size: int) -> Iterator[memoryview]:
    """``stream``'s content as views of one reused buffer of ``size`` bytes (each view is valid
    until the next is taken)."""
    buffer = bytearray(size)
    view = memoryview(buffer)
    while count := stream.readinto(buffer):
        yield view[:count]


def _write_all(fd: int, chunk: bytes) -> None:
    written = os.write(fd, chunk)
    if written < len(chunk):
        view = memoryview(chunk)[written:]
        while view:
            view = view[os.write(fd, view):]


def _write_verified(fd: int, chunks: Iterable[bytes], verifier: HashingVerifier) -> None:
    """Hash and write every chunk to ``fd`` (closed on return), stopping once the expected size
    is exceeded; the caller checks ``verifier.problem()``. Each chunk is hashed and written
    completely before the next one is taken from ``chunks``."""
    helper: ThreadPoolExecutor | None = None
    expected = verifier.expected_size
    try:
        for chunk in chunks:
            if not chunk:
                continue
            if len(chunk) < _OVERLAP_MIN or (expected is not None and verifier.size + len(chunk) > expected):
                verifier.update(chunk)
                if verifier.exceeded():
                    break
                _write_all(fd, chunk)
                continue
            if helper is None:
                from concurrent.futures import ThreadPoolExecutor

                helper = ThreadPoolExecutor(1, thread_name_prefix="distributor-hash")
            hashed = helper.submit(verifier.update, chunk)
            try:
                _write_all(fd, chunk)
            finally:
                hashed.result()
    finally:
        if helper is not None:
            helper.shutdown(wait=True)
        os.close(fd)


class LocalStorage(Storage):
    backend = "local"

    #: Two outputs written, or two source files validated, at once when files are large enough
    #: (1 MiB on average): hashing and copying big buffers release the GIL, so two threads keep
    #: two cores busy. Small files stay sequential: their cost is interpreter work and the GIL
    #: hand-offs of extra threads would cost more than they overlap. ``open_read`` returns at
    #: once for a FIFO or device (opened non-blocking, then refused).
    capabilities = Capabilities(
        frozenset(
            {
                Feature.ATOMIC_RENAME,
                Feature.IN_PLACE_WRITES,
                Feature.CONDITIONAL_WRITES,
                Feature.EXCLUSIVE_CREATE,
                Feature.REVISIONS,
                Feature.NONBLOCKING_OPEN,
                Feature.FILE_IDENTITY,
            }
        ),
        parallel_writes=2,
        parallel_reads=2,
        parallel_min_file_size=1024 * 1024,
    )

    def __init__(self, root: str | os.PathLike[str], *, create: bool = False, display: str | None = None) -> None:
        self.root = Path(os.path.abspath(os.fspath(root)))
        self.root_display = display if display is not None else (os.fspath(root) or ".")
        self._root_str = str(self.root)
        # "/" + logical path gives the OS path (the root "/" itself has no trailing part)
        self._root_prefix = self._root_str.rstrip("/") if os.sep == "/" else None
        if create:
            self.root.mkdir(parents=True, exist_ok=True, mode=_DIR_MODE)

    # ------------------------------------------------------------------ path handling

    def _check_path(self, op: str, path: str) -> str:
        if lp.is_valid_path(path):  # the compiled rule; anything else gets the exact message
            return path
        return super()._check_path(op, path)

    def _os_path(self, path: str) -> str:
        if path == "":
            return self._root_str
        if self._root_prefix is not None:
            return f"{self._root_prefix}/{path}"
        return os.path.join(self.root, *path.split("/"))

    def _oserror(self, op: str, path: str, exc: OSError) -> StorageError:
        return StorageError(op, self.backend, path, _kind_for(exc), _cause(exc))

    def _check_ancestors(self, op: str, path: str, *, include_self: bool) -> bool:
        """Refuse a symlink on any segment below the root (the final one too if asked).

        Returns True when every checked segment exists and is a directory (so a parent needs no
        creating); False when the walk stopped at a missing or non-directory segment, or when
        there was no segment to check (the root itself may not exist yet).
        """
        segments = path.split("/") if path else []
        if not include_self and segments:
            segments.pop()
        if not segments:
            return False
        prefix = self._root_prefix
        current = self._root_str if prefix is None else prefix
        for index, segment in enumerate(segments):
            current = os.path.join(current, segment) if prefix is None else f"{current}/{segment}"
            try:
                mode = os.lstat(current).st_mode
            except (FileNotFoundError, NotADirectoryError):
                return False
            except OSError as exc:
                raise self._oserror(op, path, exc) from exc
            if st.S_ISLNK(mode):
                shown = "/".join(segments[: index + 1])
                raise self.error(op, path, ErrorKind.INVALID_PATH, f"symlinked path component {shown}")
            if not st.S_ISDIR(mode):
                return False  # nothing below a non-directory exists; the caller's call fails
        return True

    # ------------------------------------------------------------------ primitives

    def stat(self, path: str) -> Entry:
        op = "stat"
        if path != "":
            self._check_path(op, path)
        self._check_ancestors(op, path, include_self=False)
        try:
            info = os.lstat(self._os_path(path))
        except OSError as exc:
            raise self._oserror(op, path, exc) from exc
        kind = _entry_type(info.st_mode)
        return Entry(
            path=path,
            type=kind,
            size=info.st_size if kind != "directory" else 0,
            mtime=datetime.fromtimestamp(info.st_mtime, UTC),
            revision=_revision(info),
        )

    def file_identities(self, paths: Sequence[str]) -> list[FileIdentity | None]:
        """One ``lstat`` per path; each parent directory's ancestors are checked once (a
        symlinked or missing component gives ``None`` for every file below it)."""
        parents: dict[str, bool] = {}
        found: list[FileIdentity | None] = []
        append = found.append
        lstat, is_regular, valid, prefix = os.lstat, st.S_ISREG, lp.is_valid_path, self._root_prefix
        for path in paths:
            parent = path.rpartition("/")[0]
            ok = parents.get(parent)
            if ok is None:
                try:
                    ok = parent == "" or self._check_ancestors("stat", path, include_self=False)
                except StorageError:
                    ok = False
                parents[parent] = ok
            if not ok or not valid(path):
                append(None)
                continue
            try:
                info = lstat(f"{prefix}/{path}" if prefix is not None else self._os_path(path))
            except OSError:
                append(None)
                continue
            if not is_regular(info.st_mode):
                append(None)
                continue
            append((info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns))
        return found

    def open_read(self, path: str) -> BinaryIO:
        op = "read"
        self._check_path(op, path)
        self._check_ancestors(op, path, include_self=False)
        try:
            fd = os.open(self._os_path(path), _READ_FLAGS)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise self.error(op, path, ErrorKind.UNSUPPORTED, "not a regular file (symlink)") from exc
            raise self._oserror(op, path, exc) from exc
        try:
            info = os.fstat(fd)
            if not st.S_ISREG(info.st_mode):
                raise self.error(op, path, ErrorKind.UNSUPPORTED, "not a regular file")
            return os.fdopen(fd, "rb", buffering=0)
        except BaseException:
            os.close(fd)
            raise

    def sha256(self, path: str, *, on_bytes: BytesCallback | None = None) -> ContentDigest:
        """Read into one reused buffer and hash there. Never through a memory map: a file that
        another process truncates while it is mapped would kill this one with ``SIGBUS``."""
        with self.open_read(path) as stream:
            size = os.fstat(stream.fileno()).st_size  # a small file needs no 1 MiB buffer
            return hash_chunks(_read_reused(stream, min(HASH_READ_SIZE, size + 1)), on_bytes)

    def _ensure_parent(self, op: str, path: str) -> None:
        directory = lp.parent(path)
        if self._check_ancestors(op, path, include_self=False):
            return  # every ancestor is already a real directory: nothing to create
        try:
            os.makedirs(self._os_path(directory), mode=_DIR_MODE, exist_ok=True)
        except FileExistsError as exc:
            raise self.error(op, path, ErrorKind.ALREADY_EXISTS, "a parent path is not a directory") from exc
        except OSError as exc:
            raise self._oserror(op, path, exc) from exc
        # a racing process could have planted a symlink while we created directories
        self._check_ancestors(op, path, include_self=False)

    def _write_stream(self, path: str, chunks: Iterable[bytes], request: WriteRequest) -> Entry:
        """Write a reserved temporary sibling and publish it (:meth:`_publish`); ``in_place``:
        create ``path`` itself exclusively and write it directly (the caller owns the name, e.g.
        the executor's staging temporary: a second temporary plus a link would only double the
        metadata work). On any failure the file this call created is removed."""
        op = "write"
        self._ensure_parent(op, path)
        final = self._os_path(path)
        if request.in_place:
            target = final
        else:
            if not request.overwrite and os.path.lexists(final):
                raise self.error(op, path, ErrorKind.ALREADY_EXISTS)
            target = self._os_path(lp.sibling_temp_path(path))
        try:
            fd = os.open(target, _CREATE_FLAGS, _FILE_MODE)
        except FileExistsError as exc:
            raise self.error(op, path, ErrorKind.ALREADY_EXISTS) from exc
        except OSError as exc:
            raise self._oserror(op, path, exc) from exc
        verifier = HashingVerifier(request.expected_size, request.expected_sha256)
        try:
            _write_verified(fd, chunks, verifier)
            problem = verifier.problem()
            if problem:
                raise self.error(op, path, ErrorKind.INTEGRITY, problem)
            if not request.in_place:
                self._publish(op, target, final, path, overwrite=request.overwrite, if_revision=request.if_revision)
        except BaseException as exc:
            try:
                os.unlink(target)
            except OSError:
                pass
            if isinstance(exc, OSError):
                raise self._oserror(op, path, exc) from exc
            raise
        return Entry(path=path, type="file", size=verifier.size)

    def _publish(
        self, op: str, src: str, dst: str, path: str, *, overwrite: bool, if_revision: str | None
    ) -> None:
        """Move ``src`` onto ``dst``: replace when allowed, otherwise link without clobbering."""
        if if_revision is not None:
            try:
                current = _revision(os.lstat(dst))
            except FileNotFoundError:
                current = ""
            if current != if_revision:
                raise self.error(op, path, ErrorKind.CONFLICT, "stored revision changed")
        if overwrite:
            if os.path.isdir(dst) and not os.path.islink(dst):
                raise self.error(op, path, ErrorKind.UNSUPPORTED, "target is a directory")
            os.replace(src, dst)
            return
        try:
            os.link(src, dst, follow_symlinks=False)
        except FileExistsError as exc:
            raise self.error(op, path, ErrorKind.ALREADY_EXISTS) from exc
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK):
                raise
            # filesystems without hard links: best-effort no-clobber rename
            if os.path.lexists(dst):
                raise self.error(op, path, ErrorKind.ALREADY_EXISTS) from exc
            os.rename(src, dst)
            return
        os.unlink(src)

    def rename(self, src: str, dst: str, *, overwrite: bool) -> None:
        op = "rename"
        self._check_path(op, src)
        self._check_path(op, dst)
        ancestors_ok = self._check_ancestors(op, src, include_self=False)
        if not (ancestors_ok and lp.parent(src) == lp.parent(dst)):
            self._ensure_parent(op, dst)
        source = self._os_path(src)
        if not overwrite:
            # the common case first: link() refuses directories and never clobbers; on any
            # failure the full sequence below runs and reports exactly as before
            try:
                os.link(source, self._os_path(dst), follow_symlinks=False)
            except OSError:
                pass
            else:
                try:
                    os.unlink(source)
                except OSError as exc:
                    raise self._oserror(op, dst, exc) from exc
                return
        try:
            info = os.lstat(source)
        except OSError as exc:
            raise self._oserror(op, src, exc) from exc
        if st.S_ISDIR(info.st_mode):
            raise self.error(op, src, ErrorKind.UNSUPPORTED, "source is a directory")
        try:
            self._publish(op, source, self._os_path(dst), dst, overwrite=overwrite, if_revision=None)
        except OSError as exc:
            raise self._oserror(op, dst, exc) from exc

    def delete_file(self, path: str) -> None:
        op = "delete"
        self._check_path(op, path)
        self._check_ancestors(op, path, include_self=False)
        target = self._os_path(path)
        try:
            info = os.lstat(target)
            if st.S_ISDIR(info.st_mode):
                raise self.error(op, path, ErrorKind.UNSUPPORTED, "target is a directory")
            os.unlink(target)
        except OSError as exc:
            raise self._oserror(op, path, exc) from exc

    def _iter_entries(self, prefix: str, recursive: bool) -> Iterator[Entry]:
        self._check_ancestors("walk", prefix, include_self=True)
        start = self._os_path(prefix)
        stack = [(start, prefix)]
        while stack:
            directory, logical = stack.pop()
            try:
                iterator = os.scandir(directory)
            except (FileNotFoundError, NotADirectoryError):
                continue
            except OSError as exc:
                raise self._oserror("walk", logical, exc) from exc
            with iterator:
                for item in iterator:
                    child = item.name if logical == "" else f"{logical}/{item.name}"
                    try:
                        info = item.stat(follow_symlinks=False)
                    except FileNotFoundError:
                        continue
                    except OSError as exc:
                        raise self._oserror("walk", child, exc) from exc
                    kind = _entry_type(info.st_mode)
                    yield Entry(
                        path=child,
                        type=kind,
                        size=info.st_size if kind != "directory" else 0,
                        mtime=datetime.fromtimestamp(info.st_mtime, UTC),
                        revision=_revision(info),
                    )
                    if kind == "directory" and recursive:
                        stack.append((item.path, child))

    def _remove_dir_if_empty(self, path: str) -> bool:
        if path == "":
            return False
        try:
            os.rmdir(self._os_path(path))
        except OSError:
            return False
        return True

"""Local filesystem backend (interfaces §5.2).

The configured root may itself be reached through a symlink; below it, every ancestor of a
target is ``lstat``-ed and a symlink is refused, so no operation can escape the root. Writes go
to a reserved temporary sibling (``.distributor-tmp-<16 hex>``) and are renamed into place only
after their size and sha256 were verified; ``overwrite=False`` publishes with ``link()``, which
never clobbers a file a racing writer created.
"""

from __future__ import annotations

import errno
import os
import stat as st
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO

from distributor_core import paths as lp
from distributor_core.storage.base import Entry, EntryType, HashingVerifier, Storage
from distributor_core.storage.errors import ErrorKind, StorageError

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


class LocalStorage(Storage):
    backend = "local"

    def __init__(self, root: str | os.PathLike[str], *, create: bool = False, display: str | None = None) -> None:
        self.root = Path(os.path.abspath(os.fspath(root)))
        self.root_display = display if display is not None else (os.fspath(root) or ".")
        if create:
            self.root.mkdir(parents=True, exist_ok=True, mode=_DIR_MODE)

    # ------------------------------------------------------------------ path handling

    def _os_path(self, path: str) -> str:
        if path == "":
            return str(self.root)
        return os.path.join(self.root, *path.split("/"))

    def _oserror(self, op: str, path: str, exc: OSError) -> StorageError:
        return StorageError(op, self.backend, path, _kind_for(exc), _cause(exc))

    def _check_ancestors(self, op: str, path: str, *, include_self: bool) -> None:
        """Refuse a symlink on any segment below the root (the final one too if asked)."""
        segments = path.split("/") if path else []
        if not include_self:
            segments = segments[:-1]
        current = str(self.root)
        for index, segment in enumerate(segments):
            current = os.path.join(current, segment)
            try:
                info = os.lstat(current)
            except FileNotFoundError:
                return
            except NotADirectoryError:
                return
            except OSError as exc:
                raise self._oserror(op, path, exc) from exc
            if st.S_ISLNK(info.st_mode):
                shown = "/".join(segments[: index + 1])
                raise self.error(op, path, ErrorKind.INVALID_PATH, f"symlinked path component {shown}")
            if index < len(segments) - 1 and not st.S_ISDIR(info.st_mode):
                return

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

    def open_read(self, path: str) -> BinaryIO:
        op = "read"
        self._check_path(op, path)
        self._check_ancestors(op, path, include_self=False)
        try:
            fd = os.open(self._os_path(path), os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
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

    def _ensure_parent(self, op: str, path: str) -> None:
        directory = lp.parent(path)
        self._check_ancestors(op, path, include_self=False)
        try:
            os.makedirs(self._os_path(directory), mode=_DIR_MODE, exist_ok=True)
        except FileExistsError as exc:
            raise self.error(op, path, ErrorKind.ALREADY_EXISTS, "a parent path is not a directory") from exc
        except OSError as exc:
            raise self._oserror(op, path, exc) from exc
        # a racing process could have planted a symlink while we created directories
        self._check_ancestors(op, path, include_self=False)

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
    ) -> Entry:
        op = "write"
        self._check_path(op, path)
        self._ensure_parent(op, path)
        final = self._os_path(path)
        if not overwrite and os.path.lexists(final):
            raise self.error(op, path, ErrorKind.ALREADY_EXISTS)
        temp_logical = lp.sibling_temp_path(path)
        temp = self._os_path(temp_logical)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
        try:
            fd = os.open(temp, flags, _FILE_MODE)
        except OSError as exc:
            raise self._oserror(op, path, exc) from exc
        verifier = HashingVerifier(expected_size, expected_sha256)
        try:
            with os.fdopen(fd, "wb", buffering=0) as handle:
                for chunk in chunks:
                    if not chunk:
                        continue
                    verifier.update(chunk)
                    if verifier.exceeded():
                        break
                    view = memoryview(chunk)
                    while view:
                        written = handle.write(view)
                        view = view[written:]
            problem = verifier.problem()
            if problem:
                raise self.error(op, path, ErrorKind.INTEGRITY, problem)
            self._publish(op, temp, final, path, overwrite=overwrite, if_revision=if_revision)
        except BaseException as exc:
            try:
                os.unlink(temp)
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
        self._check_ancestors(op, src, include_self=False)
        self._ensure_parent(op, dst)
        source = self._os_path(src)
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

"""File helpers of the staging area: atomic replacement, targeted fsync, and tree walks that no
shape of tree can break.

:func:`sync_tree` and :func:`remove_tree` walk iteratively through directory descriptors (one open
at a time, ``..`` to climb back), so neither Python's recursion limit, ``PATH_MAX`` nor the
descriptor limit bounds the depth they handle: a tree an upload left behind, however deep, is
always removable (Python 3.11's ``shutil.rmtree`` and ``os.walk`` recurse once per level). Links
are never followed.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat as st
from collections.abc import Callable, Iterable
from pathlib import Path

_FILE_MODE = 0o600
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC


def fsync_dir(path: str | os.PathLike[str]) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes, *, temp_prefix: str, durable: bool = True) -> None:
    """Replace ``path`` with ``data`` through a temporary sibling and ``rename``."""
    temp = path.parent / f"{temp_prefix}{os.urandom(8).hex()}"
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


def _scan(fd: int, on_file: Callable[[int, str], None]) -> list[str]:
    """Hand every non-directory entry of ``fd`` to ``on_file``; return the subdirectory names."""
    subdirs: list[str] = []
    with os.scandir(fd) as entries:
        for entry in entries:
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except FileNotFoundError:
                continue
            if is_dir:
                subdirs.append(entry.name)
            else:
                on_file(fd, entry.name)
    return subdirs


def walk_post_order(
    root: str | os.PathLike[str],
    *,
    on_file: Callable[[int, str], None],
    on_dir: Callable[[int], None] = lambda _fd: None,
    on_left: Callable[[int, str], None] = lambda _fd, _name: None,
) -> None:
    """Visit the tree below the directory ``root`` without recursion.

    ``on_file(dir_fd, name)`` is called for every non-directory entry (symlinks included, never
    followed), ``on_dir(fd)`` for every directory once everything below it was visited, and
    ``on_left(parent_fd, name)`` right after climbing out of the subdirectory ``name``. Only one
    directory descriptor is open at a time.
    """
    fd = os.open(root, _DIR_FLAGS)
    try:
        stack: list[tuple[str, list[str]]] = []
        pending = _scan(fd, on_file)
        while True:
            if pending:
                name = pending.pop()
                try:
                    child = os.open(name, _DIR_FLAGS, dir_fd=fd)
                except FileNotFoundError:
                    continue
                except OSError as exc:
                    if exc.errno not in (errno.ENOTDIR, errno.ELOOP):
                        raise
                    on_file(fd, name)  # replaced by a file or a link meanwhile
                    continue
                stack.append((name, pending))
                os.close(fd)
                fd = child
                pending = _scan(fd, on_file)
                continue
            on_dir(fd)
            if not stack:
                return
            name, pending = stack.pop()
            parent = os.open("..", _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = parent
            on_left(fd, name)
    finally:
        os.close(fd)


def _unlink(dir_fd: int, name: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(name, dir_fd=dir_fd)


def _rmdir(dir_fd: int, name: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.rmdir(name, dir_fd=dir_fd)


def remove_tree(path: str | os.PathLike[str]) -> None:
    """Remove ``path`` and everything below it (a file or link is unlinked); missing is fine."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    if not st.S_ISDIR(info.st_mode):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        return
    try:
        walk_post_order(path, on_file=_unlink, on_left=_rmdir)
    except FileNotFoundError:
        if os.path.lexists(path):
            raise
        return
    with contextlib.suppress(FileNotFoundError):
        os.rmdir(path)


def _fsync_file(dir_fd: int, name: str) -> None:
    try:
        fd = os.open(name, _READ_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return  # a link: nothing of ours to make durable
        raise
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def sync_paths(files: Iterable[Path], directories: Iterable[Path]) -> None:
    """fsync each of ``files`` (never following a link), then each of ``directories``."""
    for path in files:
        fd = os.open(path, _READ_FLAGS)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    for directory in directories:
        fsync_dir(directory)


def sync_tree(root: Path, extra: Iterable[Path] = ()) -> None:
    """Make everything below ``root`` (and the ``extra`` files) durable: every file and directory
    below ``root``, each of ``extra`` and its directory are fsynced. Targeted on purpose: a
    ``syncfs`` would also wait for every other writer on the filesystem."""
    walk_post_order(root, on_file=_fsync_file, on_dir=os.fsync)
    directories: set[Path] = set()
    for path in extra:
        fd = os.open(path, _READ_FLAGS)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        directories.add(path.parent)
    for directory in directories:
        fsync_dir(directory)

"""File helpers of the staging area: atomic replacement, targeted fsync, tree removal."""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
from collections.abc import Iterable
from pathlib import Path

_FILE_MODE = 0o600


def fsync_dir(path: str | os.PathLike[str]) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes, *, temp_prefix: str, durable: bool = True) -> None:
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


def remove_tree(path: str | os.PathLike[str]) -> None:
    """Remove a directory tree; a missing tree is fine."""
    with contextlib.suppress(FileNotFoundError):
        shutil.rmtree(path)


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

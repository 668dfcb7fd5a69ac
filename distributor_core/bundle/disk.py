"""Bundles in a local directory: loading ``manifest.json`` and validating the listed files.

Each listed file must exist below the root, be a regular file (symlinks, directories, devices,
FIFOs and sockets are refused), have no symlinked ancestor inside the bundle, and match its
record's size and sha256. Every file is streamed once in chunks; nothing is read whole.
"""

from __future__ import annotations

import errno
import os
import stat as st
from collections.abc import Iterator
from pathlib import Path

from distributor_core.bundle import verify
from distributor_core.bundle.codec import parse_manifest
from distributor_core.bundle.digest import ProgressCallback
from distributor_core.bundle.errors import BundleValidationError
from distributor_core.bundle.model import MANIFEST_NAME, Manifest
from distributor_core.bundle.validate import validate_manifest

#: Read buffer for hashing; large enough to keep per-call overhead negligible.
CHUNK_SIZE = 1024 * 1024
#: ``manifest.json`` files larger than this are refused (a manifest is metadata, not content).
MAX_MANIFEST_SIZE = 64 * 1024 * 1024

_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


def _describe(mode: int) -> str:
    if st.S_ISLNK(mode):
        return "symlink"
    if st.S_ISDIR(mode):
        return "directory"
    if st.S_ISFIFO(mode):
        return "fifo"
    if st.S_ISSOCK(mode):
        return "socket"
    if st.S_ISCHR(mode) or st.S_ISBLK(mode):
        return "device"
    return "special file"


def check_ancestors(root: Path, rel: str) -> None:
    """Refuse a missing, non-directory or symlinked ancestor of ``rel`` below ``root``."""
    segments = rel.split("/")[:-1]
    current = root
    for index, segment in enumerate(segments):
        current = current / segment
        try:
            info = os.lstat(current)
        except FileNotFoundError:
            raise verify.missing(rel) from None
        except OSError as exc:
            raise verify.unreadable(rel, exc.strerror or type(exc).__name__) from None
        if st.S_ISLNK(info.st_mode):
            raise verify.symlinked_ancestor(rel, "/".join(segments[: index + 1]))
        if not st.S_ISDIR(info.st_mode):
            raise verify.missing(rel)


def open_regular(root: Path, rel: str) -> tuple[int, int]:
    """Open ``root/rel`` for reading after the bundle checks; return ``(fd, size)``."""
    check_ancestors(root, rel)
    target = root.joinpath(*rel.split("/"))
    try:
        info = os.lstat(target)
    except FileNotFoundError:
        raise verify.missing(rel) from None
    except OSError as exc:
        raise verify.unreadable(rel, exc.strerror or type(exc).__name__) from None
    if not st.S_ISREG(info.st_mode):
        raise verify.not_regular(rel, _describe(info.st_mode))
    try:
        fd = os.open(target, _OPEN_FLAGS)
    except FileNotFoundError:
        raise verify.missing(rel) from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise verify.not_regular(rel, "symlink") from None
        raise verify.unreadable(rel, exc.strerror or type(exc).__name__) from None
    info = os.fstat(fd)
    if not st.S_ISREG(info.st_mode):
        os.close(fd)
        raise verify.not_regular(rel, _describe(info.st_mode))
    return fd, info.st_size


def iter_fd(fd: int, chunk_size: int = CHUNK_SIZE) -> Iterator[bytes]:
    """Yield the content of an open descriptor in chunks (the caller closes it)."""
    while True:
        chunk = os.read(fd, chunk_size)
        if not chunk:
            return
        yield chunk


def load_manifest(root: str | os.PathLike[str]) -> Manifest:
    """Read and parse ``<root>/manifest.json`` (strict JSON, manifest-only validation)."""
    root_path = Path(root)
    try:
        fd, size = open_regular(root_path, MANIFEST_NAME)
    except BundleValidationError as exc:
        raise BundleValidationError(str(exc).replace(f"file {MANIFEST_NAME}", MANIFEST_NAME, 1)) from None
    try:
        if size > MAX_MANIFEST_SIZE:
            raise BundleValidationError(f"{MANIFEST_NAME} is larger than {MAX_MANIFEST_SIZE} bytes")
        data = b"".join(iter_fd(fd))
    finally:
        os.close(fd)
    return parse_manifest(data)


def validate_bundle(
    root: str | os.PathLike[str], manifest: Manifest, *, progress: ProgressCallback | None = None
) -> Manifest:
    """Validate ``manifest`` and every listed file under ``root``; unlisted files are ignored.

    ``progress`` (optional) is called with the number of bytes hashed after each chunk.
    """
    manifest = validate_manifest(manifest)
    root_path = Path(root)
    for record in manifest.files:
        fd, size = open_regular(root_path, record.path)
        try:
            verify.check_size(record, size)
            verify.check_content(record, iter_fd(fd), progress)
        except OSError as exc:
            raise verify.unreadable(record.path, exc.strerror or type(exc).__name__) from None
        finally:
            os.close(fd)
    return manifest


__all__ = [
    "MAX_MANIFEST_SIZE",
    "load_manifest",
    "validate_bundle",
]

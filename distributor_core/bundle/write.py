"""Writing ``manifest.json`` and complete bundles (interfaces §4.1).

``write_manifest`` writes a reserved temporary sibling and publishes it atomically: with
``overwrite`` by ``os.replace``, without it by a no-clobber ``link`` so a racing writer's file is
never replaced. ``write_bundle`` stages a whole bundle in a sibling directory with a reserved name
(``.distributor-tmp-<16 hex>``, invisible to bundle discovery), validates it, then promotes it
with one rename; on overwrite the old root is moved to a reserved backup sibling first and put
back if the promotion fails.
"""

from __future__ import annotations

import errno
import os
import secrets
import shutil
import stat as st
from collections.abc import Iterator, Sequence
from datetime import datetime
from pathlib import Path

from distributor_core import paths as lp
from distributor_core.bundle.codec import marshal_manifest
from distributor_core.bundle.digest import bundle_digest, digest_chunks
from distributor_core.bundle.disk import iter_fd, validate_bundle
from distributor_core.bundle.errors import BundleError, BundlePathError, BundleValidationError
from distributor_core.bundle.model import MANIFEST_NAME, SCHEMA_VERSION, BundleFile, Manifest, ManifestFile
from distributor_core.bundle.paths import source_path_problem
from distributor_core.bundle.validate import validate_manifest
from distributor_core.jsonfmt import go_json_string
from distributor_core.timefmt import now_seconds, to_utc

_DIR_MODE = 0o755
_FILE_MODE = 0o644
_WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


def _exists(path: Path) -> FileExistsError:
    return FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(path))


def _reserved_sibling(directory: Path, prefix: str) -> Path:
    return directory / f"{prefix}{secrets.token_hex(8)}"


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def write_manifest(root: str | os.PathLike[str], manifest: Manifest, *, overwrite: bool = False) -> Path:
    """Validate ``manifest`` and write ``<root>/manifest.json`` atomically; return its path.

    Without ``overwrite`` an existing ``manifest.json`` raises ``FileExistsError``.
    """
    data = marshal_manifest(manifest)
    root_path = Path(root)
    if not root_path.is_dir():
        raise BundleError(f"bundle root {root_path} is not a directory")
    target = root_path / MANIFEST_NAME
    if not overwrite and os.path.lexists(target):
        raise _exists(target)
    temp = _reserved_sibling(root_path, lp.TEMP_PREFIX)
    fd = os.open(temp, _WRITE_FLAGS, _FILE_MODE)
    try:
        try:
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        if overwrite:
            os.replace(temp, target)
        else:
            _link_no_clobber(temp, target)
    finally:
        if os.path.lexists(temp):
            os.unlink(temp)
    return target


def _link_no_clobber(temp: Path, target: Path) -> None:
    try:
        os.link(temp, target, follow_symlinks=False)
    except FileExistsError:
        raise _exists(target) from None
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK):
            raise
        if os.path.lexists(target):  # no hard links here: best-effort no-clobber rename
            raise _exists(target) from exc
        os.rename(temp, target)


def _tee(chunks: Iterator[bytes], fd: int) -> Iterator[bytes]:
    """Write each chunk to ``fd`` and pass it on (copy and hash in one read)."""
    for chunk in chunks:
        _write_all(fd, chunk)
        yield chunk


def _check_inputs(files: Sequence[BundleFile]) -> None:
    if isinstance(files, str | bytes) or not files:
        raise BundleError("files must list at least one BundleFile")
    seen: set[str] = set()
    for index, item in enumerate(files):
        if not isinstance(item, BundleFile):
            raise BundleError(f"files[{index}] must be a BundleFile")
        problem = source_path_problem(item.path)
        if problem:
            raise BundlePathError(f"files[{index}].path: {problem}")
        if item.path in seen:
            raise BundlePathError(f"files[{index}].path duplicates {go_json_string(item.path)}")
        seen.add(item.path)
        source = Path(item.source_path)
        try:
            info = os.lstat(source)
        except FileNotFoundError:
            raise BundleValidationError(f"files[{index}].source_path {source} does not exist") from None
        if st.S_ISLNK(info.st_mode):
            raise BundleValidationError(f"files[{index}].source_path {source} is a symlink")
        if not st.S_ISREG(info.st_mode):
            raise BundleValidationError(f"files[{index}].source_path {source} is not a regular file")


def _copy_into(staging: Path, index: int, item: BundleFile) -> ManifestFile:
    """Stream one source file into the staging tree, hashing what was written."""
    target = staging.joinpath(*item.path.split("/"))
    target.parent.mkdir(parents=True, exist_ok=True, mode=_DIR_MODE)
    try:
        src = os.open(item.source_path, _READ_FLAGS)
    except OSError as exc:
        raise BundleValidationError(
            f"files[{index}].source_path {item.source_path} cannot be read: {exc.strerror or exc}"
        ) from None
    try:
        if not st.S_ISREG(os.fstat(src).st_mode):
            raise BundleValidationError(
                f"files[{index}].source_path {item.source_path} is not a regular file"
            )
        dst = os.open(target, _WRITE_FLAGS, _FILE_MODE)
        try:
            size, digest = digest_chunks(_tee(iter_fd(src), dst))
        finally:
            os.close(dst)
    finally:
        os.close(src)
    return ManifestFile(path=item.path, sha256=digest, size=size)


def write_bundle(
    root: str | os.PathLike[str],
    *,
    id: str,
    files: Sequence[BundleFile],
    created: datetime | None = None,
    overwrite: bool = False,
) -> Manifest:
    """Write a complete bundle (files in caller order plus ``manifest.json``) at ``root``.

    Inputs are checked first; an existing ``root`` without ``overwrite`` raises
    ``FileExistsError`` before any work. Source files are never modified. On failure the staging
    directory is removed and an overwritten root is restored.
    """
    _check_inputs(files)
    root_path = Path(os.path.abspath(root))
    if os.path.lexists(root_path):
        if not overwrite:
            raise _exists(root_path)
        if not root_path.is_dir() or root_path.is_symlink():
            raise BundleError(f"bundle root {root_path} exists and is not a directory")
    parent = root_path.parent
    parent.mkdir(parents=True, exist_ok=True, mode=_DIR_MODE)
    staging = _reserved_sibling(parent, lp.TEMP_PREFIX)
    staging.mkdir(mode=_DIR_MODE)
    try:
        records = [_copy_into(staging, index, item) for index, item in enumerate(files)]
        manifest = validate_manifest(
            Manifest(
                schema_version=SCHEMA_VERSION,
                id=id,
                digest=bundle_digest(records),
                created=now_seconds() if created is None else to_utc(created),
                files=records,
            )
        )
        write_manifest(staging, manifest)
        validate_bundle(staging, manifest)
        _promote(staging, root_path, overwrite=overwrite)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return manifest


def _promote(staging: Path, root: Path, *, overwrite: bool) -> None:
    if not os.path.lexists(root):
        try:
            os.rename(staging, root)
        except OSError as exc:
            if exc.errno in (errno.EEXIST, errno.ENOTEMPTY):
                raise _exists(root) from None
            raise
        return
    if not overwrite:
        raise _exists(root)
    backup = _reserved_sibling(root.parent, lp.BACKUP_PREFIX)
    os.rename(root, backup)
    try:
        os.rename(staging, root)
    except BaseException:
        try:
            os.rename(backup, root)
        except OSError:
            pass
        raise
    shutil.rmtree(backup, ignore_errors=True)


__all__ = [
    "write_bundle",
    "write_manifest",
]

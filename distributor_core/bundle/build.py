"""Building a manifest from files already under a bundle root (core-semantics §1.4).

Exactly one selection mode: an explicit ``files`` list (caller order kept) or ``scan`` (every
regular file below the root, dotfiles included, reserved names skipped, symlinks and special
files refused, paths sorted by their UTF-8 bytes).
"""

from __future__ import annotations

import os
import stat as st
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from distributor_core import paths as lp
from distributor_core.bundle.digest import ProgressCallback, bundle_digest, digest_chunks
from distributor_core.bundle.disk import iter_fd, open_regular
from distributor_core.bundle.errors import BundleError, BundlePathError
from distributor_core.bundle.model import MANIFEST_NAME, SCHEMA_VERSION, Manifest, ManifestFile
from distributor_core.bundle.paths import source_path_problem
from distributor_core.bundle.validate import validate_manifest
from distributor_core.jsonfmt import go_json_string
from distributor_core.timefmt import now_seconds, to_utc


def _skipped_by_scan(name: str) -> bool:
    return name == MANIFEST_NAME or lp.is_reserved_name(name)


def scan_files(root: str | os.PathLike[str]) -> list[str]:
    """Every regular file below ``root`` as a bundle path, sorted by UTF-8 byte order.

    Files named ``manifest.json`` and reserved names (``.distributor.json``, locks, journals,
    ``.distributor-tmp-*``, ``.distributor-bak-*``) are skipped at any depth; a symlink or a
    special file anywhere fails the scan.
    """
    root_path = Path(root)
    try:
        info = os.stat(root_path)
    except FileNotFoundError:
        raise BundleError(f"bundle root {root_path} does not exist") from None
    if not st.S_ISDIR(info.st_mode):
        raise BundleError(f"bundle root {root_path} is not a directory")
    found: list[str] = []
    stack: list[tuple[Path, str]] = [(root_path, "")]
    while stack:
        directory, logical = stack.pop()
        with os.scandir(directory) as entries:
            for entry in entries:
                rel = entry.name if logical == "" else f"{logical}/{entry.name}"
                if _skipped_by_scan(entry.name):
                    continue
                mode = entry.stat(follow_symlinks=False).st_mode
                if st.S_ISLNK(mode):
                    raise BundleError(f"scan found symlink {rel}; bundles may contain regular files only")
                if st.S_ISDIR(mode):
                    stack.append((Path(entry.path), rel))
                elif st.S_ISREG(mode):
                    found.append(rel)
                else:
                    raise BundleError(
                        f"scan found special file {rel}; bundles may contain regular files only"
                    )
    found.sort(key=lambda p: p.encode("utf-8", "surrogateescape"))
    return found


def hash_bundle_file(
    root: str | os.PathLike[str], path: str, progress: ProgressCallback | None = None
) -> ManifestFile:
    """Stream ``root/path`` once and return its manifest record (bundle file checks apply)."""
    fd, _ = open_regular(Path(root), path)
    try:
        size, digest = digest_chunks(iter_fd(fd), progress)
    finally:
        os.close(fd)
    return ManifestFile(path=path, sha256=digest, size=size)


def build_manifest(
    root: str | os.PathLike[str],
    *,
    id: str,
    files: Sequence[str] | None = None,
    scan: bool = False,
    created: datetime | None = None,
    progress: ProgressCallback | None = None,
) -> Manifest:
    """Build and validate a manifest for files already under ``root``.

    ``created`` defaults to the current UTC time truncated to whole seconds; a supplied value is
    kept to the nanosecond (converted to UTC, ``timefmt.to_utc``).
    """
    if (files is None) == (not scan):
        raise BundleError("exactly one of files or scan must be set")
    if isinstance(files, str):
        raise BundleError("files must be a list of bundle paths, not a string")
    if scan:
        paths = scan_files(root)
        if not paths:
            raise BundleError(f"scan found no files under {Path(root)}")
    else:
        paths = list(files or ())
        seen: set[str] = set()
        for index, path in enumerate(paths):
            problem = source_path_problem(path)
            if problem:
                raise BundlePathError(f"files[{index}]: {problem}")
            if path in seen:
                raise BundlePathError(f"files[{index}]: path {go_json_string(path)} is listed more than once")
            seen.add(path)
    records = [hash_bundle_file(root, path, progress) for path in paths]
    stamp = now_seconds() if created is None else to_utc(created)
    manifest = Manifest(
        schema_version=SCHEMA_VERSION,
        id=id,
        digest=bundle_digest(records),
        created=stamp,
        files=records,
    )
    return validate_manifest(manifest)


__all__ = [
    "build_manifest",
    "hash_bundle_file",
    "scan_files",
]

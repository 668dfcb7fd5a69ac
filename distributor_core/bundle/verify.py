"""Checking listed file content against manifest records, one streaming pass per file.

Shared by on-disk validation (:mod:`.disk`) and validation through the storage protocol
(:mod:`distributor_core.source`) so both report identical messages, each naming the file:
``file report.md size 20 does not match manifest size 16``.
"""

from __future__ import annotations

from collections.abc import Iterable

from distributor_core.bundle.digest import ProgressCallback, digest_chunks
from distributor_core.bundle.errors import BundleValidationError
from distributor_core.bundle.model import ManifestFile


def missing(path: str) -> BundleValidationError:
    return BundleValidationError(f"file {path} does not exist", path=path)


def not_regular(path: str, what: str | None = None) -> BundleValidationError:
    detail = f" ({what})" if what else ""
    return BundleValidationError(f"file {path} is not a regular file{detail}", path=path)


def symlinked_ancestor(path: str, ancestor: str) -> BundleValidationError:
    return BundleValidationError(f"file {path} has a symlinked ancestor {ancestor}", path=path)


def unreadable(path: str, reason: str) -> BundleValidationError:
    return BundleValidationError(f"file {path} cannot be read: {reason}", path=path)


def size_mismatch(path: str, actual: int, expected: int) -> BundleValidationError:
    return BundleValidationError(
        f"file {path} size {actual} does not match manifest size {expected}",
        path=path, expected=str(expected), actual=str(actual),
    )


def sha256_mismatch(path: str, actual: str, expected: str) -> BundleValidationError:
    return BundleValidationError(
        f"file {path} sha256 {actual} does not match manifest sha256 {expected}",
        path=path, expected=expected, actual=actual,
    )


def check_size(record: ManifestFile, actual: int) -> None:
    if actual != record.size:
        raise size_mismatch(record.path, actual, record.size)


def check_content(
    record: ManifestFile, chunks: Iterable[bytes], progress: ProgressCallback | None = None
) -> None:
    """Hash ``chunks`` once and compare size, then sha256, with ``record``."""
    size, digest = digest_chunks(chunks, progress)
    check_size(record, size)
    if digest != record.sha256:
        raise sha256_mismatch(record.path, digest, record.sha256)


__all__ = [
    "check_content",
]

"""Digests: file digests, the canonical bundle payload and its digest (core-semantics §1.5–1.6).

The bundle digest is ``sha256:`` + hex(SHA-256(P)) where ``P`` is the compact JSON array of the
ordered file records ``{"path","sha256","size"}`` encoded like Go's ``json.Marshal`` (raw UTF-8,
``<``, ``>``, ``&``, U+2028 and U+2029 escaped). File order is part of the digest.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from distributor_core.bundle.errors import ManifestError
from distributor_core.jsonfmt import go_json_string

DIGEST_PREFIX = "sha256:"
_DIGEST_RE = re.compile(r"sha256:[0-9a-f]{64}")

#: Called with the number of bytes just hashed (not a running total).
ProgressCallback = Callable[[int], None]


class FileRecord(Protocol):
    path: str
    sha256: str
    size: int


def file_digest(data: bytes) -> str:
    """``sha256:`` + lowercase hex SHA-256 of ``data``."""
    return DIGEST_PREFIX + hashlib.sha256(data).hexdigest()


def digest_chunks(chunks: Iterable[bytes], progress: ProgressCallback | None = None) -> tuple[int, str]:
    """Hash a stream of chunks once; return ``(size, "sha256:<hex>")``."""
    hasher = hashlib.sha256()
    size = 0
    for chunk in chunks:
        hasher.update(chunk)
        size += len(chunk)
        if progress is not None and chunk:
            progress(len(chunk))
    return size, DIGEST_PREFIX + hasher.hexdigest()


def is_digest(value: Any) -> bool:
    return isinstance(value, str) and _DIGEST_RE.fullmatch(value) is not None


def digest_problem(value: Any) -> str | None:
    """Why ``value`` is not a valid digest string, or ``None``."""
    if is_digest(value):
        return None
    shown = go_json_string(value) if isinstance(value, str) else type(value).__name__
    return f"invalid digest {shown}: must be sha256: followed by 64 lowercase hex characters"


def validate_digest(value: str) -> str:
    """Return ``value`` when it fullmatches ``sha256:[0-9a-f]{64}``; raise ``ManifestError``."""
    problem = digest_problem(value)
    if problem:
        raise ManifestError(problem)
    return value


def canonical_file_payload(files: Iterable[FileRecord]) -> bytes:
    """The exact bytes hashed into the bundle digest (Go ``json.Marshal`` of the file list)."""
    items = []
    for record in files:
        size = record.size
        if isinstance(size, bool) or not isinstance(size, int):
            raise ManifestError(f"manifest file {go_json_string(str(record.path))} size must be an integer")
        path = go_json_string(record.path)
        sha = go_json_string(record.sha256)
        items.append(f'{{"path":{path},"sha256":{sha},"size":{size:d}}}')
    return ("[" + ",".join(items) + "]").encode("utf-8")


def bundle_digest(files: Iterable[FileRecord]) -> str:
    """Canonical, order-sensitive digest of the ordered file records."""
    return file_digest(canonical_file_payload(files))


__all__ = [
    "DIGEST_PREFIX",
    "ProgressCallback",
    "bundle_digest",
    "canonical_file_payload",
    "digest_chunks",
    "digest_problem",
    "file_digest",
    "is_digest",
    "validate_digest",
]

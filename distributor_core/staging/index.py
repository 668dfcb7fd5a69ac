"""The idempotency index: ``<staging_path>/.idempotency/<token id>/<sha256 of key>`` holds the run
id of the upload admitted under that (token, pipeline, key) scope (resolutions D1)."""

from __future__ import annotations

import contextlib
import hashlib
import os
from pathlib import Path

from distributor_core.staging.fsio import atomic_write
from distributor_core.staging.layout import TEMP_PREFIX, idempotency_path


def key_sha256(key: str) -> str:
    return hashlib.sha256(key.encode("ascii")).hexdigest()


def read_small(path: Path) -> str | None:
    """The stripped text of a small file (at most 4 KiB read), ``None`` when it cannot be read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return os.read(fd, 4096).decode("utf-8", "replace").strip()
    except OSError:
        return None
    finally:
        os.close(fd)


def read_index(staging_path: Path, token_id: str, key_hash: str) -> str | None:
    return read_small(idempotency_path(staging_path, token_id, key_hash))


def write_index(staging_path: Path, token_id: str, key_hash: str, run_id: str, *, durable: bool = True) -> Path:
    path = idempotency_path(staging_path, token_id, key_hash)
    with contextlib.suppress(FileExistsError):
        os.mkdir(path.parent, 0o700)
    atomic_write(path, f"{run_id}\n".encode(), temp_prefix=TEMP_PREFIX, durable=durable)
    return path


def remove_index(staging_path: Path, token_id: str, key_hash: str, *, expected: str | None = None) -> None:
    """Delete an idempotency entry; with ``expected``, only while it still names that run."""
    path = idempotency_path(staging_path, token_id, key_hash)
    if expected is not None and read_small(path) != expected:
        return
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)

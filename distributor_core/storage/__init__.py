"""Storage protocol and backends. Backends are imported lazily by :mod:`.factory` so that
importing the core never pulls in paramiko or boto3.

Owns: the ``Storage`` protocol, its error kinds, and the local / SFTP / S3 adapters plus the
fault-injecting wrapper. Must not know: bundles' meaning, state, planning, execution or any
shell; it moves bytes under logical paths (``paths``).
"""

from distributor_core.storage.base import CHUNK_SIZE, DEFAULT_WALK_LIMIT, Entry, ScanResult, Storage, iter_chunks
from distributor_core.storage.errors import (
    ErrorKind,
    StorageError,
    error_kind,
    is_already_exists,
    is_conflict,
    is_kind,
    is_not_found,
)

__all__ = [
    "CHUNK_SIZE",
    "DEFAULT_WALK_LIMIT",
    "Entry",
    "ErrorKind",
    "ScanResult",
    "Storage",
    "StorageError",
    "error_kind",
    "is_already_exists",
    "is_conflict",
    "is_kind",
    "is_not_found",
    "iter_chunks",
]

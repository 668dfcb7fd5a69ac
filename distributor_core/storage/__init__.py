"""Storage: the one protocol every byte of a source or destination goes through, and its adapters.

Owns: the protocol (:class:`~.base.Storage`: a few primitives, the generic walks and deletes
built on them), its errors (:class:`~.errors.StorageError` and its ``kind``), what each adapter
declares it can do (:class:`~.capabilities.Capabilities`, :class:`~.capabilities.Feature`), the
adapters (``local``; ``sftp`` over ``sftp_connection`` and ``sftp_wire``; ``s3`` with
``s3_upload``, ``s3_errors``, ``s3_content``), :mod:`.factory` and the test-only fault injector
:mod:`.faults`.

Must not know: bundles, manifests, state files, plans or the write protocol (only the reserved
names of :mod:`distributor_core.paths`, so walks can hide them and writes can use temporaries),
configuration beyond the fields an adapter's ``from_config`` reads (S3 credentials are resolved by
:mod:`distributor_core.config.secrets`), and anything of the shells
(CLI, server, Dagster). Callers branch on ``capabilities``, never on ``backend`` or on probing
attributes. Backends are imported lazily by :mod:`.factory` so that importing the core never
pulls in paramiko or boto3.
"""

from distributor_core.storage.base import CHUNK_SIZE, DEFAULT_WALK_LIMIT, Entry, ScanResult, Storage, iter_chunks
from distributor_core.storage.capabilities import Capabilities, Feature
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
    "Capabilities",
    "Entry",
    "ErrorKind",
    "Feature",
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

"""Open the storage backend a source or destination config describes (interfaces §1.6, §5).

``local`` is opened directly; ``ssh`` and ``s3`` are imported lazily so that importing the core
never pulls in paramiko or boto3. Config objects are read by attribute (``backend``, ``path``, and
the backend's own fields, which the SFTP and S3 adapters read in their ``from_config``). A
destination config carries its backend model in ``storage``; a source config is the backend
model itself. Local paths use ``resolved_path`` (absolute, resolved against the config file's
directory) when the model has it, and ``root_path`` (the configured text) for display.
"""

from __future__ import annotations

from typing import Any

from distributor_core.storage.base import Storage
from distributor_core.storage.local import LocalStorage

STORAGE_BACKENDS = ("local", "ssh", "s3")


class UnsupportedBackendError(ValueError):
    """The config names a backend that has no storage (``http_upload``) or an unknown one."""


def _open(cfg: Any, env: Any, *, role: str, dry_run: bool) -> Storage:
    cfg = getattr(cfg, "storage", None) or cfg
    backend = getattr(cfg, "backend", None)
    backend = getattr(backend, "value", backend)  # tolerate enum-valued fields
    if backend == "local":
        path = getattr(cfg, "resolved_path", None) or cfg.path
        display = getattr(cfg, "root_path", None) or str(cfg.path) or "."
        return LocalStorage(path, display=str(display))
    if backend == "ssh":
        from distributor_core.storage.sftp import SFTPStorage

        return SFTPStorage.from_config(cfg, env, dry_run=dry_run)
    if backend == "s3":
        from distributor_core.storage.s3 import S3Storage

        return S3Storage.from_config(cfg, env, dry_run=dry_run)
    raise UnsupportedBackendError(f"{role} backend {backend} has no storage to open")


def open_source_storage(source_cfg: Any, env: Any, *, dry_run: bool = False) -> Storage:
    """Storage rooted at a pipeline source (``local`` path, ``ssh`` path, ``s3`` bucket+prefix)."""
    return _open(source_cfg, env, role="source", dry_run=dry_run)


def open_destination_storage(dest_cfg: Any, env: Any, *, dry_run: bool = False) -> Storage:
    """Storage rooted at a destination root. ``dry_run`` is passed to the adapters (an SSH dry
    run never writes ``known_hosts``)."""
    return _open(dest_cfg, env, role="destination", dry_run=dry_run)

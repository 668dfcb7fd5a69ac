"""Open the storage backend a source or destination config describes (interfaces §1.6, §5).

The config's type says which adapter: ``local`` is opened directly; ``ssh`` and ``s3`` are
imported lazily so that importing the core never pulls in paramiko or boto3 (their
``from_config`` reads the backend's fields). A destination config carries its backend model in
``storage``; a source config is the backend model itself. A local root opens at its
``resolved_path`` (absolute, resolved against the config file's directory) and shows its
``root_path`` (the configured text).
"""

from __future__ import annotations

from typing import Any

from distributor_core.config import Destination, LocalBackend, S3Backend, SourceBackend, SSHBackend
from distributor_core.storage.base import Storage
from distributor_core.storage.local import LocalStorage


class UnsupportedBackendError(ValueError):
    """The config names a backend that has no storage (``http_upload``) or an unknown one."""


def _open(cfg: Destination | SourceBackend, env: Any, *, role: str, dry_run: bool) -> Storage:
    storage = cfg.storage if isinstance(cfg, Destination) else cfg
    if isinstance(storage, LocalBackend):
        return LocalStorage(storage.resolved_path, display=storage.root_path)
    if isinstance(storage, SSHBackend):
        from distributor_core.storage.sftp import SFTPStorage

        return SFTPStorage.from_config(storage, env, dry_run=dry_run)
    if isinstance(storage, S3Backend):
        from distributor_core.storage.s3 import S3Storage

        return S3Storage.from_config(storage, env, dry_run=dry_run)
    raise UnsupportedBackendError(f"{role} backend {storage.backend} has no storage to open")


def open_source_storage(source_cfg: SourceBackend, env: Any, *, dry_run: bool = False) -> Storage:
    """Storage rooted at a pipeline source (``local`` path, ``ssh`` path, ``s3`` bucket+prefix)."""
    return _open(source_cfg, env, role="source", dry_run=dry_run)


def open_destination_storage(dest_cfg: Destination | SourceBackend, env: Any, *, dry_run: bool = False) -> Storage:
    """Storage rooted at a destination root. ``dry_run`` is passed to the adapters (an SSH dry
    run never writes ``known_hosts``)."""
    return _open(dest_cfg, env, role="destination", dry_run=dry_run)

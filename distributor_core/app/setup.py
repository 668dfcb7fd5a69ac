"""Run setup: what must hold before any destination is planned (resolutions G3).

The Go tool's app contract (seed 003, docs/internal/app.md): "Runtime setup fails for config
load, config validation, secret loading, or credential resolution errors. Source setup failures
stop the affected run before destination planning." Two checks live here:

- :func:`resolve_credentials` resolves every secret the selected pipelines need (S3 credential
  names of their sources and selected destinations, SSH private key files) and raises
  :class:`SetupError` with the first failure, so a run never half-publishes because one
  destination's credential is missing.
- :func:`check_source_root` fails when a pipeline's source root does not exist (a local or SFTP
  directory that is absent or not a directory, an S3 bucket that does not exist). An existing,
  empty root is fine: it simply holds no bundles. An S3 prefix with no objects cannot be told
  apart from an empty one and is therefore "0 bundles".

Messages name the pipeline (and destination) and the path, never a secret value.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from distributor_core.app import refusal as refusals
from distributor_core.app.refusal import Refusal
from distributor_core.config import Destination, Environment, Pipeline, S3Backend, SourceBackend, SSHBackend
from distributor_core.config.errors import SecretError
from distributor_core.config.secrets import resolve_s3_credentials
from distributor_core.storage.base import Storage
from distributor_core.storage.errors import ErrorKind, StorageError


class SetupError(Exception):
    """A run cannot start: a source root is missing or a credential does not resolve.

    ``refusal`` says where and how to fix it (:mod:`distributor_core.app.refusal`);
    :meth:`detailed` is the message with those facts."""

    def __init__(self, message: str, refusal: Refusal | None = None) -> None:
        self.message = message
        self.refusal = refusal
        super().__init__(message)

    def __str__(self) -> str:
        return self.message

    def detailed(self) -> str:
        return f"{self.message} ({self.refusal.sentence()})" if self.refusal is not None else self.message

    def __reduce__(self) -> tuple[object, ...]:  # survives pickling (Dagster run workers)
        return (self.__class__, (self.message, self.refusal))


def check_source_root(pipeline: Pipeline, storage: Storage) -> None:
    """Raise :class:`SetupError` when ``pipeline``'s source root does not exist.

    ``pipeline <id> source path <path> not found`` (with the backend's reason when it has one,
    e.g. ``bucket does not exist``) or ``... is not a directory``. Other storage failures
    (permission, unavailable) propagate unchanged.
    """
    where = pipeline.source.location()
    try:
        entry = storage.stat("")
    except StorageError as exc:
        if exc.kind is ErrorKind.NOT_FOUND:
            detail = _not_found_detail(pipeline, exc)
            raise SetupError(f"pipeline {pipeline.id} source path {where} not found{detail}",
                             refusals.missing_source_root(pipeline.source)) from None
        raise
    if entry.type != "directory":
        raise SetupError(f"pipeline {pipeline.id} source path {where} is not a directory",
                         refusals.missing_source_root(pipeline.source))


def _not_found_detail(pipeline: Pipeline, exc: StorageError) -> str:
    if isinstance(pipeline.source, S3Backend):
        return f" (bucket {pipeline.source.bucket} does not exist)"
    return ""


def resolve_credentials(
    pipelines: Iterable[tuple[Pipeline, Iterable[Destination]]], env: Environment, *, sources: bool = True
) -> None:
    """Resolve the credentials of every pipeline source (unless ``sources`` is false: an
    upload publishes from its staged copy) and selected destination, in config order; the
    first failure raises :class:`SetupError`."""
    for pipeline, destinations in pipelines:
        if sources and not pipeline.is_upload:
            _check_backend(pipeline.source, env, f"pipeline {pipeline.id} source")
        for destination in destinations:
            _check_backend(destination.storage, env, f"pipeline {pipeline.id} destination {destination.id}")


def _check_backend(cfg: SourceBackend, env: Environment, context: str) -> None:
    if isinstance(cfg, S3Backend):
        try:
            resolve_s3_credentials(cfg, env, context=context)
        except SecretError as exc:
            raise SetupError(str(exc), refusals.missing_credential(cfg, secret=exc.name)) from None
    if isinstance(cfg, SSHBackend):
        _check_ssh_files(cfg, context)


def _check_ssh_files(cfg: SSHBackend, context: str) -> None:
    if cfg.private_key_file is not None:
        path = os.path.expanduser(os.fspath(cfg.private_key_file))
        try:
            with open(path, "rb"):
                pass
        except OSError as exc:
            raise SetupError(f"{context}: cannot read private key file {path}: {exc.strerror or exc}",
                             refusals.missing_credential(cfg, key_file=path)) from None
    if cfg.ssh_config_file is not None:
        path = os.path.expanduser(os.fspath(cfg.ssh_config_file))
        try:
            with open(path, "rb"):
                pass
        except OSError as exc:
            raise SetupError(f"{context}: cannot read ssh_config_file {path}: {exc.strerror or exc}",
                             refusals.missing_credential(cfg, config_file=path)) from None

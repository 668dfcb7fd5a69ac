"""``distributor config check``: what a config would need to run, without running it.

Loading and validating the file is :func:`~distributor_core.config.load_config`'s; this module
then resolves what a run resolves before it plans anything (resolutions G3): every secret
(upload tokens, S3 credentials, SSH key and config files) and every root, named as a refusal
names it. It reaches nothing: no source or destination is opened unless ``connect`` is set; then
each is opened as a dry run (an SSH dry run never writes ``known_hosts``) and its root looked at
once (``stat``), so an operator learns before the first run that a source root is missing, an
endpoint does not answer or a host key is unknown.

Every problem is collected (not only the first), each with its refusal when it has one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from distributor_core.app import refusal as refusals
from distributor_core.app.refusal import Refusal
from distributor_core.app.setup import SetupError, check_source_root, resolve_credentials
from distributor_core.config import Config, Environment, Pipeline, SecretError, resolve_upload_tokens

#: A root's status: ``resolved`` (its secrets resolve; not contacted), ``ok`` (contacted: the root
#: exists), ``absent`` (contacted: a local or SSH destination directory the first publication
#: creates), or the failure's class.
RESOLVED, OK, ABSENT, FAILED = "resolved", "ok", "absent", "failed"


@dataclass
class RootCheck:
    pipeline_id: str
    role: str  # source | destination
    backend: str
    root: str
    destination_id: str = ""
    status: str = RESOLVED
    error: str = ""
    refusal: Refusal | None = None

    @property
    def ok(self) -> bool:
        return not self.error

    def to_dict(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"pipeline_id": self.pipeline_id, "role": self.role}
        if self.destination_id:
            doc["destination_id"] = self.destination_id
        doc.update(backend=self.backend, root=self.root, status=self.status)
        if self.error:
            doc["error"] = self.error
        if self.refusal is not None:
            doc["refusal"] = self.refusal.to_dict()
        return doc

    def fields(self) -> dict[str, Any]:
        """The text line's fields (the error and its remedy are the command's stderr lines)."""
        fields: dict[str, Any] = {"pipeline": self.pipeline_id}
        if self.destination_id:
            fields["destination"] = self.destination_id
        fields.update(backend=self.backend, root=self.root, status=self.status)
        return fields


@dataclass
class ConfigCheck:
    path: str
    connect: bool
    upload_tokens: int = 0
    roots: list[RootCheck] = field(default_factory=list)
    #: problems that belong to no root (upload tokens)
    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors and all(root.ok for root in self.roots)

    def problems(self) -> list[str]:
        found = list(self.errors)
        for root in self.roots:
            if root.error:
                detail = f" ({root.refusal.sentence()})" if root.refusal is not None else ""
                found.append(f"{root.error}{detail}")
        return found

    def to_dict(self) -> dict[str, Any]:
        return {
            "config": self.path,
            "connect": self.connect,
            "status": "ok" if self.ok else "problems",
            "pipelines": len({root.pipeline_id for root in self.roots}),
            "destinations": sum(1 for root in self.roots if root.role == "destination"),
            "upload_tokens": self.upload_tokens,
            "roots": [root.to_dict() for root in self.roots],
            "errors": list(self.errors),
        }


def _backend(cfg: Any) -> str:
    return str(getattr(cfg, "backend", ""))


def check_config(config: Config, path: str, *, connect: bool = False, env: Environment | None = None) -> ConfigCheck:
    """Resolve ``config``'s secrets and roots; with ``connect``, look at every root once."""
    env = env if env is not None else Environment.from_config(config)
    result = ConfigCheck(path=path, connect=connect, upload_tokens=len(config.upload_tokens))
    if config.upload_tokens:
        try:
            resolve_upload_tokens(config, env)
        except SecretError as exc:
            result.errors.append(str(exc))
    for pipeline in config.pipelines:
        source = RootCheck(pipeline.id, "source", _backend(pipeline.source), refusals.root_location(pipeline.source))
        if not pipeline.is_upload:
            _resolve(source, lambda p=pipeline: resolve_credentials([(p, [])], env))
            if connect and source.ok:
                _connect_source(source, pipeline, env)
        result.roots.append(source)
        for destination in pipeline.destinations:
            check = RootCheck(pipeline.id, "destination", _backend(destination.storage),
                              refusals.root_location(destination.storage), destination.id)
            _resolve(check, lambda p=pipeline, d=destination: resolve_credentials([(p, [d])], env, sources=False))
            if connect and check.ok:
                _connect_destination(check, destination, env)
            result.roots.append(check)
    return result


def _resolve(check: RootCheck, resolve: Any) -> None:
    try:
        resolve()
    except SetupError as exc:
        _fail(check, exc.message, exc.refusal)
    except SecretError as exc:
        _fail(check, str(exc), None)


def _fail(check: RootCheck, error: str, refusal: Refusal | None) -> None:
    check.error = error
    check.refusal = refusal
    check.status = refusal.failure if refusal is not None else FAILED


def _connect_source(check: RootCheck, pipeline: Pipeline, env: Environment) -> None:
    from distributor_core.storage.errors import StorageError
    from distributor_core.storage.factory import open_source_storage

    try:
        with open_source_storage(pipeline.source, env, dry_run=True) as storage:
            check_source_root(pipeline, storage)
        check.status = OK
    except SetupError as exc:
        _fail(check, exc.message, exc.refusal)
    except StorageError as exc:
        _fail(check, f"pipeline {pipeline.id} source: {exc}",
              refusals.for_destination_error(pipeline.source, exc.kind.value, pipeline.id, ""))
    except Exception as exc:  # a connection that could not be set up at all (host key, DNS...)
        _fail(check, f"pipeline {pipeline.id} source: {exc}", None)


def _connect_destination(check: RootCheck, destination: Any, env: Environment) -> None:
    from distributor_core.storage.errors import ErrorKind, StorageError
    from distributor_core.storage.factory import open_destination_storage

    context = f"pipeline {check.pipeline_id} destination {check.destination_id}"
    try:
        with open_destination_storage(destination, env, dry_run=True) as storage:
            entry = storage.stat("")
        check.status = OK if entry.type == "directory" else FAILED
        if entry.type != "directory":
            check.error = f"{context}: root {check.root} is not a directory"
    except StorageError as exc:
        if exc.kind is ErrorKind.NOT_FOUND and check.backend in ("local", "ssh"):
            check.status = ABSENT  # the first publication creates it
            return
        _fail(check, f"{context}: {exc}",
              refusals.for_destination_error(destination.storage, exc.kind.value, check.pipeline_id,
                                             check.destination_id))
    except Exception as exc:  # a connection that could not be set up at all (host key, DNS...)
        _fail(check, f"{context}: {exc}", None)

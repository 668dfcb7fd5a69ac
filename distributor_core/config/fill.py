"""Defaults (interfaces §1.9) and path resolution (resolutions D4) on the decoded tree.

The decoded tree holds what the file writes; :func:`fill` completes it from the declaration
(:mod:`.shape`): every absent key takes its model's default (a required one its zero value, as
in Go, for validation to word), a destination's inline backend keys move under ``storage``, and
every local path becomes absolute against the config file's directory. Like Go's zero values,
an empty string for a key that has a default means "use the default" (an optional path or URL:
absent; a ``keeps_empty`` text keeps it); an explicit ``0`` for a number does not.

A few values follow from other keys, each in one function here: the shared staging store of an
``s3://`` ``server.http.staging_root``, an ``http_upload`` source's staging path, upload size and
store, an S3 backend's ``conditional_writes`` (by ``endpoint``) and empty ``credentials``, a local
backend's resolved path and the secrets directory's.

Values are not checked here: ``validate.py`` reports what is wrong with the filled tree, whose
keys are the models' fields (``msgspec.convert`` builds the models from it).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Mapping
from functools import cache
from pathlib import Path
from typing import Any

import msgspec

from distributor_core.config import models, shape
from distributor_core.config.shape import REQUIRED, Key, Kind

Tree = dict[str, Any]

#: this host's scratch directory (under the system temp directory) when staging is in S3
SCRATCH_DIR_NAME = "distributor-staging"

#: what an absent required key is, as Go's decoder leaves it (validation words its absence)
_ZERO: Mapping[Kind, Callable[[], Any]] = {
    Kind.STRING: str,
    Kind.STRING_LIST: list,
    Kind.STRING_MAP: list,
    Kind.MAPPING_LIST: list,
    Kind.MAPPING: dict,
}


def resolve_path(base_dir: Path, text: str, *, expand_user: bool = False) -> Path:
    """``text`` made absolute against ``base_dir`` and normalised (``a/../b`` → ``b``)."""
    value = os.path.expanduser(text) if expand_user else text
    return Path(os.path.normpath(os.path.join(base_dir, value)))


def staging_store_location(value: Any) -> tuple[str, str] | None:
    """``(bucket, prefix)`` of an ``s3://bucket/prefix`` staging root, ``None`` for anything else
    (a local path; other URL schemes are refused before defaults are applied)."""
    if not isinstance(value, str) or not value.startswith("s3://"):
        return None
    bucket, _, prefix = value.removeprefix("s3://").partition("/")
    return bucket, prefix.strip("/")


def fill(tree: Tree, base_dir: Path) -> Tree:
    """Every default of the declaration filled into a decoded tree, paths resolved against
    ``base_dir``, and the values that follow from other keys derived."""
    filled = _Filler(base_dir).mapping(shape.root(), tree)
    filled["base_dir"] = base_dir
    return filled


class _Filler:
    def __init__(self, base_dir: Path) -> None:
        self.base_dir = base_dir
        #: the filled ``server.http`` (upload sources take their defaults from it)
        self.http: Tree = {}

    def mapping(self, key: Key, written: Mapping[str, Any]) -> Tree:
        out: Tree = {}
        for name, child in key.keys.items():
            out[name] = self.value(child, written.get(name))
        if key.inline is not None:  # a destination: its backend keys are inline
            storage = {k: v for k, v in written.items() if k == "backend" or k in shape.backend_key_owners()}
            out[key.inline] = self.backend(storage)
        derive = _DERIVED.get(key.model)  # type: ignore[arg-type]
        return derive(self, out, written) if derive is not None else out

    def backend(self, written: Mapping[str, Any]) -> Tree:
        """A source, or a destination's ``storage``: the keys of the backend it names. Without a
        (valid) backend what was written is kept, and validation reports the backend."""
        name = written.get("backend", "")
        table = shape.backends().get(name)
        if table is None:
            return {"backend": name, **{k: v for k, v in written.items() if k != "backend"}}
        return {"backend": name, **self.mapping(table, written)}

    def value(self, key: Key, written: Any) -> Any:
        if key.backends and key.inline is None and key.kind is Kind.MAPPING:  # a source
            return self.backend({} if written is None else written)
        if key.kind is Kind.MAPPING_LIST:
            items = [] if written is None else written
            return [self.mapping(key, item) for item in items]
        if key.kind is Kind.MAPPING:
            if written is None:
                default = key.default
                if default is None:
                    return None
                if default is not REQUIRED and _constant(key.model):  # type: ignore[arg-type]
                    return _default_tree(key.model, default)  # type: ignore[arg-type]
                written = {} if default is REQUIRED else msgspec.structs.asdict(default)
            elif isinstance(written, msgspec.Struct):  # a default holding a default
                written = msgspec.structs.asdict(written)
            return self.mapping(key, written)
        if key.default is REQUIRED and key.default_text is not None:  # follows from other keys
            return None if written is None or written == "" else self.scalar(key, written)
        if written is None or (written == "" and key.default not in (REQUIRED, "") and not key.keeps_empty):
            written = _ZERO[key.kind]() if key.default is REQUIRED else key.default
        return self.scalar(key, written)

    def scalar(self, key: Key, written: Any) -> Any:
        if isinstance(written, tuple):
            written = list(written)
        if key.path and isinstance(written, str | Path) and str(written) != "":
            return resolve_path(self.base_dir, os.fspath(written), expand_user=key.expand_user)
        return written


@cache
def _constant(model: type[msgspec.Struct]) -> bool:
    """Whether the filled tree of ``model`` depends on nothing but its own keys: no local path, no
    value derived from other keys, no backend, in it or below."""
    if model in _DERIVED:
        return False
    for key in shape.fields_of(model).values():
        if key.path or key.backends:
            return False
        if key.kind in (Kind.MAPPING, Kind.MAPPING_LIST) and key.model is not None and not _constant(key.model):
            return False
    return True


@cache
def _default_tree(model: type[msgspec.Struct], default: msgspec.Struct) -> Tree:
    """The filled tree of an absent mapping whose default is ``default`` (a constant tree, shared by
    every config that leaves it out: nothing changes a filled tree after :func:`fill`)."""
    return _Filler(Path()).mapping(shape.mapping_of(model), msgspec.structs.asdict(default))


# --- values that follow from other keys ---------------------------------------------------------


def _secrets(filler: _Filler, secrets: Tree, written: Mapping[str, Any]) -> Tree:
    directory = secrets["directory"]
    secrets["resolved_directory"] = resolve_path(filler.base_dir, directory) if directory else None
    return secrets


def _server_http(filler: _Filler, http: Tree, written: Mapping[str, Any]) -> Tree:
    """An ``s3://`` staging root is the store shared by every replica (its connection keys in
    ``staging_s3``); the local root is then this host's scratch space."""
    store = staging_store_location(written.get("staging_root"))
    if store is not None:
        connection = http["staging_s3"] if http["staging_s3"] is not None else filler.mapping(
            shape.field(models.ServerHTTP, "staging_s3"), {}
        )
        http["staging_store"] = {"backend": "s3", **connection, "bucket": store[0], "prefix": store[1]}
        http["staging_root"] = Path(tempfile.gettempdir()) / SCRATCH_DIR_NAME
    else:
        http["staging_store"] = None
    filler.http = http
    return http


def _local(filler: _Filler, local: Tree, written: Mapping[str, Any]) -> Tree:
    path = local["path"]
    local["resolved_path"] = resolve_path(filler.base_dir, path) if path else None
    return local


def _s3(filler: _Filler, s3: Tree, written: Mapping[str, Any]) -> Tree:
    """AWS S3 enforces conditional writes; an S3-compatible endpoint is pre-checked unless told.
    A ``credentials`` block naming neither secret is the default credential chain."""
    if s3["conditional_writes"] is None:
        s3["conditional_writes"] = "precheck" if s3["endpoint"] else "trusted"
    credentials = s3["credentials"]
    if credentials is not None and not (credentials["access_key_id_env"] or credentials["secret_access_key_env"]):
        s3["credentials"] = None
    return s3


def _pipeline(filler: _Filler, pipeline: Tree, written: Mapping[str, Any]) -> Tree:
    """An upload source stages under ``<staging_root>/<pipeline id>`` (or ``<prefix>/<pipeline id>``
    of the shared store) and takes ``server.http.max_upload_size`` unless it says otherwise."""
    source = pipeline["source"]
    if source.get("backend") != "http_upload":
        return pipeline
    pipeline_id, http = pipeline["id"], filler.http
    if source["staging_path"] is None:
        source["staging_path"] = http["staging_root"] / pipeline_id if pipeline_id else http["staging_root"]
    if source["max_upload_size"] is None:
        source["max_upload_size"] = http["max_upload_size"]
    root_store = http["staging_store"]
    if root_store is not None:  # each pipeline under <prefix>/<pipeline id> of the shared store
        prefix = "/".join(part for part in (root_store["prefix"], pipeline_id) if part)
        source["staging_store"] = {**root_store, "prefix": prefix}
    else:
        source["staging_store"] = None
    return pipeline


_DERIVED: Mapping[type[msgspec.Struct], Callable[[_Filler, Tree, Mapping[str, Any]], Tree]] = {
    models.Secrets: _secrets,
    models.ServerHTTP: _server_http,
    models.LocalBackend: _local,
    models.S3Backend: _s3,
    models.S3Connection: _s3,
    models.Pipeline: _pipeline,
}

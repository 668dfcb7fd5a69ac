"""What ``reconcile-state`` and ``prune`` work on (core-semantics §7, resolutions B2).

Both are selected by (pipeline id, destination id), which names one destination **root**, and
then by bundle path inside that root: the root itself (``""``, the default and the Go
behaviour), one ``bundle_path``, or every bundle path that holds a ``.distributor.json``
(``all_bundles``, found by one bounded walk).
"""

from __future__ import annotations

import os

import msgspec

from distributor_core import paths as lp
from distributor_core.config import Config, ConfigLookupError, Destination, Environment, Pipeline, load_config
from distributor_core.jsonfmt import go_json_string
from distributor_core.state import OwnerScope
from distributor_core.storage.base import Storage

#: Bound of the walk that finds bundle paths for ``all_bundles`` (exceeding it fails).
DISCOVERY_WALK_LIMIT = 1_000_000

ConfigSource = Config | str | os.PathLike[str]


class SelectionError(ValueError):
    """The bundle selection is not usable (bad bundle path, both selectors given)."""


class Target(msgspec.Struct, frozen=True):
    """The selected pipeline, destination and the environment secrets resolve from."""

    config: Config
    pipeline: Pipeline
    destination: Destination
    environment: Environment

    @property
    def scope(self) -> OwnerScope:
        return OwnerScope(self.pipeline.id, self.destination.id)

    @property
    def backend(self) -> str:
        return self.destination.backend

    @property
    def root_path(self) -> str:
        """The configured root as reports show it: local/ssh ``path``, s3 ``prefix``, ``.`` when empty."""
        return self.destination.storage.root_path

    @property
    def root_text(self) -> str:
        """The root as text reports and logs show it: a local root absolute (not relative to the
        config file), other roots as configured."""
        return self.destination.storage.root_text


def require_ids(pipeline_id: str, destination_id: str) -> None:
    """The scope errors raised before any I/O (interfaces §2.6 "Library")."""
    if not pipeline_id:
        raise ConfigLookupError("pipeline id is required")
    if not destination_id:
        raise ConfigLookupError("destination id is required")


def resolve_target(
    config_or_path: ConfigSource,
    pipeline_id: str,
    destination_id: str,
    environment: Environment | None = None,
) -> Target:
    """Load the config when given a path, then look up the pipeline and destination
    (``pipeline "<id>" not found``, ``pipeline <p> destination <d> not found``)."""
    require_ids(pipeline_id, destination_id)
    config = config_or_path if isinstance(config_or_path, Config) else load_config(config_or_path)
    pipeline = config.pipeline(pipeline_id)
    destination = pipeline.destination(destination_id)
    return Target(config, pipeline, destination, environment or Environment.from_config(config))


def normalise_bundle_path(value: str | None) -> str:
    """A destination-relative bundle path: ``None``, ``""``, ``.`` and ``/`` mean the root;
    a trailing slash is dropped. Reserved names and ``.``/``..`` segments are refused."""
    if value is None:
        return ""
    text = value.rstrip("/") if value not in ("", "/") else ""
    if text in ("", "."):
        return ""
    problem = lp.check_path(text)
    if problem is None:
        for segment in text.split("/"):
            if lp.is_reserved_name(segment):
                problem = f'path must not use reserved name "{segment}"'
                break
    if problem:
        raise SelectionError(f"invalid bundle path {go_json_string(value)}: {problem}")
    return text


def check_bundle_selection(bundle_path: str | None, all_bundles: bool) -> str:
    """Normalise ``bundle_path``; ``all_bundles`` excludes an explicit bundle path."""
    bundle = normalise_bundle_path(bundle_path)
    if all_bundles and bundle:
        raise SelectionError("bundle_path and all_bundles exclude each other")
    return bundle


def discover_state_bundles(storage: Storage, *, limit: int = DISCOVERY_WALK_LIMIT) -> list[str]:
    """Every bundle path under the root holding a ``.distributor.json``, sorted (root first).

    One walk of the whole root; more than ``limit`` entries fail with ``limit_exceeded``
    (``walk limit of <n> entries exceeded``) because "every bundle" could not be honoured.
    """
    entries = storage.walk("", limit=limit, include_reserved=True, include_dirs=False)
    found = {
        lp.parent(entry.path)
        for entry in entries
        if lp.basename(entry.path) == lp.STATE_FILE_NAME and not lp.is_reserved_path(lp.parent(entry.path))
    }
    return sorted(found)

"""Dagster object names derived from pipeline and destination ids (dagster.md §1, resolutions E3).

Dagster names allow only ``[A-Za-z0-9_]``; ids may also contain ``.`` and ``-``. Every other
character becomes ``_`` and the original ids stay in tags and metadata. Two ids that map to the
same generated name make the load fail with :class:`NameCollisionError` naming both owners.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from distributor_core.config import Config, Destination, Pipeline

_NOT_NAME_CHAR = re.compile(r"[^A-Za-z0-9_]")
_NAME = re.compile(r"[A-Za-z0-9_]*")

#: The three asset checks of every destination asset (dagster.md §2).
CHECK_NAMES = ("state_valid", "managed_outputs_present", "no_unmanaged_content")


def sanitize(identifier: str) -> str:
    """``identifier`` with every character outside ``[A-Za-z0-9_]`` replaced by ``_``."""
    return _NOT_NAME_CHAR.sub("_", identifier)


def check_prefix(prefix: str, option: str) -> str:
    """Refuse a name prefix Dagster would reject (it is used verbatim in names)."""
    if not _NAME.fullmatch(prefix):
        raise ValueError(f"{option} must contain only letters, digits and underscores, got {prefix!r}")
    return prefix


class NameCollisionError(ValueError):
    """Two pipelines or destinations map to the same Dagster name after sanitising."""


@dataclass(frozen=True)
class Owner:
    """Who a generated name belongs to: a pipeline, or a pipeline's destination."""

    pipeline_id: str
    destination_id: str | None = None

    def describe(self) -> str:
        if self.destination_id is None:
            return f"pipeline {self.pipeline_id}"
        return f"pipeline {self.pipeline_id} destination {self.destination_id}"


#: Dagster requires job, op and check-op names to be unique together (they are all graph nodes).
_SHARED = {"job": "node", "op": "node"}


class NameRegistry:
    """Every name one ``build_definitions`` call generates, each with its owner.

    Names live in namespaces because Dagster checks uniqueness per kind of object (jobs and ops
    share one: both are graph definitions). A second owner for a name raises
    :class:`NameCollisionError`.
    """

    def __init__(self) -> None:
        self._owners: dict[tuple[str, str], tuple[Owner, str]] = {}

    def claim(self, kind: str, name: str, owner: Owner) -> str:
        key = (_SHARED.get(kind, kind), name)
        previous = self._owners.get(key)
        if previous is not None and previous[0] != owner:
            what = kind if previous[1] == kind else f"{previous[1]}/{kind}"
            raise NameCollisionError(
                f"{previous[0].describe()} and {owner.describe()} both map to the Dagster {what} name "
                f"{name!r}; rename one of them (Dagster names allow only letters, digits and underscores)"
            )
        self._owners[key] = (owner, kind)
        return name


@dataclass(frozen=True)
class DestinationNames:
    """Names of one destination: its asset, its steps inside the pipeline's publish graph (node
    names ``plan_<d>``, ``execute_<d>``, ``check_<d>``; op definitions ``publish_<p>__<node>``) and
    its maintenance jobs."""

    pipeline_id: str
    destination_id: str
    asset_key: tuple[str, ...]
    publish_job: str
    prune_job: str
    reconcile_job: str
    audit_job: str
    plan_node: str
    execute_node: str
    check_node: str
    plan_op: str
    execute_op: str
    check_op: str


@dataclass(frozen=True)
class PipelineNames:
    """Names of one pipeline: its group, its source asset key, the graph-backed multi-asset that
    publishes its destinations (``graph``: the node name that prefixes step keys and run config),
    the asset job ``publish_<p>`` and its sensor."""

    pipeline_id: str
    group: str
    source_key: tuple[str, ...]
    graph: str
    observe_op: str
    publish_job: str
    watch_sensor: str
    uploads_sensor: str
    destinations: tuple[DestinationNames, ...]

    def destination(self, destination_id: str) -> DestinationNames:
        for names in self.destinations:
            if names.destination_id == destination_id:
                return names
        raise KeyError(destination_id)

    def publish_op(self, node: str) -> str:
        return f"{self.publish_job}__{node}"


#: The fixed node names of the generated graphs and jobs.
PUBLISH_NODES = ("discover", "validate", "report")
PRUNE_NODES = ("load_state", "plan_prune", "apply_prune")
REPAIR_NODES = ("load_state", "reconcile_state")
#: the one node of ``audit_<p>__<d>`` (distributor_dagster.audit)
AUDIT_NODE = "audit"


def _destination_names(
    registry: NameRegistry, prefix: str, key_prefix: Sequence[str], pipeline: Pipeline, destination: Destination
) -> DestinationNames:
    owner = Owner(pipeline.id, destination.id)
    p, d = sanitize(pipeline.id), sanitize(destination.id)
    publish_job = f"{prefix}publish_{p}"
    prune_job = registry.claim("job", f"{prefix}prune_{p}__{d}", owner)
    reconcile_job = registry.claim("job", f"{prefix}reconcile_state_{p}__{d}", owner)
    audit_job = registry.claim("job", f"{prefix}audit_{p}__{d}", owner)
    registry.claim("op", f"{audit_job}__{AUDIT_NODE}", owner)
    for node in PRUNE_NODES:
        registry.claim("op", f"{prune_job}__{node}", owner)
    for node in REPAIR_NODES:
        registry.claim("op", f"{reconcile_job}__{node}", owner)
    asset_key = (*key_prefix, p, d)
    registry.claim("asset", "/".join(asset_key), owner)
    plan_node, execute_node, check_node = f"plan_{d}", f"execute_{d}", f"check_{d}"
    for node in (plan_node, execute_node, check_node):
        registry.claim("node:" + publish_job, node, owner)
    return DestinationNames(
        pipeline_id=pipeline.id,
        destination_id=destination.id,
        asset_key=asset_key,
        publish_job=publish_job,
        prune_job=prune_job,
        reconcile_job=reconcile_job,
        audit_job=audit_job,
        plan_node=plan_node,
        execute_node=execute_node,
        check_node=check_node,
        plan_op=registry.claim("op", f"{publish_job}__{plan_node}", owner),
        execute_op=registry.claim("op", f"{publish_job}__{execute_node}", owner),
        check_op=registry.claim("op", f"{publish_job}__{check_node}", owner),
    )


def pipeline_names(
    registry: NameRegistry, pipeline: Pipeline, *, prefix: str = "", key_prefix: Sequence[str] = ()
) -> PipelineNames:
    owner = Owner(pipeline.id)
    p = sanitize(pipeline.id)
    group = registry.claim("group", f"{prefix}{p}", owner)
    source_key = (*key_prefix, p)
    registry.claim("asset", "/".join(source_key), owner)
    graph = registry.claim("op", f"{prefix}{p}", owner)
    observe_op = registry.claim("op", f"{graph}__observe", owner)
    publish_job = registry.claim("job", f"{prefix}publish_{p}", owner)
    for node in PUBLISH_NODES:
        registry.claim("op", f"{publish_job}__{node}", owner)
    if pipeline.is_upload:
        uploads_sensor, watch_sensor = registry.claim("sensor", f"{prefix}uploads_{p}", owner), ""
    else:
        uploads_sensor, watch_sensor = "", registry.claim("sensor", f"{prefix}watch_{p}", owner)
    destinations = tuple(
        _destination_names(registry, prefix, key_prefix, pipeline, destination) for destination in pipeline.destinations
    )
    return PipelineNames(
        pipeline_id=pipeline.id,
        group=group,
        source_key=source_key,
        graph=graph,
        observe_op=observe_op,
        publish_job=publish_job,
        watch_sensor=watch_sensor,
        uploads_sensor=uploads_sensor,
        destinations=destinations,
    )


def config_names(config: Config, *, prefix: str = "", key_prefix: Iterable[str] = ()) -> list[PipelineNames]:
    """The names of every object generated for ``config``; raises :class:`NameCollisionError`."""
    registry = NameRegistry()
    keys = tuple(key_prefix)
    return [pipeline_names(registry, pipeline, prefix=prefix, key_prefix=keys) for pipeline in config.pipelines]

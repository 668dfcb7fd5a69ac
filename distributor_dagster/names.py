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
    label: str = ""

    def describe(self) -> str:
        if self.label:
            return self.label
        if self.destination_id is None:
            return f"pipeline {self.pipeline_id}"
        return f"pipeline {self.pipeline_id} destination {self.destination_id}"


#: The owner of the site-wide names (the maintenance jobs).
SITE = Owner("", label="the maintenance jobs")
#: The owner of the op definitions every publish graph shares.
SHARED = Owner("", label="the publish steps")

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

    def claim_key(self, key: tuple[str, ...], owner: Owner) -> tuple[str, ...]:
        self.claim("asset", "/".join(key), owner)
        return key


def publish_job_name(prefix: str, pipeline_id: str) -> str:
    """The asset job ``publish_<p>`` of a pipeline."""
    return f"{prefix}publish_{sanitize(pipeline_id)}"


@dataclass(frozen=True)
class AssetKeys:
    """The asset keys of one pipeline (as the translator chose them): its source, its newest-bundle
    view (``None`` unless :func:`has_newest_view`) and its destinations, by destination id."""

    source: tuple[str, ...]
    newest: tuple[str, ...] | None
    destinations: dict[str, tuple[str, ...]]


def default_keys(pipeline: Pipeline, key_prefix: Sequence[str] = ()) -> AssetKeys:
    """``[<p>]``, ``[<p>, newest]``, ``[<p>, <d>]`` after ``key_prefix`` (ids sanitised)."""
    source = (*key_prefix, sanitize(pipeline.id))
    return AssetKeys(
        source=source,
        newest=(*source, NEWEST) if has_newest_view(pipeline) else None,
        destinations={d.id: (*source, sanitize(d.id)) for d in pipeline.destinations},
    )


def per_bundle(pipeline: Pipeline, destination: Destination) -> bool:
    """Whether ``destination`` gives each bundle of ``pipeline`` its own destination path
    (``preserve_relative`` over a ``local``, ``ssh`` or ``s3`` source): its asset is then
    partitioned by bundle, one partition per bundle path (issue 24)."""
    return not pipeline.is_upload and destination.path_mapping.mode != "fixed"


def has_newest_view(pipeline: Pipeline) -> bool:
    """Whether the pipeline mixes per-bundle and ``fixed`` destinations: the ``fixed`` ones then
    sit behind an unpartitioned view of the newest bundle."""
    flags = {per_bundle(pipeline, destination) for destination in pipeline.destinations}
    return flags == {True, False}


@dataclass(frozen=True)
class DestinationNames:
    """Names of one destination: its asset, the graph that publishes it (``graph``, the node
    name prefixing step keys) and its step ``publish_<d>`` inside that graph (a node of the
    shared op definition :func:`shared_op` ``publish``)."""

    pipeline_id: str
    destination_id: str
    asset_key: tuple[str, ...]
    partitioned: bool
    graph: str
    publish_node: str


@dataclass(frozen=True)
class GraphNames:
    """One publish graph of a pipeline: the destinations it publishes (all partitioned by bundle,
    or all unpartitioned) and its node name (step keys read ``<node>.<step>``)."""

    node: str
    partitioned: bool
    destination_ids: tuple[str, ...]


@dataclass(frozen=True)
class PipelineNames:
    """Names of one pipeline: its source asset key, the key of the unpartitioned
    "newest bundle" view (``newest_key``, only when per-bundle and ``fixed`` destinations mix),
    the dynamic partitions of its bundles (``partitions``: the source's, the bundles the source
    holds or a destination still holds; ``published``: its per-bundle destinations', the bundles
    they hold or are about to get; both empty when nothing is partitioned), its publish graphs,
    the asset job ``publish_<p>`` and its sensor."""

    pipeline_id: str
    source_key: tuple[str, ...]
    newest_key: tuple[str, ...] | None
    partitions: str
    graphs: tuple[GraphNames, ...]
    observe_op: str
    newest_observe_op: str
    publish_job: str
    watch_sensor: str
    uploads_sensor: str
    destinations: tuple[DestinationNames, ...]
    published: str = ""

    def destination(self, destination_id: str) -> DestinationNames:
        for names in self.destinations:
            if names.destination_id == destination_id:
                return names
        raise KeyError(destination_id)

    def graph(self, partitioned: bool) -> GraphNames | None:
        for graph in self.graphs:
            if graph.partitioned == partitioned:
                return graph
        return None

    @property
    def partitioned(self) -> bool:
        return bool(self.partitions)


#: The fixed steps of a publish graph; each destination adds ``publish_<d>``.
PUBLISH_NODES = ("discover", "validate")
#: The step of an upload pipeline's graph that records each upload's outcome.
REPORT_NODE = "report"
#: The op definitions every publish graph of a code location shares (issue 37 item 4): the graphs
#: are per pipeline, their steps are nodes of these (``report_<n>``: an upload pipeline's report
#: step over ``n`` destinations).
SHARED_OPS = ("discover", "validate", "publish", "publish_upload")
#: The key component of a pipeline's "newest bundle" view (next to its destinations).
NEWEST = "newest"
#: The suffix of the unpartitioned graph's node in a pipeline that also has a per-bundle one.
NEWEST_GRAPH = "__newest"
#: The site-wide maintenance jobs, each one step of the same name (distributor_dagster.maintenance).
MAINTENANCE_JOBS = ("prune", "reconcile_state", "audit")


def _destination_names(
    registry: NameRegistry, asset_key: tuple[str, ...], pipeline: Pipeline, destination: Destination,
    graph: GraphNames,
) -> DestinationNames:
    owner = Owner(pipeline.id, destination.id)
    d = sanitize(destination.id)
    registry.claim_key(asset_key, owner)
    publish_node = registry.claim("node:" + graph.node, f"publish_{d}", owner)
    return DestinationNames(
        pipeline_id=pipeline.id,
        destination_id=destination.id,
        asset_key=asset_key,
        partitioned=graph.partitioned,
        graph=graph.node,
        publish_node=publish_node,
    )


def shared_op(prefix: str, step: str) -> str:
    """The name of a shared op definition (:data:`SHARED_OPS`, ``report_<n>``)."""
    return f"{prefix}distributor__{step}"


def _graphs(registry: NameRegistry, pipeline: Pipeline, graph: str, owner: Owner) -> tuple[GraphNames, ...]:
    split = {
        flag: tuple(d.id for d in pipeline.destinations if per_bundle(pipeline, d) == flag) for flag in (True, False)
    }
    graphs = []
    for flag in (True, False):
        if not split[flag]:
            continue
        node = graph if flag or not split[True] else graph + NEWEST_GRAPH
        registry.claim("op", node, owner)
        graphs.append(GraphNames(node=node, partitioned=flag, destination_ids=split[flag]))
    return tuple(graphs)


def pipeline_names(registry: NameRegistry, pipeline: Pipeline, keys: AssetKeys, *, prefix: str = "") -> PipelineNames:
    owner = Owner(pipeline.id)
    p = sanitize(pipeline.id)
    source_key = registry.claim_key(keys.source, owner)
    graphs = _graphs(registry, pipeline, f"{prefix}{p}", owner)
    partitioned = any(g.partitioned for g in graphs)
    newest_key = None
    newest_observe_op = ""
    if keys.newest is not None:
        newest_key = registry.claim_key(keys.newest, owner)
        newest_observe_op = registry.claim("op", f"{prefix}{p}{NEWEST_GRAPH}__observe", owner)
    partitions = registry.claim("partitions", f"{'/'.join(source_key)}__bundles", owner) if partitioned else ""
    published = registry.claim("partitions", f"{'/'.join(source_key)}__published", owner) if partitioned else ""
    observe_op = registry.claim("op", f"{prefix}{p}__observe", owner)
    publish_job = registry.claim("job", publish_job_name(prefix, pipeline.id), owner)
    if pipeline.is_upload:
        uploads_sensor, watch_sensor = registry.claim("sensor", f"{prefix}uploads_{p}", owner), ""
    else:
        uploads_sensor, watch_sensor = "", registry.claim("sensor", f"{prefix}watch_{p}", owner)
    by_id = {d: g for g in graphs for d in g.destination_ids}
    destinations = tuple(
        _destination_names(registry, keys.destinations[destination.id], pipeline, destination, by_id[destination.id])
        for destination in pipeline.destinations
    )
    return PipelineNames(
        pipeline_id=pipeline.id,
        source_key=source_key,
        newest_key=newest_key,
        partitions=partitions,
        graphs=graphs,
        observe_op=observe_op,
        newest_observe_op=newest_observe_op,
        publish_job=publish_job,
        watch_sensor=watch_sensor,
        uploads_sensor=uploads_sensor,
        destinations=destinations,
        published=published,
    )


def config_names(
    config: Config, *, prefix: str = "", key_prefix: Iterable[str] = (), keys: Sequence[AssetKeys] | None = None
) -> list[PipelineNames]:
    """The names of every object generated for ``config`` (``keys``: each pipeline's asset keys,
    by default :func:`default_keys`); raises :class:`NameCollisionError`."""
    registry = NameRegistry()
    for job in MAINTENANCE_JOBS:  # one job, one step of the same name (op definition <job>__destinations)
        registry.claim("job", f"{prefix}{job}", SITE)
        registry.claim("op", f"{prefix}{job}__destinations", SITE)
    for step in SHARED_OPS:
        registry.claim("op", shared_op(prefix, step), SHARED)
    for count in sorted({len(p.destinations) for p in config.pipelines if p.is_upload}):
        registry.claim("op", shared_op(prefix, f"{REPORT_NODE}_{count}"), SHARED)
    if keys is None:
        prefix_keys = tuple(key_prefix)
        keys = [default_keys(pipeline, prefix_keys) for pipeline in config.pipelines]
    return [
        pipeline_names(registry, pipeline, pipeline_keys, prefix=prefix)
        for pipeline, pipeline_keys in zip(config.pipelines, keys, strict=True)
    ]

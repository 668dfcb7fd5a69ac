"""Which pipeline, graph and destination a step of a shared op definition works for (issue 37 item 4).

Every publish graph of a code location is built from the same few op definitions
(:data:`~distributor_dagster.names.SHARED_OPS`): a step finds its pipeline from the graph-backed
assets it executes (``context.assets_def``, whose graph is the pipeline's ``<p>`` or
``<p>__newest``) and its destination from its node (``publish_<d>`` inside that graph), never from
a closure. The tables are built once per code location, from the generated names.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import dagster as dg

from distributor_core.config import Destination, Pipeline
from distributor_dagster.names import DestinationNames, GraphNames, PipelineNames
from distributor_dagster.site import Site


@dataclass(frozen=True)
class GraphRoute:
    """One publish graph: its pipeline, the pipeline's names, and the graph's own names."""

    pipeline: Pipeline
    names: PipelineNames
    graph: GraphNames

    @property
    def partitioned(self) -> bool:
        return self.graph.partitioned


@dataclass(frozen=True)
class DestinationRoute:
    """One destination asset: its pipeline (and the pipeline's names), the destination and its names."""

    pipeline: Pipeline
    pipeline_names: PipelineNames
    destination: Destination
    names: DestinationNames

    @property
    def asset_key(self) -> dg.AssetKey:
        return dg.AssetKey(list(self.names.asset_key))

    @property
    def label(self) -> str:
        return f"{self.pipeline.id}/{self.destination.id}"


class Routes:
    """The publish graphs and destination assets of a code location, by graph name and asset key."""

    def __init__(self, site: Site) -> None:
        self._graphs: dict[str, GraphRoute] = {}
        self._steps: dict[tuple[str, str], DestinationRoute] = {}
        self._assets: dict[dg.AssetKey, DestinationRoute] = {}
        self._order: dict[dg.AssetKey, int] = {}
        for pipeline, names in zip(site.config.pipelines, site.names, strict=True):
            for graph in names.graphs:
                self._graphs[graph.node] = GraphRoute(pipeline, names, graph)
            for destination in pipeline.destinations:
                dnames = names.destination(destination.id)
                route = DestinationRoute(pipeline, names, destination, dnames)
                self._steps[(dnames.graph, dnames.publish_node)] = route
                self._assets[route.asset_key] = route
                self._order[route.asset_key] = len(self._order)

    def graph(self, context: dg.OpExecutionContext) -> GraphRoute:
        """The publish graph the step belongs to."""
        return self._graphs[context.assets_def.node_def.name]

    def destination(self, context: dg.OpExecutionContext) -> DestinationRoute:
        """The destination of a ``publish_<d>`` step."""
        return self._steps[(context.assets_def.node_def.name, context.node_handle.name)]

    def destination_named(self, graph: GraphRoute, destination_id: str) -> DestinationRoute:
        return self._assets[dg.AssetKey(list(graph.names.destination(destination_id).asset_key))]

    def selected(self, keys: Iterable[dg.AssetKey]) -> list[DestinationRoute]:
        """The destination assets among ``keys``, in config order (pipelines, then destinations)."""
        found = [self._assets[key] for key in set(keys) if key in self._assets]
        return sorted(found, key=lambda route: self._order[route.asset_key])

    def by_asset(self) -> Mapping[dg.AssetKey, DestinationRoute]:
        return self._assets

"""The asset specs of each pipeline, as the translator presents them (issue 25 item 2).

Computed once per code-location load, before the names (the keys come from here) and before the
assets (which add what the publication depends on: partitions, code versions, checks).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import dagster as dg

from distributor_core.config import Destination, Pipeline
from distributor_dagster.names import AssetKeys, default_keys, per_bundle, publish_job_name, sanitize
from distributor_dagster.options import BuildOptions
from distributor_dagster.translator import DistributorAssetProps, DistributorTranslator, Role


@dataclass(frozen=True)
class PipelineSpecs:
    """The translated specs of one pipeline's assets: its source, its newest-bundle view (when
    it has one) and each destination, by destination id."""

    source: dg.AssetSpec
    newest: dg.AssetSpec | None
    destinations: Mapping[str, dg.AssetSpec]

    def keys(self) -> AssetKeys:
        return AssetKeys(
            source=tuple(self.source.key.path),
            newest=tuple(self.newest.key.path) if self.newest is not None else None,
            destinations={d: tuple(spec.key.path) for d, spec in self.destinations.items()},
        )

    def destination(self, destination_id: str) -> dg.AssetSpec:
        return self.destinations[destination_id]


def pipeline_specs(translator: DistributorTranslator, pipeline: Pipeline, options: BuildOptions) -> PipelineSpecs:
    defaults = default_keys(pipeline, options.asset_key_prefix)
    partitioned = any(per_bundle(pipeline, destination) for destination in pipeline.destinations)

    def spec(role: Role, key: tuple[str, ...], destination: Destination | None = None) -> dg.AssetSpec:
        props = DistributorAssetProps(
            role=role,
            pipeline=pipeline,
            destination=destination,
            default_key=dg.AssetKey(list(key)),
            default_group=f"{options.name_prefix}{sanitize(pipeline.id)}",
            publish_job=publish_job_name(options.name_prefix, pipeline.id),
            automation=options.automation,
            partitioned=per_bundle(pipeline, destination) if destination is not None else partitioned,
        )
        return translator.get_asset_spec(props)

    return PipelineSpecs(
        source=spec("source", defaults.source),
        newest=spec("newest", defaults.newest) if defaults.newest is not None else None,
        destinations={
            d.id: spec("destination", defaults.destinations[d.id], d) for d in pipeline.destinations
        },
    )

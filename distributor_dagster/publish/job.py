"""``publish_<pipeline>``: the asset job of all the pipeline's destination assets (and their
checks), the target of the pipeline's sensor (dagster.md §2, resolutions B1, E1; issue 12).

Steps run in one process, highest priority first, so each destination is planned, executed and
materialized before the next one in config order (destinations sharing a root therefore never
overlap within a run). Every ``execute`` step also claims the concurrency pool of its
destination root, which serialises writers across runs. A failing destination fails only its
own ``materialize`` step; ``report`` and the checks still run. The same executor is the code
location's default, so runs of the implicit asset job (Materialize in the UI, ``dagster asset
materialize``, ``dg launch --assets``, automation) behave the same.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import dagster as dg

from distributor_core.config import Pipeline
from distributor_dagster.names import PipelineNames

if TYPE_CHECKING:
    from dagster._core.definitions.unresolved_asset_job_definition import UnresolvedAssetJobDefinition

#: In-process: one step at a time, highest ``dagster/priority`` first (config order per
#: destination, then ``report`` and the checks). ``execute`` steps never fail (``materialize``
#: steps do), so the run report is written even when a destination failed.
PUBLISH_EXECUTOR = dg.in_process_executor


def publish_job(pipeline: Pipeline, names: PipelineNames) -> UnresolvedAssetJobDefinition:
    keys = [dg.AssetKey(list(d.asset_key)) for d in names.destinations]
    kind = "staged upload" if pipeline.is_upload else f"{pipeline.source.backend} source"
    return dg.define_asset_job(
        name=names.publish_job,
        selection=dg.AssetSelection.assets(*keys),
        description=f"Publish bundles of pipeline {pipeline.id} ({kind}) to "
        + ", ".join(d.id for d in pipeline.destinations)
        + f": materializes the destination assets and evaluates their checks. Run config: "
        f"ops.{names.graph}.config.",
        tags={"distributor/pipeline": pipeline.id},
        executor_def=PUBLISH_EXECUTOR,
    )


def run_config(names: PipelineNames, **config: object) -> dict:
    """The run config of ``publish_<p>`` (and of any run materializing the pipeline's destinations)."""
    return {"ops": {names.graph: {"config": dict(config)}}}

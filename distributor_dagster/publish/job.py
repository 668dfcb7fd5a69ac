"""``publish_<pipeline>``: the asset job of all the pipeline's destination assets (and their
checks), the target of the pipeline's sensor (dagster.md §2, resolutions B1, E1; issue 12).

Steps run in one process, highest priority first, so each destination is planned and executed
before the next one in config order (destinations sharing a root therefore never overlap within
a run). Every ``execute`` step also claims the concurrency pool of its destination root, which
serialises writers across runs. The executor lets ``report`` run once every ``execute`` step has
produced its result, also when some of them failed: a failing destination fails only its own
step. The same executor is the code location's default, so runs of the implicit asset job
(Materialize in the UI, ``dagster asset materialize``, ``dg launch --assets``, automation)
behave the same.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import dagster as dg

from distributor_core.config import Pipeline
from distributor_dagster.names import PipelineNames
from distributor_dagster.publish.config import resource_key, run_config

__all__ = ["PUBLISH_EXECUTOR", "publish_job", "run_config"]

if TYPE_CHECKING:
    from dagster._core.definitions.unresolved_asset_job_definition import UnresolvedAssetJobDefinition

#: In-process, and downstream steps run as soon as their inputs exist (an ``execute`` step yields
#: its result before it fails), so the run report is written even when a destination failed.
#: With this setting a step whose input comes from a *skipped* step is never started, so no step of
#: the publish graph skips (unselected destinations return empty results instead).
PUBLISH_EXECUTOR = dg.in_process_executor.configured(
    {"step_dependency_config": {"require_upstream_step_success": False}},
    name="distributor_publish_executor",
)


def publish_job(pipeline: Pipeline, names: PipelineNames, prefix: str = "") -> UnresolvedAssetJobDefinition:
    keys = [dg.AssetKey(list(d.asset_key)) for d in names.destinations]
    kind = "staged upload" if pipeline.is_upload else f"{pipeline.source.backend} source"
    return dg.define_asset_job(
        name=names.publish_job,
        selection=dg.AssetSelection.assets(*keys),
        description=f"Publish bundles of pipeline {pipeline.id} ({kind}) to "
        + ", ".join(d.id for d in pipeline.destinations)
        + ": materializes the destination assets and evaluates their checks. Run settings: "
        + f"resources.{resource_key(prefix)}.config.",
        tags={"distributor/pipeline": pipeline.id},
        executor_def=PUBLISH_EXECUTOR,
    )

"""The assets of a pipeline (issue 12 items 1, 2, 4, 5).

- The **source asset**, key ``[<pipeline>]``, group ``<pipeline>``, kind = source backend: an
  observable source asset whose observations carry the newest bundle's digest as data version.
  Its observe function lists the source and reads manifests (nothing is hashed); for
  ``http_upload`` pipelines it reads the upload records of the staging area.
- One **destination asset** per destination, key ``[<pipeline>, <destination>]``, same group,
  kind = destination backend: an output of the pipeline's publish graph (:mod:`.publish.graph`),
  with ``dagster/uri`` and a description naming the absolute root, a code version, and, with
  ``automation="eager"``, ``AutomationCondition.eager()``.

The original ids stay in tags (when Dagster's tag rules allow them) and always in metadata.
"""

from __future__ import annotations

import re
import warnings
from typing import Any

import dagster as dg

from distributor_core.config import Destination, Pipeline
from distributor_dagster.describe import destination_description, root_uri, source_description
from distributor_dagster.names import DestinationNames, PipelineNames
from distributor_dagster.site import Site
from distributor_dagster.versions import code_version

#: Dagster's rule for asset tag values; longer ids stay in metadata only.
_TAG_VALUE = re.compile(r"[A-Za-z0-9_.-]{0,63}")


def _tags(values: dict[str, str]) -> dict[str, str]:
    return {key: value for key, value in values.items() if _TAG_VALUE.fullmatch(value)}


def destination_metadata(pipeline: Pipeline, destination: Destination, pnames: PipelineNames) -> dict[str, Any]:
    storage = destination.storage
    return {
        "dagster/uri": root_uri(storage),
        "pipeline_id": pipeline.id,
        "destination_id": destination.id,
        "backend": destination.backend,
        "destination_root": root_uri(storage),
        "configured_root": storage.root_path,
        "source_backend": pipeline.source.backend,
        "state_mode": destination.state.mode,
        "reconciliation_mode": destination.reconciliation.mode,
        "path_mapping": destination.path_mapping.mode,
        "takeover_mode": destination.takeover.mode,
        "publish_job": pnames.publish_job,
    }


def destination_out(
    site: Site, pipeline: Pipeline, destination: Destination, names: DestinationNames, pnames: PipelineNames
) -> dg.AssetOut:
    """The destination's output of the publish graph. Its value is the destination itself (files
    in storage), so the output is ``Nothing``: no IO manager stores anything."""
    eager = site.options.eager and not pipeline.is_upload
    return dg.AssetOut(
        key=dg.AssetKey(list(names.asset_key)),
        dagster_type=dg.Nothing,
        is_required=False,
        description=destination_description(pipeline, destination),
        metadata=destination_metadata(pipeline, destination, pnames),
        group_name=pnames.group,
        code_version=code_version(destination),
        automation_condition=dg.AutomationCondition.eager() if eager else None,
        tags=_tags({
            "distributor/pipeline": pipeline.id,
            "distributor/destination": destination.id,
            "distributor/backend": destination.backend,
        }),
        kinds={destination.backend},
    )


def source_spec(pipeline: Pipeline, names: PipelineNames) -> dg.AssetSpec:
    source = pipeline.source
    return dg.AssetSpec(
        key=dg.AssetKey(list(names.source_key)),
        group_name=names.group,
        description=source_description(pipeline),
        kinds={source.backend},
        tags=_tags({"distributor/pipeline": pipeline.id, "distributor/backend": source.backend}),
        metadata={
            "dagster/uri": root_uri(source),
            "pipeline_id": pipeline.id,
            "source_backend": source.backend,
            "source_root": root_uri(source),
            "publish_job": names.publish_job,
        },
    )


def source_asset(site: Site, pipeline: Pipeline, names: PipelineNames) -> dg.AssetsDefinition:
    """The observable source asset; observing it reads manifests or upload records only."""
    from distributor_dagster.observe import observe_pipeline_source

    spec = source_spec(pipeline, names)

    def observe(context):  # type: ignore[no-untyped-def]  (Dagster checks a real annotation)
        view, problems = observe_pipeline_source(site, pipeline)
        for problem in problems:
            context.log.warning(f"unreadable: {problem}")
        context.log.info(view.description())
        yield view.observe_result(spec.key)

    with warnings.catch_warnings():  # the one decorator that names its op is marked beta
        warnings.simplefilter("ignore", dg.BetaWarning)
        return dg.multi_observable_source_asset(
            specs=[spec], name=names.observe_op, description=f"Observe the source of {pipeline.id}."
        )(observe)

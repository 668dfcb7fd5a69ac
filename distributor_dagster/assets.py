"""One asset per destination (dagster.md §2): key ``[<pipeline>, <destination>]``, group
``<pipeline>``. The publish job reports its materializations; the original ids stay in tags
(when Dagster's tag rules allow them) and always in metadata."""

from __future__ import annotations

import re

import dagster as dg

from distributor_core.config import Destination, Pipeline
from distributor_dagster.names import DestinationNames, PipelineNames

#: Dagster's rule for asset tag values; longer ids stay in metadata only.
_TAG_VALUE = re.compile(r"[A-Za-z0-9_.-]{0,63}")


def _tags(pipeline: Pipeline, destination: Destination) -> dict[str, str]:
    tags = {
        "distributor/pipeline": pipeline.id,
        "distributor/destination": destination.id,
        "distributor/backend": destination.backend,
    }
    return {key: value for key, value in tags.items() if _TAG_VALUE.fullmatch(value)}


def destination_asset(
    pipeline: Pipeline, destination: Destination, names: DestinationNames, pnames: PipelineNames
) -> dg.AssetSpec:
    storage = destination.storage
    return dg.AssetSpec(
        key=dg.AssetKey(list(names.asset_key)),
        group_name=pnames.group,
        description=(
            f"Publications of pipeline {pipeline.id} to destination {destination.id} "
            f"({destination.backend} {storage.root_path}). Materialized by {pnames.publish_job} when it writes."
        ),
        tags=_tags(pipeline, destination),
        kinds={destination.backend},
        metadata={
            "pipeline_id": pipeline.id,
            "destination_id": destination.id,
            "backend": destination.backend,
            "destination_root": storage.root_path,
            "source_backend": pipeline.source.backend,
            "state_mode": destination.state.mode,
            "reconciliation_mode": destination.reconciliation.mode,
            "path_mapping": destination.path_mapping.mode,
            "takeover_mode": destination.takeover.mode,
            "publish_job": pnames.publish_job,
        },
    )

"""The assets of a pipeline (issue 12 items 1, 2, 4, 5; issue 24).

- The **source asset**, key ``[<pipeline>]``, group ``<pipeline>``, kind = source backend: an
  observable source asset. When the pipeline has per-bundle destinations it is partitioned by
  bundle (:mod:`.partitions`) and each partition's observation carries that bundle's digest;
  otherwise its observation carries the newest bundle's digest (for ``http_upload`` pipelines the
  newest upload's). Its check ``bundle_valid`` says which bundles fail validation. Its observe
  function lists the source and reads manifests (nothing is hashed; "Execute checks" validates).
- The **newest bundle view** ``[<pipeline>, newest]``, only when per-bundle and ``fixed``
  destinations mix: unpartitioned, observed with the newest bundle's digest, upstream of the
  ``fixed`` destinations (what they would take) and downstream of the source in the lineage.
- One **destination asset** per destination, key ``[<pipeline>, <destination>]``, same group,
  kind = destination backend: an output of the pipeline's publish graphs (:mod:`.publish.graph`),
  partitioned like the source when it gives each bundle its own path, with ``dagster/uri`` and a
  description naming the absolute root, a code version, and, with ``automation="eager"``,
  ``AutomationCondition.eager()``.

The original ids stay in tags (when Dagster's tag rules allow them) and always in metadata.
"""

from __future__ import annotations

import re
import warnings
from typing import Any

import dagster as dg

from distributor_core.config import Destination, Pipeline
from distributor_dagster.checks import source_check_spec
from distributor_dagster.describe import destination_description, newest_description, root_uri, source_description
from distributor_dagster.names import DestinationNames, PipelineNames
from distributor_dagster.partitions import partitions_def
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
    """The destination's output of its publish graph. Its value is the destination itself (files
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


def _source_metadata(pipeline: Pipeline, names: PipelineNames) -> dict[str, Any]:
    return {
        "dagster/uri": root_uri(pipeline.source),
        "pipeline_id": pipeline.id,
        "source_backend": pipeline.source.backend,
        "source_root": root_uri(pipeline.source),
        "publish_job": names.publish_job,
    }


def source_spec(pipeline: Pipeline, names: PipelineNames) -> dg.AssetSpec:
    source = pipeline.source
    return dg.AssetSpec(
        key=dg.AssetKey(list(names.source_key)),
        group_name=names.group,
        description=source_description(pipeline, partitioned=names.partitioned),
        kinds={source.backend},
        tags=_tags({"distributor/pipeline": pipeline.id, "distributor/backend": source.backend}),
        metadata=_source_metadata(pipeline, names),
        partitions_def=partitions_def(names.partitions) if names.partitioned else None,
    )


def newest_spec(pipeline: Pipeline, names: PipelineNames) -> dg.AssetSpec:
    assert names.newest_key is not None
    return dg.AssetSpec(
        key=dg.AssetKey(list(names.newest_key)),
        group_name=names.group,
        description=newest_description(pipeline),
        kinds={pipeline.source.backend},
        tags=_tags({"distributor/pipeline": pipeline.id, "distributor/backend": pipeline.source.backend}),
        metadata=_source_metadata(pipeline, names),
        deps=[dg.AssetKey(list(names.source_key))],
    )


def source_assets(site: Site, pipeline: Pipeline, names: PipelineNames) -> list[dg.AssetsDefinition]:
    """The observable source asset (with its check ``bundle_valid``) and, in a pipeline that mixes
    per-bundle and ``fixed`` destinations, the newest bundle view."""
    from distributor_dagster.observe import observe_newest, observe_source

    spec = source_spec(pipeline, names)
    partitions = spec.partitions_def
    check = source_check_spec(spec.key, partitions)
    selected_check = dg.AssetCheckKey(spec.key, check.name)

    def observe(context):  # type: ignore[no-untyped-def]  (Dagster checks a real annotation)
        yield from observe_source(context, site, pipeline, names, validate=selected_check in
                                  context.selected_asset_check_keys)

    with warnings.catch_warnings():  # the one decorator that names its op is marked beta
        warnings.simplefilter("ignore", dg.BetaWarning)
        assets = [dg.multi_observable_source_asset(
            specs=[spec], name=names.observe_op, description=f"Observe the source of {pipeline.id}.",
            check_specs=[check], partitions_def=partitions, can_subset=True,
        )(observe)]
        if names.newest_key is not None:
            newest = newest_spec(pipeline, names)
            newest_check = source_check_spec(newest.key, None)
            newest_selected = dg.AssetCheckKey(newest.key, newest_check.name)

            def observe_view(context):  # type: ignore[no-untyped-def]
                yield from observe_newest(context, site, pipeline, names,
                                          validate=newest_selected in context.selected_asset_check_keys)

            assets.append(dg.multi_observable_source_asset(
                specs=[newest], name=names.newest_observe_op, check_specs=[newest_check], can_subset=True,
                description=f"Observe the newest bundle of the source of {pipeline.id}.",
            )(observe_view))
    return assets

"""The assets of a pipeline (issue 12 items 1, 2, 4, 5; issue 24).

- The **source asset**, key ``[<pipeline>]``, group ``<pipeline>``, the source backend's kind: an
  observable source asset. When the pipeline has per-bundle destinations it is partitioned by
  bundle (:mod:`.partitions`) and each partition's observation carries that bundle's digest;
  otherwise its observation carries the newest bundle's digest (for ``http_upload`` pipelines the
  newest upload's). Its check ``bundle_valid`` says which bundles fail validation. Its observe
  function lists the source and reads manifests (nothing is hashed; "Execute checks" validates).
- The **newest bundle view** ``[<pipeline>, newest]``, only when per-bundle and ``fixed``
  destinations mix: unpartitioned, observed with the newest bundle's digest, upstream of the
  ``fixed`` destinations (what they would take) and downstream of the source in the lineage.
- One **destination asset** per destination, key ``[<pipeline>, <destination>]``, same group,
  the destination backend's kind: an output of the pipeline's publish graphs (:mod:`.publish.graph`),
  partitioned like the source when it gives each bundle its own path, with ``dagster/uri`` and a
  description naming the absolute root, a code version, and, with ``automation="eager"``,
  ``AutomationCondition.eager()``.

Keys, groups, descriptions, owners, tags, kinds, metadata, automation conditions and upstream
deps are what the translator (:mod:`.translator`, the config's ``dagster`` blocks) says: the
defaults are described above. The original ids stay in tags (when Dagster's tag rules allow
them) and always in metadata.
"""

from __future__ import annotations

import warnings

import dagster as dg

from distributor_core.config import Pipeline
from distributor_dagster.checks import source_check_spec
from distributor_dagster.names import PipelineNames
from distributor_dagster.partitions import partitions_def
from distributor_dagster.site import Site


def source_spec(site: Site, pipeline: Pipeline, names: PipelineNames) -> dg.AssetSpec:
    spec = site.pipeline_specs(pipeline.id).source
    return spec.replace_attributes(partitions_def=partitions_def(names.partitions) if names.partitioned else None)


def newest_spec(site: Site, pipeline: Pipeline, names: PipelineNames) -> dg.AssetSpec:
    spec = site.pipeline_specs(pipeline.id).newest
    assert spec is not None and names.newest_key is not None
    source_key = dg.AssetKey(list(names.source_key))
    return spec.merge_attributes(deps=[] if source_key in {dep.asset_key for dep in spec.deps} else [source_key])


def source_assets(site: Site, pipeline: Pipeline, names: PipelineNames) -> list[dg.AssetsDefinition]:
    """The observable source asset (with its check ``bundle_valid``) and, in a pipeline that mixes
    per-bundle and ``fixed`` destinations, the newest bundle view."""
    from distributor_dagster.observe import observe_newest, observe_source

    spec = source_spec(site, pipeline, names)
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
            newest = newest_spec(site, pipeline, names)
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

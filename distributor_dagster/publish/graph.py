"""A pipeline's destinations as graph-backed multi-assets (issue 12 item 2, resolutions B1, H1,
issue 24).

A pipeline has one publish graph per kind of destination asset: its per-bundle (partitioned)
destinations in one, its unpartitioned ones (``fixed``, uploads) in another::

    <source> ──> discover ──> validate ──> publish_<d1> ──> [<p>/<d1>] + its checks
                                      └──> publish_<d2> ──> [<p>/<d2>] + its checks

Step keys read ``<graph>.<step>``, the run config sits under ``ops.<graph>.config``. A graph of
bundles can be subset: a run of one destination (or one partition) executes ``discover``,
``validate`` and that destination's ``publish_<d>`` only, and claims only that root's pool. An
upload pipeline's graph publishes each upload whole (every destination, then ``report`` records
the outcome), so its destinations are materialized together.

Failures: ``publish_<d>`` hands its result on before it fails, and the publish executor runs a step
once its inputs exist (:data:`~distributor_dagster.publish.job.PUBLISH_EXECUTOR`), so one failing
destination fails only its own step. A bundle that fails validation fails only the source check
``bundle_valid`` of that bundle.
"""

from __future__ import annotations

import dagster as dg

from distributor_core.config import Pipeline
from distributor_dagster.assets import destination_out
from distributor_dagster.checks import check_specs
from distributor_dagster.names import GraphNames, PipelineNames
from distributor_dagster.partitions import partitions_def
from distributor_dagster.publish.config import UploadPublishConfig, bundle_config_mapping
from distributor_dagster.publish.destination import ASSET_OUTPUT, RESULT_OUTPUT, publish_op
from distributor_dagster.publish.ops import discover_op, validate_op
from distributor_dagster.publish.report import report_op
from distributor_dagster.site import Site


def _config_mapping(pipeline: Pipeline, graph: GraphNames) -> dg.ConfigMapping:
    if not pipeline.is_upload:
        return bundle_config_mapping(pipeline, graph.node)
    return dg.ConfigMapping(
        config_fn=lambda values: {"discover": {"config": values}},
        config_schema=UploadPublishConfig.to_config_schema(),
    )


def graph_assets(site: Site, pipeline: Pipeline, pnames: PipelineNames, graph: GraphNames) -> dg.AssetsDefinition:
    # the destinations' own partitions (the bundles they hold), mapped one to one onto the source's
    partitions = partitions_def(pnames.published) if graph.partitioned else None
    upload = pipeline.is_upload
    source_key = pnames.source_key if graph.partitioned or not pnames.newest_key else pnames.newest_key
    outs: dict[str, dg.AssetOut] = {}
    specs: list[dg.AssetCheckSpec] = []
    steps = []
    # a destination's upstream assets (its spec's deps) are Nothing inputs of the graph, each fed to
    # the publish steps of the destinations that name it: Dagster draws the edges from them
    upstream: dict[dg.AssetKey, tuple[str, dg.AssetIn]] = {}
    for destination_id in graph.destination_ids:
        destination = pipeline.destination(destination_id)
        dnames = pnames.destination(destination_id)
        out_name = dnames.publish_node.removeprefix("publish_")
        outs[out_name] = destination_out(site, pipeline, dnames)
        dspecs = check_specs(dnames, site.options.blocking_checks, partitions, digest=site.options.digest_checks)
        specs.extend(dspecs)
        check_outputs = {spec.name: spec.get_python_identifier() for spec in dspecs}
        inputs = []
        for dep in site.pipeline_specs(pipeline.id).destination(destination_id).deps:
            if dep.asset_key == dg.AssetKey(list(source_key)):
                continue
            name, _ = upstream.setdefault(dep.asset_key, (f"upstream_{len(upstream)}", dg.AssetIn(
                key=dep.asset_key, dagster_type=dg.Nothing, partition_mapping=dep.partition_mapping)))
            inputs.append(name)
        # an upload's destinations are checked by report, once the upload records are written
        step = publish_op(site, pipeline, destination, dnames, pnames, {} if upload else check_outputs,
                          with_result=upload, upstream=tuple(inputs))
        steps.append((out_name, step.alias(dnames.publish_node), check_outputs, tuple(inputs)))
    discover = discover_op(site, pipeline, pnames, graph).alias("discover")
    validate = validate_op(site, pipeline, pnames, graph).alias("validate")
    report = None
    if upload:
        checks = {d: outputs for d, (_, _, outputs, _) in zip(graph.destination_ids, steps, strict=True)}
        report = report_op(site, pipeline, pnames, graph, checks).alias("report")

    def compose(source, **upstream_inputs):  # type: ignore[no-untyped-def]
        validated = validate(discover(source))
        returned = {}
        results = []
        for out_name, step, check_outputs, inputs in steps:
            handles = step(validated, **{name: upstream_inputs[name] for name in inputs})
            returned[out_name] = getattr(handles, ASSET_OUTPUT)
            if upload:
                results.append(getattr(handles, RESULT_OUTPUT))
            else:
                for output in check_outputs.values():
                    returned[output] = getattr(handles, output)
        if report is not None:
            checked = report(validated, results)
            for _, _, check_outputs, _ in steps:
                for output in check_outputs.values():
                    returned[output] = getattr(checked, output)
        return returned

    compose.__name__ = graph.node
    policy = dg.BackfillPolicy.multi_run(max_partitions_per_run=site.options.bundles_per_run) if partitions else None
    # graph_multi_asset takes one group for all its outputs: the destinations' own groups (the
    # translator's) are put back on the specs when they differ
    groups = {out.group_name for out in outs.values()}
    assets = dg.graph_multi_asset(
        name=graph.node,
        outs=outs,
        ins={
            "source": dg.AssetIn(key=dg.AssetKey(list(source_key)), dagster_type=dg.Nothing,
                                 partition_mapping=dg.IdentityPartitionMapping() if partitions else None),
            **dict(upstream.values()),
        },
        can_subset=not upload,
        check_specs=specs,
        config=_config_mapping(pipeline, graph),
        partitions_def=partitions,
        backfill_policy=policy,
        group_name=next(iter(groups)) if len(groups) == 1 else None,
    )(compose)
    if len(groups) == 1:
        return assets
    group_by_key = {out.key: out.group_name for out in outs.values()}
    return assets.map_asset_specs(lambda spec: spec.replace_attributes(group_name=group_by_key[spec.key]))


def publish_assets(site: Site, pipeline: Pipeline, pnames: PipelineNames) -> list[dg.AssetsDefinition]:
    """The pipeline's destination assets: one graph-backed multi-asset per kind of destination."""
    return [graph_assets(site, pipeline, pnames, graph) for graph in pnames.graphs]

"""A pipeline's destinations as graph-backed multi-assets (issue 12 item 2, resolutions B1, H1,
issues 24 and 37).

A pipeline has one publish graph per kind of destination asset: its per-bundle (partitioned)
destinations in one, its unpartitioned ones (``fixed``, uploads) in another (an asset has one
partitions definition, so the two kinds cannot share one multi-asset)::

    <source> ──> discover ──> validate ──> publish_<d1> ──> [<p>/<d1>] + its checks
                                      └──> publish_<d2> ──> [<p>/<d2>] + its checks

Step keys read ``<graph>.<step>``. Every graph of the code location is built from the same few op
definitions (:class:`PublishSteps`, issue 37 item 4): a step finds its pipeline and destination
from the assets and node it executes (:mod:`.routes`), takes the run's settings from the
run-level resource (:mod:`.config`) and its concurrency pool from its node's tags; so the code
location grows with the destinations (graphs, nodes, assets), not with op definitions and their
config schemas. The graphs are assembled from their parts (``GraphDefinition`` and
``AssetsDefinition.from_graph``), without tracing a composition function.

A graph of bundles can be subset: a run of one destination (or one partition) executes
``discover``, ``validate`` and that destination's ``publish_<d>`` only, and claims only that root's
pool. An upload pipeline's graph publishes each upload whole (every destination, then ``report``
records the outcome), so its destinations are materialized together.

Failures: ``publish_<d>`` hands its result on before it fails, and the publish executor runs a step
once its inputs exist (:data:`~distributor_dagster.publish.job.PUBLISH_EXECUTOR`), so one failing
destination fails only its own step. A bundle that fails validation fails only the source check
``bundle_valid`` of that bundle.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import dagster as dg
from dagster._core.definitions.composition import MappedInputPlaceholder
from dagster._core.types.dagster_type import Nothing as NothingType

from distributor_core.config import Pipeline
from distributor_dagster.checks import DIGEST_CHECK, check_specs
from distributor_dagster.names import CHECK_NAMES, REPORT_NODE, GraphNames, PipelineNames, shared_op
from distributor_dagster.partitions import partitions_def
from distributor_dagster.publish.config import moved_config, moved_field, resource_key
from distributor_dagster.publish.destination import (
    ASSET_OUTPUT,
    RESULT_OUTPUT,
    UPSTREAM_INPUT,
    publish_op,
    step_tags,
)
from distributor_dagster.publish.ops import discover_op, validate_op
from distributor_dagster.publish.report import report_op, report_outputs
from distributor_dagster.publish.routes import Routes
from distributor_dagster.site import Site
from distributor_dagster.versions import code_version

SOURCE_INPUT = "source"


@dataclass
class PublishSteps:
    """The op definitions of every publish graph of one code location, each built once (the
    ``report`` step once per number of destinations an upload pipeline has)."""

    site: Site
    routes: Routes
    _reports: dict[int, dg.OpDefinition] = field(default_factory=dict)

    def __post_init__(self) -> None:
        prefix = self.site.options.name_prefix
        self.settings_key = resource_key(prefix)
        self.checks = CHECK_NAMES + ((DIGEST_CHECK,) if self.site.options.digest_checks else ())
        self.discover = discover_op(self.site, self.routes, shared_op(prefix, "discover"), self.settings_key)
        self.validate = validate_op(self.site, self.routes, shared_op(prefix, "validate"), self.settings_key)
        self.publish = publish_op(self.site, self.routes, shared_op(prefix, "publish"), self.settings_key,
                                  with_result=False, checks=self.checks)
        self.publish_upload = publish_op(self.site, self.routes, shared_op(prefix, "publish_upload"),
                                         self.settings_key, with_result=True, checks=())
        self.moved = moved_field(prefix)

    def report(self, count: int) -> dg.OpDefinition:
        if count not in self._reports:
            name = shared_op(self.site.options.name_prefix, f"{REPORT_NODE}_{count}")
            self._reports[count] = report_op(self.site, self.routes, name, self.settings_key, count, self.checks)
        return self._reports[count]


def _spec_attributes(site: Site, pipeline: Pipeline, destination_id: str) -> dict[str, object]:
    """What a destination's translated spec says about its asset, as ``from_graph`` takes it."""
    spec = site.pipeline_specs(pipeline.id).destination(destination_id)
    return {
        "description": spec.description,
        "metadata": spec.metadata,
        "tags": spec.tags,  # the kinds too (dagster/kind/...)
        "owners": spec.owners,
        "group": spec.group_name,
        "automation": spec.automation_condition,
        "code_version": code_version(pipeline.destination(destination_id)),
        "deps": spec.deps,
    }


def graph_assets(
    site: Site, steps: PublishSteps, pipeline: Pipeline, pnames: PipelineNames, graph: GraphNames
) -> dg.AssetsDefinition:
    # the destinations' own partitions (the bundles they hold), mapped one to one onto the source's
    partitions = partitions_def(pnames.published) if graph.partitioned else None
    upload = pipeline.is_upload
    source_key = dg.AssetKey(list(pnames.source_key if graph.partitioned or not pnames.newest_key
                                  else pnames.newest_key))
    publish = steps.publish_upload if upload else steps.publish
    dependencies: dict[dg.NodeInvocation, dict[str, dg.DependencyDefinition | dg.MultiDependencyDefinition]] = {
        dg.NodeInvocation(steps.discover.name, "discover"): {},
        dg.NodeInvocation(steps.validate.name, "validate"): {"selection": dg.DependencyDefinition("discover")},
    }
    inputs = [dg.InputMapping(graph_input_name=SOURCE_INPUT, mapped_node_name="discover",
                              mapped_node_input_name=SOURCE_INPUT, dagster_type=NothingType)]
    outputs: list[dg.OutputMapping] = []
    keys_by_output: dict[str, dg.AssetKey] = {}
    keys_by_input = {SOURCE_INPUT: source_key}
    internal_deps: dict[str, set[dg.AssetKey]] = {}
    partition_mappings: dict[str, dg.PartitionMapping] = {}
    if partitions is not None:  # partition <bundle> of a destination is partition <bundle> of the source
        partition_mappings[SOURCE_INPUT] = dg.IdentityPartitionMapping()
    attributes: dict[str, dict[str, object]] = {}
    specs: list[dg.AssetCheckSpec] = []
    # a destination's upstream assets (its spec's deps) are Nothing inputs of the graph, each fanned in
    # to the publish steps of the destinations that name them: Dagster draws the edges from them
    upstream: dict[dg.AssetKey, str] = {}
    report_checks = report_outputs(len(graph.destination_ids), steps.checks) if upload else []
    for index, destination_id in enumerate(graph.destination_ids):
        destination = pipeline.destination(destination_id)
        dnames = pnames.destination(destination_id)
        node = dnames.publish_node
        out_name = node.removeprefix("publish_")
        asset_key = dg.AssetKey(list(dnames.asset_key))
        attributes[out_name] = _spec_attributes(site, pipeline, destination_id)
        keys_by_output[out_name] = asset_key
        outputs.append(dg.OutputMapping(out_name, node, ASSET_OUTPUT, dagster_type=NothingType))
        fed: list[str] = []
        for dep in attributes[out_name]["deps"]:  # type: ignore[attr-defined]
            if dep.asset_key == source_key:
                continue
            if dep.asset_key not in upstream:
                name = upstream[dep.asset_key] = f"upstream_{len(upstream)}"
                keys_by_input[name] = dep.asset_key
                if dep.partition_mapping is not None:
                    partition_mappings[name] = dep.partition_mapping
            fed.append(upstream[dep.asset_key])
        internal_deps[out_name] = {source_key, *(keys_by_input[name] for name in fed)}
        node_deps: dict[str, dg.DependencyDefinition | dg.MultiDependencyDefinition] = {
            "validated": dg.DependencyDefinition("validate")
        }
        if fed:
            node_deps[UPSTREAM_INPUT] = dg.MultiDependencyDefinition([MappedInputPlaceholder] * len(fed))
            inputs.extend(
                dg.InputMapping(graph_input_name=name, mapped_node_name=node, mapped_node_input_name=UPSTREAM_INPUT,
                                fan_in_index=position, dagster_type=NothingType)
                for position, name in enumerate(fed)
            )
        dependencies[dg.NodeInvocation(publish.name, node, tags=step_tags(pipeline, destination))] = node_deps
        dspecs = check_specs(dnames, site.options.blocking_checks, partitions, digest=site.options.digest_checks)
        specs.extend(dspecs)
        # an upload's destinations are checked by report, once the upload records are written
        checker, outputs_of = (REPORT_NODE, report_checks[index]) if upload else (node, {c: c for c in steps.checks})
        outputs.extend(dg.OutputMapping(spec.get_python_identifier(), checker, outputs_of[spec.name],
                                        dagster_type=NothingType) for spec in dspecs)
    node_defs = [steps.discover, steps.validate, publish]
    if upload:
        report = steps.report(len(graph.destination_ids))
        node_defs.append(report)
        dependencies[dg.NodeInvocation(report.name, REPORT_NODE)] = {
            "validated": dg.DependencyDefinition("validate"),
            "results": dg.MultiDependencyDefinition([
                dg.DependencyDefinition(pnames.destination(d).publish_node, RESULT_OUTPUT)
                for d in graph.destination_ids
            ]),
        }
    graph_def = dg.GraphDefinition(
        name=graph.node,
        node_defs=node_defs,
        dependencies=dependencies,
        input_mappings=inputs,
        output_mappings=outputs,
        config=moved_config(graph.node, site.options.name_prefix, steps.moved),
    )
    policy = dg.BackfillPolicy.multi_run(max_partitions_per_run=site.options.bundles_per_run) if partitions else None

    def each(attribute: str) -> dict:
        return {name: values[attribute] for name, values in attributes.items() if values[attribute] is not None}

    return dg.AssetsDefinition.from_graph(
        graph_def,
        keys_by_input_name=keys_by_input,
        keys_by_output_name=keys_by_output,
        internal_asset_deps=internal_deps,
        partitions_def=partitions,
        partition_mappings=partition_mappings or None,
        group_names_by_output_name=each("group"),
        descriptions_by_output_name=each("description"),
        metadata_by_output_name=each("metadata"),
        tags_by_output_name=each("tags"),
        owners_by_output_name=each("owners"),
        code_versions_by_output_name=each("code_version"),
        automation_conditions_by_output_name=each("automation"),
        backfill_policy=policy,
        can_subset=not upload,
        check_specs=specs,
    )


def publish_assets(
    site: Site, steps: PublishSteps, pipeline: Pipeline, pnames: PipelineNames
) -> list[dg.AssetsDefinition]:
    """The pipeline's destination assets: one graph-backed multi-asset per kind of destination."""
    return [graph_assets(site, steps, pipeline, pnames, graph) for graph in pnames.graphs]

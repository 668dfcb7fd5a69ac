"""One pipeline's destinations as a subsettable, graph-backed multi-asset (issue 12 item 2,
resolutions B1, H1).

    <source asset> ──> discover ──> validate ──> plan_<d> ──> execute_<d> ──> [<pipeline>/<d>]
                          │                                       └─ result ──> report ──> check_<d>
                          └───────────────────────────────────────────────────────────┘

The node is named after the pipeline (``<p>``): step keys read ``<p>.execute_<d>`` and the run
config is ``ops: {<p>: {config: {bundle_path, destination, upload_run_id, dry_run, force,
republish}}}`` (a config mapping onto ``discover``).

Failures. ``execute_<d>`` hands its result to ``report`` and then fails when a publication
failed; the publish executor (:data:`~distributor_dagster.publish.job.PUBLISH_EXECUTOR`) runs a
step once its inputs exist, so ``report`` and the checks still run and only the failing
destination's step is red. "Re-execute from failure" runs that ``execute_<d>`` again (which
publishes again), then ``report`` and the checks, with the other destinations' results taken
from the parent run.

Subsetting. Selecting destination assets keeps every step whose output leads to them, and,
because each ``execute_<d>`` also hands its report entries to ``report`` and ``report`` precedes
the checks, every ``plan_<d>``/``execute_<d>`` stays in the plan while checks are selected.
``discover`` reads the selected asset keys: ``plan_<d>``/``execute_<d>`` of an unselected
destination touch no storage and return an empty result (they never skip: under the publish
executor a skipped step would leave the fan-in of ``report`` waiting forever); the unselected
``execute_<d>`` still takes its pool slot for that moment. A checks-only run (no destination
selected) touches neither source nor destinations: ``discover`` and ``validate`` return empty,
``report`` reports nothing, and ``check_<d>`` runs.
"""

from __future__ import annotations

import dagster as dg

from distributor_core.config import Pipeline
from distributor_dagster.assets import destination_out
from distributor_dagster.checks import check_specs
from distributor_dagster.names import PipelineNames
from distributor_dagster.publish.config import PublishConfig
from distributor_dagster.publish.ops import (
    check_op,
    discover_op,
    execute_op,
    plan_op,
    report_op,
    validate_op,
)
from distributor_dagster.site import Site


def _config_mapping() -> dg.ConfigMapping:
    return dg.ConfigMapping(
        config_fn=lambda config: {"discover": {"config": config}},
        config_schema=PublishConfig.to_config_schema(),
    )


def publish_assets(site: Site, pipeline: Pipeline, names: PipelineNames) -> dg.AssetsDefinition:
    outs: dict[str, dg.AssetOut] = {}
    specs: list[dg.AssetCheckSpec] = []
    steps = []
    for destination in pipeline.destinations:
        dnames = names.destination(destination.id)
        out_name = dnames.execute_node.removeprefix("execute_")
        outs[out_name] = destination_out(site, pipeline, destination, dnames, names)
        dspecs = check_specs(dnames, site.options.blocking_checks)
        specs.extend(dspecs)
        check_outputs = {spec.name: spec.get_python_identifier() for spec in dspecs}
        steps.append((
            out_name,
            plan_op(site, pipeline, destination, dnames).alias(dnames.plan_node),
            execute_op(site, pipeline, destination, dnames, names).alias(dnames.execute_node),
            check_op(site, pipeline, destination, dnames, check_outputs).alias(dnames.check_node),
            check_outputs,
        ))
    discover = discover_op(site, pipeline, names).alias("discover")
    validate = validate_op(site, pipeline, names).alias("validate")
    report = report_op(site, pipeline, names).alias("report")

    def graph(source):  # type: ignore[no-untyped-def]
        selection = discover(source)
        bundles = validate(selection)
        returned = {}
        results = []
        for out_name, plan, execute, _, _ in steps:
            published, result = execute(selection, bundles, plan(selection, bundles))
            returned[out_name] = published
            results.append(result)
        done = report(selection, results)
        for _, _, _, check, check_outputs in steps:
            checked = check(done)
            if len(check_outputs) == 1:
                checked = (checked,)
            returned.update(zip(check_outputs.values(), checked, strict=True))
        return returned

    graph.__name__ = names.graph
    return dg.graph_multi_asset(
        name=names.graph,
        outs=outs,
        ins={"source": dg.AssetIn(key=dg.AssetKey(list(names.source_key)), dagster_type=dg.Nothing)},
        can_subset=True,
        check_specs=specs,
        group_name=names.group,
        config=_config_mapping(),
    )(graph)

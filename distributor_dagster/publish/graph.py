"""One pipeline's destinations as a subsettable, graph-backed multi-asset (issue 12 item 2,
resolutions B1, H1).

    <source asset> ─> discover ─> validate ─> plan_<d> ─> execute_<d> ─> materialize_<d> ─> [<p>/<d>]
                         │                                     └──────> report ─> check_<d> ─> checks of [<p>/<d>]
                         └───────────────────────────────────────────────────────────┘

The node is named after the pipeline (``<p>``): step keys read ``<p>.execute_<d>`` and the run
config is ``ops: {<p>: {config: {bundle_path, destination, upload_run_id, dry_run, force,
republish}}}`` (a config mapping onto ``discover``).

Steps. ``execute_<d>`` writes under the destination lock and claims the root's pool; it records a
failed publication in its result instead of failing, so ``report`` (which joins every
destination) always runs. ``materialize_<d>`` turns the result into asset events and fails when
the publication failed: a failing destination fails its own step, the others go on, the run
fails. The executor runs one step at a time, highest priority first: a destination's steps in
config order (so destinations sharing a root never overlap, B1), ``report`` and the checks last.

Subsetting. Selecting destination assets keeps every step whose output leads to them, and,
because each ``execute_<d>`` also hands its result to ``report`` and ``report`` precedes the
checks, every ``plan_<d>``/``execute_<d>`` stays in the plan while checks are selected.
``discover`` reads the selected asset keys: ``plan_<d>`` of an unselected destination produces
nothing, so its ``execute_<d>`` is skipped and never claims its pool (``materialize_<d>`` of an
unselected destination is not in the plan at all). A checks-only run (no destination selected)
touches neither source nor destinations: ``discover`` and ``validate`` return empty, ``report``
is skipped, and ``check_<d>`` (which also waits on ``discover``) runs.
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
    materialize_op,
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
            execute_op(site, pipeline, destination, dnames).alias(dnames.execute_node),
            materialize_op(site, pipeline, destination, dnames, names).alias(dnames.materialize_node),
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
        for out_name, plan, execute, materialize, _, _ in steps:
            result = execute(selection, bundles, plan(selection, bundles))
            returned[out_name] = materialize(selection, bundles, result)
            results.append(result)
        done = report(selection, results)
        for _, _, _, _, check, check_outputs in steps:
            checked = check([done, selection])
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

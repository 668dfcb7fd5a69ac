"""Assemble ``publish_<pipeline>`` (dagster.md §2, resolutions B1, E1).

Steps run in one process, highest priority first, so each destination is planned and executed
before the next one in config order (destinations sharing a root therefore never overlap within
a run). Every ``execute`` step also claims the concurrency pool of its destination root, which
serialises writers across runs. The executor lets ``report`` run once every ``execute`` step has
produced its result, also when some of them failed: a failing destination fails only its own step.
"""


import dagster as dg

from distributor_core.config import Pipeline
from distributor_dagster.names import PipelineNames
from distributor_dagster.publish.ops import discover_op, execute_op, plan_op, report_op, validate_op
from distributor_dagster.site import Site

#: In-process, and downstream steps run as soon as their inputs exist (an ``execute`` step yields
#: its result before it fails), so the run report is written even when a destination failed.
PUBLISH_EXECUTOR = dg.in_process_executor.configured(
    {"step_dependency_config": {"require_upstream_step_success": False}},
    name="distributor_publish_executor",
)


def publish_job(site: Site, pipeline: Pipeline, names: PipelineNames) -> dg.JobDefinition:
    discover = discover_op(site, pipeline, names)
    validate = validate_op(site, pipeline, names)
    report = report_op(site, pipeline, names)
    steps = []
    for destination in pipeline.destinations:
        dnames = names.destination(destination.id)
        steps.append(
            (
                plan_op(site, pipeline, destination, dnames).alias(dnames.plan_node),
                execute_op(site, pipeline, destination, dnames).alias(dnames.execute_node),
            )
        )

    def graph() -> None:
        selection = discover.alias("discover")()
        bundles = validate.alias("validate")(selection)
        results = [execute(selection, bundles, plan(selection, bundles)) for plan, execute in steps]
        report.alias("report")(selection, bundles, results)

    graph.__name__ = names.publish_job
    kind = "staged upload" if pipeline.is_upload else f"{pipeline.source.backend} source"
    return dg.job(
        name=names.publish_job,
        description=f"Publish bundles of pipeline {pipeline.id} ({kind}) to "
        + ", ".join(d.id for d in pipeline.destinations),
        tags={"distributor/pipeline": pipeline.id},
        executor_def=PUBLISH_EXECUTOR,
    )(graph)

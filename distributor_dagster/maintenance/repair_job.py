"""``reconcile_state_<pipeline>__<destination>``: ``load_state`` → ``reconcile_state``
(dagster.md §2, interfaces §2.6, resolutions B2, E1).

The repair op runs the core's ``reconcile_state``: a dry run unless ``apply: true`` (the CLI's
``reconcile-state`` applies by default; this job does not). Applying holds the destination lock
and runs in the root's concurrency pool; it only removes records of missing managed outputs.
"""


import dagster as dg

from distributor_core.app.reconcile import ReconcileStateError, reconcile_state
from distributor_core.config import Destination, Pipeline
from distributor_core.timefmt import now_seconds
from distributor_dagster.maintenance.config import RepairConfig
from distributor_dagster.maintenance.results import MAINTENANCE_ERRORS, Sections
from distributor_dagster.maintenance.state import StateSelection, load_state_op
from distributor_dagster.names import DestinationNames
from distributor_dagster.site import Site, holder, pool_name


def repair_job(site: Site, pipeline: Pipeline, destination: Destination, names: DestinationNames) -> dg.JobDefinition:
    job = names.reconcile_job
    load_state = load_state_op(
        site, pipeline, destination, name=f"{job}__load_state", config_node="reconcile_state",
        config_type=RepairConfig,
    )

    @dg.op(
        name=f"{job}__reconcile_state",
        description="Report missing managed outputs and unmanaged entries; with apply, remove the records "
        "of missing outputs from .distributor.json (files are never deleted or adopted).",
        pool=pool_name(destination.storage.root_key),
        tags={"distributor/destination": destination.id},
    )
    def repair(context: dg.OpExecutionContext, config: RepairConfig, state: StateSelection) -> dg.Output[dict]:
        dry_run = not config.apply
        now = now_seconds(site.options.clock)
        sections = Sections(all_bundles=state.all_bundles, dry_run=dry_run)
        for path in state.bundle_paths:
            if path in state.errors:
                sections.add(path, error=state.errors[path])
                continue
            try:
                report = reconcile_state(
                    site.config, pipeline_id=pipeline.id, destination_id=destination.id,
                    all_owners=config.all_owners, dry_run=dry_run, bundle_path=path, now=now,
                    environment=site.environment(), holder=holder(job, context.run_id, "reconcile_state"),
                )
            except ReconcileStateError as exc:
                sections.add(path, exc.report, str(exc))
                continue
            except MAINTENANCE_ERRORS as exc:
                sections.add(path, error=str(exc))
                continue
            sections.add(path, report)
        for line in sections.text_lines():
            context.log.info(line)
        if dry_run:
            context.log.info("dry run: state is not rewritten (set ops.reconcile_state.config.apply: true to repair)")
        return sections.output(sections.result(pipeline, destination))

    def graph() -> None:
        repair.alias("reconcile_state")(load_state.alias("load_state")())

    graph.__name__ = job
    return dg.job(
        name=job,
        description=f"Repair the state of {pipeline.id}/{destination.id}: drop records of missing managed outputs "
        "(dry run unless ops.reconcile_state.config.apply is true).",
        tags={"distributor/pipeline": pipeline.id, "distributor/destination": destination.id},
        executor_def=dg.in_process_executor,
    )(graph)

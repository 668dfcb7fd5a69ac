"""``prune_<pipeline>__<destination>``: ``load_state`` → ``plan_prune`` → ``apply_prune``
(dagster.md §2, interfaces §2.7, resolutions B2, E1).

``plan_prune`` plans with the core's ``prune(dry_run=True)`` at a time ``now`` it fixes;
``apply_prune`` (only with ``apply: true``) runs the core's ``prune`` with the same ``now``, under
the destination lock and in the root's concurrency pool, so it deletes what the plan listed
unless the state changed in between (then it says so). A failed delete keeps the partial
report and fails the step, like the CLI.
"""


from dataclasses import dataclass
from datetime import datetime

import dagster as dg

from distributor_core.app.prune import PruneError, prune
from distributor_core.config import Destination, Pipeline
from distributor_core.timefmt import now_seconds
from distributor_dagster.maintenance.config import PruneConfig
from distributor_dagster.maintenance.results import MAINTENANCE_ERRORS, Sections
from distributor_dagster.maintenance.state import StateSelection, load_state_op
from distributor_dagster.names import DestinationNames
from distributor_dagster.site import Site, holder, pool_name


@dataclass(frozen=True)
class PrunePlanned:
    apply: bool
    now: datetime
    sections: Sections


def _paths(report: object, name: str) -> list[str]:
    return [candidate.path for candidate in getattr(report, name, None) or []]


def prune_job(site: Site, pipeline: Pipeline, destination: Destination, names: DestinationNames) -> dg.JobDefinition:
    job = names.prune_job
    load_state = load_state_op(
        site, pipeline, destination, name=f"{job}__load_state", config_node="plan_prune", config_type=PruneConfig
    )

    @dg.op(
        name=f"{job}__plan_prune",
        description="Plan the prune with the destination's retention.prune policy; deletes nothing.",
        tags={"distributor/destination": destination.id},
    )
    def plan_prune(context: dg.OpExecutionContext, config: PruneConfig, state: StateSelection) -> PrunePlanned:
        now = now_seconds(site.options.clock)
        sections = Sections(all_bundles=state.all_bundles, dry_run=True)
        for path in state.bundle_paths:
            if path in state.errors:
                sections.add(path, error=state.errors[path])
                continue
            try:
                report = prune(
                    site.config, pipeline_id=pipeline.id, destination_id=destination.id, dry_run=True,
                    bundle_path=path, now=now, environment=site.environment(),
                )
            except MAINTENANCE_ERRORS as exc:
                sections.add(path, error=str(exc))
                continue
            sections.add(path, report)
        for line in sections.text_lines():
            context.log.info(line)
        if not state.all_bundles:
            sections.raise_if_failed()
        if not config.apply:
            context.log.info("dry run: nothing is deleted (set ops.plan_prune.config.apply: true to delete)")
        return PrunePlanned(apply=config.apply, now=now, sections=sections)

    @dg.op(
        name=f"{job}__apply_prune",
        description="With apply: delete the planned managed outputs under the destination lock and rewrite "
        "state for confirmed deletions. Without apply: report the plan.",
        pool=pool_name(destination.storage.root_key),
        tags={"distributor/destination": destination.id},
    )
    def apply_prune(context: dg.OpExecutionContext, planned: PrunePlanned) -> dg.Output[dict]:
        if not planned.apply:
            return planned.sections.output(planned.sections.result(pipeline, destination))
        applied = Sections(all_bundles=planned.sections.all_bundles, dry_run=False)
        for section in planned.sections.sections:
            if section.report is None:
                applied.add(section.bundle_path, error=section.error)
                continue
            try:
                report = prune(
                    site.config, pipeline_id=pipeline.id, destination_id=destination.id, dry_run=False,
                    bundle_path=section.bundle_path, now=planned.now, environment=site.environment(),
                    holder=holder(job, context.run_id, "apply_prune"),
                )
                error = ""
            except PruneError as exc:
                report, error = exc.report, str(exc)
            except MAINTENANCE_ERRORS as exc:
                report, error = None, str(exc)
            if report is not None and _paths(report, "planned_outputs") != _paths(section.report, "planned_outputs"):
                context.log.warning(
                    f"{section.bundle_path or '.'}: the state changed since plan_prune; pruned "
                    f"{_paths(report, 'planned_outputs')} instead of {_paths(section.report, 'planned_outputs')}"
                )
            applied.add(section.bundle_path, report, error)
        for line in applied.text_lines():
            context.log.info(line)
        return applied.output(applied.result(pipeline, destination))

    def graph() -> None:
        apply_prune.alias("apply_prune")(plan_prune.alias("plan_prune")(load_state.alias("load_state")()))

    graph.__name__ = job
    return dg.job(
        name=job,
        description=f"Prune managed outputs of {pipeline.id}/{destination.id} with its retention policy "
        "(dry run unless ops.plan_prune.config.apply is true).",
        tags={"distributor/pipeline": pipeline.id, "distributor/destination": destination.id},
        executor_def=dg.in_process_executor,
    )(graph)

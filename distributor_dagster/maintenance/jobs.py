"""The site-wide maintenance jobs ``prune``, ``reconcile_state`` and ``audit`` (issues 25, 28).

Three jobs serve every destination of the code location, instead of three per destination: a run
names its destinations in its config (:mod:`.selection`; none: every destination) and, per
destination, its bundle path (none: every bundle path that holds a ``.distributor.json``, what the
CLI's ``--all-bundles`` does). Each job is one step named after what it does. Per destination it
runs the core's function (the CLI's command, through the core's bundle loop), records what it
did on the destination asset and evaluates the destination's checks again (:mod:`.record`). The
destinations are worked on by the core's destination loop, the one ``reconcile-state --all`` and
``audit --all`` use (:func:`distributor_core.app.bundles.run_destinations`): this module only maps
each destination's section onto Dagster events.

``prune`` and ``reconcile_state`` are dry runs unless ``apply: true`` (the CLI's
``reconcile-state`` applies by default; these jobs do not); a write holds the destination lock and
the root's concurrency pool (:mod:`.slots`). ``reconcile_state`` takes the CLI's ``audit`` and
``adopt`` options. ``audit`` reads only. A destination that fails does not stop the others; the
step fails at the end, naming each, with the reports as output metadata.

(No ``from __future__ import annotations``: Dagster reads the config types from annotations.)
"""

from collections.abc import Callable, Iterator
from contextlib import nullcontext
from typing import Any

import dagster as dg

from distributor_core.app.audit import audit_destination, audit_error_message
from distributor_core.app.bundles import run_destinations
from distributor_core.app.prune import prune
from distributor_core.app.reconcile import reconcile_state
from distributor_core.app.refusal import Refusal
from distributor_core.app.repair_report import DISABLED_NOTE
from distributor_core.app.selection import Target
from distributor_core.timefmt import now_seconds
from distributor_dagster.failure import failure
from distributor_dagster.maintenance.config import AuditConfig, MaintenanceConfig, PruneConfig, RepairConfig
from distributor_dagster.maintenance.holding import end_partitions, no_longer_held
from distributor_dagster.maintenance.record import audit_digests, check_evaluations, observations, sections
from distributor_dagster.maintenance.selection import select_destinations
from distributor_dagster.maintenance.slots import root_slot
from distributor_dagster.partitions import bundle_key
from distributor_dagster.site import Site, holder, pool_name

#: The core's work on one destination: its report (a bundle set's, or one bundle path's).
Work = Callable[[Target], Any]


def _bundle(config: MaintenanceConfig) -> dict[str, Any]:
    if not config.bundle_path:
        return {"bundle_path": None, "all_bundles": True}
    return {"bundle_path": config.bundle_path, "all_bundles": False}


def _steps(
    context: dg.OpExecutionContext, site: Site, operation: str, config: MaintenanceConfig, work: Work, *,
    writes: bool, failed: Callable[[Any], str] | None = None,
) -> Iterator[Any]:
    """Run ``work`` on every selected destination through the core's destination loop (config
    order; one failing does not stop the others), recording each on its asset as it is done."""
    chosen = select_destinations(site, config.destinations)
    context.log.info(f"{operation}: {len(chosen)} destination(s): " + ", ".join(c.label for c in chosen[:20])
                     + (" ..." if len(chosen) > 20 else ""))

    def held(target: Target) -> Any:  # a write holds its root's concurrency pool
        with root_slot(context, pool_name(target.destination.storage.root_key)) if writes else nullcontext():
            return work(target)

    results: dict[str, Any] = {}
    errors: list[str] = []
    refusals: list[Refusal] = []
    for selected, section in zip(chosen, run_destinations([c.target for c in chosen], held), strict=True):
        report = section.report
        if report is not None:
            for line in report.text_lines():
                context.log.info(f"{selected.label}: {line}")
        error = section.error or (failed(report) if failed is not None and report is not None
                                  else section.error_text())
        if error and section.refusal is not None and error == section.error:
            error = f"{error} ({section.refusal.sentence()})"
        refusals += section.refusals
        if error:
            context.log.error(f"{selected.label}: {error}")
            errors.append(f"{selected.label}: {error}")
        yield from observations(operation, selected, report, dry_run=not writes) if report is not None else ()
        paths = [s.bundle_path for s in sections(report)] if report is not None else []
        if config.bundle_path and config.bundle_path not in paths:
            paths.append(config.bundle_path)
        if selected.names.partitioned and report is not None:  # the partitions follow the files
            published = site.pipeline_names(selected.pipeline.id).published
            gone = no_longer_held(context.instance, selected, published, report, every=not config.bundle_path)
            end_partitions(context, published, gone, selected.label)
            paths = [path for path in paths if bundle_key(path) not in set(gone)]
        digests = audit_digests(report) if operation == "audit" and report is not None else None
        yield from check_evaluations(context, site, selected, paths, digests)
        result = section.to_dict()
        if error:
            result["error"] = error
        results[selected.label] = result
    yield dg.Output(
        {"destinations": results},
        metadata={
            "destinations": dg.MetadataValue.int(len(chosen)),
            "failed": dg.MetadataValue.int(len(errors)),
            "report": dg.MetadataValue.json({"destinations": results}),
        },
    )
    if errors:
        raise failure(f"{operation} failed for {len(errors)} destination(s): " + "; ".join(errors), refusals,
                      metadata={"errors": dg.MetadataValue.json(errors)})


def prune_job(site: Site, name: str) -> dg.JobDefinition:
    @dg.op(name=op_name(name), description="Delete managed outputs the destinations' retention.prune policies select "
           "(a dry run unless apply is true); records what it deleted on each destination asset and evaluates "
           "its checks again.")
    def prune_step(context: dg.OpExecutionContext, config: PruneConfig):  # type: ignore[no-untyped-def]
        now = now_seconds(site.clock)

        def work(target: Target) -> Any:
            if not target.destination.retention.prune.enabled:
                context.log.info(DISABLED_NOTE.format(destination=f"{target.pipeline.id}/{target.destination.id}"))
            return prune(
                target.config, pipeline_id=target.pipeline.id, destination_id=target.destination.id,
                dry_run=not config.apply, now=now, environment=target.environment,
                holder=holder(name, context.run_id, name), **_bundle(config),
            )

        yield from _steps(context, site, "prune", config, work, writes=config.apply)
        if not config.apply:
            context.log.info(f"dry run: nothing is deleted (set ops.{name}.config.apply: true to delete)")

    return _job(site, name, prune_step, "Prune managed outputs by each destination's retention policy "
                f"(dry run unless ops.{name}.config.apply is true).")


def reconcile_job(site: Site, name: str) -> dg.JobDefinition:
    @dg.op(name=op_name(name), description="Repair destination state: drop records of outputs that are missing (and, "
           "with audit, whose bytes changed); with adopt, record matching unmanaged files. A dry run unless "
           "apply is true; records what it did on each destination asset and evaluates its checks again.")
    def reconcile_step(context: dg.OpExecutionContext, config: RepairConfig):  # type: ignore[no-untyped-def]
        now = now_seconds(site.clock)

        def work(target: Target) -> Any:
            return reconcile_state(
                target.config, pipeline_id=target.pipeline.id, destination_id=target.destination.id,
                all_owners=config.all_owners, dry_run=not config.apply, audit=config.audit, adopt=config.adopt,
                now=now, environment=target.environment, holder=holder(name, context.run_id, name),
                **_bundle(config),
            )

        yield from _steps(context, site, "reconcile_state", config, work, writes=config.apply)
        if not config.apply:
            context.log.info(f"dry run: state is not rewritten (set ops.{name}.config.apply: true to repair)")

    return _job(site, name, reconcile_step, "Repair destination state: drop records of missing outputs "
                f"(dry run unless ops.{name}.config.apply is true).")


def audit_job(site: Site, name: str) -> dg.JobDefinition:
    @dg.op(name=op_name(name), description="Re-read every managed output recorded in state and compare size and sha256 "
           "with the record; lists unmanaged entries. Read only; fails when anything is wrong.")
    def audit_step(context: dg.OpExecutionContext, config: AuditConfig):  # type: ignore[no-untyped-def]
        def work(target: Target) -> Any:
            return audit_destination(
                target.config, target.pipeline.id, target.destination.id, all_owners=config.all_owners,
                allow_unmanaged=config.allow_unmanaged, environment=target.environment, **_bundle(config),
            )

        yield from _steps(context, site, "audit", config, work, writes=False, failed=audit_error_message)

    return _job(site, name, audit_step, "Audit destinations: re-read every managed output and compare it with "
                "the size and sha256 its state records (read only; fails when anything is wrong).")


def op_name(job: str) -> str:
    """The op definition of a maintenance job's one step (the step itself is named like the job)."""
    return f"{job}__destinations"


def _job(site: Site, name: str, step: dg.OpDefinition, description: str) -> dg.JobDefinition:
    def graph() -> None:
        step.alias(name)()

    graph.__name__ = name
    return dg.job(name=name, description=description, executor_def=dg.in_process_executor)(graph)


def maintenance_jobs(site: Site) -> list[dg.JobDefinition]:
    """``prune``, ``reconcile_state`` and ``audit``, for every destination of the code location."""
    prefix = site.options.name_prefix
    return [prune_job(site, f"{prefix}prune"), reconcile_job(site, f"{prefix}reconcile_state"),
            audit_job(site, f"{prefix}audit")]

"""The publish job's ops. Every rule is the core's: discovery, validation, planning and the write
protocol run through :mod:`distributor_core.app.run`, exactly as ``distributor run`` does; the ops
only split that work into steps and turn reports into Dagster events.

(No ``from __future__ import annotations`` here: Dagster reads the config and input types from
the function annotations at definition time.)
"""

import dagster as dg

from distributor_core import paths as lp
from distributor_core.app.report import ActionReport, PipelineReport, RunReport
from distributor_core.app.run import (
    DestinationPool,
    RunOptions,
    load_and_validate,
    publish_bundles,
    selected_destinations,
)
from distributor_core.bundle import Manifest
from distributor_core.config import ConfigLookupError, Destination, Pipeline
from distributor_core.source import SourceBundle, discover_bundles
from distributor_core.storage.base import Storage
from distributor_core.storage.factory import open_source_storage
from distributor_core.storage.local import LocalStorage
from distributor_dagster.names import DestinationNames, PipelineNames
from distributor_dagster.publish import uploads
from distributor_dagster.publish.config import PublishConfig, UploadPublishConfig
from distributor_dagster.publish.events import asset_event
from distributor_dagster.publish.model import DestinationPlan, DestinationResult, Selection, detached
from distributor_dagster.site import Site, holder, pool_name

PRIORITY_TAG = "dagster/priority"


def open_source(site: Site, pipeline: Pipeline, selection: Selection, *, dry_run: bool) -> Storage:
    """The pipeline source, or the staged bundle directory of an upload."""
    if selection.source_root is not None:
        return LocalStorage(selection.source_root, display="<upload>")
    return open_source_storage(pipeline.source, site.environment(), dry_run=dry_run)


def _check_selection(pipeline: Pipeline, config: PublishConfig) -> None:
    options = RunOptions(pipeline_id=pipeline.id, destination_id=config.destination)
    try:
        targets = selected_destinations(pipeline, options)
    except ConfigLookupError as exc:
        raise dg.Failure(str(exc)) from None
    for flag in ("force", "republish"):
        if getattr(config, flag) and len(targets) != 1:
            raise dg.Failure(
                f"{flag} requires a run that targets exactly one destination "
                "(set ops.discover.config.destination)"
            )


def _fail_upload(
    site: Site, pipeline: Pipeline, selection: Selection, run_id: str, error: str, report: RunReport | None = None
) -> None:
    """Record a failed publication of an upload (never for dry runs, which leave the record alone)."""
    if selection.upload_run_id and not selection.dry_run:
        uploads.mark_finished(site.config, pipeline, selection.upload_run_id, run_id, report=report, error=error,
                              clock=site.options.clock)


def discover_op(site: Site, pipeline: Pipeline, names: PipelineNames) -> dg.OpDefinition:
    config_type = UploadPublishConfig if pipeline.is_upload else PublishConfig

    def discover(context: dg.OpExecutionContext, config: PublishConfig) -> Selection:
        _check_selection(pipeline, config)
        if pipeline.is_upload:
            if config.bundle_path not in (None, ""):
                raise dg.Failure("bundle_path is not used by http_upload pipelines; set upload_run_id")
            record = uploads.open_upload(pipeline, config.upload_run_id or "")
            selection = Selection(
                pipeline_id=pipeline.id,
                bundle_paths=("",),
                destination_id=config.destination,
                dry_run=config.dry_run,
                force=config.force,
                republish=config.republish,
                upload_run_id=record.run_id,
                source_root=uploads.bundle_root(pipeline, record.run_id),
            )
            if not config.dry_run:
                uploads.mark_running(pipeline, record.run_id, context.run_id, site.options.clock)
            context.log.info(
                f"upload {record.run_id} (seq {record.seq}, bundle id {record.bundle_id}, token {record.token_id})"
            )
            return selection
        if config.upload_run_id is not None:
            raise dg.Failure(f"upload_run_id is only used by http_upload pipelines; {pipeline.id} reads its source")
        if config.bundle_path is not None:
            paths = [config.bundle_path]
        else:
            with open_source_storage(pipeline.source, site.environment(), dry_run=config.dry_run) as source:
                paths = discover_bundles(source)
        context.log.info(
            f"{len(paths)} bundle(s) in {pipeline.source.backend} source: "
            + (", ".join(lp.display_path(p) for p in paths) or "none")
        )
        return Selection(
            pipeline_id=pipeline.id,
            bundle_paths=tuple(paths),
            destination_id=config.destination,
            dry_run=config.dry_run,
            force=config.force,
            republish=config.republish,
        )

    discover.__annotations__["config"] = config_type
    return dg.op(
        name=names.publish_op("discover"),
        description=f"Find the bundles of pipeline {pipeline.id} (or the selected bundle or upload).",
        tags={"distributor/pipeline": pipeline.id},
    )(discover)


def validate_op(site: Site, pipeline: Pipeline, names: PipelineNames) -> dg.OpDefinition:
    @dg.op(
        name=names.publish_op("validate"),
        description="Validate every selected bundle (manifest rules, each file's size and sha256); "
        "an invalid bundle fails the run before any destination is touched.",
    )
    def validate(context: dg.OpExecutionContext, selection: Selection) -> list[SourceBundle]:
        bundles: list[SourceBundle] = []
        invalid: list[str] = []
        try:
            with open_source(site, pipeline, selection, dry_run=selection.dry_run) as source:
                for path in selection.bundle_paths:
                    options = RunOptions(bundle_path=path, dry_run=selection.dry_run)
                    found, errors = load_and_validate(pipeline, source, options)
                    # only path and manifest travel to the next steps (pickled by the IO manager):
                    # source bytes never land in Dagster's storage; execute streams them again
                    bundles.extend(SourceBundle(bundle.path, bundle.manifest) for bundle in found)
                    invalid.extend(error for _, error in errors)
        except Exception as exc:
            _fail_upload(site, pipeline, selection, context.run_id, str(exc))
            raise
        if invalid:
            message = "; ".join(invalid)
            report = RunReport(dry_run=selection.dry_run, force=selection.force, republish=selection.republish)
            report.pipelines.append(PipelineReport(pipeline.id, pipeline.source.backend, len(selection.bundle_paths),
                                                   error=message))
            _fail_upload(site, pipeline, selection, context.run_id, message, report)
            raise dg.Failure(message)
        for bundle in bundles:
            context.log.info(
                f"valid: {lp.display_path(bundle.path)} id={bundle.manifest.id} digest={bundle.manifest.digest} "
                f"files={bundle.manifest.file_count}"
            )
        return bundles

    return validate


def _publish(
    site: Site,
    pipeline: Pipeline,
    destination: Destination,
    selection: Selection,
    bundles: list[SourceBundle],
    *,
    dry_run: bool,
    lock_holder: str,
) -> list[ActionReport]:
    """``distributor run``'s per-destination publication of ``bundles`` (a dry run only plans)."""
    report = RunReport(dry_run=dry_run, force=selection.force, republish=selection.republish)
    options = selection.run_options(destination.id, dry_run=dry_run, clock=site.options.clock, holder=lock_holder)
    pool = DestinationPool(site.environment(), dry_run=dry_run)
    try:
        with open_source(site, pipeline, selection, dry_run=dry_run) as source:
            publish_bundles(pipeline, source, bundles, pool=pool, options=options, report=report)
    finally:
        pool.close()
    return [detached(entry) for entry in report.actions]


def _describe(entry: ActionReport) -> str:
    where = f"bundle {lp.display_path(entry.bundle_path)} -> {lp.display_path(entry.destination_path)}"
    if not entry.failed:
        return f"{where}: {entry.action} ({entry.reason})"
    if entry.action is None or entry.error.startswith(f"{entry.action}:"):
        return f"{where}: {entry.error}"
    return f"{where}: {entry.action} failed: {entry.error}"


def _priority(pipeline: Pipeline, destination: Destination) -> str:
    # In-process steps run highest priority first: plan and execute of destination i before
    # those of destination i + 1, so destinations sharing a root run in config order (B1). The
    # first destination keeps Dagster's default priority 0, the next ones go below it.
    return str(-pipeline.destinations.index(destination))


def plan_op(site: Site, pipeline: Pipeline, destination: Destination, names: DestinationNames) -> dg.OpDefinition:
    @dg.op(
        name=names.plan_op,
        description=f"Plan destination {destination.id} ({destination.backend}) for every bundle; read-only.",
        out=dg.Out(DestinationPlan, is_required=False),
        tags={PRIORITY_TAG: _priority(pipeline, destination), "distributor/destination": destination.id},
    )
    def plan(context: dg.OpExecutionContext, selection: Selection, bundles: list[SourceBundle]):
        if not selection.selects(destination.id):
            context.log.info(f"destination {destination.id} is not selected by this run")
            return
        result = DestinationPlan(destination.id)
        try:
            step = holder(names.publish_job, context.run_id, names.plan_node)
            result.entries = _publish(site, pipeline, destination, selection, bundles, dry_run=True, lock_holder=step)
        except Exception as exc:  # the execute step plans again under the lock and reports it
            result.error = f"planning failed: {exc}"
            context.log.error(result.error)
        if not bundles:
            context.log.info("no bundles to publish")
        for entry in result.entries:
            (context.log.warning if entry.failed else context.log.info)("plan: " + _describe(entry))
        yield dg.Output(result)

    return plan


def _manifests(bundles: list[SourceBundle]) -> dict[str, Manifest]:
    return {bundle.path: bundle.manifest for bundle in bundles}


def execute_op(
    site: Site, pipeline: Pipeline, destination: Destination, names: DestinationNames
) -> dg.OpDefinition:
    asset_key = dg.AssetKey(list(names.asset_key))
    root = destination.storage.root_path

    @dg.op(
        name=names.execute_op,
        description=f"Publish to destination {destination.id} under its lock: re-plan, then write "
        "(outputs first, state last). Materializes the destination asset for executed write actions.",
        pool=pool_name(destination.storage.root_key),
        tags={PRIORITY_TAG: _priority(pipeline, destination), "distributor/destination": destination.id},
    )
    def execute(
        context: dg.OpExecutionContext, selection: Selection, bundles: list[SourceBundle], plan: DestinationPlan
    ):
        result = DestinationResult(destination.id)
        planned = {entry.bundle_path: entry for entry in plan.entries}
        try:
            if selection.dry_run:
                result.entries = list(plan.entries)
                result.error = plan.error
            else:
                step = holder(names.publish_job, context.run_id, names.execute_node)
                result.entries = _publish(
                    site, pipeline, destination, selection, bundles, dry_run=False, lock_holder=step
                )
        except Exception as exc:
            result.error = f"{pipeline.id}/{destination.id}: {exc}"
        manifests = _manifests(bundles)
        for entry in result.entries:
            first = planned.get(entry.bundle_path)
            if not selection.dry_run and first is not None and first.action and first.action != entry.action:
                entry.planned_action = first.action
                context.log.warning(
                    f"bundle {lp.display_path(entry.bundle_path)}: planned {first.action}, "
                    f"executed {entry.action or 'nothing'} after re-planning under the lock"
                )
            (context.log.error if entry.failed else context.log.info)(
                ("dry run: " if selection.dry_run else "") + _describe(entry)
            )
            context.log_event(
                asset_event(
                    entry, asset_key, manifests.get(entry.bundle_path), dry_run=selection.dry_run,
                    destination_root=root,
                )
            )
        yield dg.Output(result)
        if result.failed:
            failures = [
                f"{e.pipeline_id}/{e.destination_id} [{lp.display_path(e.bundle_path)}]: {e.error}"
                for e in result.entries
                if e.failed
            ]
            if result.error:
                failures.append(result.error)
            raise dg.Failure(
                description=f"{len(failures)} failure(s): " + "; ".join(failures),
                metadata={"destination_id": destination.id},
            )

    return execute


def report_op(site: Site, pipeline: Pipeline, names: PipelineNames) -> dg.OpDefinition:
    order = {destination.id: index for index, destination in enumerate(pipeline.destinations)}

    @dg.op(
        name=names.publish_op("report"),
        description="The run report, as `distributor run` prints it; an upload's record gets it.",
    )
    def report(
        context: dg.OpExecutionContext,
        selection: Selection,
        bundles: list[SourceBundle],
        results: list[DestinationResult],
    ) -> dg.Output[dict]:
        run_report = RunReport(dry_run=selection.dry_run, force=selection.force, republish=selection.republish)
        run_report.pipelines.append(PipelineReport(pipeline.id, pipeline.source.backend, len(bundles)))
        entries = [entry for result in results for entry in result.entries]
        run_report.actions = sorted(entries, key=lambda e: (e.bundle_path, order.get(e.destination_id, 0)))
        step_errors = [result.error for result in results if result.error]
        for line in run_report.text_lines():
            context.log.info(line)
        error = "; ".join(filter(None, [run_report.error_message(), *step_errors]))
        if error:
            context.log.error(error)
        if selection.upload_run_id and not selection.dry_run:
            record = uploads.mark_finished(
                site.config, pipeline, selection.upload_run_id, context.run_id, report=run_report,
                error="; ".join(step_errors), clock=site.options.clock,
            )
            context.log.info(f"upload {record.run_id}: {record.status}")
        result = run_report.to_dict()
        return dg.Output(
            result,
            metadata={
                "actions": dg.MetadataValue.int(len(run_report.actions)),
                "failed": dg.MetadataValue.int(len(run_report.failed_actions)),
                "summary": dg.MetadataValue.json(result["summary"]),
                "report": dg.MetadataValue.json(result),
            },
        )

    return report

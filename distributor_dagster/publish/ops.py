"""The steps of a pipeline's publish graph. Every rule is the core's: target selection,
discovery, validation, planning and the write protocol run through
:mod:`distributor_core.app.publication` and :mod:`distributor_core.app.run`, exactly as
``distributor run`` does; the ops only split that work into steps and turn reports into events.

(No ``from __future__ import annotations`` here: Dagster reads the config and input types from
the function annotations at definition time.)
"""

import warnings

import dagster as dg

from distributor_core import paths as lp
from distributor_core.app.publication import (
    PipelineOutcome,
    TargetError,
    execute_destination,
    plan_destination,
    run_report,
    select_targets,
)
from distributor_core.app.report import ActionReport, RunReport
from distributor_core.app.run import load_and_validate
from distributor_core.app.run_options import DestinationPool, RunOptions
from distributor_core.app.setup import SetupError, check_source_root, resolve_credentials
from distributor_core.config import ConfigLookupError, Destination, Pipeline
from distributor_core.source import SourceBundle, discover_bundles
from distributor_core.storage.base import Storage
from distributor_core.storage.factory import open_source_storage
from distributor_core.storage.local import LocalStorage
from distributor_dagster.checks import evaluate_checks
from distributor_dagster.describe import root_uri
from distributor_dagster.names import DestinationNames, PipelineNames
from distributor_dagster.publish import uploads
from distributor_dagster.publish.config import PublishConfig
from distributor_dagster.publish.events import asset_events
from distributor_dagster.publish.model import DestinationPlan, DestinationResult, Selection, detached
from distributor_dagster.site import Site, holder, pool_name
from distributor_dagster.sources import SourceView, read_bundles

PRIORITY_TAG = "dagster/priority"
PIPELINE_TAG = "distributor/pipeline"
UPLOAD_TAG = "distributor/upload_run_id"
#: How a Dagster user restricts a run to one destination (the hint of the B3 refusal).
TARGET_HINT = "materialize only that destination asset, or set destination in the run config"


def open_source(site: Site, pipeline: Pipeline, selection: Selection, *, dry_run: bool) -> Storage:
    """The pipeline source, or the staged bundle directory of an upload."""
    if selection.source_root is not None:
        return LocalStorage(selection.source_root, display="<upload>")
    return open_source_storage(pipeline.source, site.environment(), dry_run=dry_run)


def _tag_run(context: dg.OpExecutionContext, tags: dict[str, str]) -> None:
    """Add run tags the run was launched without (runs of the implicit asset job, runs launched
    by hand), so runs stay findable by pipeline and upload."""
    missing = {key: value for key, value in tags.items() if context.run.tags.get(key) != value}
    if missing:
        context.instance.add_run_tags(context.run_id, missing)


def _tag_upload(context: dg.OpExecutionContext, selection: Selection) -> None:
    """Tag the run with the upload it publishes. ``discover`` does it first; ``execute`` and
    ``report`` again, for re-executions from failure, which do not run ``discover`` again."""
    if selection.upload_run_id:
        _tag_run(context, {PIPELINE_TAG: selection.pipeline_id, UPLOAD_TAG: selection.upload_run_id})


def _targets(context: dg.OpExecutionContext, pipeline: Pipeline, pnames: PipelineNames,
             config: PublishConfig) -> list[Destination]:
    """The selected destination assets, restricted by ``destination``, with the B3 rule."""
    selected = context.selected_asset_keys
    chosen = [
        d.id for d in pipeline.destinations
        if dg.AssetKey(list(pnames.destination(d.id).asset_key)) in selected
    ]
    try:
        if config.destination is not None:
            pipeline.destination(config.destination)
            if config.destination not in chosen:
                raise dg.Failure(
                    f"destination {config.destination} is not among the destination assets selected for this run"
                )
            chosen = [config.destination]
        return select_targets(pipeline, chosen, force=config.force, republish=config.republish)
    except ConfigLookupError as exc:
        raise dg.Failure(str(exc)) from None
    except TargetError as exc:
        raise dg.Failure(exc.describe(exc.flag, TARGET_HINT)) from None


def _fail_upload(
    site: Site, pipeline: Pipeline, selection: Selection, run_id: str, error: str, report: RunReport | None = None
) -> None:
    """Record a failed publication of an upload (never for dry runs, which leave the record alone)."""
    if selection.upload_run_id and not selection.dry_run:
        uploads.mark_finished(site.config, pipeline, selection.upload_run_id, run_id, report=report, error=error,
                              clock=site.options.clock)


def _check_root(pipeline: Pipeline, source: Storage) -> None:
    try:
        check_source_root(pipeline, source)
    except SetupError as exc:
        raise dg.Failure(str(exc)) from None


def discover_op(site: Site, pipeline: Pipeline, names: PipelineNames) -> dg.OpDefinition:
    source_key = dg.AssetKey(list(names.source_key))

    def discover(context: dg.OpExecutionContext, config: PublishConfig) -> Selection:
        targets = _targets(context, pipeline, names, config)
        flags = {"dry_run": config.dry_run, "force": config.force, "republish": config.republish}
        if not targets:
            context.log.info("no destination asset is selected: this run only evaluates asset checks")
            return Selection(pipeline_id=pipeline.id, bundle_paths=(), **flags)
        destinations = tuple(d.id for d in targets)
        _tag_run(context, {PIPELINE_TAG: pipeline.id})
        context.log.info("destinations: " + ", ".join(destinations))
        if pipeline.is_upload:
            if config.bundle_path not in (None, ""):
                raise dg.Failure("bundle_path is not used by http_upload pipelines; set upload_run_id")
            if not config.upload_run_id:
                raise dg.Failure(
                    f"upload_run_id is required to publish pipeline {pipeline.id} (an http_upload pipeline): "
                    f"the {names.uploads_sensor} sensor sets it for every accepted upload"
                )
            record = uploads.open_upload(pipeline, config.upload_run_id)
            _tag_run(context, {UPLOAD_TAG: record.run_id})
            if not config.dry_run:
                uploads.mark_running(pipeline, record.run_id, context.run_id, site.options.clock)
            context.log.info(
                f"upload {record.run_id} (seq {record.seq}, bundle id {record.bundle_id}, token {record.token_id})"
            )
            return Selection(
                pipeline_id=pipeline.id, bundle_paths=("",), destinations=destinations,
                upload_run_id=record.run_id, source_root=uploads.bundle_root(pipeline, record.run_id), **flags,
            )
        if config.upload_run_id is not None:
            raise dg.Failure(f"upload_run_id is only used by http_upload pipelines; {pipeline.id} reads its source")
        try:  # setup failures (resolutions G3) fail this step, before any destination is planned
            resolve_credentials([(pipeline, targets)], site.environment())
        except SetupError as exc:
            raise dg.Failure(str(exc)) from None
        if config.bundle_path is not None:
            paths = [config.bundle_path]
            with open_source_storage(pipeline.source, site.environment(), dry_run=config.dry_run) as source:
                _check_root(pipeline, source)
        else:
            with open_source_storage(pipeline.source, site.environment(), dry_run=config.dry_run) as source:
                _check_root(pipeline, source)
                paths = discover_bundles(source)
                # the whole source was listed: report what it holds (manifests only, no hashing)
                seen, _ = read_bundles(source, paths)
            view = SourceView.of(seen)
            context.log_event(view.observation(source_key))
            context.log.info(f"source: {view.description()}")
        context.log.info(
            f"{len(paths)} bundle(s) in {pipeline.source.backend} source: "
            + (", ".join(lp.display_path(p) for p in paths) or "none")
        )
        return Selection(pipeline_id=pipeline.id, bundle_paths=tuple(paths), destinations=destinations, **flags)

    discover.__annotations__["config"] = PublishConfig
    return dg.op(
        name=names.publish_op("discover"),
        description=f"Find the bundles of pipeline {pipeline.id} (or the selected bundle or upload) and the "
        "destinations this run publishes to (the selected destination assets).",
        ins={"source": dg.In(dg.Nothing)},
        tags={PIPELINE_TAG: pipeline.id},
    )(discover)


def validate_op(site: Site, pipeline: Pipeline, names: PipelineNames) -> dg.OpDefinition:
    @dg.op(
        name=names.publish_op("validate"),
        description="Validate every selected bundle (manifest rules, each file's size and sha256); "
        "an invalid bundle fails the run before any destination is touched.",
    )
    def validate(context: dg.OpExecutionContext, selection: Selection) -> list[SourceBundle]:
        if not selection.destinations:
            return []
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
            options = RunOptions(dry_run=selection.dry_run, force=selection.force, republish=selection.republish)
            report = run_report([PipelineOutcome(pipeline, len(selection.bundle_paths), error=message)], [], options)
            _fail_upload(site, pipeline, selection, context.run_id, message, report)
            raise dg.Failure(message)
        for bundle in bundles:
            context.log.info(
                f"valid: {lp.display_path(bundle.path)} id={bundle.manifest.id} digest={bundle.manifest.digest} "
                f"files={bundle.manifest.file_count}"
            )
        return bundles

    return validate


def _steps(
    site: Site,
    pipeline: Pipeline,
    destination: Destination,
    selection: Selection,
    bundles: list[SourceBundle],
    *,
    lock_holder: str,
    planned: DestinationPlan | None = None,
) -> list[ActionReport]:
    """One destination's plan (``planned`` is None) or publication, from a source opened once."""
    dry_run = selection.dry_run or planned is None
    options = selection.run_options(destination.id, dry_run=dry_run, clock=site.options.clock, holder=lock_holder)
    with DestinationPool(site.environment(), dry_run=dry_run) as pool, \
            open_source(site, pipeline, selection, dry_run=dry_run) as source:
        if planned is None:
            entries = plan_destination(pipeline, destination, source, bundles, pool=pool, options=options)
        else:
            entries = execute_destination(
                pipeline, destination, source, bundles, pool=pool, options=options, planned=planned.entries
            )
    return [detached(entry) for entry in entries]


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
        description=f"Plan destination {destination.id} ({destination.backend}) for every bundle; read-only. "
        "An empty plan when the run does not publish to this destination.",
        out=dg.Out(DestinationPlan),
        tags={PRIORITY_TAG: _priority(pipeline, destination), "distributor/destination": destination.id},
    )
    def plan(context: dg.OpExecutionContext, selection: Selection, bundles: list[SourceBundle]) -> DestinationPlan:
        result = DestinationPlan(destination.id)
        if not selection.selects(destination.id):
            # never skip: under the publish executor a skipped step would leave the fan-in of
            # ``report`` waiting for its result (see PUBLISH_EXECUTOR)
            context.log.info(f"destination {destination.id} is not selected by this run")
            return result
        try:
            step = holder(names.publish_job, context.run_id, names.plan_node)
            result.entries = _steps(site, pipeline, destination, selection, bundles, lock_holder=step)
        except Exception as exc:  # the execute step plans again under the lock and reports it
            result.error = f"planning failed: {exc}"
            context.log.error(result.error)
        if not bundles:
            context.log.info("no bundles to publish")
        for entry in result.entries:
            (context.log.warning if entry.failed else context.log.info)("plan: " + _describe(entry))
        return result

    return plan


ASSET_OUTPUT = "published"
RESULT_OUTPUT = "result"


def execute_op(
    site: Site, pipeline: Pipeline, destination: Destination, names: DestinationNames, pnames: PipelineNames
) -> dg.OpDefinition:
    asset_key = dg.AssetKey(list(names.asset_key))
    source_key = dg.AssetKey(list(pnames.source_key))
    uri = root_uri(destination.storage)

    @dg.op(
        name=names.execute_op,
        description=f"Publish to destination {destination.id} under its lock: re-plan, then write "
        "(outputs first, state last). Materializes the destination asset for executed write actions, "
        "records skips as observations, and fails when a publication failed (after handing its result "
        "to report). Claims the concurrency pool of the destination root.",
        pool=pool_name(destination.storage.root_key),
        out={
            ASSET_OUTPUT: dg.Out(dg.Nothing, is_required=False),
            RESULT_OUTPUT: dg.Out(DestinationResult, is_required=False),
        },
        tags={PRIORITY_TAG: _priority(pipeline, destination), "distributor/destination": destination.id},
    )
    def execute(
        context: dg.OpExecutionContext, selection: Selection, bundles: list[SourceBundle], plan: DestinationPlan
    ):
        result = DestinationResult(destination.id)
        if not selection.selects(destination.id):  # nothing to do, but report waits for the result
            if RESULT_OUTPUT in context.selected_output_names:
                yield dg.Output(result, RESULT_OUTPUT)
            return
        _tag_upload(context, selection)
        try:
            if selection.dry_run:
                result.entries = list(plan.entries)
                result.error = plan.error
            else:
                step = holder(names.publish_job, context.run_id, names.execute_node)
                result.entries = _steps(
                    site, pipeline, destination, selection, bundles, lock_holder=step, planned=plan
                )
        except Exception as exc:  # the destination fails, report and the other destinations go on
            result.error = f"{pipeline.id}/{destination.id}: {exc}"
            context.log.error(result.error)
        for entry in result.entries:
            if entry.planned_action is not None:
                context.log.warning(
                    f"bundle {lp.display_path(entry.bundle_path)}: planned {entry.planned_action}, "
                    f"executed {entry.action or 'nothing'} after re-planning under the lock"
                )
            (context.log.error if entry.failed else context.log.info)(
                ("dry run: " if selection.dry_run else "") + _describe(entry)
            )
        events = asset_events(
            result.entries, {bundle.path: bundle.manifest for bundle in bundles}, asset_key=asset_key,
            source_key=source_key, dry_run=selection.dry_run, root_uri=uri,
        )
        for event in events.logged:
            context.log_event(event)
        if events.final is not None and ASSET_OUTPUT in context.selected_output_names:
            metadata, data_version, tags = events.final
            with warnings.catch_warnings():  # Output's data_version is marked beta
                warnings.simplefilter("ignore", dg.BetaWarning)
                output = dg.Output(None, ASSET_OUTPUT, metadata=metadata, data_version=data_version, tags=tags)
            yield output
        if RESULT_OUTPUT in context.selected_output_names:
            yield dg.Output(result, RESULT_OUTPUT)
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
    @dg.op(
        name=names.publish_op("report"),
        description="The run report, as `distributor run` prints it, built once for every destination of the "
        "run; an upload's record gets it.",
    )
    def report(
        context: dg.OpExecutionContext,
        selection: Selection,
        results: list[DestinationResult],
    ) -> dg.Output[dict]:
        options = RunOptions(dry_run=selection.dry_run, force=selection.force, republish=selection.republish)
        entries = [entry for result in results for entry in result.entries]
        run = run_report([PipelineOutcome(pipeline, len(selection.bundle_paths))], entries, options)
        step_errors = [result.error for result in results if result.error]
        _tag_upload(context, selection)
        if not selection.destinations:
            context.log.info("no destination was published by this run (it only evaluates asset checks)")
        else:
            for line in run.text_lines():
                context.log.info(line)
        error = "; ".join(filter(None, [run.error_message(), *step_errors]))
        if error:
            context.log.error(error)
        if selection.upload_run_id and not selection.dry_run:
            record = uploads.mark_finished(
                site.config, pipeline, selection.upload_run_id, context.run_id, report=run,
                error="; ".join(step_errors), clock=site.options.clock,
            )
            context.log.info(f"upload {record.run_id}: {record.status}")
        result = run.to_dict()
        return dg.Output(
            result,
            metadata={
                "actions": dg.MetadataValue.int(len(run.actions)),
                "failed": dg.MetadataValue.int(len(run.failed_actions)),
                "summary": dg.MetadataValue.json(result["summary"]),
                "report": dg.MetadataValue.json(result),
            },
        )

    return report


def check_op(
    site: Site, pipeline: Pipeline, destination: Destination, names: DestinationNames,
    outputs: dict[str, str],
) -> dg.OpDefinition:
    """The destination's three checks; ``outputs`` maps each check name to its graph output name."""
    key = dg.AssetKey(list(names.asset_key))

    @dg.op(
        name=names.check_op,
        description=f"Checks of {pipeline.id}/{destination.id} (a read-only reconcile-state dry run of every "
        "bundle path the asset has materialized), after the run's publications.",
        ins={"after": dg.In(dg.Nothing)},
        out={output: dg.Out(dg.Nothing, is_required=False) for output in outputs.values()},
    )
    def check(context: dg.OpExecutionContext):
        selected = context.selected_output_names
        if not any(output in selected for output in outputs.values()):
            return
        results = evaluate_checks(site, pipeline, destination, context.instance, key, context.log)
        for name, output in outputs.items():
            if output in selected:
                yield results[name]

    return check

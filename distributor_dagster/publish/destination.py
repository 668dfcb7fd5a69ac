"""``publish_<d>``: one destination's step of a publish graph (issue 24 items 2–6).

It plans every bundle the destination gets (without the lock), publishes it under the
destination lock (which re-plans and records both actions when they differ, resolutions B1),
turns the outcome into asset events (:mod:`.events`) and then evaluates the destination's checks
on the paths the run targeted (:mod:`distributor_dagster.checks`). It claims the concurrency pool
of its destination root (its node's tag ``dagster/concurrency_key``: one op definition serves
every destination of the code location), so a run of one destination (or one partition) holds
that root only.

A partitioned destination logs one event per bundle partition and one check evaluation per
partition; an unpartitioned one yields its materialization (one per run) and check results as
step outputs. The step fails, after recording everything, when a publication failed or a
blocking check failed.

(No ``from __future__ import annotations``: Dagster reads the input types from annotations.)
"""

import warnings

import dagster as dg

from distributor_core import paths as lp
from distributor_core.app.publication import PipelineOutcome, publish_destination, run_report
from distributor_core.app.report import ActionReport
from distributor_core.app.run_options import DestinationPool, RunOptions
from distributor_core.config import Destination, Pipeline
from distributor_core.source import SourceBundle
from distributor_dagster.audit import digest_outcome
from distributor_dagster.checks import (
    DIGEST_CHECK,
    Outcome,
    checked_paths,
    evaluate_paths,
    failed_blocking,
    latest_materialization,
    not_published,
    run_partition_keys,
)
from distributor_dagster.failure import failure
from distributor_dagster.names import DestinationNames
from distributor_dagster.partitions import bundle_key
from distributor_dagster.publish import uploads
from distributor_dagster.publish.events import Provenance, destination_events, partition_events
from distributor_dagster.publish.model import DestinationResult, Item, Validated, detached
from distributor_dagster.publish.ops import checked_scope, open_item_source, tag_uploads
from distributor_dagster.publish.routes import Routes
from distributor_dagster.site import Site, holder, pool_name
from distributor_dagster.versions import code_version, input_pointer

PRIORITY_TAG = "dagster/priority"
DESTINATION_TAG = "distributor/destination"
#: A node's concurrency pool (Dagster reads it from the step's tags when its op definition has none).
POOL_TAG = "dagster/concurrency_key"
ASSET_OUTPUT = "published"
RESULT_OUTPUT = "result"
#: The fan-in input of a destination's upstream assets (its spec's deps).
UPSTREAM_INPUT = "upstream"


def _describe(item: Item, entry: ActionReport) -> str:
    where = f"{item.label} -> {lp.display_path(entry.destination_path)}"
    if not entry.failed:
        return f"{where}: {entry.action} ({entry.reason})"
    if entry.action is None or entry.error.startswith(f"{entry.action}:"):
        return f"{where}: {entry.error}"
    return f"{where}: {entry.action} failed: {entry.error}"


def _priority(pipeline: Pipeline, destination: Destination) -> str:
    # In-process steps run highest priority first: destination i before destination i + 1, so
    # destinations sharing a root run in config order within a run (B1). The first destination
    # keeps Dagster's default priority 0, the next ones go below it.
    return str(-pipeline.destinations.index(destination))


def step_tags(pipeline: Pipeline, destination: Destination) -> dict[str, str]:
    """The tags of a destination's ``publish_<d>`` node: its priority, its destination and the
    concurrency pool of its root (``dagster/concurrency_key``: the op definition is shared by every
    destination, so the pool is the node's, which Dagster's run queue and executor claim alike)."""
    return {
        PRIORITY_TAG: _priority(pipeline, destination),
        DESTINATION_TAG: destination.id,
        POOL_TAG: pool_name(destination.storage.root_key),
    }


def publish_entries(
    site: Site, pipeline: Pipeline, destination: Destination, validated: Validated, *, lock_holder: str
) -> list[tuple[Item, ActionReport]]:
    """The publish stage of the core for this destination (plan, then publish under the lock, or only
    plan for a dry run: :func:`~distributor_core.app.publication.publish_destination`), once per
    source: uploads each have their own staged source, bundles share the pipeline's."""
    selection = validated.selection
    by_source: dict[str | None, list] = {}
    for valid in validated.valid:  # uploads each have their own staged source; bundles share one
        by_source.setdefault(valid.item.source_root, []).append(valid)
    entries: list[tuple[Item, ActionReport]] = []
    options = selection.run_options(destination.id, dry_run=selection.dry_run, clock=site.clock,
                                    holder=lock_holder)
    with DestinationPool(site.environment(), dry_run=selection.dry_run) as pool, \
            uploads.item_store(pipeline, site.environment()) as store:
        for group in by_source.values():
            items = {valid.item.bundle_path: valid.item for valid in group}
            bundles = [SourceBundle(valid.item.bundle_path, valid.manifest) for valid in group]
            with open_item_source(site, pipeline, group[0].item, dry_run=selection.dry_run, store=store) as source:
                done = publish_destination(pipeline, destination, source, bundles, pool=pool, options=options)
            entries.extend((items[entry.bundle_path], detached(entry)) for entry in done)
    return entries


def publish_op(
    site: Site, routes: Routes, name: str, settings_key: str, *, with_result: bool, checks: tuple[str, ...],
) -> dg.OpDefinition:
    """The ``publish_<d>`` step of every destination of the code location (one definition for the
    destinations of ``local``/``ssh``/``s3`` pipelines, one for those of ``http_upload`` ones). Its
    outputs: ``published`` (the destination asset), one per check in ``checks`` (named after the
    check), and with ``with_result`` the ``result`` an upload graph's ``report`` step collects.
    ``upstream`` takes the destination's upstream assets (its deps), fanned in by its graph."""
    outs = {ASSET_OUTPUT: dg.Out(dg.Nothing, is_required=False)}
    if with_result:
        outs[RESULT_OUTPUT] = dg.Out(DestinationResult, is_required=False)
    outs.update({check: dg.Out(dg.Nothing, is_required=False) for check in checks})
    check_outputs = {check: check for check in checks}

    @dg.op(
        name=name,
        description="Publish the run's bundles to this step's destination under its lock: plan, re-plan under "
        "the lock, write (outputs first, state last); then evaluate its checks on the paths the run targeted. "
        "Claims the concurrency pool of the destination root (tag dagster/concurrency_key).",
        ins={"validated": dg.In(Validated), UPSTREAM_INPUT: dg.In(dg.Nothing)},
        out=outs,
        required_resource_keys={settings_key},
    )
    def publish(context: dg.OpExecutionContext, validated: Validated):  # type: ignore[no-untyped-def]
        route = routes.destination(context)
        pipeline, destination, names, pnames = route.pipeline, route.destination, route.names, route.pipeline_names
        asset_key = route.asset_key
        if names.partitioned:
            input_key = dg.AssetKey(list(pnames.source_key))
        else:
            input_key = dg.AssetKey(list(pnames.newest_key or pnames.source_key))
        checked_scope(context, settings_key, validated.selection)
        if pipeline.is_upload:  # a re-execution publishes only the uploads not yet published
            validated = uploads.still_to_publish(context, site.config, pipeline, validated, site.clock,
                                                 env=site.environment())
        selection = validated.selection
        selected = context.selected_output_names
        result = DestinationResult(destination.id)
        publishing = selection.selects(destination.id) and ASSET_OUTPUT in selected
        if publishing:
            tag_uploads(context, selection)
            step = holder(context.job_name, context.run_id, names.publish_node)
            try:
                entries = publish_entries(site, pipeline, destination, validated, lock_holder=step)
                result = DestinationResult(destination.id, tuple(entries))
            except Exception as exc:  # the destination fails; the other destinations go on
                result = DestinationResult(destination.id, error=f"{pipeline.id}/{destination.id}: {exc}")
                context.log.error(result.error)
            if not validated.valid:
                context.log.info("no valid bundle to publish")
            # what `distributor run` prints for these publications
            entries = [entry for _, entry in result.entries]
            options = RunOptions(dry_run=selection.dry_run, force=selection.force, republish=selection.republish)
            for line in run_report([PipelineOutcome(pipeline, len(validated.valid))], entries, options).text_lines():
                context.log.info(line)
            yield from _events(context, names, asset_key, input_key, destination, selection.dry_run, result,
                               validated)
        if with_result and RESULT_OUTPUT in selected:
            yield dg.Output(result, RESULT_OUTPUT)
        problems = yield from explained_checks(context, check_outputs, evaluate_checks(
            context, site, pipeline, destination, names, check_outputs, validated, result if publishing else None
        ))
        failed = [entry for _, entry in result.entries if entry.failed]
        failures = [f"{item.label}: {entry.failure_text()}" for item, entry in result.entries if entry.failed]
        if result.error:
            failures.append(result.error)
        if failures or problems:
            raise failure(
                "; ".join(failures + [f"blocking check failed: {p}" for p in problems]),
                [entry.refusal for entry in failed],
                metadata={"destination_id": destination.id, "destination_root": destination.storage.uri()},
            )

    return publish


def explained_checks(context, check_outputs: dict[str, str], events):  # type: ignore[no-untyped-def]
    """Yield the check events of :func:`evaluate_checks` and return its result; then, for the
    selected checks that were not step outputs (a run of several bundles records them per bundle
    as evaluations; a run that published nothing here has nothing to check), say so first:
    Dagster follows with ``op '...' did not yield or return expected outputs {...}``, an INFO line
    that reads like a failure and only means that."""
    as_outputs: set[str] = set()
    evaluations = 0
    iterator = iter(events)
    while True:
        try:
            event = next(iterator)
        except StopIteration as stop:
            problems = stop.value
            break
        if isinstance(event, dg.AssetCheckResult):
            as_outputs.add(event.check_name or "")
        else:
            evaluations += 1
        yield event
    selected = context.selected_output_names
    others = sorted(name for name, output in check_outputs.items() if output in selected and name not in as_outputs)
    if others:
        how = (f"recorded as check evaluations, per bundle ({evaluations} in all; the asset's Checks tab)"
               if evaluations else "not evaluated: nothing of this run is published at this destination to check")
        context.log.info(
            f"checks {', '.join(others)}: {how}; Dagster's next line, 'did not yield or return expected outputs', "
            "says only that they were not step outputs, not that a check failed"
        )
    return problems


def evaluate_checks(  # type: ignore[no-untyped-def]
    context, site: Site, pipeline: Pipeline, destination: Destination, names: DestinationNames,
    check_outputs: dict[str, str], validated: Validated, result: DestinationResult | None,
):
    """Evaluate the destination's selected checks on the paths the run targeted (``result``: what
    it published; ``None``: a checks-only run; a dry run looks where a checks-only run looks) and
    yield or log them; returns the failed blocking checks."""
    selected = context.selected_output_names
    if not any(output in selected for output in check_outputs.values()):
        return []
    asset_key = dg.AssetKey(list(names.asset_key))
    root = destination.storage
    blocking = site.options.blocking_checks
    dry_run = validated.selection.dry_run
    unpublished: dict[str, dict[str, Outcome]] = {}
    if result is not None and not dry_run:
        # the paths the run published to (or was refused at)
        paths = [entry.destination_path for _, entry in result.entries]
        if names.partitioned:
            # a partition the run targeted whose bundle failed validation is the source's problem:
            # what is published there (an earlier version) is checked as it is; a path where
            # nothing was ever published says so instead of leaving its checks unanswered
            for item, error in validated.invalid:
                if latest_materialization(context.instance, asset_key, bundle_key(item.bundle_path)) is None:
                    unpublished[item.bundle_path] = not_published(item.bundle_path, error, root)
                else:
                    paths.append(item.bundle_path)
        elif not paths:
            paths = checked_paths(context, asset_key, False)
    else:
        paths = checked_paths(context, asset_key, names.partitioned)
    results = evaluate_paths(site, pipeline, destination, paths, root, context.log)
    if check_outputs.get(DIGEST_CHECK) in selected:
        for path, by_name in results.items():
            by_name[DIGEST_CHECK] = digest_outcome(site, pipeline, destination, path, root)
            context.log.info(f"{lp.display_path(path)}: {DIGEST_CHECK}: {by_name[DIGEST_CHECK].description}")
    if not results and not unpublished:
        context.log.info(f"{destination.id}: nothing to check: nothing of this run's bundles is published here")
    results.update(unpublished)
    # a step output where Dagster planned one (an unpartitioned asset, or the one partition of the
    # run), a logged evaluation per partition otherwise; a dry run's checks are always logged: Dagster
    # enforces a blocking check given as an output, and a dry run's checks block nothing
    single = run_partition_keys(context) if names.partitioned else None
    for path, by_name in results.items():
        as_output = not dry_run and (not names.partitioned or single == [bundle_key(path)])
        target = None if as_output else latest_materialization(context.instance, asset_key, bundle_key(path))
        for name, outcome in by_name.items():
            if check_outputs.get(name) not in selected:
                continue
            if as_output:
                yield outcome.result(asset_key)
            else:  # yielded, not logged: logged events not followed by a yield are lost if the step fails
                yield outcome.evaluation(asset_key, bundle_key(path) if names.partitioned else None,
                                         blocking=name in blocking and not dry_run, target=target)
    # a dry run wrote nothing: its checks describe the destination as it is and block nothing
    chosen = {path: {n: o for n, o in by_name.items() if check_outputs.get(n) in selected}
              for path, by_name in results.items()}
    return [] if dry_run else failed_blocking(chosen, blocking)


def _events(context, names, asset_key, input_key, destination, dry_run, result, validated):  # type: ignore[no-untyped-def]
    for item, entry in result.entries:
        if entry.planned_action is not None:
            context.log.warning(
                f"{item.label}: planned {entry.planned_action}, executed {entry.action or 'nothing'} "
                "after re-planning under the lock"
            )
        (context.log.error if entry.failed else context.log.info)(("dry run: " if dry_run else "") +
                                                                  _describe(item, entry))
    manifests = {valid.item.key: valid.manifest for valid in validated.valid}

    def pointer(partition: str | None, digest: str) -> int | None:
        return input_pointer(context.instance, input_key, partition, digest)

    provenance = Provenance(code_version(destination), input_key, pointer)
    build = partition_events if names.partitioned else destination_events
    events = build(list(result.entries), manifests, asset_key=asset_key, provenance=provenance, dry_run=dry_run,
                   root=destination.storage)
    yield from events.logged  # yielded: logged events not followed by a yield are lost if the step fails
    if events.final is not None:
        metadata, data_version, tags = events.final
        with warnings.catch_warnings():  # Output's data_version is marked beta
            warnings.simplefilter("ignore", dg.BetaWarning)
            yield dg.Output(None, ASSET_OUTPUT, metadata=metadata, data_version=data_version, tags=tags)

"""Publishing one pipeline destination by destination: the steps ``distributor run`` and the
Dagster publish assets share (one orchestrator, issue 12 item 8).

- :func:`select_targets` — the destinations a run publishes to, with the one-destination rule of
  ``force`` and ``republish`` (resolutions B3);
- :func:`destination_bundles` — which validated bundles a destination gets (sorted by path; a
  ``fixed`` destination only the newest one); :func:`retained_bundles` — of a run of every
  bundle, those a ``retention.prune.bundles`` policy keeps;
- :func:`publish_to` — one (bundle, destination) publication through the core's
  :func:`~distributor_core.execute.publish.publish` (lock, recovery, plan, write protocol);
- :func:`plan_destination` / :func:`execute_destination` — every bundle of one destination, planned
  (a dry run, no lock) or published; ``execute_destination`` compares each fresh plan with what was
  planned before the lock and records both actions when they differ (B1);
  :func:`publish_destination` runs the two bundle by bundle (the Dagster ``publish_<d>`` step);
- :func:`run_report` — the run report, built once, in resolutions C2 order.

Every function opens nothing: the caller passes the open source and a :class:`DestinationPool`,
so a step opens the source once however many bundles or destinations it handles.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

import msgspec

from distributor_core.app import refusal as refusals
from distributor_core.app.policy import bundle_policy, destination_policy
from distributor_core.app.report import ActionReport, PipelineReport, RunReport
from distributor_core.app.run_options import DestinationPool, RunEvent, RunOptions, RunSelectionError
from distributor_core.config import Destination, Pipeline
from distributor_core.source import SourceBundle, select_newest
from distributor_core.state.bundle_retention import BundleCandidate, plan_bundle_retention
from distributor_core.storage.base import Storage
from distributor_core.storage.errors import StorageError

if TYPE_CHECKING:
    # the write protocol (plan, state, execute) is imported by publish_to, when there is a bundle
    # to publish: a run over an empty source does not pay for it (issue 17, start-up)
    from distributor_core.execute.executor import Progress
    from distributor_core.execute.publish import PublishOutcome

FORCE_FLAGS = ("force", "republish")


class TargetError(RunSelectionError):
    """``force`` or ``republish`` on a run that does not target exactly one destination (B3).

    ``flag`` is ``force`` or ``republish``; :meth:`describe` words the message for an entry point
    (the CLI says ``--force`` and how to select with its flags, Dagster names its run config).
    """

    CLI_HINT = "select it with --pipeline and --destination"

    def __init__(self, flag: str, targets: int) -> None:
        self.flag = flag
        self.targets = targets
        super().__init__(self.describe(f"--{flag}", self.CLI_HINT))

    def describe(self, flag: str, hint: str) -> str:
        return f"{flag} requires a run that targets exactly one destination ({hint})"


def require_one_target(targets: int, *, force: bool, republish: bool) -> None:
    """Raise :class:`TargetError` unless ``targets == 1`` when ``force`` or ``republish`` is set."""
    for flag, wanted in zip(FORCE_FLAGS, (force, republish), strict=True):
        if wanted and targets != 1:
            raise TargetError(flag, targets)


def select_targets(
    pipeline: Pipeline, destination_ids: Iterable[str] | None = None, *, force: bool = False, republish: bool = False
) -> list[Destination]:
    """The destinations of ``pipeline`` a run publishes to, in config order.

    ``destination_ids`` restricts the run (``None``: every destination); an unknown id raises
    :class:`~distributor_core.config.ConfigLookupError`. ``force``/``republish`` need exactly one.
    """
    if destination_ids is None:
        targets = list(pipeline.destinations)
    else:
        wanted = {pipeline.destination(destination_id).id for destination_id in destination_ids}
        targets = [destination for destination in pipeline.destinations if destination.id in wanted]
    require_one_target(len(targets), force=force, republish=republish)
    return targets


def destination_bundles(destination: Destination, bundles: Sequence[SourceBundle]) -> list[SourceBundle]:
    """The bundles ``destination`` publishes, sorted by path: all of them, or for a ``fixed``
    destination only the newest one (manifest ``created``, ties by path)."""
    if destination.path_mapping.mode == "fixed":
        newest = select_newest(bundles)
        return [] if newest is None else [newest]
    return sorted(bundles, key=lambda bundle: bundle.path)


def retained_bundles(
    destination: Destination, bundles: Sequence[SourceBundle], *, now: datetime
) -> tuple[list[SourceBundle], list[SourceBundle]]:
    """A run of every bundle (issue 37): of ``bundles``, those a ``retention.prune.bundles``
    policy keeps (ranked among these bundles by manifest ``created``, as ``prune`` ranks the
    published ones) and those it leaves out, so that a run never publishes what the next prune
    removes. Without such a policy every bundle is kept."""
    policy = bundle_policy(destination)
    if policy is None:
        return list(bundles), []
    by_path = {bundle.path: bundle for bundle in bundles}
    candidates = [
        BundleCandidate(b.path, b.manifest.created, b.manifest.id, b.manifest.digest, len(b.manifest.files))
        for b in bundles
    ]
    kept, left_out = [], []
    for verdict in plan_bundle_retention(candidates, policy, now=now):
        (left_out if verdict.removed else kept).append(by_path[verdict.bundle_path])
    return sorted(kept, key=lambda b: b.path), sorted(left_out, key=lambda b: b.path)


def action_entry(
    pipeline: Pipeline,
    destination: Destination,
    bundle: SourceBundle | None,
    outcome: PublishOutcome | None,
    *,
    error: str = "",
) -> ActionReport:
    """The report entry of one (bundle, destination) publication; ``outcome`` ``None`` when the
    destination could not even be opened (``error`` says why)."""
    policy = destination_policy(destination)
    plan = outcome.plan if outcome is not None else None
    bundle_path = bundle.path if bundle is not None else ""
    entry = ActionReport(
        pipeline_id=pipeline.id,
        destination_id=destination.id,
        backend=destination.backend,
        bundle_path=bundle_path,
        destination_path=plan.bundle_path if plan else ("" if policy.path_mapping == "fixed" else bundle_path),
        source_id=bundle.manifest.id if bundle is not None else "",
        action=plan.action.value if plan else None,
        reason=plan.reason if plan else "",
        state_mode=policy.state_mode,
        reconciliation_mode=policy.reconciliation_mode,
        status=outcome.status if outcome is not None else "failed",
        error=(outcome.error if outcome is not None else "") or error,
        error_kind=outcome.error_kind if outcome is not None else "",
        outcome=outcome,
    )
    if plan is not None:
        entry.primary_url = plan.primary_url
        entry.outputs = [o.to_dict() for o in plan.outputs]
        entry.deletes = list(plan.deletes)
        entry.taken_over_outputs = [t.to_dict() for t in plan.taken_over_outputs]
    if outcome is not None:
        if outcome.execution is not None:
            entry.bytes_written = outcome.execution.bytes_written
        if outcome.recovery is not None:
            entry.recovery = outcome.recovery.to_dict()
        if outcome.first_plan is not None:
            entry.planned_action = outcome.first_plan.action.value
        entry.warnings = list(outcome.warnings)
    return entry


def invalid_entry(pipeline: Pipeline, destination: Destination, path: str, error: str) -> ActionReport:
    """The failed entry of a destination whose pipeline has an invalid bundle at ``path``."""
    policy = destination_policy(destination)
    return ActionReport(
        pipeline_id=pipeline.id,
        destination_id=destination.id,
        backend=destination.backend,
        bundle_path=path,
        destination_path="" if policy.path_mapping == "fixed" else path,
        source_id="",
        action=None,
        reason="",
        state_mode=policy.state_mode,
        reconciliation_mode=policy.reconciliation_mode,
        status="failed",
        error=error,
        refusal=refusals.for_invalid_bundle(pipeline.source, path,
                                            pipeline_id="" if pipeline.is_upload else pipeline.id),
    )


def outcome_refusal(
    destination: Destination, target: Storage | None, outcome: PublishOutcome
) -> refusals.Refusal | None:
    """Where and how to fix a failed publication (``None`` when it did not fail, or failed for a
    reason without a remedy of its own). A ``fail_unmanaged`` plan lists the files in the way."""
    if not outcome.failed:
        return None
    plan = outcome.plan
    if plan is not None and plan.action.failed:
        listing, truncated = None, False
        if target is not None and plan.action.value == "fail_unmanaged":
            try:
                listing, truncated = refusals.unmanaged_listing(target, plan)
            except StorageError:  # the refusal stands without its listing; it names the path it saw
                listing = None
        return refusals.for_plan(plan, destination.storage, listing, listing_truncated=truncated)
    request = outcome.request
    return refusals.for_destination_error(
        destination.storage, outcome.error_kind, request.pipeline_id, request.destination_id,
        plan.bundle_path if plan is not None else request.bundle_path,
    )


def publish_to(
    pipeline: Pipeline,
    destination: Destination,
    source: Storage,
    bundle: SourceBundle,
    *,
    pool: DestinationPool,
    options: RunOptions,
) -> ActionReport:
    """Publish (or, with ``options.dry_run``, plan) one validated bundle to one destination."""
    from distributor_core.execute.publish import default_holder, publish
    from distributor_core.execute.request import PlanRequest

    try:
        target = pool.get(pipeline, destination)
    except Exception as exc:  # remembered by the pool: every bundle reports the same failure
        entry = action_entry(pipeline, destination, bundle, None, error=str(exc))
        kind = getattr(getattr(exc, "kind", None), "value", "")
        entry.error_kind = kind
        entry.refusal = refusals.for_destination_error(destination.storage, kind, pipeline.id, destination.id)
        return entry
    request = PlanRequest(
        pipeline_id=pipeline.id,
        destination_id=destination.id,
        source=source,
        source_bundle_path=bundle.path,
        manifest=bundle.manifest,
        destination=target,
        policy=destination_policy(destination),
        distributor_version=options.version,
        force=options.force,
        republish=options.republish,
        source_content=bundle.content,
    )
    events = options.events

    def on_progress(progress: Progress) -> None:
        if events is not None:
            events(RunEvent("publish", pipeline.id, destination.id, bundle.path, progress=progress))

    outcome = publish(
        request,
        dry_run=options.dry_run,
        clock=options.clock,
        version=options.version,
        holder=options.holder or default_holder("run"),
        progress=on_progress if events is not None else None,
        lock_wait=options.lock_wait,
        lock_lease=destination.lock_lease.total_seconds(),
    )
    entry = action_entry(pipeline, destination, bundle, outcome)
    entry.refusal = outcome_refusal(destination, target, outcome)
    return entry


def plan_destination(
    pipeline: Pipeline,
    destination: Destination,
    source: Storage,
    bundles: Sequence[SourceBundle],
    *,
    pool: DestinationPool,
    options: RunOptions,
) -> list[ActionReport]:
    """Plan every bundle ``destination`` gets, without the lock and without writing."""
    dry = msgspec.structs.replace(options, dry_run=True)
    return [
        publish_to(pipeline, destination, source, bundle, pool=pool, options=dry)
        for bundle in destination_bundles(destination, bundles)
    ]


def execute_destination(
    pipeline: Pipeline,
    destination: Destination,
    source: Storage,
    bundles: Sequence[SourceBundle],
    *,
    pool: DestinationPool,
    options: RunOptions,
    planned: Iterable[ActionReport] = (),
) -> list[ActionReport]:
    """Publish every bundle ``destination`` gets (a dry run when ``options.dry_run``).

    Each publication re-plans under the destination lock and executes that fresh plan. When
    ``planned`` (the entries of an earlier :func:`plan_destination`) shows another action for a
    bundle, the entry keeps both: ``action`` is what was executed, ``planned_action`` what was
    planned (resolutions B1).
    """
    first = {entry.bundle_path: entry.action for entry in planned if entry.action}
    entries = []
    for bundle in destination_bundles(destination, bundles):
        entry = publish_to(pipeline, destination, source, bundle, pool=pool, options=options)
        planned_action = first.get(bundle.path)
        if not options.dry_run and planned_action is not None and planned_action != entry.action:
            entry.planned_action = planned_action
        entries.append(entry)
    return entries


def publish_destination(
    pipeline: Pipeline,
    destination: Destination,
    source: Storage,
    bundles: Sequence[SourceBundle],
    *,
    pool: DestinationPool,
    options: RunOptions,
) -> list[ActionReport]:
    """The publish stage for one destination, as a Dagster ``publish_<d>`` step runs it: each
    bundle the destination gets is planned without the lock (:func:`plan_destination`), then,
    unless ``options.dry_run``, published under the lock (:func:`execute_destination`, which
    re-plans and records both actions when they differ, resolutions B1); bundle by bundle, so a
    bundle is planned after the one before it was written."""
    entries: list[ActionReport] = []
    for bundle in destination_bundles(destination, bundles):
        planned = plan_destination(pipeline, destination, source, [bundle], pool=pool, options=options)
        if options.dry_run:
            entries.extend(planned)
            continue
        entries.extend(
            execute_destination(pipeline, destination, source, [bundle], pool=pool, options=options, planned=planned)
        )
    return entries


def ordered(pipelines: Sequence[Pipeline], entries: Iterable[ActionReport]) -> list[ActionReport]:
    """Entries in resolutions C2 order: pipeline (config order), bundle path, destination (config order)."""
    pipeline_rank = {pipeline.id: index for index, pipeline in enumerate(pipelines)}
    destination_rank = {
        (pipeline.id, destination.id): index
        for pipeline in pipelines
        for index, destination in enumerate(pipeline.destinations)
    }
    return sorted(
        entries,
        key=lambda e: (
            pipeline_rank.get(e.pipeline_id, len(pipeline_rank)),
            e.bundle_path,
            destination_rank.get((e.pipeline_id, e.destination_id), 0),
        ),
    )


class PipelineOutcome(msgspec.Struct, frozen=True):
    """What one pipeline's run found: bundles discovered (valid or not) and the bundle errors."""

    pipeline: Pipeline
    bundle_count: int
    error: str = ""


def run_report(
    outcomes: Sequence[PipelineOutcome], entries: Iterable[ActionReport], options: RunOptions
) -> RunReport:
    """The run report of ``outcomes`` and their action entries, in C2 order."""
    report = RunReport(dry_run=options.dry_run, force=options.force, republish=options.republish)
    report.pipelines = [
        PipelineReport(o.pipeline.id, o.pipeline.source.backend, o.bundle_count, error=o.error) for o in outcomes
    ]
    report.actions = ordered([o.pipeline for o in outcomes], entries)
    return report


"""``run``: discover, validate, plan and publish every configured pipeline (interfaces §2.5).

Order (resolutions C2): pipelines in config order, bundle paths sorted, destinations in config
order. An invalid bundle fails its pipeline before any write; other pipelines go on. Each
destination is independent: one failing destination does not stop the others.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from distributor_core import __version__
from distributor_core.app.policy import destination_policy
from distributor_core.app.report import ActionReport, PipelineReport, RunReport
from distributor_core.bundle import BundleError
from distributor_core.config import Config, Destination, Environment, Pipeline, load_config
from distributor_core.execute.executor import Progress
from distributor_core.execute.publish import PublishOutcome, default_holder, publish
from distributor_core.execute.request import PlanRequest
from distributor_core.source import (
    SourceBundle,
    ValidatedContent,
    discover_bundles,
    load_source_manifest,
    select_newest,
    validate_source_bundle,
)
from distributor_core.storage.base import Storage
from distributor_core.storage.errors import StorageError
from distributor_core.storage.factory import open_destination_storage, open_source_storage
from distributor_core.timefmt import Clock


class UsageError(ValueError):
    """The selection of a run is not allowed (for example ``--force`` on several destinations)."""


@dataclass(frozen=True)
class RunEvent:
    """Progress notification: ``kind`` is ``validate``, ``publish`` or ``done``."""

    kind: str
    pipeline_id: str
    destination_id: str = ""
    bundle_path: str = ""
    progress: Progress | None = None
    bytes_done: int = 0


EventCallback = Callable[[RunEvent], None]


@dataclass
class RunOptions:
    dry_run: bool = False
    force: bool = False
    republish: bool = False
    pipeline_id: str | None = None
    destination_id: str | None = None
    bundle_path: str | None = None
    clock: Clock | None = None
    version: str = __version__
    holder: str | None = None
    events: EventCallback | None = None
    lock_wait: float = 30.0


def selected_pipelines(config: Config, options: RunOptions) -> list[Pipeline]:
    if options.pipeline_id is not None:
        return [config.pipeline(options.pipeline_id)]
    return list(config.pipelines)


def selected_destinations(pipeline: Pipeline, options: RunOptions) -> list[Destination]:
    if options.destination_id is not None:
        return [pipeline.destination(options.destination_id)]
    return list(pipeline.destinations)


def check_selection(config: Config, options: RunOptions) -> None:
    """``--force`` / ``--republish`` need a run that targets exactly one destination (B3)."""
    if options.destination_id is not None and options.pipeline_id is None:
        raise UsageError("--destination requires --pipeline")
    pipelines = selected_pipelines(config, options)
    if not (options.force or options.republish):
        for pipeline in pipelines:
            selected_destinations(pipeline, options)
        return
    targets = sum(len(selected_destinations(p, options)) for p in pipelines if not p.is_upload)
    if targets != 1:
        flag = "--force" if options.force else "--republish"
        raise UsageError(
            f"{flag} requires a run that targets exactly one destination (select it with --pipeline and --destination)"
        )


def _action_entry(
    pipeline: Pipeline,
    destination: Destination,
    bundle: SourceBundle | None,
    outcome: PublishOutcome | None,
    *,
    error: str = "",
) -> ActionReport:
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


class DestinationPool:
    """Opens each destination's storage once per run (one SFTP connection reused) and closes all."""

    def __init__(self, env: Environment, *, dry_run: bool) -> None:
        self.env = env
        self.dry_run = dry_run
        self._open: dict[tuple[str, str], Storage | StorageError | Exception] = {}

    def get(self, pipeline: Pipeline, destination: Destination) -> Storage:
        key = (pipeline.id, destination.id)
        if key not in self._open:
            try:
                self._open[key] = open_destination_storage(destination, self.env, dry_run=self.dry_run)
            except Exception as exc:  # remembered so every bundle reports the same failure
                self._open[key] = exc
        value = self._open[key]
        if isinstance(value, Exception):
            raise value
        return value

    def close(self) -> None:
        for value in self._open.values():
            if isinstance(value, Storage):
                try:
                    value.close()
                except Exception:
                    pass
        self._open.clear()


def publish_bundles(
    pipeline: Pipeline,
    source: Storage,
    bundles: Sequence[SourceBundle],
    *,
    pool: DestinationPool,
    options: RunOptions,
    report: RunReport,
) -> None:
    """Publish validated bundles of one pipeline to its selected destinations, in C2 order."""
    destinations = selected_destinations(pipeline, options)
    newest = select_newest(bundles)
    for bundle in sorted(bundles, key=lambda b: b.path):
        for destination in destinations:
            policy = destination_policy(destination)
            if policy.path_mapping == "fixed" and (newest is None or bundle.path != newest.path):
                continue
            try:
                target = pool.get(pipeline, destination)
            except Exception as exc:
                report.actions.append(_action_entry(pipeline, destination, bundle, None, error=str(exc)))
                continue
            request = PlanRequest(
                pipeline_id=pipeline.id,
                destination_id=destination.id,
                source=source,
                source_bundle_path=bundle.path,
                manifest=bundle.manifest,
                destination=target,
                policy=policy,
                distributor_version=options.version,
                force=options.force,
                republish=options.republish,
                source_content=bundle.content,
                manifest_validated=True,  # load_source_manifest validated it (validate_bundles)
            )
            def on_progress(progress: Progress, _d=destination, _b=bundle, _events=options.events) -> None:
                if _events is not None:
                    _events(RunEvent("publish", pipeline.id, _d.id, _b.path, progress=progress))

            outcome = publish(
                request,
                dry_run=options.dry_run,
                clock=options.clock,
                version=options.version,
                holder=options.holder or default_holder("run"),
                progress=on_progress if options.events is not None else None,
                lock_wait=options.lock_wait,
            )
            report.actions.append(_action_entry(pipeline, destination, bundle, outcome))


def load_and_validate(
    pipeline: Pipeline, source: Storage, options: RunOptions
) -> tuple[list[SourceBundle], list[tuple[str, str]]]:
    """Discover and validate a pipeline's bundles. Returns the valid bundles and (path, error)
    for invalid ones. Discovery failures raise (a setup failure)."""
    paths = [options.bundle_path] if options.bundle_path is not None else discover_bundles(source)
    bundles: list[SourceBundle] = []
    invalid: list[tuple[str, str]] = []
    # small files are published from the bytes validation read (one budget per pipeline run)
    content = ValidatedContent() if not options.dry_run else None
    for path in paths:
        try:
            manifest = load_source_manifest(source, path)

            def on_bytes(done: int, _p=path) -> None:
                if options.events is not None:
                    options.events(RunEvent("validate", pipeline.id, bundle_path=_p, bytes_done=done))

            validate_source_bundle(
                source,
                path,
                manifest,
                progress=on_bytes if options.events else None,
                keep=content,
                manifest_checked=True,  # load_source_manifest validated it
            )
        except BundleError as exc:
            invalid.append((path, f"invalid source bundle {path or '.'}: {exc}"))
            continue
        bundles.append(SourceBundle(path, manifest, content))
    return bundles, invalid


def run_config(config: Config, options: RunOptions | None = None, *, env: Environment | None = None) -> RunReport:
    """Run the selected pipelines of a loaded config; ``http_upload`` pipelines are served by
    ``serve`` and skipped here."""
    options = options or RunOptions()
    check_selection(config, options)
    env = env or Environment.from_config(config)
    report = RunReport(dry_run=options.dry_run, force=options.force, republish=options.republish)
    pool = DestinationPool(env, dry_run=options.dry_run)
    try:
        for pipeline in selected_pipelines(config, options):
            if pipeline.is_upload:
                continue
            entry = PipelineReport(pipeline.id, pipeline.source.backend)
            report.pipelines.append(entry)
            source = open_source_storage(pipeline.source, env, dry_run=options.dry_run)
            try:
                bundles, invalid = load_and_validate(pipeline, source, options)
                entry.bundle_count = len(bundles) + len(invalid)
                if invalid:
                    entry.error = "; ".join(error for _, error in invalid)
                    for path, error in invalid:
                        for destination in selected_destinations(pipeline, options):
                            report.actions.append(_invalid_entry(pipeline, destination, path, error))
                    continue
                publish_bundles(pipeline, source, bundles, pool=pool, options=options, report=report)
            finally:
                source.close()
    finally:
        pool.close()
    return report


def _invalid_entry(pipeline: Pipeline, destination: Destination, path: str, error: str) -> ActionReport:
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
    )


def run(config_path: str, **kwargs) -> RunReport:
    """Library entry point: load ``config_path`` and run it (keyword arguments as :class:`RunOptions`)."""
    env = kwargs.pop("environment", None)
    return run_config(load_config(config_path), RunOptions(**kwargs), env=env)


def publish_source_bundle(
    config: Config,
    pipeline_id: str,
    source: Storage,
    bundle_path: str = "",
    options: RunOptions | None = None,
    *,
    env: Environment | None = None,
) -> RunReport:
    """Validate and publish one bundle from ``source`` through ``pipeline_id``'s destinations.

    The upload server (both publishers) calls this with the staged upload as a local source and
    bundle path ``""`` (resolutions B5); it works for any pipeline, ``http_upload`` included.
    """
    options = options or RunOptions()
    pipeline = config.pipeline(pipeline_id)
    env = env or Environment.from_config(config)
    report = RunReport(dry_run=options.dry_run, force=options.force, republish=options.republish)
    entry = PipelineReport(pipeline.id, pipeline.source.backend, bundle_count=1)
    report.pipelines.append(entry)
    scoped = RunOptions(**{**options.__dict__, "pipeline_id": pipeline.id, "bundle_path": bundle_path})
    bundles, invalid = load_and_validate(pipeline, source, scoped)
    if invalid:
        entry.error = "; ".join(error for _, error in invalid)
        for path, error in invalid:
            for destination in selected_destinations(pipeline, scoped):
                report.actions.append(_invalid_entry(pipeline, destination, path, error))
        return report
    pool = DestinationPool(env, dry_run=options.dry_run)
    try:
        publish_bundles(pipeline, source, bundles, pool=pool, options=scoped, report=report)
    finally:
        pool.close()
    return report

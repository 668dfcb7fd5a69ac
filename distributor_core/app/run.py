"""``run``: the publication sequence, stage by stage (interfaces §2.5).

One sequence, written once, that ``distributor run`` runs in one go (:func:`run_config`) and the
Dagster publish steps run split into steps (``discover``, ``validate``, ``publish_<d>``,
``report``), calling the same stage functions:

1. credentials and 2. root: :func:`open_sources` (resolutions G3: every credential resolves, then
   every source opens and its root exists, before any destination is planned);
3. discover: :func:`find_bundles` (the bundle asked for, or every bundle of the source);
4. validate: :func:`check_bundles` (manifest rules, every file's size and sha256; an invalid
   bundle is worded by :func:`invalid_message`);
5. publish: :func:`~distributor_core.app.publication.publish_to` for each (bundle, destination),
   bundle by bundle in one process (:func:`publish_bundles`) or destination by destination with
   the plan made before the lock kept beside the executed one (Dagster's steps:
   :func:`~distributor_core.app.publication.publish_destination`);
6. report: :func:`~distributor_core.app.publication.run_report`.

Order (resolutions C2): pipelines in config order, bundle paths sorted, destinations in config
order. An invalid bundle fails its pipeline before any write; other pipelines go on. Each
destination is independent: one failing destination does not stop the others.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from typing import Any

import msgspec

from distributor_core import paths as lp
from distributor_core.app.policy import bundle_policy
from distributor_core.app.publication import (
    PipelineOutcome,
    TargetError,
    destination_bundles,
    invalid_entry,
    publish_to,
    require_one_target,
    retained_bundles,
    run_report,
    select_targets,
)
from distributor_core.app.report import RunReport
from distributor_core.app.run_options import DestinationPool, EventCallback, RunEvent, RunOptions, RunSelectionError
from distributor_core.app.setup import SetupError, check_source_root, resolve_credentials
from distributor_core.bundle import BundleError, check_admitted
from distributor_core.config import Config, Destination, Environment, Pipeline, load_config
from distributor_core.source import (
    SourceBundle,
    ValidatedContent,
    discover_bundles,
    load_source_manifest,
    validate_source_bundle,
)
from distributor_core.storage.base import Storage
from distributor_core.storage.capabilities import Feature
from distributor_core.storage.factory import open_source_storage
from distributor_core.timefmt import now_seconds
from distributor_core.validation_cache import ValidationCache, enabled_by_env

__all__ = [
    "CheckedBundle",
    "DestinationPool",
    "EventCallback",
    "RunEvent",
    "RunOptions",
    "RunSelectionError",
    "SetupError",
    "TargetError",
    "check_bundles",
    "check_selection",
    "find_bundles",
    "invalid_message",
    "load_and_validate",
    "load_valid_bundle",
    "open_sources",
    "publish_bundles",
    "publish_source_bundle",
    "run",
    "run_config",
    "selected_destinations",
    "selected_pipelines",
]


def selected_pipelines(config: Config, options: RunOptions) -> list[Pipeline]:
    if options.pipeline_id is not None:
        return [config.pipeline(options.pipeline_id)]
    return list(config.pipelines)


def selected_destinations(pipeline: Pipeline, options: RunOptions) -> list[Destination]:
    """``--destination``, or every destination of ``pipeline`` (the core's target selection; the
    one-destination rule of ``--force`` is checked over the whole run by :func:`check_selection`)."""
    return select_targets(pipeline, None if options.destination_id is None else [options.destination_id])


def check_selection(config: Config, options: RunOptions) -> None:
    """``--force`` / ``--republish`` need a run that targets exactly one destination (B3)."""
    if options.destination_id is not None and options.pipeline_id is None:
        raise RunSelectionError("--destination requires --pipeline")
    pipelines = selected_pipelines(config, options)
    targets = sum(len(selected_destinations(p, options)) for p in pipelines if not p.is_upload)
    require_one_target(targets, force=options.force, republish=options.republish)


# ---------------------------------------------------------------- 1, 2: credentials, root


@contextmanager
def open_sources(
    pipelines: Sequence[tuple[Pipeline, Iterable[Destination]]], env: Environment, *, dry_run: bool
) -> Iterator[list[Storage]]:
    """Stages 1 and 2 (resolutions G3): the credentials of every pipeline's source and selected
    destinations resolve, then every source opens and its root exists; otherwise
    :class:`~distributor_core.app.setup.SetupError` before any destination is planned. Yields
    the open sources in the order of ``pipelines`` and closes them afterwards."""
    resolve_credentials(pipelines, env)
    with ExitStack() as stack:
        sources: list[Storage] = []
        for pipeline, _ in pipelines:
            source = stack.enter_context(open_source_storage(pipeline.source, env, dry_run=dry_run))
            check_source_root(pipeline, source)
            sources.append(source)
        yield sources


# ---------------------------------------------------------------- 3: discover


def find_bundles(source: Storage, bundle_path: str | None = None) -> list[str]:
    """Stage 3: the bundle paths a run publishes: ``bundle_path`` when one is asked for, else
    every bundle of the source (sorted; a discovery failure raises)."""
    return [bundle_path] if bundle_path is not None else discover_bundles(source)


# ---------------------------------------------------------------- 4: validate


def load_valid_bundle(
    pipeline: Pipeline,
    source: Storage,
    path: str,
    options: RunOptions,
    *,
    cache: ValidationCache | None = None,
    content: ValidatedContent | None = None,
    admitted: Mapping[str, Any] | None = None,
) -> SourceBundle:
    """Load and validate the bundle at ``path`` (manifest rules, then every file's size and
    sha256); raises :class:`~distributor_core.bundle.BundleError` for an invalid bundle.
    ``admitted``: a staged upload's manifest identity as its record has it; a manifest that is
    not that one is refused before any file is read
    (:func:`~distributor_core.bundle.check_admitted`)."""
    manifest = load_source_manifest(source, path)
    if admitted is not None:
        check_admitted(manifest, admitted)

    def on_bytes(done: int) -> None:
        if options.events is not None:
            options.events(RunEvent("validate", pipeline.id, bundle_path=path, bytes_done=done))

    validate_source_bundle(
        source,
        path,
        manifest,
        progress=on_bytes if options.events else None,
        keep=content,
        cache=cache,
    )
    return SourceBundle(path, manifest, content)


def invalid_message(path: str, error: BundleError) -> str:
    return f"invalid source bundle {path or '.'}: {error}"


class CheckedBundle(msgspec.Struct, frozen=True):
    """Stage 4's verdict on one bundle path: the valid bundle, or the error and its message."""

    path: str
    bundle: SourceBundle | None = None
    error: BundleError | None = None

    @property
    def message(self) -> str:
        return invalid_message(self.path, self.error) if self.error is not None else ""


def check_bundles(
    pipeline: Pipeline,
    source: Storage,
    paths: Iterable[str],
    options: RunOptions,
    *,
    cache: ValidationCache | None = None,
    content: ValidatedContent | None = None,
    admitted: Mapping[str, Mapping[str, Any]] | None = None,
) -> Iterator[CheckedBundle]:
    """Stage 4: validate each bundle path in order, one verdict each as soon as it is known (an
    invalid bundle is a verdict; any other failure raises). ``content`` keeps the bytes of small
    files for the publication that follows in the same process; ``cache``: see
    :func:`validation_cache`; ``admitted``: the manifest identity each staged upload (by bundle
    path) was admitted with, see :func:`load_valid_bundle`."""
    for path in paths:
        try:
            yield CheckedBundle(path, load_valid_bundle(pipeline, source, path, options, cache=cache, content=content,
                                                        admitted=(admitted or {}).get(path)))
        except BundleError as exc:
            yield CheckedBundle(path, error=exc)


def load_and_validate(
    pipeline: Pipeline, source: Storage, options: RunOptions, *, cache: ValidationCache | None = None,
    admitted: Mapping[str, Mapping[str, Any]] | None = None,
) -> tuple[list[SourceBundle], list[tuple[str, str]]]:
    """Stages 3 and 4 for one pipeline: the valid bundles, and (path, error) for invalid ones.
    Discovery failures raise (a setup failure). ``cache``: the validation cache of a local
    source (``distributor run`` only; see :func:`validation_cache`)."""
    paths = find_bundles(source, options.bundle_path)
    # small files are published from the bytes validation read (one budget per pipeline run)
    content = ValidatedContent() if not options.dry_run else None
    bundles: list[SourceBundle] = []
    invalid: list[tuple[str, str]] = []
    for checked in check_bundles(pipeline, source, paths, options, cache=cache, content=content, admitted=admitted):
        if checked.bundle is not None:
            bundles.append(checked.bundle)
        else:
            invalid.append((checked.path, checked.message))
    return bundles, invalid


def validation_cache(
    pipeline: Pipeline, source: Storage, caches: dict[str, ValidationCache]
) -> ValidationCache | None:
    """The validation cache for ``pipeline``'s source in this run (one per source root, shared by
    the pipelines reading it), or None: switched off (``validation.cache: false``,
    ``DISTRIBUTOR_VALIDATION_CACHE=off``) or a source that cannot tell file identities."""
    root = pipeline.source.local_root
    if root is None or not pipeline.validation.cache or Feature.FILE_IDENTITY not in source.capabilities:
        return None
    if not enabled_by_env():
        return None
    key = str(root)
    cache = caches.get(key)
    if cache is None:
        cache = caches[key] = ValidationCache.load(key)
    return cache


# ---------------------------------------------------------------- 5: publish


def publish_bundles(
    pipeline: Pipeline,
    source: Storage,
    bundles: Sequence[SourceBundle],
    *,
    pool: DestinationPool,
    options: RunOptions,
    report: RunReport,
) -> None:
    """Stage 5 in one process: publish validated bundles of one pipeline to its selected
    destinations in C2 order, bundle by bundle (sorted by path), each to every destination in
    config order."""
    destinations = selected_destinations(pipeline, options)
    chosen = {d.id: {b.path for b in destination_bundles(d, bundles)} for d in destinations}
    if options.bundle_path is None:  # every bundle: none a bundle retention policy removes (issue 37)
        now = now_seconds(options.clock)
        for destination in destinations:
            kept, left_out = retained_bundles(destination, bundles, now=now)
            if left_out:
                chosen[destination.id] &= {b.path for b in kept}
                report.warnings.append(left_out_warning(pipeline, destination, left_out))
    for bundle in sorted(bundles, key=lambda b: b.path):
        for destination in destinations:
            if bundle.path in chosen[destination.id]:
                report.actions.append(publish_to(pipeline, destination, source, bundle, pool=pool, options=options))


def left_out_warning(pipeline: Pipeline, destination: Destination, left_out: Sequence[SourceBundle]) -> str:
    """What a run of every bundle says about the bundles a bundle retention policy left out."""
    policy = bundle_policy(destination)
    shown = ", ".join(lp.display_path(b.path) for b in left_out[:5]) + (" ..." if len(left_out) > 5 else "")
    return (
        f"{pipeline.id}/{destination.id}: {len(left_out)} bundle(s) of the source not published, outside "
        f"retention.prune.bundles ({policy.describe() if policy else ''}): {shown} "
        "(a prune would remove them again)"
    )


# ---------------------------------------------------------------- the whole sequence


def publish_pipeline(
    pipeline: Pipeline,
    source: Storage,
    *,
    pool: DestinationPool,
    options: RunOptions,
    cache: ValidationCache | None = None,
    admitted: Mapping[str, Mapping[str, Any]] | None = None,
) -> RunReport:
    """Stages 3 to 6 for one pipeline from an open source; an invalid bundle fails the pipeline
    before any write (its destinations get failed entries). ``cache`` is saved once validation
    is over (not on a dry run, nor when discovery failed: the old cache then stays);
    ``admitted``: see :func:`check_bundles`."""
    bundles, invalid = load_and_validate(pipeline, source, options, cache=cache, admitted=admitted)
    if cache is not None and not options.dry_run:
        cache.save()
    outcome = PipelineOutcome(pipeline, len(bundles) + len(invalid), error="; ".join(e for _, e in invalid))
    report = run_report([outcome], [], options)
    if invalid:
        for path, error in invalid:
            for destination in selected_destinations(pipeline, options):
                report.actions.append(invalid_entry(pipeline, destination, path, error))
        return report
    publish_bundles(pipeline, source, bundles, pool=pool, options=options, report=report)
    return report


def run_config(config: Config, options: RunOptions | None = None, *, env: Environment | None = None) -> RunReport:
    """Run the selected pipelines of a loaded config, every stage in order; ``http_upload``
    pipelines are served by ``serve`` and skipped here. The source of each pipeline is opened
    once. Setup (stages 1 and 2, :func:`open_sources`) comes first for every selected pipeline:
    a :class:`~distributor_core.app.setup.SetupError` is raised before any destination is
    planned or written.
    """
    options = options or RunOptions()
    check_selection(config, options)
    env = env or Environment.from_config(config)
    pipelines = [p for p in selected_pipelines(config, options) if not p.is_upload]
    report = RunReport(dry_run=options.dry_run, force=options.force, republish=options.republish)
    selected = [(p, selected_destinations(p, options)) for p in pipelines]
    with open_sources(selected, env, dry_run=options.dry_run) as sources, \
            DestinationPool(env, dry_run=options.dry_run) as pool:
        caches: dict[str, ValidationCache] = {}
        for pipeline, source in zip(pipelines, sources, strict=True):
            cache = validation_cache(pipeline, source, caches)
            part = publish_pipeline(pipeline, source, pool=pool, options=options, cache=cache)
            report.pipelines.extend(part.pipelines)
            report.actions.extend(part.actions)
            report.warnings.extend(part.warnings)
        for cache in caches.values():
            report.warnings.extend(w for w in cache.warnings if w not in report.warnings)
    return report


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
    admitted: Mapping[str, Any] | None = None,
) -> RunReport:
    """Validate and publish one bundle from ``source`` through ``pipeline_id``'s destinations.

    The upload server (both publishers) calls this with the staged upload as a local source and
    bundle path ``""`` (resolutions B5); it works for any pipeline, ``http_upload`` included.
    ``admitted``: the manifest identity the upload was admitted with (its record's); a staged
    bundle whose manifest is another is refused (issue 35, item 2).
    """
    options = options or RunOptions()
    pipeline = config.pipeline(pipeline_id)
    env = env or Environment.from_config(config)
    scoped = msgspec.structs.replace(options, pipeline_id=pipeline.id, bundle_path=bundle_path)
    resolve_credentials([(pipeline, selected_destinations(pipeline, scoped))], env, sources=False)
    with DestinationPool(env, dry_run=options.dry_run) as pool:
        report = publish_pipeline(pipeline, source, pool=pool, options=scoped,
                                  admitted={bundle_path: admitted} if admitted is not None else None)
    report.pipelines[0].bundle_count = 1
    return report

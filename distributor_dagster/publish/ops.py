"""The first steps of a publish graph: ``discover`` (what this run publishes, where) and
``validate`` (every byte of it). They run the stages of the core's run sequence
(:mod:`distributor_core.app.run`) that ``distributor run`` runs: ``discover`` the credentials, root
and discover stages (:func:`~distributor_core.app.run.open_sources`,
:func:`~distributor_core.app.run.find_bundles`) after the core's target selection
(:func:`~distributor_core.app.publication.select_targets`), ``validate`` the validate stage
(:func:`~distributor_core.app.run.check_bundles`); these ops add the partitions, observations and
check evaluations that describe the work to Dagster.

(No ``from __future__ import annotations`` here: Dagster reads the config and input types from
the function annotations at definition time.)
"""

from collections.abc import Iterator
from contextlib import contextmanager
from itertools import groupby

import dagster as dg

from distributor_core import paths as lp
from distributor_core.app.publication import TargetError, require_one_target
from distributor_core.app.refusal import for_invalid_bundle
from distributor_core.app.run import CheckedBundle, check_bundles, find_bundles, open_sources
from distributor_core.app.run_options import RunOptions
from distributor_core.app.setup import SetupError
from distributor_core.config import Destination, Pipeline
from distributor_core.staging.store import UploadStore
from distributor_core.storage.base import Storage
from distributor_core.storage.factory import open_source_storage
from distributor_dagster.checks import SOURCE_CHECK, bundle_outcome, run_partition_keys
from distributor_dagster.failure import failure, refusal_metadata
from distributor_dagster.partitions import add_partitions, bundle_key, bundle_path, key_problem, keyed
from distributor_dagster.publish import uploads
from distributor_dagster.publish.config import WHERE, RunSettings
from distributor_dagster.publish.model import Item, RunScope, Valid, Validated
from distributor_dagster.publish.routes import DestinationRoute, GraphRoute, Routes
from distributor_dagster.site import Site
from distributor_dagster.sources import SourceSnapshot, newest, read_bundles
from distributor_dagster.upload_status import upload_tag

PIPELINE_TAG = "distributor/pipeline"
UPLOAD_TAG = "distributor/upload_run_id"
#: How a Dagster user restricts a run to one destination (the hint of the B3 refusal).
TARGET_HINT = f"materialize only that destination asset, or name it in destinations of {WHERE}"
#: How many selected destinations an unknown-name error lists.
SHOWN = 20


@contextmanager
def open_item_source(
    site: Site, pipeline: Pipeline, item: Item, *, dry_run: bool, store: UploadStore | None = None
) -> Iterator[Storage]:
    """The pipeline source, or the staged bundle of an upload, read through the pipeline's upload
    store (``store`` when open already): a local directory or the shared staging bucket."""
    if item.upload_run_id is not None:
        with uploads.staged_bundle(pipeline, item.upload_run_id, site.environment(), store) as staged:
            yield staged
        return
    with open_source_storage(pipeline.source, site.environment(), dry_run=dry_run) as source:
        yield source


def tag_run(context: dg.OpExecutionContext, tags: dict[str, str]) -> None:
    """Add run tags the run was launched without (runs of the implicit asset job, runs launched
    by hand), so runs stay findable by pipeline and upload."""
    missing = {key: value for key, value in tags.items() if context.run.tags.get(key) != value}
    if missing:
        context.instance.add_run_tags(context.run_id, missing)


def tag_uploads(context: dg.OpExecutionContext, selection: RunScope) -> None:
    """Tag a run with each upload it publishes (``GET /runs/<id>`` follows the run by it), and a
    run of one upload with ``distributor/upload_run_id`` too."""
    tags = {PIPELINE_TAG: selection.pipeline_id, **dict(map(upload_tag, selection.upload_run_ids))}
    if len(selection.upload_run_ids) == 1:
        tags[UPLOAD_TAG] = selection.upload_run_ids[0]
    if selection.upload_run_ids:
        tag_run(context, tags)


def run_destinations(
    context: dg.OpExecutionContext, routes: Routes, settings: RunSettings
) -> list[DestinationRoute]:
    """The destinations the whole run publishes to, in config order: the destination assets it
    selects (in every graph and pipeline of the run), restricted by ``destinations``, with the B3
    rule applied to the run (``force``/``republish`` need exactly one destination in the run)."""
    selected = set(context.run.asset_selection or context.job_def.asset_layer.executable_asset_keys)
    chosen = routes.selected(selected | set(context.selected_asset_keys))
    if settings.destinations:
        unknown = [name for name in settings.destinations
                   if not any(name in (route.destination.id, route.label) for route in chosen)]
        if unknown:
            listed = ", ".join(route.label for route in chosen[:SHOWN]) or "none"
            more = f" and {len(chosen) - SHOWN} more" if len(chosen) > SHOWN else ""
            raise dg.Failure(
                f"destinations: {unknown[0]!r} is not among the destination assets selected for this run (it selects "
                f"{listed}{more}); name one by its destination id or as '<pipeline id>/<destination id>'"
            )
        wanted = set(settings.destinations)
        chosen = [route for route in chosen if route.destination.id in wanted or route.label in wanted]
    try:
        require_one_target(len(chosen), force=settings.force, republish=settings.republish)
    except TargetError as exc:
        raise dg.Failure(exc.describe(exc.flag, TARGET_HINT)) from None
    return chosen


def _targets(
    context: dg.OpExecutionContext, routes: Routes, route: GraphRoute, settings: RunSettings
) -> list[Destination]:
    """This graph's share of the run's targets (:func:`run_destinations`): those of its
    destinations this step's assets select."""
    mine = set(context.selected_asset_keys)
    return [
        target.destination for target in run_destinations(context, routes, settings)
        if target.pipeline.id == route.pipeline.id and target.asset_key in mine
        and target.destination.id in route.graph.destination_ids
    ]


def _fits(route: GraphRoute, settings: RunSettings) -> None:
    """Refuse settings that name what this pipeline does not have: a bundle of an upload
    pipeline, uploads of a pipeline that reads a source."""
    pipeline = route.pipeline
    if pipeline.is_upload and settings.bundle_path is not None:
        raise dg.Failure(f"bundle_path: pipeline {pipeline.id} publishes staged uploads (http_upload): name them with "
                         "upload_run_id or upload_run_ids")
    if not pipeline.is_upload and (settings.upload_run_id or settings.upload_run_ids is not None):
        raise dg.Failure(f"upload_run_id/upload_run_ids: pipeline {pipeline.id} reads a {pipeline.source.backend} "
                         "source, not staged uploads: name its bundle with bundle_path")


def settings_of(context: dg.OpExecutionContext, key: str) -> RunSettings:
    return getattr(context.resources, key)


def checked_scope(context: dg.OpExecutionContext, key: str, selection: RunScope) -> RunScope:
    """``selection`` when the run's settings still say what ``discover`` decided it with; a step
    whose input was decided under other flags (a re-execution launched with another run config)
    fails rather than mix them."""
    settings = settings_of(context, key)
    run = (settings.dry_run, settings.force, settings.republish)
    if run != (selection.dry_run, selection.force, selection.republish):
        raise dg.Failure(
            f"this run's settings (dry_run={run[0]}, force={run[1]}, republish={run[2]}) differ from those its "
            f"discover step decided with (dry_run={selection.dry_run}, force={selection.force}, "
            f"republish={selection.republish}): re-execute the whole run with the settings you want"
        )
    return selection


def _bundle_items(
    context: dg.OpExecutionContext, route: GraphRoute, settings: RunSettings, source: Storage
) -> list[str]:
    """The bundle paths of this run, with the source observed for them."""
    pnames, graph = route.names, route.graph
    source_key = dg.AssetKey(list(pnames.source_key))
    keys = run_partition_keys(context) if graph.partitioned else None
    listed_all = False
    if keys is not None:
        if settings.bundle_path is not None:
            raise dg.Failure("bundle_path is not used by a partitioned run: its partitions name the bundles")
        paths = [bundle_path(key) for key in keys]
    else:
        paths = find_bundles(source, settings.bundle_path)
        listed_all = settings.bundle_path is None
    seen, problems = read_bundles(source, paths)
    for problem in problems:  # validate reports it on the source check
        context.log.warning(f"unreadable manifest: {problem}")
    view = SourceSnapshot.of(seen) if listed_all else None
    if not graph.partitioned and settings.bundle_path is None:
        chosen = newest(seen)  # what a fixed destination publishes: the newest bundle
        paths = [chosen.path] if chosen is not None else []
        seen = [s for s in seen if chosen is not None and s.path == chosen.path]
    if pnames.partitioned:
        keys_ok, refused = keyed(paths)
        for problem in refused:
            context.log.warning(problem)
        if graph.partitioned:  # a bundle that cannot be a partition cannot be a partition's publication
            paths = [p for p in paths if key_problem(p) is None]
        added = add_partitions(context.instance, pnames.partitions, keys_ok)
        if graph.partitioned:  # the bundles this run publishes become the destinations' partitions too
            added = list(dict.fromkeys(added + add_partitions(context.instance, pnames.published, keys_ok)))
        if added:
            context.log.info(f"added {len(added)} bundle partition(s): " + ", ".join(added[:20]))
    if view is not None:
        context.log.info(f"source: {view.description()}")
    if settings.dry_run:
        # a source observation tells the watch sensor (and eager automation) that a bundle was
        # handled: a dry run records none, so the next tick still publishes what it planned
        context.log.info("dry run: the source is not observed")
        return paths
    if pnames.partitioned:
        for bundle in seen:
            if key_problem(bundle.path) is None:
                context.log_event(bundle.observation(source_key))
    if view is not None:
        whole = pnames.newest_key if pnames.partitioned else pnames.source_key
        if whole is not None:
            context.log_event(view.observation(dg.AssetKey(list(whole))))
    elif not pnames.partitioned and seen:
        context.log_event(SourceSnapshot.of(seen).observation(source_key))
    return paths


def _upload_items(
    context: dg.OpExecutionContext, site: Site, pipeline: Pipeline, settings: RunSettings
) -> list[Item]:
    """The uploads of this run: the one named, the batch named, or every upload still waiting, in
    admission order."""
    named = settings.named_uploads()
    items = []
    with uploads.upload_store(pipeline, site.environment()) as store:
        if settings.upload_run_id:
            records = [uploads.open_upload(pipeline, settings.upload_run_id, store)]
        elif named is not None:
            records = uploads.batch_records(context, site.config, pipeline, named, dry_run=settings.dry_run,
                                            store=store, clock=site.clock)
        else:
            records = uploads.waiting(pipeline, store)
            if not records:
                context.log.info(f"no upload of pipeline {pipeline.id} is waiting to be published")
        for record in records:
            if not settings.dry_run:
                uploads.mark_running(store, record.run_id, context.run_id, site.clock)
            context.log.info(
                f"upload {record.run_id} (seq {record.seq}, bundle id {record.bundle_id}, token {record.token_id})"
            )
            items.append(Item("", record.run_id, store.bundle_location(record.run_id)))
    return items


def discover_op(site: Site, routes: Routes, name: str, settings_key: str) -> dg.OpDefinition:
    """The ``discover`` step of every publish graph of the code location."""

    @dg.op(
        name=name,
        description="Find the bundles this run publishes for the graph's pipeline (its partitions, the bundle_path "
        "or uploads of the run settings, or every bundle; the fixed destinations' graph takes the newest) and the "
        "destinations it publishes to (the selected destination assets, restricted by the run settings); observes "
        "the source for them. Fails, before anything is written, on a setup failure.",
        ins={"source": dg.In(dg.Nothing)},
        required_resource_keys={settings_key},
    )
    def discover(context: dg.OpExecutionContext) -> RunScope:
        route = routes.graph(context)
        pipeline = route.pipeline
        settings = settings_of(context, settings_key)
        _fits(route, settings)
        targets = _targets(context, routes, route, settings)
        flags = {"dry_run": settings.dry_run, "force": settings.force, "republish": settings.republish}
        if not targets:
            context.log.info("no destination asset is selected: this run only evaluates asset checks")
            return RunScope(pipeline_id=pipeline.id, items=(), **flags)
        destinations = tuple(d.id for d in targets)
        tag_run(context, {PIPELINE_TAG: pipeline.id})
        context.log.info(("dry run: " if settings.dry_run else "") + "destinations: " + ", ".join(destinations))
        if pipeline.is_upload:
            selection = RunScope(pipeline.id, tuple(_upload_items(context, site, pipeline, settings)),
                                 destinations, **flags)
            tag_uploads(context, selection)
            return selection
        try:  # setup failures (resolutions G3) fail this step, before any destination is planned
            with open_sources([(pipeline, targets)], site.environment(), dry_run=settings.dry_run) as (source,):
                paths = _bundle_items(context, route, settings, source)
        except SetupError as exc:
            raise failure(exc.detailed(), [exc.refusal]) from None
        context.log.info(
            f"{len(paths)} bundle(s) from the {pipeline.source.backend} source: "
            + (", ".join(lp.display_path(p) for p in paths[:50]) or "none") + (" ..." if len(paths) > 50 else "")
        )
        return RunScope(pipeline.id, tuple(Item(path) for path in paths), destinations, **flags)

    return discover


def _checked_items(
    site: Site, pipeline: Pipeline, selection: RunScope, dagster_run_id: str
) -> Iterator[tuple[Item, CheckedBundle]]:
    """The core's validate stage over the run's items, each with its verdict: one source per group
    (an upload's staged bundle, or the pipeline's source for all its bundles). A failure other
    than an invalid bundle fails the step, and the upload it happened to (its record says why)."""
    options = RunOptions(dry_run=selection.dry_run)
    with uploads.item_store(pipeline, site.environment()) as store:
        for _, grouped in groupby(selection.items, key=lambda item: item.source_root):
            items = list(grouped)
            try:
                with open_item_source(site, pipeline, items[0], dry_run=selection.dry_run, store=store) as source:
                    # an upload's staged manifest must be the one it was admitted with (issue 35)
                    admitted = {"": store.read(items[0].upload_run_id).manifest} \
                        if store is not None and items[0].upload_run_id else None
                    checked = check_bundles(pipeline, source, [item.bundle_path for item in items], options,
                                            admitted=admitted)
                    yield from zip(items, checked, strict=True)
            except Exception as exc:
                if items[0].upload_run_id:  # an upload is a group of its own
                    uploads.fail(site.config, pipeline, items[0].upload_run_id, dagster_run_id, exc,
                                 selection.dry_run, site.clock, store=store)
                raise


def validate_op(site: Site, routes: Routes, name: str, settings_key: str) -> dg.OpDefinition:
    """The ``validate`` step of every publish graph of the code location."""

    @dg.op(
        name=name,
        out=dg.Out(Validated),
        description="Validate every bundle of the run (manifest rules, each file's size and sha256). A bundle "
        f"that fails is the source's problem: the source check {SOURCE_CHECK} fails for it, naming the file "
        "and both digests, and no destination sees it.",
        required_resource_keys={settings_key},
    )
    def validate(context: dg.OpExecutionContext, selection: RunScope):  # type: ignore[no-untyped-def]
        route = routes.graph(context)
        pipeline, pnames = route.pipeline, route.names
        selection = checked_scope(context, settings_key, selection)
        source_key = dg.AssetKey(list(pnames.source_key))
        newest_key = dg.AssetKey(list(pnames.newest_key)) if pnames.newest_key and not route.partitioned else None
        if not selection.destinations:
            yield dg.Output(Validated(selection))
            return
        valid: list[Valid] = []
        invalid: list[tuple[Item, str]] = []
        for item, checked in _checked_items(site, pipeline, selection, context.run_id):
            if checked.bundle is None:
                message = checked.message if not item.upload_run_id else \
                    f"invalid upload {item.upload_run_id}: {checked.error}"
                refusal = for_invalid_bundle(item.source_root or pipeline.source, item.bundle_path,
                                             getattr(checked.error, "path", ""),
                                             pipeline_id="" if item.upload_run_id else pipeline.id)
                context.log.error(f"{message} ({refusal.sentence()})")
                invalid.append((item, message))
                outcome = bundle_outcome(item.bundle_path, "", checked.error)
                outcome.metadata.update(refusal_metadata([refusal]))
                if item.upload_run_id:
                    uploads.fail(site.config, pipeline, item.upload_run_id, context.run_id, checked.error,
                                 selection.dry_run, site.clock, env=site.environment())
            else:
                manifest = checked.bundle.manifest
                valid.append(Valid(item, manifest))
                outcome = bundle_outcome(item.bundle_path, manifest.digest, None)
                context.log.info(
                    f"valid: {item.label} id={manifest.id} digest={manifest.digest} files={manifest.file_count}"
                )
            if newest_key is not None:  # the fixed destinations' view: is the bundle they take valid
                yield outcome.evaluation(newest_key, None, blocking=False)
            if pnames.partitioned and key_problem(item.bundle_path) is not None:
                continue  # no partition to report it on (discover said why)
            partition = bundle_key(item.bundle_path) if pnames.partitioned else None
            yield outcome.evaluation(source_key, partition, blocking=False)  # kept even if a later item fails
        if invalid:
            context.log.warning(
                f"{len(invalid)} invalid bundle(s) are left out; the source check {SOURCE_CHECK} names them"
            )
        yield dg.Output(Validated(selection, tuple(valid), tuple(invalid)))

    return validate

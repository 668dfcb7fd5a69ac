"""Observing a pipeline's source on demand (the source asset's observe function, "Observe" and
"Execute checks" in the UI).

A ``local``, ``ssh`` or ``s3`` source is listed and its manifests are read (nothing is hashed):
a partitioned source gets one observation per bundle partition (the run's partitions, or every
bundle, whose missing partitions are added), an unpartitioned one a single observation with the
newest bundle's digest. An ``http_upload`` pipeline's source is its upload staging area (a local
directory or a shared ``s3://`` store, read through its upload store): the records are read and
the newest upload is the one admitted last (highest ``seq``).

With the source check ``bundle_valid`` selected, the same bundles are also validated (every
file's size and sha256) and each gets its check result.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import dagster as dg

from distributor_core import paths as lp
from distributor_core.app.run import load_valid_bundle
from distributor_core.app.run_options import RunOptions
from distributor_core.bundle import BundleError
from distributor_core.config import Pipeline
from distributor_core.source import discover_bundles
from distributor_core.storage.base import Storage
from distributor_core.storage.factory import open_source_storage
from distributor_dagster.checks import SOURCE_CHECK, Outcome, bundle_outcome, run_partition_keys
from distributor_dagster.names import PipelineNames
from distributor_dagster.partitions import add_partitions, bundle_key, bundle_path, keyed
from distributor_dagster.publish.uploads import staged_bundle, upload_store
from distributor_dagster.sensors.staging_scan import uploads_view
from distributor_dagster.site import Site
from distributor_dagster.sources import SourceSnapshot, newest, read_bundles


def _validate(pipeline: Pipeline, source: Storage, path: str) -> Outcome:
    try:
        bundle = load_valid_bundle(pipeline, source, path, RunOptions(dry_run=True))
    except BundleError as exc:
        return bundle_outcome(path, "", exc)
    return bundle_outcome(path, bundle.manifest.digest, None)


def _observe_uploads(
    context: Any, site: Site, pipeline: Pipeline, key: dg.AssetKey, validate: bool
) -> Iterator[Any]:
    errors: list[tuple[str, str]] = []
    with upload_store(pipeline, site.environment()) as store:
        records = store.records(errors)
        for run_id, error in errors:
            context.log.warning(f"unreadable upload record {run_id}: {error}")
        view = uploads_view(records, counted=store.counts_admissions)
        context.log.info(view.description())
        yield view.observe_result(key)
        if not validate:
            return
        staged = [r for r in records if store.has_bundle(r.run_id)]
        failed = []
        for record in staged:
            with staged_bundle(pipeline, record.run_id, store=store) as source:
                outcome = _validate(pipeline, source, "")
            if not outcome.passed:
                failed.append(f"upload {record.run_id}: {outcome.description}")
    description = "; ".join(failed) if failed else f"{len(staged)} staged upload(s) valid"
    yield dg.AssetCheckResult(asset_key=key, check_name=SOURCE_CHECK, passed=not failed, description=description,
                              metadata={"staged_uploads": dg.MetadataValue.int(len(staged))})


def observe_source(
    context: Any, site: Site, pipeline: Pipeline, names: PipelineNames, *, validate: bool
) -> Iterator[Any]:
    """The observe function of the source asset."""
    key = dg.AssetKey(list(names.source_key))
    if pipeline.is_upload:
        yield from _observe_uploads(context, site, pipeline, key, validate)
        return
    keys = run_partition_keys(context) if names.partitioned else None
    with open_source_storage(pipeline.source, site.environment(), dry_run=True) as source:
        paths = [bundle_path(k) for k in keys] if keys is not None else discover_bundles(source)
        seen, problems = read_bundles(source, paths)
        for problem in problems:
            context.log.warning(f"unreadable: {problem}")
        view = SourceSnapshot.of(seen)
        context.log.info(view.description() if keys is None else f"{len(seen)} bundle(s) observed")
        if not names.partitioned:
            yield view.observe_result(key)
            if validate:
                chosen = newest(seen)
                outcome = _validate(pipeline, source, chosen.path) if chosen is not None else \
                    Outcome(SOURCE_CHECK, True, "no bundle to validate", {})
                yield outcome.result(key)
            return
        good, refused = keyed(s.path for s in seen)
        for problem in refused:
            context.log.warning(problem)
        added = add_partitions(context.instance, names.partitions, good)
        if added:
            context.log.info(f"added {len(added)} bundle partition(s)")
        for bundle in seen:
            if bundle_key(bundle.path) in good:
                context.log_event(bundle.observation(key))
        if keys is None and names.newest_key is not None:
            context.log_event(view.observation(dg.AssetKey(list(names.newest_key))))
        if validate:
            for path in paths:
                if bundle_key(path) not in good and path in {s.path for s in seen}:
                    continue
                outcome = _validate(pipeline, source, path)
                context.log.info(f"{lp.display_path(path)}: {outcome.description}")
                context.log_event(outcome.evaluation(key, bundle_key(path), blocking=False))


def observe_newest(
    context: Any, site: Site, pipeline: Pipeline, names: PipelineNames, *, validate: bool
) -> Iterator[Any]:
    """The observe function of the newest bundle view of a mixed pipeline (with ``validate``, its
    check ``bundle_valid`` validates the newest bundle)."""
    assert names.newest_key is not None
    key = dg.AssetKey(list(names.newest_key))
    with open_source_storage(pipeline.source, site.environment(), dry_run=True) as source:
        seen, problems = read_bundles(source)
        for problem in problems:
            context.log.warning(f"unreadable: {problem}")
        view = SourceSnapshot.of(seen)
        context.log.info(view.description())
        yield view.observe_result(key)
        if validate:
            chosen = newest(seen)
            outcome = _validate(pipeline, source, chosen.path) if chosen is not None else \
                Outcome(SOURCE_CHECK, True, "no bundle to validate", {})
            yield outcome.result(key)

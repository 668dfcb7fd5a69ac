"""``watch_<pipeline>``: observes a local, ssh or s3 source and requests a publish run for each
new or changed bundle (dagster.md §2, resolutions E3, issue 12 items 1 and 6).

Every tick whose view of the source changed (newest bundle or bundle count) reports an
observation of the source asset with the newest bundle's digest as data version. With
``automation="eager"`` the sensor only observes: the destination assets' eager automation
condition publishes. The comparison is :mod:`.source_scan`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import dagster as dg

from distributor_core import paths as lp
from distributor_core.app.setup import SetupError, check_source_root
from distributor_core.config import Pipeline
from distributor_core.storage.factory import open_source_storage
from distributor_core.timefmt import parse_rfc3339
from distributor_dagster.names import PipelineNames
from distributor_dagster.pools import ensure_site_pools
from distributor_dagster.publish.job import run_config
from distributor_dagster.sensors.source_scan import Scan, format_cursor, parse_cursor, scan_source
from distributor_dagster.site import Site
from distributor_dagster.sources import Seen, SourceView

if TYPE_CHECKING:
    from dagster._core.definitions.unresolved_asset_job_definition import UnresolvedAssetJobDefinition


def source_view(scan: Scan) -> SourceView:
    """The source as this tick sees it: every complete bundle with a readable manifest."""
    seen = [
        Seen(path, bundle_id, digest, parse_rfc3339(created))
        for path, (digest, created, bundle_id) in scan.complete_bundles().items()
    ]
    return SourceView.of(seen)


def watch_sensor(
    site: Site, pipeline: Pipeline, names: PipelineNames, job: UnresolvedAssetJobDefinition
) -> dg.SensorDefinition:
    backend = pipeline.source.backend
    options = site.options
    source_key = dg.AssetKey(list(names.source_key))
    what = (
        "Observes the {backend} source of pipeline {pipeline} (its destination assets publish by their eager "
        "automation condition)" if options.eager else
        "Requests a {job} run for each new or changed bundle in the {backend} source of pipeline {pipeline}, "
        "and observes the source"
    )

    @dg.sensor(
        name=names.watch_sensor,
        job=job,
        minimum_interval_seconds=options.sensor_interval,
        default_status=options.default_sensor_status,
        description=what.format(backend=backend, pipeline=pipeline.id, job=names.publish_job) + ".",
    )
    def watch(context: dg.SensorEvaluationContext) -> dg.SensorResult:
        ensure_site_pools(context, site)
        cursor = parse_cursor(context.cursor)
        with open_source_storage(pipeline.source, site.environment(), dry_run=True) as source:
            try:  # a missing source root is this tick's error (resolutions G3), shown by Dagster
                check_source_root(pipeline, source)
            except SetupError as exc:
                context.log.error(str(exc))
                raise
            scan = scan_source(source, backend, cursor.known, created=cursor.created, ids=cursor.ids)
        for problem in scan.invalid:
            context.log.warning(f"skipping bundle with an unreadable manifest: {problem}")
        if scan.incomplete:
            context.log.info("waiting for incomplete bundle(s): " + ", ".join(map(lp.display_path, scan.incomplete)))
        view = source_view(scan)
        observed = f"{view.data_version} {view.bundle_count}"
        events = [view.observation(source_key)] if observed != cursor.observed else []
        requests = []
        # with eager automation nothing is requested, so every found bundle is handled at once
        limit = len(scan.found) if options.eager else options.max_runs_per_tick
        for found in scan.found[:limit]:
            if not options.eager:
                requests.append(
                    dg.RunRequest(
                        run_key=found.key,
                        run_config=run_config(names, bundle_path=found.bundle_path),
                        tags={
                            "distributor/pipeline": pipeline.id,
                            "distributor/bundle_id": found.bundle_id,
                            "distributor/bundle_path": lp.display_path(found.bundle_path),
                        },
                    )
                )
            scan.known[found.bundle_path] = found.key
        skip = None if requests or events else "no new or changed bundles"
        return dg.SensorResult(
            run_requests=requests,
            asset_events=events,
            cursor=format_cursor(scan, observed),
            skip_reason=skip,
        )

    return watch

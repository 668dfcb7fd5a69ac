"""``watch_<pipeline>``: a publish run for each new or changed bundle of a local, ssh or s3 source
(dagster.md §2, resolutions E3). The comparison is :mod:`.source_scan`."""

import dagster as dg

from distributor_core import paths as lp
from distributor_core.config import Pipeline
from distributor_core.storage.factory import open_source_storage
from distributor_dagster.names import PipelineNames
from distributor_dagster.pools import ensure_site_pools
from distributor_dagster.sensors.source_scan import format_cursor, parse_cursor, scan_source
from distributor_dagster.site import Site


def watch_sensor(site: Site, pipeline: Pipeline, names: PipelineNames, job: dg.JobDefinition) -> dg.SensorDefinition:
    backend = pipeline.source.backend
    options = site.options

    @dg.sensor(
        name=names.watch_sensor,
        job=job,
        minimum_interval_seconds=options.sensor_interval,
        default_status=options.default_sensor_status,
        description=f"Requests a {names.publish_job} run for each new or changed bundle in the {backend} source "
        f"of pipeline {pipeline.id}.",
    )
    def watch(context: dg.SensorEvaluationContext) -> dg.SensorResult:
        ensure_site_pools(context, site)
        known = parse_cursor(context.cursor)
        with open_source_storage(pipeline.source, site.environment(), dry_run=True) as source:
            scan = scan_source(source, backend, known)
        for problem in scan.invalid:
            context.log.warning(f"skipping bundle with an unreadable manifest: {problem}")
        if scan.incomplete:
            context.log.info("waiting for incomplete bundle(s): " + ", ".join(map(lp.display_path, scan.incomplete)))
        requests = []
        for found in scan.found[: options.max_runs_per_tick]:
            requests.append(
                dg.RunRequest(
                    run_key=found.key,
                    run_config={"ops": {"discover": {"config": {"bundle_path": found.bundle_path}}}},
                    tags={
                        "distributor/pipeline": pipeline.id,
                        "distributor/bundle_id": found.bundle_id,
                        "distributor/bundle_path": lp.display_path(found.bundle_path),
                    },
                )
            )
            scan.known[found.bundle_path] = found.key
        skip = None if requests else "no new or changed bundles"
        return dg.SensorResult(run_requests=requests, cursor=format_cursor(scan.known), skip_reason=skip)

    return watch

"""``uploads_<pipeline>``: a publish run for each accepted upload in the durable staging area
(dagster.md §3, resolutions D1).

The run key is the upload run id, so a record is never published twice, and the run carries the
tags ``distributor/upload_run_id``, ``distributor/pipeline`` and ``distributor/bundle_id``. The
cursor (:mod:`.staging_scan`) keeps ticks cheap however many records the staging area holds.
"""

import os
from pathlib import Path

import dagster as dg

from distributor_core import staging
from distributor_core.config import Pipeline
from distributor_dagster.names import PipelineNames
from distributor_dagster.sensors.staging_scan import UploadCursor, scan_staging
from distributor_dagster.site import Site


def upload_run_request(pipeline: Pipeline, record: staging.UploadRecord) -> dg.RunRequest:
    return dg.RunRequest(
        run_key=record.run_id,
        run_config={"ops": {"discover": {"config": {"upload_run_id": record.run_id}}}},
        tags={
            "distributor/upload_run_id": record.run_id,
            "distributor/pipeline": pipeline.id,
            "distributor/bundle_id": record.bundle_id,
        },
    )


def uploads_sensor(site: Site, pipeline: Pipeline, names: PipelineNames, job: dg.JobDefinition) -> dg.SensorDefinition:
    options = site.options
    where = Path(os.fspath(pipeline.source.staging_path))  # type: ignore[union-attr]

    @dg.sensor(
        name=names.uploads_sensor,
        job=job,
        minimum_interval_seconds=options.sensor_interval,
        default_status=options.default_sensor_status,
        description=f"Requests a {names.publish_job} run for each upload accepted by `distributor serve "
        f"--publisher dagster` for pipeline {pipeline.id}.",
    )
    def uploads(context: dg.SensorEvaluationContext) -> dg.SensorResult:
        scan = scan_staging(where, UploadCursor.parse(context.cursor), max_requests=options.max_runs_per_tick)
        for run_id, error in scan.errors:
            context.log.warning(f"skipping unreadable upload record {run_id}: {error}")
        requests = [upload_run_request(pipeline, record) for record in scan.pending]
        if scan.partial:
            context.log.info(f"read {scan.read} upload record(s); the next tick continues the scan")
        skip = None
        if not requests:
            skip = "no new uploads" if scan.idle else f"no accepted uploads among {scan.read} record(s) read"
        return dg.SensorResult(run_requests=requests, cursor=scan.cursor.format(), skip_reason=skip)

    return uploads

"""``uploads_<pipeline>``: a publish run for each accepted upload in the durable staging area
(dagster.md §3, resolutions D1).

The run key is the upload run id, so a record is never published twice, and the run carries the
tags ``distributor/upload_run_id``, ``distributor/pipeline`` and ``distributor/bundle_id``. The
cursor (:mod:`.staging_scan`) keeps ticks cheap however many records the staging area holds. A
tick that finds new uploads also observes the source asset (the staging area): its data version
is the digest of the newest upload admitted.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import dagster as dg

from distributor_core import staging
from distributor_core.config import Pipeline
from distributor_dagster.names import PipelineNames
from distributor_dagster.pools import ensure_pipeline_pools, pipeline_pools
from distributor_dagster.publish.job import run_config
from distributor_dagster.sensors.staging_scan import UploadCursor, scan_staging, uploads_view
from distributor_dagster.site import Site

if TYPE_CHECKING:
    from dagster._core.definitions.unresolved_asset_job_definition import UnresolvedAssetJobDefinition


def upload_run_request(pipeline: Pipeline, names: PipelineNames, record: staging.UploadRecord) -> dg.RunRequest:
    return dg.RunRequest(
        run_key=record.run_id,
        run_config=run_config(names, upload_run_id=record.run_id),
        tags={
            "distributor/upload_run_id": record.run_id,
            "distributor/pipeline": pipeline.id,
            "distributor/bundle_id": record.bundle_id,
        },
    )


def uploads_sensor(
    site: Site, pipeline: Pipeline, names: PipelineNames, job: UnresolvedAssetJobDefinition
) -> dg.SensorDefinition:
    options = site.options
    pools = pipeline_pools(pipeline)  # once, at load
    where = Path(os.fspath(pipeline.source.staging_path))  # type: ignore[union-attr]
    source_key = dg.AssetKey(list(names.source_key))

    @dg.sensor(
        name=names.uploads_sensor,
        job=job,
        minimum_interval_seconds=options.sensor_interval,
        default_status=options.default_sensor_status,
        description=f"Requests a {names.publish_job} run for each upload accepted by `distributor serve "
        f"--publisher dagster` for pipeline {pipeline.id}.",
    )
    def uploads(context: dg.SensorEvaluationContext) -> dg.SensorResult:
        ensure_pipeline_pools(context, pools)
        scan = scan_staging(where, UploadCursor.parse(context.cursor), max_requests=options.max_runs_per_tick)
        for run_id, error in scan.errors:
            context.log.warning(f"skipping unreadable upload record {run_id}: {error}")
        requests = [upload_run_request(pipeline, names, record) for record in scan.pending]
        events = [uploads_view(scan.pending, admitted=scan.cursor.seq).observation(source_key)] if requests else []
        if scan.partial:
            context.log.info(f"read {scan.read} upload record(s); the next tick continues the scan")
        skip = None
        if not requests:
            skip = "no new uploads" if scan.idle else f"no accepted uploads among {scan.read} record(s) read"
        return dg.SensorResult(
            run_requests=requests, asset_events=events, cursor=scan.cursor.format(), skip_reason=skip
        )

    return uploads

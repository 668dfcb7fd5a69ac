"""``uploads_<pipeline>``: publish runs for the uploads accepted into the durable staging area
(dagster.md §3, resolutions D1; issue 28: batched runs).

A tick that finds new ``accepted`` records requests runs of at most ``bundles_per_run`` uploads
each, in admission order (``upload_run_ids`` of the run settings, ``resources.publish.config``), so N uploads cost about
N / ``bundles_per_run`` run workers instead of N; each upload's record still gets its own outcome
and the Dagster run id. A run carries the tags ``distributor/pipeline`` and, per upload,
``distributor/upload.<stamp>.<hex>`` (:func:`~distributor_dagster.upload_status.upload_tag`); a
run of one upload also ``distributor/upload_run_id`` and ``distributor/bundle_id``. The run key
is the upload run id for one upload, ``<first>..<last>`` for a batch. Tag values and the run key
(a tag too) longer than PostgreSQL indexes are shortened with a hash
(:func:`~distributor_dagster.tags.tag_value`); the full bundle id is in the upload record.

Which uploads a tick requests is the upload store's answer
(:meth:`~distributor_core.staging.store.UploadStore.scan_accepted`, :mod:`distributor_core.staging.accepted`).
On a local staging path the cursor passes every record it requests, so no record is requested
twice (a record offered again after one the inline publisher holds gets a run of its own, keyed by
its run id), and keeps ticks cheap however many records the staging area holds. On a shared
``s3://`` staging store (issue 29) a tick lists the store's pending markers (one per unfinished
upload) and the cursor remembers which were handed out, so an upload a slower ``serve`` replica
admitted after later ones is requested at the next tick. A tick that finds new uploads also
observes the source asset (the staging area): its data version is the digest of the newest upload
admitted.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import dagster as dg

from distributor_core import staging
from distributor_core.config import Pipeline
from distributor_core.staging.store import open_upload_store
from distributor_dagster.names import PipelineNames
from distributor_dagster.pools import ensure_pipeline_pools, pipeline_pools
from distributor_dagster.publish.config import run_config
from distributor_dagster.sensors.staging_scan import uploads_view
from distributor_dagster.site import Site
from distributor_dagster.tags import tag_value, tag_values
from distributor_dagster.upload_status import upload_tag

if TYPE_CHECKING:
    from dagster._core.definitions.unresolved_asset_job_definition import UnresolvedAssetJobDefinition


def upload_run_request(
    pipeline: Pipeline, names: PipelineNames, batch: Sequence[staging.UploadRecord], prefix: str = ""
) -> dg.RunRequest:
    """The run publishing ``batch`` (admission order)."""
    first, last = batch[0], batch[-1]
    tags = {"distributor/pipeline": pipeline.id, **dict(upload_tag(record.run_id) for record in batch)}
    if len(batch) == 1:
        tags.update({"distributor/upload_run_id": first.run_id, "distributor/bundle_id": first.bundle_id})
    else:
        tags["distributor/uploads"] = str(len(batch))
    return dg.RunRequest(
        run_key=tag_value(first.run_id if len(batch) == 1 else f"{first.run_id}..{last.run_id}"),
        run_config=run_config(prefix, upload_run_ids=[record.run_id for record in batch]),
        tags=tag_values(tags),
    )


def uploads_sensor(
    site: Site, pipeline: Pipeline, names: PipelineNames, job: UnresolvedAssetJobDefinition
) -> dg.SensorDefinition:
    options = site.options
    pools = pipeline_pools(pipeline)  # once, at load
    source_key = dg.AssetKey(list(names.source_key))

    @dg.sensor(
        name=names.uploads_sensor,
        job=job,
        minimum_interval_seconds=options.sensor_interval,
        default_status=options.sensor_status,
        description=f"Requests {names.publish_job} runs, of at most {options.bundles_per_run} uploads each, for "
        f"the uploads accepted by `distributor serve --publisher dagster` for pipeline {pipeline.id}.",
    )
    def uploads(context: dg.SensorEvaluationContext) -> dg.SensorResult:
        ensure_pipeline_pools(context, pools)
        store = open_upload_store(pipeline, site.environment())  # secrets resolve at tick time
        try:
            scan = store.scan_accepted(context.cursor, limit=options.max_runs_per_tick * options.bundles_per_run,
                                       batch_size=options.bundles_per_run)
            counted = store.counts_admissions
        finally:
            store.close()
        for run_id, error in scan.errors:
            context.log.warning(f"skipping unreadable upload record {run_id}: {error}")
        for run_id in scan.abandoned:
            context.log.info(f"removed the pending marker of upload {run_id}: its admission never completed")
        requests = [upload_run_request(pipeline, names, batch, options.name_prefix) for batch in scan.runs]
        events = [uploads_view(scan.offered, admitted=scan.admitted, counted=counted).observation(source_key)] \
            if requests else []
        if scan.partial:
            context.log.info(f"read {scan.read} upload record(s); the next tick continues the scan")
        skip = None
        if not requests:
            skip = "no new uploads" if scan.idle else f"no accepted uploads among {scan.read} record(s) read"
        return dg.SensorResult(
            run_requests=requests, asset_events=events, cursor=scan.cursor, skip_reason=skip
        )

    return uploads

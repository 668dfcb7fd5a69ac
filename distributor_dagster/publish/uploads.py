"""The publish run's side of the durable upload staging area (resolutions D1, dagster.md §3).

A publish run of an ``http_upload`` pipeline marks its upload record ``running`` when it starts,
``succeeded`` or ``failed`` with the run report when it ends (which removes ``bundle/`` on
success). Dry runs never touch the record.
"""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from distributor_core import staging
from distributor_core.app.report import RunReport
from distributor_core.config import Config, Pipeline
from distributor_core.staging import host_redactions
from distributor_core.timefmt import Clock


def staging_path(pipeline: Pipeline) -> Path:
    return Path(pipeline.source.staging_path)  # type: ignore[union-attr]


def open_upload(pipeline: Pipeline, upload_run_id: str) -> staging.UploadRecord:
    """The record of ``upload_run_id``; a :class:`dagster.Failure` when it cannot be published."""
    where = staging_path(pipeline)
    if not staging.is_run_id(upload_run_id):
        raise dg.Failure(f"upload_run_id {upload_run_id!r} is not an upload run id")
    try:
        record = staging.read_record(where, upload_run_id)
    except FileNotFoundError:
        raise dg.Failure(f"upload {upload_run_id} is not in the staging area of pipeline {pipeline.id}") from None
    except (OSError, staging.RecordError) as exc:
        raise dg.Failure(f"upload {upload_run_id}: {exc}") from None
    if record.pipeline_id != pipeline.id:
        raise dg.Failure(f"upload {upload_run_id} belongs to pipeline {record.pipeline_id}, not {pipeline.id}")
    if record.status == staging.SUCCEEDED:
        raise dg.Failure(f"upload {upload_run_id} was already published (status succeeded)")
    if not staging.bundle_dir(where, upload_run_id).is_dir():
        raise dg.Failure(f"the staged bundle of upload {upload_run_id} is gone")
    return record


def bundle_root(pipeline: Pipeline, upload_run_id: str) -> str:
    return str(staging.bundle_dir(staging_path(pipeline), upload_run_id))


def mark_running(pipeline: Pipeline, upload_run_id: str, dagster_run_id: str, clock: Clock | None) -> None:
    staging.mark_running(staging_path(pipeline), upload_run_id, dagster_run_id=dagster_run_id, clock=clock)


def mark_finished(
    config: Config,
    pipeline: Pipeline,
    upload_run_id: str,
    dagster_run_id: str,
    *,
    report: RunReport | None = None,
    error: str = "",
    clock: Clock | None = None,
) -> staging.UploadRecord:
    """Record the end of the publication; host paths are scrubbed from the stored error and
    report exactly as the inline publisher does (resolutions D2)."""
    return staging.mark_finished(
        staging_path(pipeline),
        upload_run_id,
        report=report,
        error=error,
        dagster_run_id=dagster_run_id,
        clock=clock,
        redact=host_redactions(config),
    )


def waiting(pipeline: Pipeline) -> list[staging.UploadRecord]:
    """The uploads still waiting to be published (``accepted``), in admission order, whose staged
    bundle is there."""
    where = staging_path(pipeline)
    records = staging.list_records(where, errors=[])
    return [
        record for record in records
        if record.status == staging.ACCEPTED and record.pipeline_id == pipeline.id
        and staging.bundle_dir(where, record.run_id).is_dir()
    ]


def fail(site_config: Config, pipeline: Pipeline, upload_run_id: str, dagster_run_id: str, error: str,
         dry_run: bool, clock: Clock | None = None) -> None:
    """Record a failed publication of an upload (never for dry runs, which leave the record alone)."""
    if not dry_run:
        mark_finished(site_config, pipeline, upload_run_id, dagster_run_id, error=error, clock=clock)

"""The publish run's side of the durable upload staging area (resolutions D1, dagster.md §3).

A publish run of an ``http_upload`` pipeline marks each of its upload records ``running`` when it
starts, ``succeeded`` or ``failed`` with that upload's own run report when it ends (which removes
the staged bundle on success), each with the Dagster run id. A run publishes one upload, a batch
(the uploads sensor's ``upload_run_ids``) or every waiting one. A re-execution publishes only the
uploads of its parent not yet published (:func:`still_to_publish`). Dry runs never touch a record.

Every read and status change goes through the pipeline's upload store
(:func:`~distributor_core.staging.store.open_upload_store`): a local staging directory, or a shared
``s3://`` staging store (issue 29), whose staged bundles a run reads from the bucket
(:func:`staged_bundle`), so run workers need no disk shared with ``serve``. A shared store's
credentials resolve like an S3 destination's, through the site's environment, at run time.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

import dagster as dg

from distributor_core import staging
from distributor_core.app.report import RunReport
from distributor_core.config import Config, Environment, Pipeline
from distributor_core.staging import host_redactions
from distributor_core.staging.store import UploadStore, open_upload_store
from distributor_core.storage import Storage, StorageError
from distributor_core.timefmt import Clock
from distributor_dagster.publish.model import Validated

#: what reading a record or a staged bundle may raise besides :class:`FileNotFoundError`
READ_ERRORS = (OSError, staging.RecordError, StorageError)


@contextmanager
def upload_store(pipeline: Pipeline, env: Environment | None = None,
                 store: UploadStore | None = None) -> Iterator[UploadStore]:
    """``store`` when given (left open), else the pipeline's upload store, closed afterwards."""
    if store is not None:
        yield store
        return
    opened = open_upload_store(pipeline, env)
    try:
        yield opened
    finally:
        opened.close()


@contextmanager
def item_store(pipeline: Pipeline, env: Environment | None = None) -> Iterator[UploadStore | None]:
    """The upload store of an ``http_upload`` pipeline for the length of a step (closed after it);
    ``None`` for other pipelines."""
    if not pipeline.is_upload:
        yield None
        return
    with upload_store(pipeline, env) as store:
        yield store


@contextmanager
def staged_bundle(pipeline: Pipeline, upload_run_id: str, env: Environment | None = None,
                  store: UploadStore | None = None) -> Iterator[Storage]:
    """The staged bundle of an upload as a source storage (bundle path ``""``): a local
    directory, or the bundle's prefix in the shared staging bucket."""
    with upload_store(pipeline, env, store) as where:
        source = where.open_bundle(upload_run_id)
        try:
            yield source
        finally:
            source.close()


def open_upload(pipeline: Pipeline, upload_run_id: str, store: UploadStore) -> staging.UploadRecord:
    """The record of ``upload_run_id``; a :class:`dagster.Failure` when it cannot be published."""
    if not staging.is_run_id(upload_run_id):
        raise dg.Failure(f"upload_run_id {upload_run_id!r} is not an upload run id")
    try:
        record = store.read(upload_run_id)
    except FileNotFoundError:
        raise dg.Failure(f"upload {upload_run_id} is not in the staging area of pipeline {pipeline.id}") from None
    except READ_ERRORS as exc:
        raise dg.Failure(f"upload {upload_run_id}: {exc}") from None
    if record.pipeline_id != pipeline.id:
        raise dg.Failure(f"upload {upload_run_id} belongs to pipeline {record.pipeline_id}, not {pipeline.id}")
    if record.status == staging.SUCCEEDED:
        raise dg.Failure(f"upload {upload_run_id} was already published (status succeeded)")
    if not store.has_bundle(upload_run_id):
        raise dg.Failure(f"the staged bundle of upload {upload_run_id} is gone")
    return record


def mark_running(store: UploadStore, upload_run_id: str, dagster_run_id: str, clock: Clock | None) -> None:
    store.mark_running(upload_run_id, dagster_run_id=dagster_run_id, clock=clock)


def mark_finished(
    config: Config,
    pipeline: Pipeline,
    upload_run_id: str,
    dagster_run_id: str,
    *,
    report: RunReport | None = None,
    error: str | BaseException = "",
    clock: Clock | None = None,
    store: UploadStore | None = None,
    env: Environment | None = None,
) -> staging.UploadRecord:
    """Record the end of the publication: the record keeps what a producer may read (the failure
    class and a short reason; an ``error`` exception is classified, other text is the run log's)
    exactly as the inline publisher's does (resolutions D2, issue 35 item 7)."""
    with upload_store(pipeline, env, store) as where:
        return where.mark_finished(
            upload_run_id,
            report=report,
            error=error,
            dagster_run_id=dagster_run_id,
            clock=clock,
            redact=host_redactions(config),
        )


def waiting(pipeline: Pipeline, store: UploadStore) -> list[staging.UploadRecord]:
    """The uploads still waiting to be published (``accepted``), in admission order, whose staged
    bundle is there."""
    return [record for record in store.waiting() if record.pipeline_id == pipeline.id]


def fail(site_config: Config, pipeline: Pipeline, upload_run_id: str, dagster_run_id: str, error: str | BaseException,
         dry_run: bool, clock: Clock | None = None, *, store: UploadStore | None = None,
         env: Environment | None = None) -> None:
    """Record a failed publication of an upload (never for dry runs, which leave the record alone)."""
    if not dry_run:
        mark_finished(site_config, pipeline, upload_run_id, dagster_run_id, error=error, clock=clock, store=store,
                      env=env)


def _in_progress_elsewhere(instance: dg.DagsterInstance, record: staging.UploadRecord, dagster_run_id: str) -> str:
    """Why another publication owns ``record`` right now (``""``: none does): the inline
    publisher, or another Dagster run still in progress."""
    if record.status == staging.QUEUED or (record.status == staging.RUNNING and not record.dagster_run_id):
        return "the inline publisher owns it"
    if record.status == staging.RUNNING and record.dagster_run_id and record.dagster_run_id != dagster_run_id:
        other = instance.get_run_by_id(record.dagster_run_id)
        if other is not None and not other.is_finished:
            return f"Dagster run {other.run_id} is publishing it"
    return ""


def batch_records(
    context: dg.OpExecutionContext, config: Config, pipeline: Pipeline, upload_run_ids: list[str], *, dry_run: bool,
    store: UploadStore, clock: Clock | None = None,
) -> list[staging.UploadRecord]:
    """The uploads of a batch this run publishes, in the order named. One upload's problem never
    stops the others: an upload already published, or owned by another publication in progress,
    is passed over (logged); an unknown one is logged; one whose staged bundle is gone is recorded
    ``failed`` with the reason."""
    chosen: list[staging.UploadRecord] = []
    for run_id in dict.fromkeys(upload_run_ids):
        if not staging.is_run_id(run_id) or staging.run_id_pipeline(run_id) != pipeline.id:
            context.log.error(f"upload_run_ids: {run_id!r} is not an upload run id of pipeline {pipeline.id}")
            continue
        try:
            record = store.read(run_id)
        except FileNotFoundError:
            context.log.warning(f"upload {run_id} is not in the staging area of pipeline {pipeline.id} (expired?)")
            continue
        except READ_ERRORS as exc:
            context.log.error(f"upload {run_id}: {exc}")
            continue
        if record.status == staging.SUCCEEDED:
            context.log.info(f"upload {run_id} was already published (Dagster run {record.dagster_run_id})")
            continue
        owner = _in_progress_elsewhere(context.instance, record, context.run_id)
        if owner:
            context.log.info(f"upload {run_id} is passed over: {owner}")
            continue
        if not store.has_bundle(run_id):
            error = staging.PublicText(f"the staged bundle of upload {run_id} is gone")
            context.log.error(error)
            if not dry_run:
                mark_finished(config, pipeline, run_id, context.run_id, error=error, clock=clock, store=store)
            continue
        chosen.append(record)
    return chosen


def still_to_publish(
    context: dg.OpExecutionContext, config: Config, pipeline: Pipeline, validated: Validated,
    clock: Clock | None = None, *, env: Environment | None = None,
) -> Validated:
    """The valid uploads a publish or report step still publishes. In a first run: every one.
    In a re-execution (its steps take ``validated`` from the parent run): those not yet published
    (a ``succeeded`` record is passed over: its staged bundle is gone), each marked ``running``
    under this run; none owned by another publication in progress. Dry runs: every one."""
    if validated.selection.dry_run or not validated.valid:
        return validated
    keep = []
    with upload_store(pipeline, env) as store:
        for valid in validated.valid:
            run_id = valid.item.upload_run_id
            if not run_id:
                keep.append(valid)
                continue
            try:
                record = store.read(run_id)
            except READ_ERRORS as exc:
                context.log.warning(f"upload {run_id} is passed over: its record cannot be read: {exc}")
                continue
            if record.status == staging.SUCCEEDED:
                context.log.info(f"upload {run_id} was already published (Dagster run {record.dagster_run_id})")
                continue
            if record.dagster_run_id != context.run_id or record.status != staging.RUNNING:
                owner = _in_progress_elsewhere(context.instance, record, context.run_id)
                if owner:
                    context.log.info(f"upload {run_id} is passed over: {owner}")
                    continue
                mark_running(store, run_id, context.run_id, clock)
            keep.append(valid)
    if len(keep) == len(validated.valid):
        return validated
    return replace(validated, valid=tuple(keep))

"""One pipeline's staged uploads as publishers see them, wherever they are kept (issue 29).

:class:`UploadStore` is what the inline publisher, the Dagster uploads sensor and the Dagster
publish runs ask of staging: read a record, list them, open a staged bundle as a source, and move
a record through the status table. Two implementations:

- :class:`LocalUploadStore`: today's staging directory of one ``serve`` process (``upload.json``
  and ``bundle/`` under ``<staging path>/<run id>``);
- :class:`SharedUploadStore`: a pipeline's part of an ``s3://`` staging root that any number of
  ``serve`` replicas share (:mod:`.objectstore`): every status change is a compare-and-swap on the
  record's ETag, and a bundle is read from the bucket, so run workers need no shared disk.

:func:`open_upload_store` picks the one a pipeline's config names; callers never look behind it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import timedelta
from pathlib import Path
from typing import Any, Protocol

from distributor_core.config import HTTPUploadSource, Pipeline
from distributor_core.staging import records as rc
from distributor_core.staging.accepted import AcceptedScan, scan_local, scan_pending
from distributor_core.staging.layout import RecordError, bundle_dir
from distributor_core.staging.objectstore import ObjectStagingStore
from distributor_core.staging.redact import staging_redactions
from distributor_core.staging.scan import list_records
from distributor_core.staging.status import ACCEPTED
from distributor_core.storage import Storage, StorageError, is_not_found
from distributor_core.storage.local import LocalStorage
from distributor_core.timefmt import Clock


class UploadStore(Protocol):
    """One pipeline's staged uploads (see the module docstring)."""

    pipeline_id: str
    #: where the uploads are staged, for messages (a directory, or ``s3://bucket/prefix``)
    display: str
    #: whether ``seq`` counts admissions (a local staging path's counter; a shared store's numbers
    #: are times), so the highest ``seq`` is the number of uploads admitted
    counts_admissions: bool

    def read(self, run_id: str) -> rc.UploadRecord:
        """The record; :class:`FileNotFoundError` when there is none, :class:`RecordError` when it
        is malformed or names another run."""
        ...

    def records(self, errors: list[tuple[str, str]]) -> list[rc.UploadRecord]:
        """Every readable record in admission order; unreadable ones are appended to ``errors``."""
        ...

    def waiting(self) -> list[rc.UploadRecord]:
        """The ``accepted`` uploads whose staged bundle is there, in admission order."""
        ...

    def has_bundle(self, run_id: str) -> bool: ...

    def open_bundle(self, run_id: str) -> Storage:
        """The staged bundle of ``run_id`` as a source storage (bundle path ``""``); the caller
        closes it."""
        ...

    def mark_running(self, run_id: str, *, dagster_run_id: str | None = None,
                     clock: Clock | None = None) -> rc.UploadRecord: ...

    def mark_finished(self, run_id: str, *, report: Any = None, error: str | BaseException = "",
                      dagster_run_id: str | None = None,
                      clock: Clock | None = None, redact: Iterable[tuple[str, str]] = ()) -> rc.UploadRecord:
        """End a publication (:func:`~.records.finished_changes`); a succeeded upload's bundle is
        removed."""
        ...

    def hand_back(self, run_id: str) -> rc.UploadRecord:
        """``queued`` or an interrupted inline ``running`` → ``accepted``, for the Dagster sensor."""
        ...

    def close(self) -> None: ...

    def bundle_location(self, run_id: str) -> str:
        """Where the staged bundle of ``run_id`` is, for messages: its directory, or
        ``s3://bucket/prefix/bundles/<run id>``."""
        ...

    def scan_accepted(self, cursor: str | None, *, limit: int, batch_size: int) -> AcceptedScan:
        """One tick of the Dagster uploads sensor from its cursor text: the ``accepted`` uploads not
        requested before (at most ``limit``) in runs of at most ``batch_size``, and the next cursor
        (:mod:`.accepted`). An upload admitted late by a slower replica is never passed over."""
        ...


class LocalUploadStore:
    """The staging directory of one ``serve`` process."""

    def __init__(self, pipeline_id: str, path: str | Path) -> None:
        self.pipeline_id = pipeline_id
        self.path = Path(path)
        self.display = str(self.path)
        self.counts_admissions = True

    def read(self, run_id: str) -> rc.UploadRecord:
        return rc.read_record(self.path, run_id)

    def records(self, errors: list[tuple[str, str]]) -> list[rc.UploadRecord]:
        return list_records(self.path, errors=errors)

    def waiting(self) -> list[rc.UploadRecord]:
        return [r for r in self.records([]) if r.status == ACCEPTED and r.pipeline_id == self.pipeline_id
                and self.has_bundle(r.run_id)]

    def has_bundle(self, run_id: str) -> bool:
        return bundle_dir(self.path, run_id).is_dir()

    def open_bundle(self, run_id: str) -> Storage:
        return LocalStorage(bundle_dir(self.path, run_id), display="upload")

    def mark_running(self, run_id: str, *, dagster_run_id: str | None = None,
                     clock: Clock | None = None) -> rc.UploadRecord:
        return rc.mark_running(self.path, run_id, dagster_run_id=dagster_run_id, clock=clock)

    def mark_finished(self, run_id: str, *, report: Any = None, error: str | BaseException = "",
                      dagster_run_id: str | None = None,
                      clock: Clock | None = None, redact: Iterable[tuple[str, str]] = ()) -> rc.UploadRecord:
        return rc.mark_finished(self.path, run_id, report=report, error=error, dagster_run_id=dagster_run_id,
                                clock=clock, redact=redact)

    def hand_back(self, run_id: str) -> rc.UploadRecord:
        return rc.hand_back(self.path, run_id)

    def close(self) -> None:
        pass

    def bundle_location(self, run_id: str) -> str:
        return str(bundle_dir(self.path, run_id))

    def scan_accepted(self, cursor: str | None, *, limit: int, batch_size: int) -> AcceptedScan:
        return scan_local(self.path, cursor, limit=limit, batch_size=batch_size)


class SharedUploadStore:
    """A pipeline's part of a shared ``s3://`` staging root (:class:`.objectstore.ObjectStagingStore`)."""

    def __init__(self, store: ObjectStagingStore, display: str, scratch: str | Path | None = None) -> None:
        self.store = store
        self.pipeline_id = store.pipeline_id
        self.display = display
        self.counts_admissions = False
        #: this host's directory for uploads being received (scrubbed from errors like a path)
        self.scratch = scratch

    def read(self, run_id: str) -> rc.UploadRecord:
        try:
            found = self.store.read(run_id)
        except StorageError as exc:
            if is_not_found(exc):
                raise FileNotFoundError(f"upload record {run_id} does not exist") from None
            raise RecordError(f"upload record {run_id} cannot be read: {exc}") from None
        if found is None:
            raise FileNotFoundError(f"upload record {run_id} does not exist")
        return found.record

    def records(self, errors: list[tuple[str, str]]) -> list[rc.UploadRecord]:
        return self.store.records(errors)

    def waiting(self) -> list[rc.UploadRecord]:
        return [v.record for v in self.store.unfinished() if v.record.status == ACCEPTED]

    def has_bundle(self, run_id: str) -> bool:
        bundle = self.store.bundle_prefix(run_id)
        try:
            return bool(self.store.storage.scan(bundle, limit=1, include_reserved=True).entries)
        except StorageError as exc:
            if is_not_found(exc):
                return False
            raise

    def open_bundle(self, run_id: str) -> Storage:
        below = getattr(self.store.storage, "below", None)
        if below is None:
            raise RecordError(f"the staged bundle of upload {run_id} cannot be opened from {self.display}")
        storage: Storage = below(self.store.bundle_prefix(run_id))
        return storage

    def mark_running(self, run_id: str, *, dagster_run_id: str | None = None,
                     clock: Clock | None = None) -> rc.UploadRecord:
        return self.store.transition(run_id, **rc.running_changes(dagster_run_id=dagster_run_id, clock=clock)).record

    def mark_finished(self, run_id: str, *, report: Any = None, error: str | BaseException = "",
                      dagster_run_id: str | None = None,
                      clock: Clock | None = None, redact: Iterable[tuple[str, str]] = (),
                      fence: Callable[[], None] | None = None) -> rc.UploadRecord:
        """As :meth:`UploadStore.mark_finished`; ``fence`` (the inline publisher's lease check)
        runs right before the record is written: a publisher that lost its lease writes nothing."""
        pairs = [*redact, (f"{self.display}/{self.store.bundle_prefix(run_id)}", "<upload>"),
                 (self.display, "<staging>")]
        if self.scratch is not None:
            pairs.extend(staging_redactions(self.scratch))
        current = self.read(run_id)
        changes = rc.finished_changes(current, report=report, error=error, dagster_run_id=dagster_run_id,
                                      clock=clock, redact=pairs)
        return self.store.transition(run_id, fence=fence, **changes).record

    def hand_back(self, run_id: str) -> rc.UploadRecord:
        return self.store.transition(run_id, status=ACCEPTED, started_at=None).record

    def close(self) -> None:
        self.store.storage.close()

    def bundle_location(self, run_id: str) -> str:
        return f"{self.display}/{self.store.bundle_prefix(run_id)}"

    def scan_accepted(self, cursor: str | None, *, limit: int, batch_size: int) -> AcceptedScan:
        return scan_pending(self.store, cursor, limit=limit, batch_size=batch_size)


def shared_display(source: HTTPUploadSource) -> str:
    store = source.staging_store
    assert store is not None
    return store.location()


#: botocore's attempts per request to a shared staging store: an upload waiting on a store that
#: does not answer gets its ``503`` within about three seconds (two retries, backing off up to 1 and
#: 2 s) and retries itself; every loop over the store (publishers, expiry, sensors) looks again
STAGING_ATTEMPTS = 3


def open_upload_store(pipeline: Pipeline, env: Any = None, *, admission_lease: timedelta | None = None) -> UploadStore:
    """The upload store of an ``http_upload`` pipeline: its shared S3 staging (credentials
    resolved through ``env`` as for S3 destinations; ``admission_lease``: its key claims'
    lease, ``server.http.admission_lease``) or its local staging directory."""
    source = pipeline.source
    if not isinstance(source, HTTPUploadSource):
        raise ValueError(f"pipeline {pipeline.id} has no http_upload source")
    if source.staging_store is None:
        return LocalUploadStore(pipeline.id, source.staging_path)
    from distributor_core.storage.s3 import S3Storage

    storage = S3Storage.from_config(source.staging_store, env, context="server.http.staging_s3",
                                    max_attempts=STAGING_ATTEMPTS)
    store = ObjectStagingStore(storage, pipeline.id, **({"abandon_after": admission_lease} if admission_lease else {}))
    return SharedUploadStore(store, shared_display(source), source.staging_path)


__all__ = ["AcceptedScan", "LocalUploadStore", "SharedUploadStore", "UploadStore", "open_upload_store"]

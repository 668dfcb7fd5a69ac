"""The upload coordinator on a shared S3 staging store (issue 29): any number of ``serve``
replicas, active-active, behind an ordinary load balancer.

Same contract as :class:`~.service.UploadService` (the routes cannot tell them apart), but no
state that matters lives in this process: an upload is received and extracted into this
process's private scratch directory, then the validated bundle is streamed to the store and the
upload admitted there (:class:`~distributor_core.staging.objectstore.ObjectStagingStore`):

1. the bundle, file by file (multipart parts of bounded size, sizes and digests checked);
2. the idempotency key claim (the core's lease, created with ``If-None-Match: *``): the one
   admission of a ``(token, key)`` scope, whichever replica got the request (a second replica
   answers the replay, or ``409 key in flight`` while the first is still admitting);
3. the record (``If-None-Match``), the key claim settled (a compare-and-swap that fails when
   another replica took the claim over meanwhile: the record is removed again and the request
   answered as the winner's replay), then the pending marker: only then is ``202`` answered.

Status reads go to the store, so ``GET /runs/<id>`` answers on any replica. Statuses change by
compare-and-swap on the record's ETag. Admission order is time-ordered numbers, no shared counter
(:mod:`~distributor_core.staging.ordering`).
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from distributor_core import staging as sg
from distributor_core.app.run_options import RunOptions
from distributor_core.bundle import MANIFEST_NAME, Manifest, manifest_to_obj
from distributor_core.config import Config, Environment, UploadGrant, UploadTokenTable
from distributor_core.lease import pid_alive
from distributor_core.server import errors
from distributor_core.server.archive import extract_bundle
from distributor_core.server.pathroom import PathRoom
from distributor_core.server.queueview import QueueView
from distributor_core.server.reservations import Reservations
from distributor_core.server.service import (
    NO_UPLOAD_PIPELINE,
    Accepted,
    DagsterLookup,
    PublisherMode,
    Ticket,
    dagster_overlay,
)
from distributor_core.staging import RandomSuffix, StagingSetupError, ensure_private_dir, new_run_id, random_suffix
from distributor_core.staging.objectstore import ObjectStagingStore, StoreConflict
from distributor_core.staging.store import SharedUploadStore, UploadStore, open_upload_store
from distributor_core.storage import StorageError
from distributor_core.timefmt import Clock, now_seconds

log = logging.getLogger("distributor.server")

#: a replica's scratch directory: ``serve-<pid>-<random>`` under the scratch root
SCRATCH_PREFIX = "serve-"
#: scratch directories made by this process (its services' own, never swept by another of them)
_MADE_HERE: set[Path] = set()
#: longest S3 object key; a staged file whose key would be longer is refused at upload
MAX_KEY_LENGTH = 1024


@dataclass
class SharedPipeline:
    uploads: SharedUploadStore
    scratch: Path
    max_upload_size: int
    room: PathRoom

    @property
    def store(self) -> ObjectStagingStore:
        return self.uploads.store


class SharedUploadService:
    """Every ``http_upload`` pipeline of a config on its part of a shared S3 staging store."""

    def __init__(
        self,
        config: Config,
        *,
        env: Environment,
        tokens: UploadTokenTable,
        mode: PublisherMode = "inline",
        clock: Clock | None = None,
        suffix: RandomSuffix = random_suffix,
        lookup_dagster_run: DagsterLookup | None = None,
    ) -> None:
        if mode not in ("inline", "dagster"):
            raise ValueError("publisher must be inline or dagster")
        self.config = config
        self.env = env
        self.tokens = tokens
        self.mode: PublisherMode = mode
        self.clock = clock
        self.suffix = suffix
        self.lookup_dagster_run = lookup_dagster_run
        self.http = config.server.http
        self.pipelines: dict[str, SharedPipeline] = {}
        self.scratch: Path | None = None
        self.token_share = self.http.queue_share(len(config.upload_tokens))
        self.redactions = sg.host_redactions(config)
        #: how long a publication waits for a destination lock another writer renews (a dead
        #: writer's lock, which stops changing, is waited out until it expires)
        self.lock_wait = RunOptions().lock_wait
        self._lock = threading.Lock()
        #: requests being received and the idempotency scopes they hold (under ``_lock``)
        self._requests = Reservations()
        #: the whole store's unfinished uploads and their tokens, listed in the background
        self.queue = QueueView(lambda: [p.store for p in self.pipelines.values()])
        self._janitor_stop = threading.Event()
        #: set after each admission (the inline publisher wakes up at once)
        self.admitted = threading.Event()
        #: kept for the runtime's interface: a shared store hands nothing over in memory
        self.on_accepted = None
        self.on_settled = None

    # ------------------------------------------------------------------ lifecycle

    def open(self) -> list[sg.UploadRecord]:
        """Make this process's scratch directory and reach every pipeline's store (a listing, so
        a wrong bucket, endpoint or credentials stop ``serve`` before it listens). Nothing is
        handed over: unfinished uploads are taken from the store by whichever replica is free."""
        upload_pipelines = self.config.upload_pipelines
        if not upload_pipelines:
            raise errors.ServerSetupError(NO_UPLOAD_PIPELINE)
        try:
            ensure_private_dir(self.http.staging_root)
        except StagingSetupError as exc:
            raise errors.ServerSetupError(str(exc)) from None
        sweep_scratch(self.http.staging_root)
        self.scratch = Path(tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-", dir=self.http.staging_root))
        _MADE_HERE.add(self.scratch)
        try:
            for pipeline in upload_pipelines:
                uploads = open_upload_store(pipeline, self.env, admission_lease=self.http.admission_lease)
                assert isinstance(uploads, SharedUploadStore)
                scratch = self.scratch / pipeline.id
                os.mkdir(scratch, 0o700)
                try:
                    uploads.store.pending_run_ids()
                except StorageError as exc:
                    raise errors.ServerSetupError(
                        f"server.http.staging_root {uploads.display} cannot be used: {exc}"
                    ) from None
                self.pipelines[pipeline.id] = SharedPipeline(
                    uploads, scratch, pipeline.source.max_upload_size,  # type: ignore[union-attr]
                    PathRoom.of(pipeline, scratch),
                )
            self.queue.refresh()
        except BaseException:
            self.close()
            raise
        self.queue.start()
        return []

    def close(self) -> None:
        self.stop_janitor()
        self.queue.stop()
        for pipeline in self.pipelines.values():
            pipeline.uploads.close()
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)
            _MADE_HERE.discard(self.scratch)
            self.scratch = None

    def start_janitor(self, interval: float = 60.0) -> None:
        """Expire finished records in the background (every replica may: deletes are idempotent)."""
        interval = min(interval, max(1.0, self.http.retention.total_seconds() / 2))

        def run() -> None:
            while not self._janitor_stop.wait(interval):
                try:
                    self.expire()
                except Exception:
                    log.exception("distributor: expiring upload records failed")

        threading.Thread(target=run, name="distributor-janitor", daemon=True).start()

    def stop_janitor(self) -> None:
        self._janitor_stop.set()

    def expire(self, now: datetime | None = None) -> list[str]:
        """Expire finished records (and abandoned admissions' bundles), then keep the failed
        uploads' bundles within the byte quotas."""
        expired: list[str] = []
        for pipeline in self.pipelines.values():
            expired.extend(pipeline.store.expire(self.http.retention))
        self.keep_failed_within_quotas()
        return expired

    def keep_failed_within_quotas(self) -> None:
        """``max_failed_bytes_per_token`` and ``max_failed_bytes`` over the failed uploads of the
        whole store whose bundle is still staged (:func:`~distributor_core.staging.over_quota`):
        the bundle is removed, the record stays and its error says which quota removed it."""
        kept: list[tuple[sg.KeptBundle, SharedPipeline]] = []
        for pipeline in self.pipelines.values():
            for record in pipeline.store.failed_with_bundle():
                if record.finished_at is None:
                    continue
                size = sg.listed_size(record)
                kept.append((sg.KeptBundle(record.run_id, record.pipeline_id, record.token_id, size,
                                           record.finished_at, record.accepted_at, record.seq), pipeline))
        owners = {bundle.run_id: pipeline for bundle, pipeline in kept}
        victims = sg.over_quota([b for b, _ in kept], per_token=self.http.max_failed_bytes_per_token,
                                total=self.http.max_failed_bytes)
        for bundle, knob in victims:
            store = owners[bundle.run_id].store
            note = sg.dropped_note(knob)
            try:
                store.storage.delete_prefix(store.bundle_prefix(bundle.run_id), prune_empty_dirs=False)
                current = store.read(bundle.run_id)
                if current is not None:
                    error = current.record.error
                    store.transition(bundle.run_id, error=f"{error}; {note}" if error else note)
            except (StorageError, sg.RecordError, StoreConflict) as exc:
                log.warning("distributor: could not remove the staged bundle of failed upload %s: %s",
                            bundle.run_id, exc)
                continue
            log.warning("distributor: removed the staged bundle of failed upload %s (%d bytes, token %s) "
                        "to stay within %s", bundle.run_id, bundle.size, bundle.token_id, knob)

    # ------------------------------------------------------------------ admission

    def upload_limit(self, pipeline_id: str) -> int:
        return self.pipelines[pipeline_id].max_upload_size

    def admit(self, pipeline_id: str, token_id: str, key: str | None, content_length: int | None) -> Ticket:
        """The checks made before the body is read (resolutions D3). The queue counts the
        unfinished uploads of the whole store (every replica's) and the requests this replica
        is receiving."""
        pipeline = self.pipelines[pipeline_id]
        if content_length is not None and content_length > pipeline.max_upload_size:
            raise errors.too_large()
        scope = (token_id, pipeline_id, key) if key is not None else None
        pending, per_token = self.queue.counts()
        with self._lock:
            self._requests.take(
                token_id, scope, queued=pending, queued_of_token=lambda: per_token.get(token_id, 0),
                queue_size=self.http.queue_size, token_share=self.token_share,
            )
        incoming = pipeline.scratch / secrets.token_hex(16)
        try:
            os.mkdir(incoming, 0o700)
        except BaseException:
            with self._lock:
                self._requests.give_back(token_id, scope, reserved=True)
            raise
        return Ticket(pipeline_id, token_id, key, pipeline.max_upload_size, incoming, scope)

    def release(self, ticket: Ticket) -> None:
        """End a request: free its reservation and scope, remove its scratch files. Never raises."""
        with self._lock:
            self._requests.give_back(ticket.token_id, ticket.scope, reserved=ticket.reserved)
            ticket.reserved = False
            ticket.scope = None
            ticket.released = True
        shutil.rmtree(ticket.incoming, ignore_errors=True)

    def stage_and_commit(self, ticket: Ticket, *, compressed: bool, release: bool = False) -> Accepted:
        try:
            manifest = self.stage(ticket, compressed=compressed)
            return self.commit(ticket, manifest)
        finally:
            if release:
                self.release(ticket)

    def stage(self, ticket: Ticket, *, compressed: bool) -> Manifest:
        """Extract and validate the archive in this process's scratch directory."""
        pipeline = self.pipelines[ticket.pipeline_id]
        prefix_length = len(f"{pipeline.store.storage.prefix}/bundles/{'x' * 64}/".encode())  # type: ignore[attr-defined]

        def problem(relative: str) -> str | None:
            if prefix_length + len(relative.encode()) > MAX_KEY_LENGTH:
                return f"its key in the staging store would exceed {MAX_KEY_LENGTH} bytes"
            return pipeline.room.problem(relative)

        try:
            return extract_bundle(
                ticket.archive, ticket.bundle, compressed=compressed, max_bytes=ticket.limit, limits=self.http.limits,
                path_check=problem,
            )
        finally:
            ticket.archive.unlink(missing_ok=True)

    def commit(self, ticket: Ticket, manifest: Manifest) -> Accepted:
        """Admit a staged upload into the store, or answer it as the replay of its scope.

        A scope already settled is answered before anything is written. Otherwise the bundle is
        streamed first and the key claimed after it (the key is held only for the last three
        small writes, :mod:`~distributor_core.staging.objectstore`); a request that lost the race
        for the key removes its bundle and answers as the winner's replay (or ``409``)."""
        pipeline = self.pipelines[ticket.pipeline_id]
        store = pipeline.store
        identity = manifest_to_obj(manifest)
        if ticket.key is not None:
            holder = store.key_holder(ticket.token_id, ticket.key)
            settled = store.read(holder) if holder is not None and sg.is_run_id(holder) else None
            if settled is not None:  # a replay (or a conflict), answered before anything is written
                return self._answer_taken(store, settled.record.run_id, identity, ticket.key, settled.record)
        started = time.monotonic()
        now = now_seconds(self.clock)
        run_id = new_run_id(ticket.pipeline_id, now, self.suffix)
        response = {"run_id": run_id, "pipeline_id": ticket.pipeline_id, "status": sg.ACCEPTED,
                    "status_url": f"/runs/{run_id}"}
        try:
            files = [(MANIFEST_NAME, None, None), *((f.path, f.size, f.sha256) for f in manifest.files)]
            store.put_bundle(run_id, ticket.bundle, files)
            if time.monotonic() - started > self.http.retention.total_seconds() / 2:
                # expiry removes a bundle without a record once it is older than the retention
                raise StoreConflict("streaming the bundle to the staging store took too long")
            claim = None
            if ticket.key is not None:
                taken = store.claim_key(ticket.token_id, ticket.key, run_id)
                if not taken.claimed:
                    store.storage.delete_prefix(store.bundle_prefix(run_id), prune_empty_dirs=False)
                    return self._answer_taken(store, taken.holder, identity, ticket.key, taken.record)
                claim = taken.lease
            record = sg.UploadRecord(
                run_id=run_id, seq=store.next_number(), pipeline_id=ticket.pipeline_id, token_id=ticket.token_id,
                idempotency_key=ticket.key, manifest=identity, response=response, status=sg.ACCEPTED,
                accepted_at=now,
            )
            store.admit(record, claim=claim)
        except errors.UploadRejected:
            raise
        except BaseException as exc:
            self._undo(store, run_id, ticket)
            if isinstance(exc, StoreConflict) and ticket.key is not None:
                holder = store.key_holder(ticket.token_id, ticket.key)
                if holder is not None and holder != run_id:  # another admission won the key: its replay
                    return self._answer_taken(store, holder, identity, ticket.key)
            if isinstance(exc, StoreConflict):  # its detail names runs of other uploads: the log's
                log.warning("distributor: upload %s of pipeline %s was not admitted: %s", run_id,
                            ticket.pipeline_id, exc)
                raise errors.not_admitted() from None
            raise
        self.queue.admitted(run_id, ticket.token_id)
        with self._lock:
            if ticket.reserved:
                self._requests.settle(ticket.token_id)
                ticket.reserved = False
        self.admitted.set()
        return Accepted(dict(response), False)

    @staticmethod
    def _answer_taken(
        store: ObjectStagingStore, holder: str, identity: dict[str, Any], key: str,
        record: sg.UploadRecord | None = None,
    ) -> Accepted:
        """The answer to a request whose scope ``holder`` holds: the replay of the same upload,
        ``409 key in flight`` while the holder is still being admitted, ``409`` conflict for
        another upload under the same key."""
        if record is None:
            found = store.read(holder) if sg.is_run_id(holder) else None
            record = found.record if found is not None else None
        if record is None:
            raise errors.key_in_flight()
        if record.manifest == identity and record.idempotency_key == key:
            return Accepted(dict(record.response), True)
        raise errors.key_conflict()

    @staticmethod
    def _undo(store: ObjectStagingStore, run_id: str, ticket: Ticket) -> None:
        """Remove what a failed admission wrote: its bundle objects and its key entry."""
        try:
            store.storage.delete_prefix(store.bundle_prefix(run_id), prune_empty_dirs=False)
            if ticket.key is not None:
                store.release_key(ticket.token_id, ticket.key, run_id)
        except Exception as exc:  # an orphaned key claim is taken over after abandon_after
            log.warning("distributor: could not remove the partial admission %s: %s", run_id, exc)

    # ------------------------------------------------------------------ records and status

    def upload_store(self, pipeline_id: str) -> UploadStore:
        return self.pipelines[pipeline_id].uploads

    def update(self, record: sg.UploadRecord) -> None:
        """Nothing to remember: records are read from the store."""

    def quarantined_records(self) -> int:
        """Records this replica set aside as unreadable since it started (each named in its log
        when it was), for ``/healthz``."""
        return sum(len(pipeline.store.quarantined) for pipeline in self.pipelines.values())

    def pending_count(self) -> int:
        with self._lock:
            reserved = self._requests.total
        return reserved + self.queue.counts()[0]

    def records(self) -> list[sg.UploadRecord]:
        found = [r for p in self.pipelines.values() for r in p.store.records()]
        return sorted(found, key=lambda r: (r.accepted_at, r.pipeline_id, r.seq))

    def status(self, run_id: str, grant: UploadGrant) -> dict[str, Any] | None:
        """``GET /runs/<id>`` from the store, on any replica."""
        pipeline_id = sg.run_id_pipeline(run_id)
        if pipeline_id is None or pipeline_id not in self.pipelines or not grant.allows(pipeline_id):
            return None
        try:
            found = self.pipelines[pipeline_id].store.read(run_id)
        except StorageError as exc:  # the upload may well exist: never a 404 for it (issue 35, item 5)
            log.warning("distributor: reading the record of upload %s failed: %s", run_id, exc)
            raise errors.staging_unavailable() from None
        except sg.RecordError:
            return None
        if found is None or found.record.pipeline_id != pipeline_id:
            return None
        record = found.record
        if self.mode == "dagster":
            record = dagster_overlay(record, self.lookup_dagster_run, self.redactions)
        return record.status_view()


def sweep_scratch(root: Path) -> list[Path]:
    """Remove the scratch directories of replicas that are gone: a ``serve`` killed with
    ``kill -9`` leaves its own behind (uploads it was receiving included). A directory is left to
    its process while that pid is alive on this host, and one of this process only if this
    process made it (a container restarted on the same volume may get the dead one's pid)."""
    removed: list[Path] = []
    try:
        entries = list(os.scandir(root))
    except OSError:
        return removed
    for entry in entries:
        if not entry.name.startswith(SCRATCH_PREFIX) or not entry.is_dir(follow_symlinks=False):
            continue
        pid_text = entry.name.removeprefix(SCRATCH_PREFIX).partition("-")[0]
        if not pid_text.isdigit():
            continue
        pid = int(pid_text)
        if Path(entry.path) in _MADE_HERE or (pid != os.getpid() and pid_alive(pid)):
            continue
        if entry.stat(follow_symlinks=False).st_uid != os.geteuid():
            continue
        shutil.rmtree(entry.path, ignore_errors=True)
        removed.append(Path(entry.path))
    if removed:
        log.warning("distributor: removed %d scratch director%s left by replicas that are gone", len(removed),
                    "y" if len(removed) == 1 else "ies")
    return removed


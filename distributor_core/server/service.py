"""The upload coordinator: admission, staging, idempotency, records and status (interfaces
§3.4–3.8, resolutions D1–D3).

One :class:`UploadService` serves every ``http_upload`` pipeline of a config. Requests go through
:meth:`admit` (checks that need no body: size header, key in flight, queue depth), then the
caller streams the body to ``ticket.archive`` and calls :meth:`stage_and_commit`, and always
:meth:`release`. Records live on disk (:mod:`.staging`); this object keeps a small index of them
in memory, rebuilt from disk at :meth:`open`.

Locks: ``_lock`` guards the in-memory index and counters and is held only for memory work;
each pipeline's ``commit_lock`` serialises that pipeline's commits and expiries (sequence
numbers, idempotency entries, renames; no fsync is made under it), and its ``handoff`` lock
the hand-over of committed records to the publisher in ``seq`` order. Order: pipeline lock,
then ``handoff`` or ``_lock``.
"""

from __future__ import annotations

import errno
import logging
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from distributor_core import staging as sg
from distributor_core.app.run_options import RunOptions
from distributor_core.bundle import Manifest, manifest_to_obj
from distributor_core.config import Config, Environment, UploadGrant, UploadTokenTable
from distributor_core.server import errors
from distributor_core.server.archive import StagingError, extract_bundle
from distributor_core.server.pathroom import PathRoom
from distributor_core.server.reservations import Reservations
from distributor_core.server.runstatus import RunStatusSource
from distributor_core.staging import (
    PipelineStaging,
    RandomSuffix,
    StagingSetupError,
    ensure_private_dir,
    host_redactions,
    key_sha256,
    new_run_id,
    random_suffix,
)
from distributor_core.staging.store import LocalUploadStore, UploadStore
from distributor_core.timefmt import Clock, now_seconds

log = logging.getLogger("distributor.server")

PublisherMode = Literal["inline", "dagster"]
#: ``lookup(run_id) -> (status, dagster_run_id, error) | None`` (resolutions D1 overlay)
DagsterLookup = RunStatusSource

ARCHIVE_NAME = "upload.archive"
#: ``GET /runs/<id>``'s error while the Dagster run that failed has not recorded the outcome
DAGSTER_RUN_FAILED = "failed: the Dagster run failed (its logs in Dagster have the details)"
NO_UPLOAD_PIPELINE = "serve requires at least one http_upload pipeline"


@dataclass
class Ticket:
    """One admitted request while its body is received and staged."""

    pipeline_id: str
    token_id: str
    key: str | None
    limit: int
    incoming: Path
    scope: tuple[str, str, str] | None
    reserved: bool = True
    released: bool = False

    @property
    def archive(self) -> Path:
        return self.incoming / ARCHIVE_NAME

    @property
    def bundle(self) -> Path:
        return self.incoming / sg.BUNDLE_DIR


@dataclass
class Accepted:
    """What the upload route answers with: the 202 body and whether it is a replay."""

    body: dict[str, Any]
    replay: bool


class _Handoff:
    """Hands a pipeline's committed records on in ``seq`` order, although their fsyncs end in
    any order: a record waits for every earlier one to be settled (kept or rolled back); whichever
    thread settles the first one in line delivers it and the settled ones after it, then records
    the highest number handed on in ``.seq`` (once per batch). Taking a place in line never waits
    for a delivery (``_line`` is held for memory work only; ``_delivery`` serialises deliveries)."""

    def __init__(self, write_seq: Callable[[int], None] = lambda _seq: None) -> None:
        self._line = threading.Lock()
        self._delivery = threading.Lock()
        self._waiting: deque[int] = deque()
        self._settled: dict[int, sg.UploadRecord | None] = {}
        self._write_seq = write_seq

    def expect(self, seq: int) -> None:
        """Take a place in line (call under the commit lock, in the order numbers are issued)."""
        with self._line:
            self._waiting.append(seq)

    def done(self, seq: int, record: sg.UploadRecord | None,
             deliver: Callable[[sg.UploadRecord], None] | None) -> None:
        """``seq`` is settled: ``record`` was kept (``None``: rolled back); deliver what is due."""
        with self._line:
            self._settled[seq] = record
        with self._delivery:
            last = None
            while True:
                with self._line:
                    if not self._waiting or self._waiting[0] not in self._settled:
                        break
                    last = self._waiting.popleft()
                    ready = self._settled.pop(last)
                if ready is None or deliver is None:
                    continue
                try:
                    deliver(ready)
                except Exception:  # accepted and durable: a restart queues it if this did not
                    log.exception("distributor: queueing upload %s failed", ready.run_id)
            if last is not None:
                try:
                    self._write_seq(last)
                except OSError as exc:  # repaired from the records at the next start
                    log.warning("distributor: could not record admission number %d: %s", last, exc.strerror)


@dataclass
class _Pipeline:
    staging: PipelineStaging
    max_upload_size: int
    #: whether a bundle path fits where it is staged and published (issue 26, item 6)
    room: PathRoom
    commit_lock: threading.Lock = field(default_factory=threading.Lock)
    handoff: _Handoff = field(init=False)

    def __post_init__(self) -> None:
        self.handoff = _Handoff(self.staging.write_seq)


class UploadService:
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
        durable: bool = True,
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
        self.durable = durable
        self.http = config.server.http
        self.pipelines: dict[str, _Pipeline] = {}
        self._lock = threading.Lock()
        self._records: dict[str, sg.UploadRecord] = {}
        self._index: dict[tuple[str, str, str], str] = {}
        #: requests being received and the idempotency scopes they hold (under ``_lock``)
        self._requests = Reservations()
        #: failed uploads whose staged bundle is kept, within the byte quotas (issue 26, item 4)
        self._kept: dict[str, sg.KeptBundle] = {}
        self._kept_lock = threading.Lock()
        #: records set aside as unreadable since this process started (``/healthz``; issue 35)
        self.quarantined = 0
        #: queue slots one token may hold (``server.http.max_queue_per_token``)
        self.token_share = self.http.queue_share(len(config.upload_tokens))
        self._opened = False
        self._janitor_stop = threading.Event()
        self._janitor: threading.Thread | None = None
        #: called with each newly committed record, in ``seq`` order (inline publisher: queue it)
        self.on_accepted: Callable[[sg.UploadRecord], None] | None = None
        #: called with each newly committed record in its request's own thread, before
        #: ``on_accepted`` (inline publisher: record it ``queued``); returns the record to hand on
        self.on_settled: Callable[[sg.UploadRecord], sg.UploadRecord] | None = None
        self.redactions = host_redactions(config)
        #: a publication waits this long for a destination lock (the run's default)
        self.lock_wait = RunOptions().lock_wait

    # ------------------------------------------------------------------ lifecycle

    def open(self) -> list[sg.UploadRecord]:
        """Check and lock every staging path, sweep, load records, expire finished ones.

        Returns the unfinished records (accepted, queued, running) in admission order; the
        inline publisher re-queues them. Raises :class:`~.errors.ServerSetupError` naming a
        directory.
        """
        try:
            return self._open()
        except StagingSetupError as exc:
            raise errors.ServerSetupError(str(exc)) from None

    def _open(self) -> list[sg.UploadRecord]:
        upload_pipelines = self.config.upload_pipelines
        if not upload_pipelines:
            raise errors.ServerSetupError(NO_UPLOAD_PIPELINE)
        seen: dict[Path, str] = {}
        for pipeline in upload_pipelines:
            path = Path(pipeline.source.staging_path)  # type: ignore[union-attr]
            if path in seen:
                raise StagingSetupError(
                    f"pipelines {seen[path]} and {pipeline.id} share staging directory {path}"
                )
            seen[path] = pipeline.id
        root = Path(self.http.staging_root)
        if any(path == root or root in path.parents for path in seen):
            ensure_private_dir(root)
        unfinished: list[sg.UploadRecord] = []
        try:
            for pipeline in upload_pipelines:
                staging = PipelineStaging(
                    pipeline.id, Path(pipeline.source.staging_path), durable=self.durable  # type: ignore[union-attr]
                )
                staging.open()
                self.pipelines[pipeline.id] = _Pipeline(
                    staging, pipeline.source.max_upload_size, PathRoom.of(pipeline, staging.path)  # type: ignore[union-attr]
                )
                records, index, report = staging.sweep()
                for run_id, reason in report.unreadable_records:
                    log.warning("distributor: ignoring unreadable upload record %s: %s", run_id, reason)
                for run_id, reason in report.quarantined:
                    log.warning("distributor: quarantined upload record %s of pipeline %s (moved to %s): %s",
                                run_id, pipeline.id, staging.path / sg.QUARANTINE_DIR / run_id, reason)
                self.quarantined += len(report.quarantined)
                for duplicate, kept in report.duplicates:
                    log.warning("distributor: upload %s shares its idempotency key with %s; marked failed, "
                                "not published", duplicate, kept)
                for path, reason in report.unremovable:
                    log.warning("distributor: cannot remove %s left in a staging directory: %s", path, reason)
                for record in records:
                    self._records[record.run_id] = _light(record)
                    kept = sg.kept_bundle(staging.path, record)
                    if kept is not None:
                        self._kept[record.run_id] = kept
                for (token_id, key_hash), run_id in index.items():
                    self._index[(pipeline.id, token_id, key_hash)] = run_id
        except BaseException:
            self.close()
            raise
        self._opened = True
        self._keep_failed_within_quotas()
        self.expire()
        with self._lock:
            unfinished = [r for r in self._records.values() if not r.finished]
        order = {p.id: i for i, p in enumerate(upload_pipelines)}
        unfinished.sort(key=lambda r: (r.accepted_at, order[r.pipeline_id], r.seq))
        return self._hand_over(unfinished)

    def _hand_over(self, unfinished: list[sg.UploadRecord]) -> list[sg.UploadRecord]:
        """Decide who finishes the unfinished records of a previous process.

        A ``running`` record with a ``dagster_run_id`` belongs to a Dagster run and is left
        alone in both modes. Inline mode returns every other unfinished record, to be
        re-queued. Dagster mode turns records the inline publisher had queued or was running
        back into ``accepted``, so the upload sensor picks them up; it returns nothing.
        """
        own = [r for r in unfinished if not (r.status == sg.RUNNING and r.dagster_run_id)]
        owned = {r.run_id for r in own}
        for record in unfinished:
            if record.run_id not in owned:
                log.warning("distributor: upload %s is running in Dagster run %s; leaving it to Dagster",
                            record.run_id, record.dagster_run_id)
        if self.mode == "inline":
            return own
        for record in own:
            if record.status != sg.ACCEPTED:
                try:
                    self.update(sg.hand_back(self.staging_path(record.pipeline_id), record.run_id))
                except (OSError, sg.RecordError) as exc:
                    log.warning("distributor: could not hand upload %s to Dagster: %s", record.run_id, exc)
        return []

    def close(self) -> None:
        self.stop_janitor()
        for pipeline in self.pipelines.values():
            pipeline.staging.close()

    def start_janitor(self, interval: float = 60.0) -> None:
        """Expire records in the background too (besides every submission and status lookup)."""
        interval = min(interval, max(1.0, self.http.retention.total_seconds() / 2))

        def run() -> None:
            while not self._janitor_stop.wait(interval):
                try:
                    self.expire()
                except Exception:
                    log.exception("distributor: expiring upload records failed")

        self._janitor = threading.Thread(target=run, name="distributor-janitor", daemon=True)
        self._janitor.start()

    def stop_janitor(self) -> None:
        self._janitor_stop.set()

    # ------------------------------------------------------------------ admission

    def upload_limit(self, pipeline_id: str) -> int:
        return self.pipelines[pipeline_id].max_upload_size

    def admit(self, pipeline_id: str, token_id: str, key: str | None, content_length: int | None) -> Ticket:
        """The checks made before the body is read, in the order of resolutions D3."""
        pipeline = self.pipelines[pipeline_id]
        if content_length is not None and content_length > pipeline.max_upload_size:
            raise errors.too_large()
        scope = (token_id, pipeline_id, key) if key is not None else None
        self.expire()  # in dagster mode this also re-reads the statuses the publish runs wrote
        with self._lock:
            pending = [r for r in self._records.values() if r.pending]
            self._requests.take(
                token_id, scope, queued=len(pending),
                queued_of_token=lambda: sum(1 for r in pending if r.token_id == token_id),
                queue_size=self.http.queue_size, token_share=self.token_share,
            )
        try:
            incoming = pipeline.staging.new_incoming()
        except BaseException:
            with self._lock:
                self._requests.give_back(token_id, scope, reserved=True)
            raise
        return Ticket(pipeline_id, token_id, key, pipeline.max_upload_size, incoming, scope)

    def release(self, ticket: Ticket) -> None:
        """End a request: free its reservation and scope, then remove whatever it left in
        ``.incoming``. Never raises: a tree that cannot be removed now is swept at the next start."""
        with self._lock:
            self._requests.give_back(ticket.token_id, ticket.scope, reserved=ticket.reserved)
            ticket.reserved = False
            ticket.scope = None
            ticket.released = True
        try:
            sg.remove_tree(ticket.incoming)
        except Exception as exc:
            log.warning("distributor: could not remove a refused upload of pipeline %s (%s); "
                        "the next start sweeps it", ticket.pipeline_id, type(exc).__name__)

    def stage_and_commit(self, ticket: Ticket, *, compressed: bool, release: bool = False) -> Accepted:
        """Extract and validate the received archive, then record the upload (or replay it);
        with ``release``, :meth:`release` the ticket on the way out, whatever happened."""
        try:
            manifest = self.stage(ticket, compressed=compressed)
            return self.commit(ticket, manifest)
        finally:
            if release:
                self.release(ticket)

    def stage(self, ticket: Ticket, *, compressed: bool) -> Manifest:
        """Extract and validate the archive, then fsync the bundle (outside any lock: the
        fsyncs of concurrent uploads overlap)."""
        pipeline = self.pipelines[ticket.pipeline_id]
        try:
            manifest = extract_bundle(
                ticket.archive, ticket.bundle, compressed=compressed, max_bytes=ticket.limit, limits=self.http.limits,
                path_check=pipeline.room.problem,
            )
        finally:
            ticket.archive.unlink(missing_ok=True)
        pipeline.staging.sync_bundle(ticket.bundle)
        return manifest

    def commit(self, ticket: Ticket, manifest: Manifest) -> Accepted:
        """Record a staged upload, or answer it as the replay of its idempotency scope.

        Under the pipeline's commit lock only the cheap part: the replay check, the run id and
        sequence number, the record and index entry written and the directory renamed
        (:meth:`~.staging.PipelineStaging.place`). The fsyncs that make it durable
        (:meth:`~.staging.PipelineStaging.settle`) run after the lock, concurrently with other
        uploads' (one journal commit serves many); the record is registered before this returns
        (so a retry after the ``202`` replays it) and handed to the publisher in ``seq`` order.
        """
        pipeline = self.pipelines[ticket.pipeline_id]
        identity = manifest_to_obj(manifest)
        key_hash = key_sha256(ticket.key) if ticket.key is not None else None
        with pipeline.commit_lock:
            if key_hash is not None:
                with self._lock:
                    existing_id = self._index.get((ticket.pipeline_id, ticket.token_id, key_hash))
                    existing = self._records.get(existing_id) if existing_id else None
                if existing is not None:
                    if existing.manifest == identity and existing.idempotency_key == ticket.key:
                        return Accepted(dict(existing.response), True)
                    raise errors.key_conflict()
            now = now_seconds(self.clock)
            run_id = self._new_run_id(ticket.pipeline_id, now)
            response = {
                "run_id": run_id,
                "pipeline_id": ticket.pipeline_id,
                "status": sg.ACCEPTED,
                "status_url": f"/runs/{run_id}",
            }
            record = sg.UploadRecord(
                run_id=run_id,
                seq=pipeline.staging.next_seq(),
                pipeline_id=ticket.pipeline_id,
                token_id=ticket.token_id,
                idempotency_key=ticket.key,
                manifest=identity,
                response=response,
                status=sg.ACCEPTED,
                accepted_at=now,
            )
            placement = pipeline.staging.place(ticket.incoming, record)
            pipeline.handoff.expect(record.seq)
        kept: sg.UploadRecord | None = None
        try:
            try:
                pipeline.staging.settle(placement)
            except sg.PromotedError:
                # visible and indexed, and it could not be rolled back: it is the accepted upload
                # a restart would publish, so answer it as such (a retry replays it)
                log.error("distributor: upload %s could not be made durable and was kept as accepted", run_id)
            if self.on_settled is not None:
                try:
                    record = self.on_settled(record)
                except Exception:  # accepted and durable: it is published all the same
                    log.exception("distributor: preparing upload %s for its queue failed", run_id)
            with self._lock:
                self._records[run_id] = record
                if key_hash is not None:
                    self._index[(ticket.pipeline_id, ticket.token_id, key_hash)] = run_id
                if ticket.reserved:
                    self._requests.settle(ticket.token_id)
                    ticket.reserved = False
            kept = record
        finally:  # rolled back or not, later uploads of the pipeline must not wait for this one
            pipeline.handoff.done(record.seq, kept, self.on_accepted)
        return Accepted(dict(response), False)

    def _new_run_id(self, pipeline_id: str, now: datetime) -> str:
        staging_path = self.pipelines[pipeline_id].staging.path
        for _ in range(100):
            run_id = new_run_id(pipeline_id, now, self.suffix)
            with self._lock:
                taken = run_id in self._records
            if not taken and not (staging_path / run_id).exists():
                return run_id
        raise RuntimeError("could not find an unused run id")

    # ------------------------------------------------------------------ records and status

    def staging_path(self, pipeline_id: str) -> Path:
        return self.pipelines[pipeline_id].staging.path

    def upload_store(self, pipeline_id: str) -> UploadStore:
        """The pipeline's staged uploads as publishers see them."""
        return LocalUploadStore(pipeline_id, self.staging_path(pipeline_id))

    def update(self, record: sg.UploadRecord) -> None:
        """Remember a record written to disk by a publisher; a newly failed one's staged bundle
        counts against the failed-bundle quotas from then on."""
        with self._lock:
            if record.run_id not in self._records:
                return
            newly_failed = record.status == sg.FAILED and self._records[record.run_id].status != sg.FAILED
            self._records[record.run_id] = _light(record)
        if newly_failed:
            kept = sg.kept_bundle(self.staging_path(record.pipeline_id), record)
            if kept is not None:
                with self._kept_lock:
                    self._kept[record.run_id] = kept
                self._keep_failed_within_quotas()

    def kept_failed_bytes(self) -> dict[str, int]:
        """Bytes of failed uploads' staged bundles still kept, per token id."""
        with self._kept_lock:
            held: dict[str, int] = {}
            for kept in self._kept.values():
                held[kept.token_id] = held.get(kept.token_id, 0) + kept.size
            return held

    def _keep_failed_within_quotas(self) -> None:
        """Remove the staged bundles of failed uploads over ``max_failed_bytes_per_token`` or
        ``max_failed_bytes``, oldest first (:func:`~distributor_core.staging.over_quota`)."""
        with self._kept_lock:
            victims = sg.over_quota(self._kept.values(), per_token=self.http.max_failed_bytes_per_token,
                                    total=self.http.max_failed_bytes)
            for kept, _ in victims:
                del self._kept[kept.run_id]
        for kept, knob in victims:
            try:
                dropped = sg.drop_bundle(self.staging_path(kept.pipeline_id), kept.run_id, knob)
            except OSError as exc:  # moved out of sight already, or swept at the next start
                log.warning("distributor: could not remove the staged bundle of failed upload %s: %s",
                            kept.run_id, exc.strerror or type(exc).__name__)
                continue
            if dropped:
                log.warning("distributor: removed the staged bundle of failed upload %s (%d bytes, token %s) "
                            "to stay within %s", kept.run_id, kept.size, kept.token_id, knob)

    def quarantined_records(self) -> int:
        """Records set aside as unreadable by this process (its startup sweep), for ``/healthz``."""
        return self.quarantined

    def pending_count(self) -> int:
        with self._lock:
            return self._requests.total + sum(1 for r in self._records.values() if r.pending)

    def records(self) -> list[sg.UploadRecord]:
        with self._lock:
            return sorted(self._records.values(), key=lambda r: (r.accepted_at, r.pipeline_id, r.seq))

    def status(self, run_id: str, grant: UploadGrant) -> dict[str, Any] | None:
        """``GET /runs/<id>``: the record's view, or ``None`` when the id is unknown, expired or
        belongs to a pipeline the token may not see (resolutions D2)."""
        pipeline_id = sg.run_id_pipeline(run_id)
        if pipeline_id is None or pipeline_id not in self.pipelines or not grant.allows(pipeline_id):
            return None
        self.expire()
        try:
            record = sg.read_record(self.staging_path(pipeline_id), run_id)
        except (FileNotFoundError, NotADirectoryError, sg.RecordError):
            return None
        except OSError as exc:
            if exc.errno == errno.ELOOP:  # a link where a record should be: no record of ours
                return None
            log.warning("distributor: reading the record of upload %s failed: %s", run_id, exc)
            raise errors.staging_unavailable() from None
        if record.pipeline_id != pipeline_id:
            return None
        if self.mode == "dagster":
            self.update(record)
            record = self._overlay(record)
        return record.status_view()

    def _overlay(self, record: sg.UploadRecord) -> sg.UploadRecord:
        pairs = [*self.redactions, *sg.staging_redactions(self.staging_path(record.pipeline_id), record.run_id)]
        return dagster_overlay(record, self.lookup_dagster_run, pairs)

    def _refresh_unfinished(self) -> None:
        """Dagster mode: the publish runs write statuses; re-read the records not yet finished."""
        with self._lock:
            unfinished = [(r.pipeline_id, r.run_id) for r in self._records.values() if not r.finished]
        for pipeline_id, run_id in unfinished:
            try:
                record = sg.read_record(self.staging_path(pipeline_id), run_id)
            except (OSError, sg.RecordError):
                continue
            self.update(record)

    # ------------------------------------------------------------------ expiry

    def expire(self, now: datetime | None = None) -> list[str]:
        """Drop finished records (and their idempotency entries and files) older than
        ``server.http.retention``; return their run ids. Unfinished records never expire."""
        if not self._opened:
            return []
        if self.mode == "dagster":
            self._refresh_unfinished()
        now = now or now_seconds(self.clock)
        retention = self.http.retention
        with self._lock:
            due = [
                r for r in self._records.values()
                if r.finished and r.finished_at is not None and r.finished_at + retention <= now
            ]
        expired: list[str] = []
        for record in due:
            pipeline = self.pipelines[record.pipeline_id]
            with pipeline.commit_lock:
                with self._lock:
                    if self._records.pop(record.run_id, None) is None:
                        continue
                    if record.idempotency_key is not None:
                        scope = (record.pipeline_id, record.token_id, key_sha256(record.idempotency_key))
                        if self._index.get(scope) == record.run_id:
                            del self._index[scope]
                trash = pipeline.staging.retire(record.run_id, record.token_id, record.idempotency_key)
            with self._kept_lock:
                self._kept.pop(record.run_id, None)
            if trash is not None:  # deleted outside the lock: commits of the pipeline go on meanwhile
                try:
                    sg.remove_tree(trash)
                except OSError as exc:  # it is in .incoming: the next start sweeps it
                    log.warning("distributor: could not remove expired upload %s: %s", record.run_id, exc.strerror)
            expired.append(record.run_id)
        return expired


def dagster_overlay(
    record: sg.UploadRecord, lookup: DagsterLookup | None, redactions: list[tuple[str, str]]
) -> sg.UploadRecord:
    """``--publisher dagster``: an unfinished record as its publish run reports it (resolutions
    D1 overlay); the record as it is when Dagster cannot be asked or does not know the upload."""
    if record.finished or lookup is None:
        return record
    try:
        found = lookup(record.run_id)
    except Exception as exc:  # the record still answers when Dagster cannot be reached
        log.warning("distributor: Dagster run lookup for %s failed: %s", record.run_id, exc)
        return record
    if found is None:
        return record
    status, dagster_run_id, error = found
    if status not in sg.STATUSES:
        return record
    changes: dict[str, Any] = {"status": status, "dagster_run_id": dagster_run_id or record.dagster_run_id}
    if status == sg.FAILED:  # the run's own error is the operator's (its logs); issue 35, item 7
        log.info("distributor: Dagster run %s of upload %s failed: %s", dagster_run_id, record.run_id,
                 sg.scrub(error or "", redactions))
        changes["error"] = DAGSTER_RUN_FAILED
    return replace(record, **changes)


def _light(record: sg.UploadRecord) -> sg.UploadRecord:
    """The in-memory copy of a record keeps no report (status reads go to disk)."""
    return replace(record, report=None) if record.report is not None else record


__all__ = [
    "Accepted",
    "DagsterLookup",
    "PublisherMode",
    "StagingError",
    "StagingSetupError",
    "Ticket",
    "UploadService",
    "dagster_overlay",
    "host_redactions",
]

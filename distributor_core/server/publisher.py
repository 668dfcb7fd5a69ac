"""The inline publisher: the server publishes accepted uploads itself (dagster.md §3).

``max_concurrency`` worker threads take jobs from per-pipeline queues: a pipeline runs one
upload at a time, in ``seq`` (admission) order, and a pipeline that is busy never blocks the
others. Which pipeline goes next is fair (issue 26, item 9): among the pipelines whose next upload
may start, the one whose upload's token was served least recently, then the pipeline served least
recently, then the upload admitted first. So tokens take turns (round robin), a token's pipelines
take turns, and one token's eight queued uploads delay another token's upload by at most one
publication, instead of all eight (first in, first out across tokens before).

Statuses move accepted → queued (placed in the queue) → running → succeeded | failed,
each written to ``upload.json`` before anything else sees it. A run succeeds iff its report is
ok; a succeeded upload's bundle files are removed, a failed one keeps them until it expires.

Shutdown: :meth:`stop` stops starting jobs (safe to call from a signal handler: it only sets a
flag); :meth:`drain` waits for running jobs up to a deadline. Jobs left queued or running stay
so on disk and are re-queued by the next start.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from distributor_core import staging as sg
from distributor_core.app.run import RunOptions, publish_source_bundle
from distributor_core.config import Config, Environment
from distributor_core.execute.publish import default_holder
from distributor_core.server.service import UploadService
from distributor_core.staging.store import UploadStore
from distributor_core.timefmt import Clock

log = logging.getLogger("distributor.server")

class PublishingService(Protocol):
    """What a publication needs of the upload service (local or shared staging)."""

    config: Config
    env: Environment
    clock: Clock | None
    #: seconds a publication waits for a destination lock held by another publisher
    lock_wait: float

    def upload_store(self, pipeline_id: str) -> UploadStore: ...


#: ``publish(service, record) -> report`` — the default runs the pipeline's destinations
PublishFunction = Callable[[PublishingService, sg.UploadRecord], object]


def publish_staged_upload(service: PublishingService, record: sg.UploadRecord) -> object:
    """Publish a staged upload through its pipeline's destinations (source bundle path ``""``),
    only if its staged manifest is the one it was admitted with (issue 35, item 2)."""
    source = service.upload_store(record.pipeline_id).open_bundle(record.run_id)
    try:
        return publish_source_bundle(
            service.config,
            record.pipeline_id,
            source,
            "",
            RunOptions(holder=default_holder("serve"), clock=service.clock, lock_wait=service.lock_wait),
            env=service.env,
            admitted=record.manifest,
        )
    finally:
        source.close()


def log_failure(run_id: str, report: object, exc: BaseException | None) -> None:
    """The operator's account of a failed publication, for the server log: the run report's error
    (refusals with their root, paths and remedy) or the exception. The upload's record keeps only
    what a producer may read (:func:`~distributor_core.staging.records.finished_changes`)."""
    if exc is not None:
        log.warning("distributor: publishing upload %s failed: %s: %s", run_id, type(exc).__name__, exc)
        return
    failed, message = sg.report_failed(report)
    if failed:
        log.warning("distributor: publishing upload %s failed: %s", run_id, message)


@dataclass(frozen=True)
class _Job:
    ticket: int
    run_id: str
    pipeline_id: str
    seq: int
    token_id: str = ""


class InlinePublisher:
    def __init__(
        self,
        service: UploadService,
        *,
        max_concurrency: int | None = None,
        publish: PublishFunction = publish_staged_upload,
    ) -> None:
        self.service = service
        self.max_concurrency = max_concurrency or service.http.max_concurrency
        self.publish = publish
        self.stopping = False
        self._cond = threading.Condition()
        self._queues: dict[str, deque[_Job]] = {}
        self._running: set[str] = set()
        self._tickets = itertools.count()
        #: when each token and pipeline was last served (a counter: only the order matters)
        self._turns = itertools.count()
        self._token_served: dict[str, int] = {}
        self._pipeline_served: dict[str, int] = {}
        self._threads: list[threading.Thread] = []

    # ------------------------------------------------------------------ lifecycle

    def start(self, requeue: list[sg.UploadRecord]) -> None:
        """Queue the unfinished records of a previous process (already in admission order), then
        start the workers. New uploads arrive through ``service.on_accepted``."""
        for record in requeue:
            self.enqueue(record)
        self.service.on_settled = self.mark_queued
        self.service.on_accepted = self.enqueue
        for index in range(self.max_concurrency):
            thread = threading.Thread(target=self._work, name=f"distributor-publisher-{index}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        """Stop starting new publications (signal-handler safe: sets a flag only)."""
        self.stopping = True

    def drain(self, deadline: float) -> bool:
        """Stop and wait until running publications finish or ``deadline`` (monotonic) passes.
        Returns True when every worker ended."""
        self.stopping = True
        with self._cond:
            self._cond.notify_all()
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        return not any(thread.is_alive() for thread in self._threads)

    # ------------------------------------------------------------------ queue

    def mark_queued(self, record: sg.UploadRecord) -> sg.UploadRecord:
        """Record an upload about to be queued as ``queued`` (``service.on_settled``: each upload
        in its own request's thread, before :meth:`enqueue` hands them over in ``seq`` order)."""
        if record.status == sg.QUEUED:
            return record
        try:
            return sg.mark_queued(self.service.staging_path(record.pipeline_id), record.run_id)
        except (OSError, sg.RecordError) as exc:  # the record is durable; publish it all the same
            log.warning("distributor: could not mark upload %s queued: %s", record.run_id, exc)
            return record

    def enqueue(self, record: sg.UploadRecord) -> None:
        """Place an upload in its pipeline's queue (recording it as ``queued`` if it is not)."""
        if record.status != sg.QUEUED:
            record = self.mark_queued(record)
            self.service.update(record)
        with self._cond:
            job = _Job(next(self._tickets), record.run_id, record.pipeline_id, record.seq, record.token_id)
            self._queues.setdefault(record.pipeline_id, deque()).append(job)
            self._cond.notify()

    def queued(self) -> int:
        with self._cond:
            return sum(len(q) for q in self._queues.values())

    def _next_job(self) -> _Job | None:
        """The next upload to publish (call under ``_cond``): the head of a pipeline queue whose
        pipeline is not running, least recently served token first, then least recently served
        pipeline, then first admitted."""
        heads = [q[0] for p, q in self._queues.items() if q and p not in self._running]
        if not heads:
            return None
        job = min(heads, key=lambda j: (self._token_served.get(j.token_id, -1),
                                        self._pipeline_served.get(j.pipeline_id, -1), j.ticket))
        self._queues[job.pipeline_id].popleft()
        self._running.add(job.pipeline_id)
        turn = next(self._turns)
        self._token_served[job.token_id] = turn
        self._pipeline_served[job.pipeline_id] = turn
        return job

    def _work(self) -> None:
        while True:
            with self._cond:
                job = None
                while not self.stopping:
                    job = self._next_job()
                    if job is not None:
                        break
                    self._cond.wait(1.0)
                if job is None:
                    return
            try:
                self._run(job)
            except Exception:  # never lose a worker; the record says what happened
                log.exception("distributor: publishing upload %s failed unexpectedly", job.run_id)
            finally:
                with self._cond:
                    self._running.discard(job.pipeline_id)
                    self._cond.notify_all()

    def _run(self, job: _Job) -> None:
        service = self.service
        staging_path = service.staging_path(job.pipeline_id)
        record = sg.mark_running(staging_path, job.run_id, clock=service.clock)
        service.update(record)
        report: object = None
        error: Exception | None = None
        try:
            report = self.publish(service, record)
        except Exception as exc:
            error = exc
        log_failure(job.run_id, report, error)
        record = sg.mark_finished(
            staging_path, job.run_id, report=report, error=error or "", clock=service.clock,
            redact=service.redactions
        )
        service.update(record)

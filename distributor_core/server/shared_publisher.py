"""The inline publisher of a replica on shared S3 staging (issue 29).

Every replica runs ``max_concurrency`` workers. A worker takes a pipeline's next upload from the
store under a lease (:meth:`~distributor_core.staging.objectstore.ObjectStagingStore.claim_next`
with ``in_order``: only a pipeline's first unfinished upload may be taken, so a pipeline publishes
one upload at a time, in admission order, whichever replica publishes it), renews the lease every
quarter of ``server.http.publication_lease`` while it publishes (the core's one lease and renew
loop, :mod:`distributor_core.lease`), then records the outcome, fenced: the record is written only
if the lease is still its own right before. A replica killed mid-publication stops renewing; once
another replica has seen its lease unchanged for ``publication_lease`` (on its own monotonic
clock; at once when the dead replica ran on the same host), it takes the upload over
(``running`` → ``running``) and publishes it again from the staged bundle, which the
destination's state record makes a skip when the first attempt had already completed. A worker
whose lease was taken over does not report its outcome.

Pipelines take turns: a worker tries them round robin, starting after the pipeline it served
last. It sleeps when nothing was there to take, until an upload is admitted on this replica (the
replica that admits an upload is woken at once, so it usually publishes it) or the poll interval
has passed: one second, doubled after every empty look up to ten, so idle replicas cost the store
about one listing per pipeline every ten seconds each. Uploads admitted on other replicas, and
publications whose lease expired, are found by that poll: failover takes the lease plus at most
one poll interval.
"""

from __future__ import annotations

import itertools
import logging
import os
import socket
import threading
import time

from distributor_core import staging as sg
from distributor_core.lease import Lease, LeaseLost
from distributor_core.server.publisher import PublishFunction, log_failure, publish_staged_upload
from distributor_core.server.shared import SharedPipeline, SharedUploadService
from distributor_core.storage import StorageError

log = logging.getLogger("distributor.server")

#: seconds before the next look at the store after one that found nothing; doubled up to
#: ``MAX_POLL_INTERVAL`` while nothing is found
POLL_INTERVAL = 1.0
MAX_POLL_INTERVAL = 10.0


class SharedPublisher:
    def __init__(
        self,
        service: SharedUploadService,
        *,
        max_concurrency: int | None = None,
        publish: PublishFunction = publish_staged_upload,
        poll_interval: float = POLL_INTERVAL,
    ) -> None:
        self.service = service
        self.max_concurrency = max_concurrency or service.http.max_concurrency
        self.publish = publish
        self.poll_interval = poll_interval
        self.lease = service.http.publication_lease
        self.stopping = False
        self._identity = f"{socket.gethostname()}:{os.getpid()}:{os.urandom(4).hex()}"
        self._turn = itertools.count()
        self._threads: list[threading.Thread] = []

    def start(self, requeue: list[sg.UploadRecord]) -> None:
        del requeue  # unfinished uploads are taken from the store, by any replica
        for index in range(self.max_concurrency):
            thread = threading.Thread(target=self._work, args=(f"{self._identity}/{index}",),
                                      name=f"distributor-publisher-{index}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        """Stop taking uploads (signal-handler safe: sets a flag only)."""
        self.stopping = True

    def drain(self, deadline: float) -> bool:
        self.stopping = True
        self.service.admitted.set()
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        return not any(thread.is_alive() for thread in self._threads)

    def queued(self) -> int:
        return 0

    def _work(self, owner: str) -> None:
        interval = self.poll_interval
        while not self.stopping:
            try:
                worked = self._take_one(owner)
            except Exception:  # a store hiccup: look again after the poll interval
                log.exception("distributor: taking an upload to publish failed")
                worked = False
            if worked:
                interval = self.poll_interval
                continue
            if not self.stopping and self.service.admitted.wait(interval):
                self.service.admitted.clear()
                interval = self.poll_interval
            else:
                interval = min(interval * 2, max(self.poll_interval, MAX_POLL_INTERVAL))

    def _take_one(self, owner: str) -> bool:
        pipelines = list(self.service.pipelines.items())
        start = next(self._turn) % max(1, len(pipelines))
        for _pipeline_id, pipeline in pipelines[start:] + pipelines[:start]:
            if self.stopping:
                return False
            claimed = pipeline.store.claim_next(owner, self.lease, in_order=True)
            if claimed is None:
                continue
            lease, started = claimed
            self._run(pipeline, started.record, lease)
            return True
        return False

    def _run(self, pipeline: SharedPipeline, record: sg.UploadRecord, lease: Lease) -> None:
        service = self.service
        report: object = None
        error: Exception | None = None
        with lease.kept():
            try:
                report = self.publish(service, record)
            except Exception as exc:
                error = exc
        log_failure(record.run_id, report, error)
        try:
            pipeline.uploads.mark_finished(record.run_id, report=report, error=error or "", clock=service.clock,
                                           redact=service.redactions, fence=lease.check)
            service.queue.finished(record.run_id)
        except LeaseLost:
            log.warning("distributor: the publication lease of upload %s was taken over; its outcome is "
                        "left to the replica that holds it", record.run_id)
        except (StorageError, sg.RecordError, sg.StatusTransitionError) as exc:
            log.warning("distributor: could not record the outcome of upload %s: %s", record.run_id, exc)

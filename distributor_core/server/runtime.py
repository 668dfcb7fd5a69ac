"""Start and stop what runs beside the HTTP app: the inline publisher and the expiry janitor."""

from __future__ import annotations

import threading
import time

from distributor_core import staging as sg
from distributor_core.server.publisher import InlinePublisher
from distributor_core.server.service import UploadService
from distributor_core.server.shared import SharedUploadService
from distributor_core.server.shared_publisher import SharedPublisher

SHUTDOWN_GRACE = 30.0


class UploadRuntime:
    """Owns an opened :class:`UploadService` and, in inline mode, its :class:`InlinePublisher`.

    :meth:`start` and :meth:`shutdown` are idempotent. :meth:`request_stop` only sets flags, so a
    signal handler may call it; running publications then get ``SHUTDOWN_GRACE`` seconds from
    that moment to finish.
    """

    def __init__(
        self,
        service: UploadService | SharedUploadService,
        publisher: InlinePublisher | SharedPublisher | None,
        requeue: list[sg.UploadRecord],
        *,
        janitor_interval: float = 60.0,
    ) -> None:
        self.service = service
        self.publisher = publisher
        self.requeue = requeue
        self.janitor_interval = janitor_interval
        self.stop_requested_at: float | None = None
        self._started = False
        self._closed = False
        self._lock = threading.Lock()

    def start(self) -> None:
        with self._lock:
            if self._started or self._closed:
                return
            self._started = True
        if self.publisher is not None:
            self.publisher.start(self.requeue)
        self.service.start_janitor(self.janitor_interval)

    def request_stop(self) -> None:
        if self.stop_requested_at is None:
            self.stop_requested_at = time.monotonic()
        if self.publisher is not None:
            self.publisher.stop()

    def shutdown(self, grace: float = SHUTDOWN_GRACE) -> bool:
        """Stop publishing, wait for running publications (until ``grace`` seconds after the stop
        request), release the staging locks. Returns True when no publication was cut off."""
        self.request_stop()
        with self._lock:
            if self._closed:
                return True
            self._closed = True
        drained = True
        if self.publisher is not None and self._started:
            assert self.stop_requested_at is not None
            drained = self.publisher.drain(self.stop_requested_at + grace)
        self.service.close()
        return drained

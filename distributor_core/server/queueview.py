"""What a replica on shared S3 staging knows of the whole store's queue (issue 29): the
unfinished uploads of every pipeline and their tokens, for ``queue_size`` and the per-token share.

Listing every pipeline's pending markers and reading their records on each request would cost an
admission ``1 + 2 × backlog`` requests (measured by bench P15). Instead a background thread lists
the markers every ``interval`` seconds (one listing per pipeline) and reads a record only for a run
id it has not seen before (a record's token never changes); admissions use the latest listing
plus the uploads this replica admitted since that listing began. Between listings the count lags
the other replicas' admissions by at most ``interval``: ``queue_size`` is back-pressure across
replicas, not an exact bound.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from distributor_core.staging.objectstore import ObjectStagingStore

log = logging.getLogger("distributor.server")

#: seconds between listings of the store's pending markers
DEFAULT_INTERVAL = 2.0


@dataclass(frozen=True)
class QueueSnapshot:
    """Unfinished uploads (run id → token id) as of ``taken`` (monotonic)."""

    taken: float = 0.0
    tokens: dict[str, str] = field(default_factory=dict)


class QueueView:
    def __init__(
        self,
        stores: Callable[[], Iterable[ObjectStagingStore]],
        *,
        interval: float = DEFAULT_INTERVAL,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._stores = stores
        self.interval = interval
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._snapshot = QueueSnapshot()
        #: run id → token id of records seen (a record's token never changes)
        self._known: dict[str, str] = {}
        #: uploads this replica admitted: (monotonic time, run id, token id)
        self._own: list[tuple[float, str, str]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def refresh(self) -> None:
        """List every pipeline's pending markers (reading the records of run ids not seen before)."""
        started = self._monotonic()
        tokens: dict[str, str] = {}
        for store in self._stores():
            for run_id in store.pending_run_ids():
                token = self._known.get(run_id)
                if token is None:
                    found = store.read(run_id)
                    if found is None:  # an admission in flight, or one that died: not queued (yet)
                        continue
                    token = self._known[run_id] = found.record.token_id
                tokens[run_id] = token
        with self._lock:
            self._snapshot = QueueSnapshot(started, tokens)
            self._own = [entry for entry in self._own if entry[0] >= started and entry[1] not in tokens]
            for run_id in list(self._known):
                if run_id not in tokens and not any(entry[1] == run_id for entry in self._own):
                    del self._known[run_id]

    def admitted(self, run_id: str, token_id: str) -> None:
        """Count an upload this replica just admitted until a listing includes it."""
        with self._lock:
            self._own.append((self._monotonic(), run_id, token_id))
            self._known[run_id] = token_id

    def finished(self, run_id: str) -> None:
        """An upload this replica published is finished: no longer counted (the next listing would
        drop it too; until then it held a queue slot it no longer needs)."""
        with self._lock:
            self._own = [entry for entry in self._own if entry[1] != run_id]
            if run_id in self._snapshot.tokens:
                tokens = {key: value for key, value in self._snapshot.tokens.items() if key != run_id}
                self._snapshot = QueueSnapshot(self._snapshot.taken, tokens)

    def counts(self) -> tuple[int, dict[str, int]]:
        """``(unfinished uploads, per token)`` of the whole store, as far as this replica knows."""
        with self._lock:
            tokens = dict(self._snapshot.tokens)
            for _, run_id, token in self._own:
                tokens.setdefault(run_id, token)
        per_token: dict[str, int] = {}
        for token in tokens.values():
            per_token[token] = per_token.get(token, 0) + 1
        return len(tokens), per_token

    def start(self) -> None:
        def run() -> None:
            while not self._stop.wait(self.interval):
                try:
                    self.refresh()
                except Exception as exc:  # the last listing stands until the store answers again
                    log.warning("distributor: listing the staging store's queue failed: %s", exc)

        self._thread = threading.Thread(target=run, name="distributor-queue-view", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

"""How ``GET /runs/<id>`` asks an orchestrator about an upload's publish run (the overlay of
``--publisher dagster``, resolutions D1), without the core importing the orchestrator.

A *run status source* is a callable ``source(upload_run_id) -> (status, run id, error) | None``:
``status`` is an upload status (``queued``, ``running``, ``succeeded``, ``failed``), ``run id`` the
orchestrator's id of the run, ``error`` the failure text. Sources are registered per publisher mode
as a zero-argument factory under the entry point group :data:`ENTRY_POINT_GROUP`; the Dagster layer
registers ``dagster`` (``distributor_dagster.upload_status:DagsterRunLookup``), which is also the
built-in default when the package metadata is not installed.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from importlib.metadata import EntryPoint, entry_points

from distributor_core.server.errors import ServerSetupError

#: ``(status, orchestrator run id, error)``
RunOverlay = tuple[str, "str | None", str]
RunStatusSource = Callable[[str], "RunOverlay | None"]

ENTRY_POINT_GROUP = "distributor.run_status"
#: publisher mode -> ``module:factory`` used when no entry point of that name is installed
DEFAULT_SOURCES = {"dagster": "distributor_dagster.upload_status:DagsterRunLookup"}


class LazyRunStatusSource:
    """A registered run status source, loaded (and its orchestrator imported) on its first call,
    so that ``serve --publisher dagster`` starts without importing Dagster (about 30 MiB of RSS
    and a second of start-up)."""

    def __init__(self, publisher: str, target: EntryPoint | str) -> None:
        self.publisher = publisher
        self._target = target
        self._source: RunStatusSource | None = None
        self._lock = threading.Lock()

    def load(self) -> RunStatusSource:
        with self._lock:
            if self._source is None:
                try:
                    if isinstance(self._target, str):
                        module, _, attribute = self._target.partition(":")
                        factory = getattr(importlib.import_module(module), attribute)
                    else:
                        factory = self._target.load()
                except ImportError as exc:
                    raise ServerSetupError(
                        f"the run status source of publisher {self.publisher} cannot be loaded: {exc}") from None
                self._source = factory()
            return self._source

    def __call__(self, upload_run_id: str) -> RunOverlay | None:
        return self.load()(upload_run_id)


def load_run_status_source(publisher: str) -> LazyRunStatusSource:
    """The run status source registered for ``publisher``; its module is imported on first use."""
    found = entry_points(group=ENTRY_POINT_GROUP, name=publisher)
    if found:
        return LazyRunStatusSource(publisher, next(iter(found)))
    if publisher in DEFAULT_SOURCES:
        return LazyRunStatusSource(publisher, DEFAULT_SOURCES[publisher])
    raise ServerSetupError(f"no run status source is registered for publisher {publisher}")

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
from collections.abc import Callable
from importlib.metadata import entry_points

from distributor_core.server.errors import ServerSetupError

#: ``(status, orchestrator run id, error)``
RunOverlay = tuple[str, "str | None", str]
RunStatusSource = Callable[[str], "RunOverlay | None"]

ENTRY_POINT_GROUP = "distributor.run_status"
#: publisher mode -> ``module:factory`` used when no entry point of that name is installed
DEFAULT_SOURCES = {"dagster": "distributor_dagster.upload_status:DagsterRunLookup"}


def load_run_status_source(publisher: str) -> RunStatusSource:
    """The run status source registered for ``publisher`` (a new instance of its factory)."""
    found = entry_points(group=ENTRY_POINT_GROUP, name=publisher)
    try:
        if found:
            factory = next(iter(found)).load()
        elif publisher in DEFAULT_SOURCES:
            module, _, attribute = DEFAULT_SOURCES[publisher].partition(":")
            factory = getattr(importlib.import_module(module), attribute)
        else:
            raise ServerSetupError(f"no run status source is registered for publisher {publisher}")
    except ImportError as exc:
        raise ServerSetupError(f"the run status source of publisher {publisher} cannot be loaded: {exc}") from None
    return factory()

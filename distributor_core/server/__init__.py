"""The HTTP upload server of ``distributor serve``: the FastAPI app, archive extraction and its
limits, admission and fairness, connection limits, and the inline publisher.

The durable staging area it writes (records, index, scan, redaction) is
``distributor_core.staging``, below this package, shared with the Dagster sensors and publish
runs. The
FastAPI app is imported lazily (``from distributor_core.server import create_app``).

Owns: HTTP (routes, auth, archive limits, timeouts), publishing staged uploads through ``app``.
Must not know: Dagster (the ``--publisher dagster`` run-status overlay is a registered source,
entry point group ``distributor.run_status``, implemented in ``distributor_dagster``), the CLI."""

from __future__ import annotations

from typing import Any

__all__ = ["create_app", "serve"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from distributor_core.server.app import create_app

        return create_app
    if name == "serve":
        from distributor_core.server.serve import serve

        return serve
    raise AttributeError(name)

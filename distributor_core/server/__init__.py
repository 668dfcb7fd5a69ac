"""The HTTP upload server of ``distributor serve``: the FastAPI app, archive staging, the durable
staging area and the inline publisher.

``distributor_core.server.staging`` is the small, dependency-free reader/writer of the staging
layout that the Dagster upload sensor and publish runs use too. The FastAPI app is imported
lazily (``from distributor_core.server import create_app``) so that importing the staging module
does not import FastAPI.

Owns: HTTP (routes, auth, archive limits), the staging area on disk, publishing staged uploads
through ``app``. Must not know: Dagster (the Dagster-status overlay is on its way out of this
package, issue 16 item 3), the CLI.
"""

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

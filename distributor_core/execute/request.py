"""A request to publish one validated bundle to one destination: the storages and the policy.

This is what the CLI, the upload server and Dagster hand to :func:`execute.publish.publish`.
It lives on the execute side because it holds the storage handles; planning itself
(:mod:`distributor_core.plan`) only ever sees the facts read from them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

from distributor_core.plan import bundle_path_for
from distributor_core.plan.model import DestinationPolicy, Renderer
from distributor_core.structeq import compare_without

if TYPE_CHECKING:
    from distributor_core.bundle import Manifest
    from distributor_core.storage.base import Storage


@compare_without("source_content")
class PlanRequest(msgspec.Struct, frozen=True):
    pipeline_id: str
    destination_id: str
    source: Storage
    source_bundle_path: str
    #: the source manifest (source validation runs before planning, so usually a
    #: ``ValidManifest``; a plain ``Manifest`` is validated where planning and execution use it)
    manifest: Manifest
    destination: Storage
    policy: DestinationPolicy
    distributor_version: str = ""
    force: bool = False
    republish: bool = False
    renderer: Renderer | None = None
    #: validated bytes of small source files (``source.ValidatedContent``: ``get(path)``), which
    #: execution writes instead of reading the source again; None reads everything again
    source_content: Any = None



    @property
    def bundle_path(self) -> str:
        """The destination bundle path (``""`` under fixed path mapping, §4.4.4)."""
        return bundle_path_for(self.policy, self.source_bundle_path)


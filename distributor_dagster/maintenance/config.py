"""Run config of the prune and state-repair jobs (resolutions B2, E1). Both default to a dry run;
``apply: true`` writes. (The CLI's ``reconcile-state`` applies by default; these jobs do not.)"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import dagster as dg
from pydantic import Field


class BundleSelectionConfig(dg.Config):
    apply: bool = Field(default=False, description="Write the changes; without it the job is a dry run.")
    bundle_path: str = Field(
        default="", description="Destination-relative bundle path to work on (default: the destination root)."
    )
    all_bundles: bool = Field(
        default=False, description="Work on every bundle path under the root that holds a .distributor.json."
    )


class PruneConfig(BundleSelectionConfig):
    """``ops: {plan_prune: {config: {apply, bundle_path, all_bundles}}}``."""


class RepairConfig(BundleSelectionConfig):
    """``ops: {reconcile_state: {config: {apply, all_owners, bundle_path, all_bundles}}}``."""

    all_owners: bool = Field(
        default=False, description="Shared-root state: check every owner's records, not only this destination's."
    )


def node_config(run_config: Mapping[str, Any], node: str) -> dict[str, Any]:
    """The ``config`` block of ``node`` in a run config (``{}`` when absent)."""
    ops = run_config.get("ops") or {}
    block = ops.get(node) or {}
    config = block.get("config") if isinstance(block, Mapping) else None
    return dict(config) if isinstance(config, Mapping) else {}

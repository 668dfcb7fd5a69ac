"""Run config of the site-wide maintenance jobs (resolutions B2, E1; issues 25 and 28).

Each job offers only the fields that apply to it, every one optional with its default visible in
the launchpad. ``prune`` and ``reconcile_state`` are dry runs unless ``apply: true`` (the CLI's
``reconcile-state`` applies by default; these jobs do not).
"""

from __future__ import annotations

import dagster as dg
from pydantic import Field


class MaintenanceConfig(dg.Config):
    destinations: list[str] = Field(
        default_factory=list,
        description="Destinations to work on: '<pipeline id>/<destination id>', or a pipeline id for all of its "
        "destinations. Empty: every destination of the code location.",
    )
    bundle_path: str = Field(
        default="",
        description="One destination-relative bundle path ('.' for the root). Empty: every bundle path that holds a "
        ".distributor.json (the CLI's --all-bundles).",
    )


class PruneConfig(MaintenanceConfig):
    """``ops: {prune: {config: {destinations, bundle_path, apply}}}``."""

    apply: bool = Field(default=False, description="Delete the planned outputs; without it the run is a dry run.")


class RepairConfig(MaintenanceConfig):
    """``ops: {reconcile_state: {config: {destinations, bundle_path, apply, all_owners, audit, adopt}}}``."""

    apply: bool = Field(default=False, description="Rewrite state; without it the run is a dry run.")
    all_owners: bool = Field(
        default=False, description="Shared-root state: check every owner's records, not only each destination's."
    )
    audit: bool = Field(
        default=False, description="Re-read every recorded output and drop the records of those whose bytes changed."
    )
    adopt: bool = Field(
        default=False, description="Record unmanaged files that are exactly what the source would publish there."
    )


class AuditConfig(MaintenanceConfig):
    """``ops: {audit: {config: {destinations, bundle_path, all_owners, allow_unmanaged}}}``."""

    all_owners: bool = Field(
        default=False, description="Shared-root state: audit every owner's outputs, not only each destination's."
    )
    allow_unmanaged: bool = Field(default=False, description="List unmanaged entries without failing the audit.")

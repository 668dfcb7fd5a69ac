"""Run config of a publication: ``ops: {<pipeline>: {config: {...}}}`` (issue 12; was
``ops.discover.config`` of the op job, resolutions E1)."""

from __future__ import annotations

import dagster as dg
from pydantic import Field


class PublishConfig(dg.Config):
    """Which bundle to publish where, with the CLI's ``--dry-run``, ``--force`` and ``--republish``.

    Every field is optional, so "Materialize" and "Execute checks" run without a launchpad;
    publishing an ``http_upload`` pipeline needs ``upload_run_id`` (the uploads sensor sets it).
    """

    bundle_path: str | None = Field(
        default=None,
        description="Source-relative bundle path to publish; every discovered bundle when unset.",
    )
    destination: str | None = Field(
        default=None,
        description="Destination id to restrict the run to (among the selected destination assets); "
        "every selected destination when unset.",
    )
    upload_run_id: str | None = Field(
        default=None, description="Staged upload to publish (http_upload pipelines, required there)."
    )
    dry_run: bool = Field(default=False, description="Plan and report without writing anything.")
    force: bool = Field(
        default=False,
        description="Replace conflicting or unmanaged content; needs a run that targets exactly one destination.",
    )
    republish: bool = Field(
        default=False,
        description="Rewrite a destination that already matches its source; needs exactly one destination.",
    )

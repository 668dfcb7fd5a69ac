"""Run config of the publish job (resolutions E1): ``ops: {discover: {config: {...}}}``."""

from __future__ import annotations

import dagster as dg
from pydantic import Field


class PublishConfig(dg.Config):
    """Which bundle to publish where, with the CLI's ``--dry-run``, ``--force`` and ``--republish``."""

    bundle_path: str | None = Field(
        default=None,
        description="Source-relative bundle path to publish; every discovered bundle when unset.",
    )
    destination: str | None = Field(
        default=None, description="Destination id to restrict the run to; every destination when unset."
    )
    upload_run_id: str | None = Field(
        default=None, description="Staged upload to publish (http_upload pipelines only)."
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


class UploadPublishConfig(PublishConfig):
    """An ``http_upload`` pipeline publishes one staged upload per run: ``upload_run_id`` is required."""

    upload_run_id: str = Field(description="Run id of the staged upload to publish (the upload sensor sets it).")

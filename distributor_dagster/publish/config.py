"""Run config of a publication: ``ops: {<graph>: {config: {...}}}`` (issue 12, issue 24).

Every field is optional, so "Materialize" and "Execute checks" run without a launchpad. A pipeline
that reads a source takes ``bundle_path``; an ``http_upload`` pipeline takes ``upload_run_id``
(without it, a run publishes the uploads still waiting in the staging area). Partitioned runs
name their bundles by partition instead of ``bundle_path``.
"""

from __future__ import annotations

import dagster as dg
from pydantic import Field


class PublishConfig(dg.Config):
    """Where to publish, with the CLI's ``--dry-run``, ``--force`` and ``--republish``."""

    destination: str | None = Field(
        default=None,
        description="Destination id to restrict the run to (among the selected destination assets); "
        "every selected destination when unset.",
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


class BundlePublishConfig(PublishConfig):
    """A run of a pipeline that reads a ``local``, ``ssh`` or ``s3`` source."""

    bundle_path: str | None = Field(
        default=None,
        description="Source-relative bundle path to publish (unpartitioned runs); a partitioned run publishes "
        "its partitions, and with neither every discovered bundle is published.",
    )


class UploadPublishConfig(PublishConfig):
    """A run of an ``http_upload`` pipeline."""

    upload_run_id: str | None = Field(
        default=None,
        description="The staged upload to publish (the uploads sensor sets it); unset: every upload still "
        "waiting (status accepted), in admission order.",
    )

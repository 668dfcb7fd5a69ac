"""Observing a pipeline's source on demand (the source asset's observe function).

A ``local``, ``ssh`` or ``s3`` source is listed and its manifests are read (nothing is hashed).
An ``http_upload`` pipeline's source is its upload staging area: the records are read and the
newest upload is the one admitted last (highest ``seq``).
"""

from __future__ import annotations

from collections.abc import Sequence

from distributor_core.config import Pipeline
from distributor_core.server import staging
from distributor_core.storage.factory import open_source_storage
from distributor_dagster.site import Site
from distributor_dagster.sources import Seen, SourceView, read_bundles, seen_upload


def uploads_view(records: Sequence[staging.UploadRecord], admitted: int | None = None) -> SourceView:
    """The staging area as observed through ``records`` (admission order): the newest upload is
    the last one with a readable manifest identity; ``admitted`` defaults to the highest ``seq``."""
    seen = [s for s in (seen_upload(r.run_id, r.manifest) for r in records) if s is not None]
    last: Seen | None = seen[-1] if seen else None
    count = admitted if admitted is not None else max((r.seq for r in records), default=0)
    return SourceView(count, last, noun="upload")


def observe_pipeline_source(site: Site, pipeline: Pipeline) -> tuple[SourceView, list[str]]:
    """The current view of the pipeline's source and one line per unreadable manifest or record."""
    if pipeline.is_upload:
        errors: list[tuple[str, str]] = []
        records = staging.list_records(pipeline.source.staging_path, errors=errors)  # type: ignore[union-attr]
        return uploads_view(records), [f"{run_id}: {error}" for run_id, error in errors]
    with open_source_storage(pipeline.source, site.environment(), dry_run=True) as source:
        seen, problems = read_bundles(source)
    return SourceView.of(seen), problems

"""Observing a pipeline's source on demand (the source asset's observe function).

A ``local``, ``ssh`` or ``s3`` source is listed and its manifests are read (nothing is hashed).
An ``http_upload`` pipeline's source is its upload staging area: the records are read and the
newest upload is the one admitted last (highest ``seq``).
"""

from __future__ import annotations

from distributor_core.config import Pipeline
from distributor_core.storage.factory import open_source_storage
from distributor_dagster.sensors.staging_scan import staged_records, uploads_view
from distributor_dagster.site import Site
from distributor_dagster.sources import SourceView, read_bundles


def observe_pipeline_source(site: Site, pipeline: Pipeline) -> tuple[SourceView, list[str]]:
    """The current view of the pipeline's source and one line per unreadable manifest or record."""
    if pipeline.is_upload:
        errors: list[tuple[str, str]] = []
        records = staged_records(pipeline.source.staging_path, errors=errors)  # type: ignore[union-attr]
        return uploads_view(records), [f"{run_id}: {error}" for run_id, error in errors]
    with open_source_storage(pipeline.source, site.environment(), dry_run=True) as source:
        seen, problems = read_bundles(source)
    return SourceView.of(seen), problems

"""How sources and destinations are described to a Dagster user: one-line descriptions, each
naming its root as the backend config names it (``uri()`` and the endpoint of an S3-compatible
service; ``dagster/uri`` is ``uri()`` too). Pure functions of the loaded config (no storage is
opened)."""

from __future__ import annotations

from distributor_core.config import Destination, Pipeline, SourceBackend


def root_text(storage: SourceBackend) -> str:
    """The resolved, absolute root as an operator reads it: its URI, and for an S3-compatible
    service its endpoint."""
    return storage.uri() + storage.endpoint_note


def destination_description(pipeline: Pipeline, destination: Destination) -> str:
    mode = destination.path_mapping.mode
    if pipeline.is_upload:
        how = "Materializing it publishes the uploads waiting in the staging area (to every destination of the " \
              "pipeline: an upload is published whole)."
    elif mode == "fixed":
        how = "It holds the newest bundle: materializing it publishes the newest bundle there when that bundle " \
              "is valid (else nothing, and the source check bundle_valid says why)."
    else:
        how = "Partitioned by bundle: each partition is one bundle's publication at its own path; materializing " \
              "a partition publishes that bundle."
    return (
        f"Destination {destination.id} of pipeline {pipeline.id}: {root_text(destination.storage)} "
        f"({destination.backend}; {mode.replace('_', ' ')} paths, {destination.state.mode.replace('_', ' ')} "
        f"state, {destination.reconciliation.mode} reconciliation). {how}"
    )


def source_description(pipeline: Pipeline, *, partitioned: bool = False) -> str:
    where = root_text(pipeline.source)
    if pipeline.is_upload:
        return (
            f"Source of pipeline {pipeline.id}: the upload staging area {where}, filled by `distributor serve`. "
            "Observed by the uploads sensor; its data version is the digest of the newest upload."
        )
    if partitioned:
        return (
            f"Source of pipeline {pipeline.id}: {where} ({pipeline.source.backend}). One partition per bundle, "
            "keyed by its source-relative path (the bundle at the source root is '.'); each partition's data "
            "version is that bundle's digest. Observed by the watch sensor and the publish runs; the check "
            "bundle_valid names bundles that fail validation."
        )
    return (
        f"Source of pipeline {pipeline.id}: {where} ({pipeline.source.backend}). Observed by the watch sensor, "
        "the publish runs and the Observe button; its data version is the digest of the newest bundle."
    )


def newest_description(pipeline: Pipeline) -> str:
    return (
        f"Newest bundle of the source of pipeline {pipeline.id} ({root_text(pipeline.source)}): the latest "
        "manifest created, ties by path, which its fixed destinations publish. Its data version is that "
        "bundle's digest; its check bundle_valid says whether that bundle passes validation."
    )

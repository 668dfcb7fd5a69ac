"""Asset events of a publication (issue 12 items 4, 5; resolutions E2; issue 24).

A partition of a per-bundle destination is materialized by every publication that leaves the
destination holding that bundle: an executed write, and also ``skip_same`` (the partition the run
targeted holds exactly that bundle; Dagster counts a targeted partition that was neither
materialized nor failed as failed, so a backfill over published bundles would otherwise end
red). Its data version is the bundle's digest and its provenance names that bundle's partition
of the source. Each partition is its own event, logged by the step.

An unpartitioned destination (``fixed``, uploads) gets at most one materialization per run, the
step's asset output, for the bundle it holds at the end; only an executed write materializes it
(a ``skip_same`` is an observation with the same data version, as resolutions E2 says).

Everything else (dry runs, ``skip_destination_newer``, ``fail_*`` plans, failed writes, bundles a
later one replaced within the run) is an ``AssetObservation`` with the same metadata.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import dagster as dg

from distributor_core import paths as lp
from distributor_core.app.report import ActionReport
from distributor_core.bundle import Manifest
from distributor_core.config import StorageBackend
from distributor_dagster.partitions import bundle_key
from distributor_dagster.publish.model import Item
from distributor_dagster.versions import data_version_tags, materialization_tags

OUTPUTS_SCHEMA = dg.TableSchema(
    columns=[
        dg.TableColumn("path", "string"),
        dg.TableColumn("kind", "string"),
        dg.TableColumn("size", "int"),
        dg.TableColumn("sha256", "string"),
    ]
)


def outputs_table(outputs: Sequence[Mapping[str, Any]]) -> dg.TableMetadataValue:
    records = [
        dg.TableRecord(
            {"path": str(o.get("path", "")), "kind": str(o.get("kind", "")), "size": int(o.get("size", 0)),
             "sha256": str(o.get("sha256", ""))}
        )
        for o in outputs
    ]
    return dg.MetadataValue.table(records=records, schema=OUTPUTS_SCHEMA)


def action_metadata(
    entry: ActionReport, manifest: Manifest | None, *, dry_run: bool, root: StorageBackend
) -> dict[str, Any]:
    """The metadata of one (bundle, destination) publication, executed or not."""
    metadata: dict[str, Any] = {
        "action": entry.action or "none",
        "reason": entry.reason,
        "status": entry.status,
        "dry_run": dg.MetadataValue.bool(dry_run),
        "pipeline_id": entry.pipeline_id,
        "destination_id": entry.destination_id,
        "backend": entry.backend,
        "dagster/uri": root.uri(entry.destination_path),
        "destination_root": root.uri(),
        "destination_path": lp.display_path(entry.destination_path),
        "source_bundle_path": lp.display_path(entry.bundle_path),
        "source_id": entry.source_id or (manifest.id if manifest is not None else ""),
        "outputs_count": dg.MetadataValue.int(len(entry.outputs)),
        "bytes_written": dg.MetadataValue.int(entry.bytes_written),
        "outputs": outputs_table(entry.outputs),
    }
    if manifest is not None:
        metadata["source_digest"] = manifest.digest
        metadata["source_created"] = dg.MetadataValue.timestamp(manifest.created)
        metadata["source_file_count"] = dg.MetadataValue.int(manifest.file_count)
        metadata["source_bytes"] = dg.MetadataValue.int(manifest.total_size)
    if entry.primary_url:
        metadata["primary_url"] = dg.MetadataValue.url(entry.primary_url)
    if entry.planned_action is not None:
        metadata["planned_action"] = entry.planned_action
    if entry.error:
        metadata["error"] = entry.error
    if entry.deletes:
        metadata["deletes"] = dg.MetadataValue.json(list(entry.deletes))
    if entry.taken_over_outputs:
        metadata["taken_over_outputs"] = dg.MetadataValue.json(list(entry.taken_over_outputs))
    if entry.recovery is not None:
        metadata["recovery"] = dg.MetadataValue.json(dict(entry.recovery))
    if entry.warnings:
        metadata["warnings"] = dg.MetadataValue.json(list(entry.warnings))
    return metadata


def executed(entry: ActionReport, *, dry_run: bool) -> bool:
    """An executed write action: ``completed`` is only reported for those."""
    return not dry_run and entry.status == "completed"


def holds(entry: ActionReport, *, dry_run: bool) -> bool:
    """The destination holds the entry's bundle after the step (written now or already the same)."""
    return executed(entry, dry_run=dry_run) or (not dry_run and entry.action == "skip_same" and not entry.failed)


def describe(entry: ActionReport) -> str:
    return f"{entry.action or 'failed'}: {entry.reason or entry.error}"


class Pointer(Protocol):
    def __call__(self, partition: str | None, digest: str) -> int | None: ...


@dataclass(frozen=True)
class Provenance:
    """What a destination's materializations record: its code version and the source asset
    (partition) they were published from."""

    code_version: str
    input_key: dg.AssetKey
    pointer: Pointer

    def tags(self, digest: str, partition: str | None) -> dict[str, str]:
        return materialization_tags(digest, self.code_version, self.input_key, digest,
                                    self.pointer(partition, digest))


@dataclass
class AssetEvents:
    """The events of one destination step: ``logged`` are yielded by the step as they are; ``final``
    (metadata, data version, tags) becomes the step's asset output (unpartitioned destinations)."""

    logged: list[dg.AssetMaterialization | dg.AssetObservation] = field(default_factory=list)
    final: tuple[dict[str, Any], dg.DataVersion, dict[str, str]] | None = None


def partition_events(
    entries: Sequence[tuple[Item, ActionReport]],
    manifests: Mapping[str, Manifest],
    *,
    asset_key: dg.AssetKey,
    provenance: Provenance,
    dry_run: bool,
    root: StorageBackend,
) -> AssetEvents:
    """One event per bundle partition: a materialization where the destination holds the bundle."""
    events = AssetEvents()
    for item, entry in entries:
        manifest = manifests.get(item.key)
        key = bundle_key(item.bundle_path)
        metadata = action_metadata(entry, manifest, dry_run=dry_run, root=root)
        if manifest is not None and holds(entry, dry_run=dry_run):
            events.logged.append(dg.AssetMaterialization(
                asset_key=asset_key, partition=key, description=describe(entry), metadata=metadata,
                tags=provenance.tags(manifest.digest, key),
            ))
        else:
            events.logged.append(dg.AssetObservation(
                asset_key=asset_key, partition=key, description=describe(entry), metadata=metadata,
            ))
    return events


def destination_events(
    entries: Sequence[tuple[Item, ActionReport]],
    manifests: Mapping[str, Manifest],
    *,
    asset_key: dg.AssetKey,
    provenance: Provenance,
    dry_run: bool,
    root: StorageBackend,
) -> AssetEvents:
    """An unpartitioned destination: the last executed write of the run is its materialization
    (the step's output); every other entry an observation (a ``skip_same`` one keeps the data
    version it holds)."""
    events = AssetEvents()
    last = None
    for index, (item, entry) in enumerate(entries):
        if manifests.get(item.key) is not None and executed(entry, dry_run=dry_run):
            last = index
    for index, (item, entry) in enumerate(entries):
        manifest = manifests.get(item.key)
        metadata = action_metadata(entry, manifest, dry_run=dry_run, root=root)
        if index == last and manifest is not None:
            events.final = (metadata, dg.DataVersion(manifest.digest), provenance.tags(manifest.digest, None))
            continue
        still_held = manifest is not None and last is None and holds(entry, dry_run=dry_run)
        events.logged.append(dg.AssetObservation(
            asset_key=asset_key, description=describe(entry), metadata=metadata,
            tags=data_version_tags(manifest.digest) if still_held and manifest is not None else {},
        ))
    return events



"""Asset events of a publication (issue 12 items 4, 5; resolutions E2).

Only an executed write action materializes the destination asset; its data version is the
published bundle's digest. Skips, dry runs and ``fail_*`` plans emit an ``AssetObservation`` with
the same metadata; a ``skip_same`` observation carries the same data version (the destination
still holds that bundle), dry runs and failures none.

When one step materializes several bundles (a run without a bundle selector), all but the last
are logged as ``AssetMaterialization`` events and the last one, the newest, is the step's asset
output, which Dagster gives the code version and data provenance of the asset.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import dagster as dg

from distributor_core import paths as lp
from distributor_core.app.report import ActionReport
from distributor_core.bundle import Manifest
from distributor_dagster.versions import data_version_tags, input_version_tags

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


def bundle_uri(root_uri: str, destination_path: str) -> str:
    return root_uri if not destination_path else f"{root_uri.rstrip('/')}/{destination_path}"


def action_metadata(
    entry: ActionReport, manifest: Manifest | None, *, dry_run: bool, root_uri: str
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
        "dagster/uri": bundle_uri(root_uri, entry.destination_path),
        "destination_root": root_uri,
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


def materializes(entry: ActionReport, *, dry_run: bool) -> bool:
    """True for an executed write action: ``completed`` is only reported for those."""
    return not dry_run and entry.status == "completed"


def holds(entry: ActionReport, *, dry_run: bool) -> bool:
    """The destination holds the entry's bundle after the step (written now or already the same)."""
    return materializes(entry, dry_run=dry_run) or (not dry_run and entry.action == "skip_same")


def describe(entry: ActionReport) -> str:
    return f"{entry.action or 'failed'}: {entry.reason or entry.error}"


@dataclass
class AssetEvents:
    """The events of one destination step: ``logged`` go through ``context.log_event``; ``final``
    (metadata, data version, tags) becomes the step's asset output, when anything was written."""

    logged: list[dg.AssetMaterialization | dg.AssetObservation] = field(default_factory=list)
    final: tuple[dict[str, Any], dg.DataVersion, dict[str, str]] | None = None


def asset_events(
    entries: Sequence[ActionReport],
    manifests: Mapping[str, Manifest],
    *,
    asset_key: dg.AssetKey,
    source_key: dg.AssetKey,
    dry_run: bool,
    root_uri: str,
) -> AssetEvents:
    """Observations for what was not written and materializations, newest last, for what was."""
    events = AssetEvents()
    written: list[tuple[ActionReport, Manifest]] = []
    held: list[tuple[str, Manifest]] = []
    for entry in entries:
        manifest = manifests.get(entry.bundle_path)
        if manifest is not None and holds(entry, dry_run=dry_run):
            held.append((entry.bundle_path, manifest))
        if manifest is not None and materializes(entry, dry_run=dry_run):
            written.append((entry, manifest))
            continue
        tags = data_version_tags(manifest.digest) if manifest is not None and holds(entry, dry_run=dry_run) else {}
        events.logged.append(dg.AssetObservation(
            asset_key=asset_key, description=describe(entry), tags=tags,
            metadata=action_metadata(entry, manifest, dry_run=dry_run, root_uri=root_uri),
        ))
    if not written:
        return events
    written.sort(key=lambda item: (item[1].created, item[0].bundle_path))
    for entry, manifest in written[:-1]:
        events.logged.append(dg.AssetMaterialization(
            asset_key=asset_key, description=describe(entry), tags=data_version_tags(manifest.digest),
            metadata=action_metadata(entry, manifest, dry_run=dry_run, root_uri=root_uri),
        ))
    entry, manifest = written[-1]
    # the newest bundle held (latest created, ties by path, as a fixed destination picks it)
    _, newest_held = min(held, key=lambda item: (-item[1].created.timestamp(), item[0]))
    events.final = (
        action_metadata(entry, manifest, dry_run=dry_run, root_uri=root_uri),
        dg.DataVersion(manifest.digest),
        input_version_tags(source_key, newest_held.digest),
    )
    return events

"""Asset events of a publication (dagster.md §2, resolutions E2).

Only an executed write action materializes the destination asset. Skips, dry runs and ``fail_*``
plans emit an ``AssetObservation`` with the same metadata, so nothing is dropped silently.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import dagster as dg

from distributor_core import paths as lp
from distributor_core.app.report import ActionReport
from distributor_core.bundle import Manifest
from distributor_core.timefmt import format_precise

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
    entry: ActionReport, manifest: Manifest | None, *, dry_run: bool, destination_root: str
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
        "destination_root": destination_root,
        "destination_path": lp.display_path(entry.destination_path),
        "source_bundle_path": lp.display_path(entry.bundle_path),
        "source_id": entry.source_id or (manifest.id if manifest is not None else ""),
        "source_digest": manifest.digest if manifest is not None else "",
        "source_created": format_precise(manifest.created) if manifest is not None else "",
        "outputs_count": dg.MetadataValue.int(len(entry.outputs)),
        "bytes_written": dg.MetadataValue.int(entry.bytes_written),
        "outputs": outputs_table(entry.outputs),
    }
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


def asset_event(
    entry: ActionReport,
    asset_key: dg.AssetKey,
    manifest: Manifest | None,
    *,
    dry_run: bool,
    destination_root: str,
) -> dg.AssetMaterialization | dg.AssetObservation:
    metadata = action_metadata(entry, manifest, dry_run=dry_run, destination_root=destination_root)
    description = f"{entry.action or 'failed'}: {entry.reason or entry.error}"
    if materializes(entry, dry_run=dry_run):
        return dg.AssetMaterialization(asset_key=asset_key, description=description, metadata=metadata)
    return dg.AssetObservation(asset_key=asset_key, description=description, metadata=metadata)

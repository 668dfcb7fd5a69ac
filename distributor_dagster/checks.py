"""Asset checks of a destination asset (dagster.md §2, resolutions B2, issue 12 item 3).

The checks are declared with the destination assets (check specs of the publish graph) and
evaluated by the graph's ``check_<d>`` step, so every run that materializes a destination
evaluates them; "Execute checks" in the UI runs that step alone. They look only at the bundle
paths the asset has materialized (the ``destination_path`` of its materializations) and run
the core's read-only ``reconcile_state`` dry run on each:

- ``state_valid``: every such ``.distributor.json`` exists, parses, validates and names this
  destination as its owner (or has an owner record for it in shared-root state);
- ``managed_outputs_present``: every output recorded for this destination exists;
- ``no_unmanaged_content`` (severity WARN): nothing but managed outputs and reserved names lives
  in those bundle paths (nested bundles with their own state are not counted).
"""

from __future__ import annotations

from typing import Any

import dagster as dg

from distributor_core import paths as lp
from distributor_core.app.reconcile import reconcile_state
from distributor_core.app.repair_report import ReconcileStateReport
from distributor_core.config import Destination, Pipeline
from distributor_dagster.maintenance.results import MAINTENANCE_ERRORS
from distributor_dagster.names import CHECK_NAMES, DestinationNames
from distributor_dagster.site import Site

#: Materialization records read per page when collecting published bundle paths.
PAGE_SIZE = 1000
#: How many paths a check lists in its metadata per bundle path.
LISTED = 50


def published_bundle_paths(
    instance: dg.DagsterInstance, key: dg.AssetKey, destination: Destination | None = None
) -> list[str]:
    """Destination bundle paths of every materialization of ``key``, sorted.

    A ``fixed`` destination publishes every bundle to its root, so only whether it was ever
    materialized is read (one record, however long its history); a ``preserve_relative`` one has
    a path per bundle and reads its materializations in pages of :data:`PAGE_SIZE` (about one per
    bundle path it has published, as a re-publication of an unchanged bundle is an observation).
    """
    if destination is not None and destination.path_mapping.mode == "fixed":
        return [""] if instance.fetch_materializations(key, limit=1).records else []
    found: set[str] = set()
    cursor = None
    while True:
        page = instance.fetch_materializations(key, limit=PAGE_SIZE, cursor=cursor)
        for record in page.records:
            materialization = record.asset_materialization
            value = materialization.metadata.get("destination_path") if materialization is not None else None
            text = getattr(value, "value", value)
            if isinstance(text, str):
                found.add("" if text == "." else text)
        if not page.has_more:
            return sorted(found)
        cursor = page.cursor


def _listing(items: dict[str, list[str]]) -> dict[str, list[str]]:
    return {lp.display_path(bundle): paths[:LISTED] for bundle, paths in items.items() if paths}


def evaluate(
    site: Site, pipeline: Pipeline, destination: Destination, bundle_paths: list[str]
) -> tuple[dict[str, ReconcileStateReport], dict[str, str]]:
    """Dry-run ``reconcile_state`` on each bundle path: reports, and errors of unreadable state."""
    reports: dict[str, ReconcileStateReport] = {}
    errors: dict[str, str] = {}
    for path in bundle_paths:
        try:
            report = reconcile_state(
                site.config, pipeline_id=pipeline.id, destination_id=destination.id, dry_run=True,
                bundle_path=path, environment=site.environment(),
            )
        except MAINTENANCE_ERRORS as exc:
            errors[path] = str(exc)
            continue
        reports[path] = report  # type: ignore[assignment]
    return reports, errors


MISSING_SCHEMA = dg.TableSchema(columns=[dg.TableColumn("bundle_path", "string"), dg.TableColumn("path", "string")])
UNMANAGED_SCHEMA = dg.TableSchema(columns=[
    dg.TableColumn("bundle_path", "string"), dg.TableColumn("path", "string"),
    dg.TableColumn("type", "string"), dg.TableColumn("size", "int"),
])
ERRORS_SCHEMA = dg.TableSchema(columns=[dg.TableColumn("bundle_path", "string"), dg.TableColumn("error", "string")])


def _table(rows: list[dict[str, Any]], schema: dg.TableSchema) -> dg.TableMetadataValue:
    return dg.MetadataValue.table(records=[dg.TableRecord(row) for row in rows], schema=schema)


def check_results(
    key: dg.AssetKey, bundle_paths: list[str], reports: dict[str, ReconcileStateReport], errors: dict[str, str]
) -> dict[str, dg.AssetCheckResult]:
    """The three results; failing ones list the paths at fault as tables (and as JSON by bundle path)."""
    common: dict[str, Any] = {"bundle_paths": dg.MetadataValue.json([lp.display_path(p) for p in bundle_paths])}
    if not bundle_paths:
        note = "the asset has no materialization yet, so no bundle path to check"
        return {
            name: dg.AssetCheckResult(asset_key=key, check_name=name, passed=True, description=note, metadata=common)
            for name in CHECK_NAMES
        }
    shown_errors = {lp.display_path(p): e for p, e in errors.items()}
    missing = {p: [m.path for m in r.missing_managed_outputs] for p, r in reports.items()}
    unmanaged = {p: list(r.unmanaged_entries) for p, r in reports.items()}
    missing_count = sum(len(v) for v in missing.values())
    unmanaged_count = sum(len(v) for v in unmanaged.values())
    truncated = any(r.truncated for r in reports.values())
    error_rows = [{"bundle_path": p, "error": e} for p, e in shown_errors.items()]
    missing_rows = [
        {"bundle_path": lp.display_path(p), "path": path} for p, paths in missing.items() for path in paths[:LISTED]
    ]
    unmanaged_rows = [
        {"bundle_path": lp.display_path(p), "path": u.path, "type": u.type, "size": u.size}
        for p, items in unmanaged.items() for u in items[:LISTED]
    ]
    return {
        "state_valid": dg.AssetCheckResult(
            asset_key=key, check_name="state_valid", passed=not errors,
            description="; ".join(f"{p}: {e}" for p, e in shown_errors.items()) or "state is valid",
            metadata={**common, "errors": dg.MetadataValue.json(shown_errors),
                      "error_table": _table(error_rows, ERRORS_SCHEMA)},
        ),
        "managed_outputs_present": dg.AssetCheckResult(
            asset_key=key, check_name="managed_outputs_present", passed=not errors and missing_count == 0,
            description=(
                f"{missing_count} managed output(s) missing" if missing_count
                else ("state could not be read" if errors else "every managed output exists")
            ),
            metadata={
                **common,
                "checked_count": dg.MetadataValue.int(sum(r.checked_count for r in reports.values())),
                "missing_count": dg.MetadataValue.int(missing_count),
                "missing_outputs": _table(missing_rows, MISSING_SCHEMA),
                "missing": dg.MetadataValue.json(_listing(missing)),
                "errors": dg.MetadataValue.json(shown_errors),
            },
        ),
        "no_unmanaged_content": dg.AssetCheckResult(
            asset_key=key, check_name="no_unmanaged_content", passed=unmanaged_count == 0,
            severity=dg.AssetCheckSeverity.WARN,
            description=f"{unmanaged_count} unmanaged entr{'y' if unmanaged_count == 1 else 'ies'}"
            + (" (walk truncated)" if truncated else ""),
            metadata={
                **common,
                "unmanaged_count": dg.MetadataValue.int(unmanaged_count),
                "unmanaged_entries": _table(unmanaged_rows, UNMANAGED_SCHEMA),
                "unmanaged": dg.MetadataValue.json(_listing({p: [u.path for u in v] for p, v in unmanaged.items()})),
                "truncated": dg.MetadataValue.bool(truncated),
            },
        ),
    }


CHECK_DESCRIPTIONS = {
    "state_valid": "The .distributor.json of every published bundle path is valid and records this destination.",
    "managed_outputs_present": "Every managed output recorded for this destination exists.",
    "no_unmanaged_content": "No unmanaged files in the published bundle paths (warning).",
}


def check_specs(names: DestinationNames, blocking: tuple[str, ...]) -> list[dg.AssetCheckSpec]:
    """The three checks of a destination asset, declared with it; ``blocking`` names those whose
    failure (severity error) blocks downstream assets in the same run."""
    key = dg.AssetKey(list(names.asset_key))
    return [
        dg.AssetCheckSpec(name, asset=key, description=CHECK_DESCRIPTIONS[name], blocking=name in blocking)
        for name in CHECK_NAMES
    ]


def evaluate_checks(
    site: Site, pipeline: Pipeline, destination: Destination, instance: dg.DagsterInstance, key: dg.AssetKey,
    log: Any,
) -> dict[str, dg.AssetCheckResult]:
    """Run the read-only checks on every bundle path ``key`` has materialized."""
    bundle_paths = published_bundle_paths(instance, key, destination)
    reports, errors = evaluate(site, pipeline, destination, bundle_paths)
    for path, error in errors.items():
        log.warning(f"{lp.display_path(path)}: {error}")
    for report in reports.values():
        log.info(report.text_line(with_bundle=True))
    return check_results(key, bundle_paths, reports, errors)

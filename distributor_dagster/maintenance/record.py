"""Maintenance shows on the destination asset (issue 25 item 3).

After a prune, a state repair (with its audit and adoption options) or an audit of a destination,
the step records what it did on the destination asset, one observation per bundle path (per
partition where the asset is partitioned): the operation, whether it was a dry run, and the paths
it deleted, repaired, adopted or found wrong. Then it evaluates the destination's checks on those
paths in the same run (an audit also answers ``outputs_match_digests`` when that check is on), so
the asset page shows the repaired destination green, or still red with the reason.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import dagster as dg

from distributor_core import paths as lp
from distributor_core.app.audit_report import AuditReport
from distributor_core.app.bundle_set import BundleSection, BundleSetReport
from distributor_core.app.repair_report import PruneReport, ReconcileStateReport
from distributor_dagster.audit import digest_report_outcome
from distributor_dagster.checks import (
    CHECK_NAMES,
    DIGEST_CHECK,
    Outcome,
    evaluate_paths,
    latest_materialization,
)
from distributor_dagster.maintenance.selection import SelectedDestination
from distributor_dagster.partitions import bundle_key, key_problem
from distributor_dagster.site import Site

#: Paths listed per observation.
LISTED = 50
PATHS_SCHEMA = dg.TableSchema(columns=[dg.TableColumn("path", "string"), dg.TableColumn("what", "string")])

Report = PruneReport | ReconcileStateReport | AuditReport


def sections(report: Any) -> list[BundleSection[Any]]:
    """The bundle sections of a one-bundle report or of a bundle-set report."""
    if isinstance(report, BundleSetReport):
        return list(report.sections)
    return [BundleSection(report.bundle_path, report)]


def _rows(report: Report) -> list[tuple[str, str]]:
    """(path, what happened or was found) for the observation's table."""
    if isinstance(report, PruneReport):
        done = report.deleted_outputs if not report.dry_run else report.planned_outputs
        verb = "deleted" if not report.dry_run else "would delete"
        return [(candidate.path, verb) for candidate in done]
    if isinstance(report, ReconcileStateReport):
        dropped = "record dropped" if not report.dry_run else "record would be dropped"
        rows = [(missing.path, f"missing: {dropped}") for missing in report.missing_managed_outputs]
        rows += [(check.path, f"{check.status}: {dropped}") for check in report.mismatched_managed_outputs]
        adopted = "adopted" if not report.dry_run else "would be adopted"
        rows += [(output.path, adopted) for output in report.adopted_outputs]
        rows += [(entry.path, "unmanaged") for entry in report.unmanaged_entries]
        return rows
    return [(check.path, check.status) for check in report.problems]


def _summary(operation: str, report: Report) -> dict[str, Any]:
    if isinstance(report, PruneReport):
        summary: dict[str, Any] = {"planned": len(report.planned_outputs), "deleted": len(report.deleted_outputs),
                                   "preserved": len(report.preserved_outputs), "retention_enabled": report.enabled}
        if report.bundle_retention is not None:  # retention.prune.bundles: the bundle path kept or removed
            summary.update({"bundle_action": report.bundle_retention.action,
                            "bundle_reason": report.bundle_retention.reason, "bundle_removed": report.bundle_removed})
        return summary
    if isinstance(report, ReconcileStateReport):
        return {"missing": len(report.missing_managed_outputs), "mismatched": len(report.mismatched_managed_outputs),
                "adopted": len(report.adopted_outputs), "unmanaged": len(report.unmanaged_entries),
                "state_changed": report.changed}
    return {"checked": report.checked_count, "problems": len(report.problems), "bytes_read": report.bytes_read}


def partition_of(target: SelectedDestination, bundle_path: str) -> str | None:
    """The partition a bundle path is (``None`` for an unpartitioned destination)."""
    return bundle_key(bundle_path) if target.names.partitioned else None


def observations(
    operation: str, target: SelectedDestination, report: Any, *, dry_run: bool
) -> Iterator[dg.AssetObservation]:
    """One observation of the destination asset per bundle path the operation worked on."""
    root = target.destination.storage
    for section in sections(report):
        path = section.bundle_path
        if target.names.partitioned and key_problem(path) is not None:
            continue
        metadata: dict[str, Any] = {
            "operation": operation,
            "dry_run": dg.MetadataValue.bool(dry_run),
            "bundle_path": lp.display_path(path),
            "destination_uri": root.uri(path),
        }
        if section.report is not None:
            rows = _rows(section.report)
            metadata.update({key: value for key, value in _summary(operation, section.report).items()})
            metadata["paths"] = dg.MetadataValue.table(
                records=[dg.TableRecord({"path": p, "what": w}) for p, w in rows[:LISTED]], schema=PATHS_SCHEMA
            )
            metadata["report"] = dg.MetadataValue.json(section.report.to_dict(with_bundle_path=True))
            text = section.report.text_line(with_bundle=True)
        else:
            text = f"{operation} of {lp.display_path(path)} failed"
        if section.error:
            metadata["error"] = section.error
            text = f"{text}: {section.error}"
        yield dg.AssetObservation(
            asset_key=target.asset_key, partition=partition_of(target, path), description=text, metadata=metadata
        )


def check_evaluations(
    context: dg.OpExecutionContext, site: Site, target: SelectedDestination, paths: Sequence[str],
    digests: dict[str, Outcome] | None = None,
) -> Iterator[dg.AssetCheckEvaluation]:
    """The destination's checks evaluated again on ``paths`` (and ``outputs_match_digests`` from
    an audit's own findings, when that check is on)."""
    if target.names.partitioned:
        paths = [path for path in paths if key_problem(path) is None]
    if not paths:
        return
    results = evaluate_paths(site, target.pipeline, target.destination, paths, target.destination.storage,
                             context.log)
    for path, by_name in results.items():
        if site.options.digest_checks and digests and path in digests:
            by_name[DIGEST_CHECK] = digests[path]
        partition = partition_of(target, path)
        materialized = latest_materialization(context.instance, target.asset_key, partition)
        for name, outcome in by_name.items():
            if name in CHECK_NAMES or name == DIGEST_CHECK:
                # nothing runs after a maintenance step: its evaluations block nothing (the step's
                # own result says whether the work succeeded)
                yield outcome.evaluation(target.asset_key, partition, blocking=False, target=materialized)


def audit_digests(report: Any) -> dict[str, Outcome]:
    """``outputs_match_digests`` per bundle path, from an audit's reports."""
    return {
        section.bundle_path: digest_report_outcome(section.report, section.bundle_path)
        for section in sections(report)
        if isinstance(section.report, AuditReport)
    }

"""Digest audits in Dagster (issue 18 item 1): the opt-in asset check ``outputs_match_digests`` of
every destination asset, which the site-wide ``audit`` job (:mod:`distributor_dagster.maintenance`)
answers too.

Both run the core's read-only :func:`~distributor_core.app.audit.audit_destination` (the CLI's
``distributor audit``): every managed output recorded in state is re-read and hashed with sha256
(on S3 an object's stored whole-object ``ChecksumSHA256`` is compared instead), nothing is locked
or written.

``outputs_match_digests`` (severity error, never blocking) is off by default because it reads
every byte of every published output whenever it is evaluated (with each publication of the asset
and "Execute checks"); the ``digest_checks`` build option, the ``DISTRIBUTOR_DAGSTER_DIGEST_CHECKS``
variable or the Component attribute turn it on. It is a check spec of the destination asset,
evaluated with the other checks on the same paths (:mod:`distributor_dagster.checks`); unmanaged
entries are left to ``no_unmanaged_content``.
"""

from __future__ import annotations

from typing import Any

import dagster as dg

from distributor_core import paths as lp
from distributor_core.app.audit import audit_destination
from distributor_core.app.audit_report import AuditReport
from distributor_core.app.output_check import OK, STATUSES
from distributor_core.config import Destination, Pipeline, StorageBackend
from distributor_dagster.checks import DIGEST_CHECK, LISTED, Outcome
from distributor_dagster.maintenance.errors import MAINTENANCE_ERRORS
from distributor_dagster.site import Site

PROBLEM_SCHEMA = dg.TableSchema(
    columns=[
        dg.TableColumn("path", "string"),
        dg.TableColumn("status", "string"),
        dg.TableColumn("size", "int"),
        dg.TableColumn("actual_size", "int"),
        dg.TableColumn("sha256", "string"),
        dg.TableColumn("actual_sha256", "string"),
    ]
)


def digest_outcome(
    site: Site, pipeline: Pipeline, destination: Destination, bundle_path: str, root: StorageBackend
) -> Outcome:
    """``outputs_match_digests`` for one destination bundle path: every recorded output re-read."""
    where = lp.display_path(bundle_path)
    try:
        report = audit_destination(
            site.config, pipeline.id, destination.id, bundle_path=bundle_path, allow_unmanaged=True,
            environment=site.environment(),
        )
    except MAINTENANCE_ERRORS as exc:
        metadata = {"bundle_path": where, "destination_uri": root.uri(bundle_path), "error": str(exc)}
        return Outcome(DIGEST_CHECK, False, f"{where}: not audited: {exc}", metadata)
    assert isinstance(report, AuditReport)
    outcome = digest_report_outcome(report, bundle_path)
    outcome.metadata["destination_uri"] = root.uri(bundle_path)
    return outcome


def digest_report_outcome(report: AuditReport, bundle_path: str) -> Outcome:
    """``outputs_match_digests`` of one bundle path from an audit report of it."""
    counts = {status: report.counts.get(status, 0) for status in STATUSES}
    rows = [
        dg.TableRecord({
            "path": check.path,
            "status": check.status,
            "size": check.size,
            "actual_size": check.actual_size if check.actual_size is not None else -1,
            "sha256": check.sha256,
            "actual_sha256": check.actual_sha256 or "",
        })
        for check in report.problems[:LISTED]
    ]
    failed = [f"{n} {status}" for status, n in counts.items() if status != OK and n]
    metadata: dict[str, Any] = {
        "bundle_path": lp.display_path(bundle_path),
        "checked_count": dg.MetadataValue.int(report.checked_count),
        "bytes_read": dg.MetadataValue.int(report.bytes_read),
        **{f"{status}_count": dg.MetadataValue.int(n) for status, n in counts.items()},
        "problems": dg.MetadataValue.table(records=rows, schema=PROBLEM_SCHEMA),
    }
    description = ", ".join(failed) if failed else "every managed output has the size and sha256 state records"
    return Outcome(DIGEST_CHECK, not failed, description, metadata)

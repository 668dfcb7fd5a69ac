"""Digest audits in Dagster (issue 18 item 1): the ``audit_<pipeline>__<destination>`` job of every
destination and the opt-in asset check ``outputs_match_digests`` of every destination asset.

Both run the core's read-only :func:`~distributor_core.app.audit.audit_destination` (the CLI's
``distributor audit``): every managed output recorded in state is re-read and hashed with sha256
(on S3 an object's stored whole-object ``ChecksumSHA256`` is compared instead), nothing is locked
or written.

- ``audit_<p>__<d>``: one op, ``audit``, with run config ``ops: {audit: {config: {bundle_path,
  all_bundles, all_owners, allow_unmanaged}}}`` (the CLI's flags; default: the root's state
  file). The step fails when anything is wrong (the report is its failure metadata) and
  otherwise outputs the CLI's JSON ``result``.
- ``outputs_match_digests`` (severity error, never blocking): off by default because it reads
  every byte of every published output whenever it is evaluated (with each materialization of
  the asset and "Execute checks"); turned on by the ``digest_checks`` build option, the
  ``DISTRIBUTOR_DAGSTER_DIGEST_CHECKS`` variable or the Component attribute. It audits the
  bundle paths the asset has materialized (as the other checks do); unmanaged entries are left
  to ``no_unmanaged_content``.
"""

# no ``from __future__ import annotations``: Dagster reads the op's config annotation at definition
from typing import Any

import dagster as dg
from pydantic import Field

from distributor_core import paths as lp
from distributor_core.app.audit import audit_destination, audit_error_message
from distributor_core.app.audit_report import AuditReport
from distributor_core.app.output_check import OK, STATUSES
from distributor_core.config import Destination, Pipeline
from distributor_dagster.checks import checked_paths
from distributor_dagster.maintenance.results import MAINTENANCE_ERRORS
from distributor_dagster.names import AUDIT_NODE, DestinationNames
from distributor_dagster.site import Site

#: the name of the opt-in check
DIGEST_CHECK = "outputs_match_digests"
#: outputs listed per check result
LISTED = 50

PROBLEM_SCHEMA = dg.TableSchema(
    columns=[
        dg.TableColumn("bundle_path", "string"),
        dg.TableColumn("path", "string"),
        dg.TableColumn("status", "string"),
        dg.TableColumn("size", "int"),
        dg.TableColumn("actual_size", "int"),
        dg.TableColumn("sha256", "string"),
        dg.TableColumn("actual_sha256", "string"),
    ]
)


class AuditConfig(dg.Config):
    """``ops: {audit: {config: {bundle_path, all_bundles, all_owners, allow_unmanaged}}}``."""

    bundle_path: str = Field(
        default="", description="Destination-relative bundle path to audit (default: the destination root)."
    )
    all_bundles: bool = Field(
        default=False, description="Audit every bundle path under the root that holds a .distributor.json."
    )
    all_owners: bool = Field(
        default=False, description="Shared-root state: audit every owner's outputs, not only this destination's."
    )
    allow_unmanaged: bool = Field(default=False, description="List unmanaged entries without failing the audit.")


def audit_job(site: Site, pipeline: Pipeline, destination: Destination, names: DestinationNames) -> dg.JobDefinition:
    job = names.audit_job

    @dg.op(
        name=f"{job}__{AUDIT_NODE}",
        description="Re-read every managed output recorded in state and compare size and sha256 with the "
        "record; lists unmanaged entries. Read only.",
        tags={"distributor/destination": destination.id},
    )
    def audit(context: dg.OpExecutionContext, config: AuditConfig) -> dg.Output[dict]:
        report = audit_destination(
            site.config,
            pipeline.id,
            destination.id,
            bundle_path=None if config.all_bundles else config.bundle_path,
            all_bundles=config.all_bundles,
            all_owners=config.all_owners,
            allow_unmanaged=config.allow_unmanaged,
            environment=site.environment(),
        )
        for line in report.text_lines():
            context.log.info(line)
        result = report.to_dict()
        if not report.clean:
            metadata = {"report": dg.MetadataValue.json(result)}
            raise dg.Failure(description=audit_error_message(report), metadata=metadata)
        return dg.Output(result, metadata={"report": dg.MetadataValue.json(result)})

    def graph() -> None:
        audit.alias(AUDIT_NODE)()

    graph.__name__ = job
    return dg.job(
        name=job,
        description=f"Audit {pipeline.id}/{destination.id}: re-read every managed output and compare it with "
        "the size and sha256 its state records (read only; fails when anything is wrong).",
        tags={"distributor/pipeline": pipeline.id, "distributor/destination": destination.id},
        executor_def=dg.in_process_executor,
    )(graph)


def _audit_paths(
    site: Site, pipeline: Pipeline, destination: Destination, bundle_paths: list[str]
) -> tuple[dict[str, AuditReport], dict[str, str]]:
    reports: dict[str, AuditReport] = {}
    errors: dict[str, str] = {}
    for path in bundle_paths:
        try:
            report = audit_destination(
                site.config,
                pipeline.id,
                destination.id,
                bundle_path=path,
                allow_unmanaged=True,
                environment=site.environment(),
            )
        except MAINTENANCE_ERRORS as exc:
            errors[path] = str(exc)
            continue
        assert isinstance(report, AuditReport)
        reports[path] = report
    return reports, errors


def digest_check_result(
    key: dg.AssetKey, bundle_paths: list[str], reports: dict[str, AuditReport], errors: dict[str, str]
) -> dg.AssetCheckResult:
    """Passed when every recorded output of every bundle path matches (and every state was read)."""
    shown = [lp.display_path(p) for p in bundle_paths]
    if not bundle_paths:
        return dg.AssetCheckResult(
            check_name=DIGEST_CHECK,
            asset_key=key,
            passed=True,
            description="the asset has no materialization yet: nothing to audit",
            metadata={"bundle_paths": dg.MetadataValue.json(shown)},
        )
    counts = dict.fromkeys(STATUSES, 0)
    for report in reports.values():
        for status, count in report.counts.items():
            if status in counts:
                counts[status] += count
    problems = [(path, check) for path, report in reports.items() for check in report.problems]
    rows = [
        dg.TableRecord(
            {
                "bundle_path": lp.display_path(path),
                "path": check.path,
                "status": check.status,
                "size": check.size,
                "actual_size": check.actual_size if check.actual_size is not None else -1,
                "sha256": check.sha256,
                "actual_sha256": check.actual_sha256 or "",
            }
        )
        for path, check in problems[:LISTED]
    ]
    failed = [f"{n} {status}" for status, n in counts.items() if status != OK and n]
    if errors:
        failed.append(f"{len(errors)} bundle path(s) not audited")
    metadata: dict[str, Any] = {
        "bundle_paths": dg.MetadataValue.json(shown),
        "checked_count": dg.MetadataValue.int(sum(r.checked_count for r in reports.values())),
        "bytes_read": dg.MetadataValue.int(sum(r.bytes_read for r in reports.values())),
        **{f"{status}_count": dg.MetadataValue.int(n) for status, n in counts.items()},
        "problems": dg.MetadataValue.table(records=rows, schema=PROBLEM_SCHEMA),
        "errors": dg.MetadataValue.json({lp.display_path(p): e for p, e in errors.items()}),
    }
    return dg.AssetCheckResult(
        check_name=DIGEST_CHECK,
        asset_key=key,
        passed=not failed,
        severity=dg.AssetCheckSeverity.ERROR,
        description=", ".join(failed) if failed else "every managed output has the size and sha256 state records",
        metadata=metadata,
    )


def digest_check(site: Site, pipeline: Pipeline, destination: Destination, names: DestinationNames) -> Any:
    """The ``outputs_match_digests`` check of one destination asset (a standalone asset check)."""
    key = dg.AssetKey(list(names.asset_key))

    @dg.asset_check(
        asset=key,
        name=DIGEST_CHECK,
        description="Every managed output recorded for this destination still has the recorded size and "
        "sha256 (re-reads every byte; opt-in).",
        blocking=False,
    )
    def outputs_match_digests(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
        bundle_paths = checked_paths(context.op_execution_context, key, names.partitioned)
        reports, errors = _audit_paths(site, pipeline, destination, bundle_paths)
        for path, error in errors.items():
            context.log.warning(f"{lp.display_path(path)}: {error}")
        for report in reports.values():
            context.log.info(report.text_line(with_bundle=True))
        return digest_check_result(key, bundle_paths, reports, errors)

    return outputs_match_digests


def audit_definitions(site: Site) -> tuple[list[dg.JobDefinition], list[Any]]:
    """Every destination's audit job, and its digest check when ``digest_checks`` is on."""
    jobs: list[dg.JobDefinition] = []
    checks: list[Any] = []
    for pipeline, names in zip(site.config.pipelines, site.names, strict=True):
        for destination in pipeline.destinations:
            dnames = names.destination(destination.id)
            jobs.append(audit_job(site, pipeline, destination, dnames))
            if site.options.digest_checks:
                checks.append(digest_check(site, pipeline, destination, dnames))
    return jobs, checks

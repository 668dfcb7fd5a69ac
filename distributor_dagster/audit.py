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
from distributor_dagster.checks import DIGEST_CHECK, LISTED, Outcome, path_uri
from distributor_dagster.maintenance.results import MAINTENANCE_ERRORS
from distributor_dagster.names import AUDIT_NODE, DestinationNames
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


def digest_outcome(
    site: Site, pipeline: Pipeline, destination: Destination, bundle_path: str, root_uri: str
) -> Outcome:
    """``outputs_match_digests`` for one destination bundle path: every recorded output re-read."""
    where = lp.display_path(bundle_path)
    metadata: dict[str, Any] = {"bundle_path": where, "destination_uri": path_uri(root_uri, bundle_path)}
    try:
        report = audit_destination(
            site.config, pipeline.id, destination.id, bundle_path=bundle_path, allow_unmanaged=True,
            environment=site.environment(),
        )
    except MAINTENANCE_ERRORS as exc:
        return Outcome(DIGEST_CHECK, False, f"{where}: not audited: {exc}", {**metadata, "error": str(exc)})
    assert isinstance(report, AuditReport)
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
    metadata.update({
        "checked_count": dg.MetadataValue.int(report.checked_count),
        "bytes_read": dg.MetadataValue.int(report.bytes_read),
        **{f"{status}_count": dg.MetadataValue.int(n) for status, n in counts.items()},
        "problems": dg.MetadataValue.table(records=rows, schema=PROBLEM_SCHEMA),
    })
    description = ", ".join(failed) if failed else "every managed output has the size and sha256 state records"
    return Outcome(DIGEST_CHECK, not failed, description, metadata)


def audit_jobs(site: Site) -> list[dg.JobDefinition]:
    """Every destination's audit job."""
    return [
        audit_job(site, pipeline, destination, names.destination(destination.id))
        for pipeline, names in zip(site.config.pipelines, site.names, strict=True)
        for destination in pipeline.destinations
    ]

"""Asset checks (dagster.md §2, resolutions B2, issue 12 item 3, issue 24 items 4 and 5).

Every destination asset has three checks, declared with it and evaluated by its ``publish_<d>``
step after the publication (or alone: "Execute checks"). They look at the destination path the
run targeted, published or not, through the core's read-only :mod:`distributor_core.app.health`:
a partitioned destination's partition ``P`` is checked at bundle path ``P``, an unpartitioned
destination at its root. So a check never vouches for a publication that failed: after a
``fail_unmanaged`` refusal, ``no_unmanaged_content`` lists the files in the way.

- ``state_valid``: the path's ``.distributor.json`` exists, parses, validates and records this
  destination (as owner, or with an owner record in shared-root state);
- ``managed_outputs_present``: every output recorded for this destination exists;
- ``no_unmanaged_content`` (severity WARN): nothing but managed outputs and reserved names lives
  in the path (nested bundles with their own state are not counted).

The source asset has one check, ``bundle_valid``, evaluated by the ``validate`` step for every
bundle a run publishes (per partition where the source is partitioned): a bundle that fails
validation is the source's problem, named there with the file and both digests, and no
destination of it turns red.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import dagster as dg
from dagster._core.definitions.asset_checks.asset_check_evaluation import AssetCheckEvaluationTargetMaterializationData

from distributor_core import paths as lp
from distributor_core.app.health import PathHealth, inspect_paths
from distributor_core.bundle import BundleError, BundleValidationError
from distributor_core.config import Destination, Pipeline, StorageBackend
from distributor_dagster.names import CHECK_NAMES, DestinationNames
from distributor_dagster.partitions import bundle_path
from distributor_dagster.site import Site

#: How many paths a check lists in its metadata.
LISTED = 50
#: The source asset's check.
SOURCE_CHECK = "bundle_valid"
#: The opt-in check that re-reads every byte (``digest_checks``, :mod:`distributor_dagster.audit`).
DIGEST_CHECK = "outputs_match_digests"

CHECK_DESCRIPTIONS = {
    "state_valid": "The .distributor.json of the checked destination path is valid and records this destination.",
    "managed_outputs_present": "Every managed output recorded for this destination exists.",
    "no_unmanaged_content": "No unmanaged files in the checked destination path (warning).",
}


def check_specs(
    names: DestinationNames, blocking: tuple[str, ...], partitions: dg.PartitionsDefinition | None,
    *, digest: bool = False,
) -> list[dg.AssetCheckSpec]:
    """The three checks of a destination asset, declared with it (per partition when it is
    partitioned), and with ``digest`` the opt-in ``outputs_match_digests`` (never blocking);
    ``blocking`` names those whose failure (severity error) blocks downstream assets."""
    key = dg.AssetKey(list(names.asset_key))
    with preview_partitioned_checks():
        specs = [
            dg.AssetCheckSpec(name, asset=key, description=CHECK_DESCRIPTIONS[name], blocking=name in blocking,
                              partitions_def=partitions)
            for name in CHECK_NAMES
        ]
        if digest:
            specs.append(dg.AssetCheckSpec(
                DIGEST_CHECK, asset=key, partitions_def=partitions, blocking=False,
                description="Every managed output recorded for this destination still has the recorded size and "
                "sha256 (re-reads every byte; opt-in).",
            ))
    return specs


@contextmanager
def preview_partitioned_checks() -> Iterator[None]:
    """Partitioned asset checks are a preview feature of Dagster 1.13 (the dependency is pinned
    below 1.14): its warning is said once, in docs/dagster.md, not at every load."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.PreviewWarning)
        yield


def source_check_spec(key: dg.AssetKey, partitions: dg.PartitionsDefinition | None) -> dg.AssetCheckSpec:
    with preview_partitioned_checks():
        return dg.AssetCheckSpec(
            SOURCE_CHECK, asset=key, partitions_def=partitions,
            description="The bundle passes validation: manifest rules, and every listed file's size and sha256.",
        )


@dataclass(frozen=True)
class Outcome:
    """One check's result for one checked path, ready to become a Dagster check event."""

    name: str
    passed: bool
    description: str
    metadata: dict[str, Any]
    severity: dg.AssetCheckSeverity = dg.AssetCheckSeverity.ERROR

    def result(self, key: dg.AssetKey) -> dg.AssetCheckResult:
        return dg.AssetCheckResult(asset_key=key, check_name=self.name, passed=self.passed, severity=self.severity,
                                   description=self.description, metadata=self.metadata)

    def evaluation(
        self, key: dg.AssetKey, partition: str | None, *, blocking: bool,
        target: AssetCheckEvaluationTargetMaterializationData | None = None,
    ) -> dg.AssetCheckEvaluation:
        """The check event for ``partition``; ``target`` is the materialization it checked (Dagster
        shows a partition's check status only while it is the partition's latest)."""
        return dg.AssetCheckEvaluation(
            asset_key=key, check_name=self.name, passed=self.passed, severity=self.severity,
            description=self.description, metadata=self.metadata, partition=partition, blocking=blocking,
            target_materialization_data=target,
        )


def latest_materialization(
    instance: dg.DagsterInstance, key: dg.AssetKey, partition: str | None
) -> AssetCheckEvaluationTargetMaterializationData | None:
    """The latest materialization of one partition (or of an unpartitioned asset), as a check
    evaluation's target."""
    partitions = [partition] if partition is not None else None
    records = instance.fetch_materializations(dg.AssetRecordsFilter(asset_key=key, asset_partitions=partitions),
                                              limit=1).records
    if not records:
        return None
    record = records[0]
    return AssetCheckEvaluationTargetMaterializationData(
        storage_id=record.storage_id, run_id=record.event_log_entry.run_id, timestamp=record.timestamp
    )


MISSING_SCHEMA = dg.TableSchema(columns=[dg.TableColumn("path", "string")])
UNMANAGED_SCHEMA = dg.TableSchema(columns=[
    dg.TableColumn("path", "string"), dg.TableColumn("type", "string"), dg.TableColumn("size", "int"),
])


def _table(rows: list[dict[str, Any]], schema: dg.TableSchema) -> dg.TableMetadataValue:
    return dg.MetadataValue.table(records=[dg.TableRecord(row) for row in rows], schema=schema)


def outcomes(health: PathHealth, root: StorageBackend) -> dict[str, Outcome]:
    """The three checks' outcomes for one destination path."""
    where = lp.display_path(health.bundle_path)
    common: dict[str, Any] = {"bundle_path": where, "destination_uri": root.uri(health.bundle_path)}
    missing = health.missing_outputs
    unmanaged = health.unmanaged_entries
    unmanaged_count = len(unmanaged)
    if health.error and health.state_missing:
        state_text = health.error
    elif health.error:
        state_text = f"{where}: {health.error}"
    else:
        state_text = "state is valid"
    # a bundle whose outputs were all pruned or dropped: no check passes on an empty output list
    emptied = not health.error and not missing and health.report is not None and health.report.holds is False
    if missing:
        present_text = f"{len(missing)} managed output(s) missing: " + ", ".join(missing[:5])
    elif health.error:
        present_text = "state could not be read: " + health.error
    elif emptied:
        present_text = (f"{where}: the state records no output of this destination although its bundle has "
                        "outputs to publish: they were pruned or their records dropped (reconcile-state); "
                        "nothing of it is published here")
    else:
        present_text = "every managed output exists"
    unmanaged_text = f"{unmanaged_count} unmanaged entr{'y' if unmanaged_count == 1 else 'ies'}"
    if unmanaged:
        unmanaged_text += ": " + ", ".join(u.path for u in unmanaged[:5]) + (" ..." if unmanaged_count > 5 else "")
    if health.walk_truncated:
        unmanaged_text += " (walk truncated)"
    return {
        "state_valid": Outcome("state_valid", not health.error, state_text, {**common, "error": health.error}),
        "managed_outputs_present": Outcome(
            "managed_outputs_present", not health.error and not missing and not emptied, present_text,
            {
                **common,
                "checked_count": dg.MetadataValue.int(health.report.checked_count if health.report else 0),
                "missing_count": dg.MetadataValue.int(len(missing)),
                "missing_outputs": _table([{"path": p} for p in missing[:LISTED]], MISSING_SCHEMA),
            },
        ),
        "no_unmanaged_content": Outcome(
            "no_unmanaged_content", unmanaged_count == 0, unmanaged_text,
            {
                **common,
                "unmanaged_count": dg.MetadataValue.int(unmanaged_count),
                "unmanaged_entries": _table(
                    [{"path": u.path, "type": u.type, "size": u.size} for u in unmanaged[:LISTED]], UNMANAGED_SCHEMA
                ),
                "truncated": dg.MetadataValue.bool(health.walk_truncated),
            },
            severity=dg.AssetCheckSeverity.WARN,
        ),
    }


def not_published(bundle_path: str, error: str, root: StorageBackend) -> dict[str, Outcome]:
    """The checks of a destination path a run targeted but could not publish to because its bundle
    failed validation, where nothing was ever published: nothing there to vouch for or against."""
    where = lp.display_path(bundle_path)
    text = (f"nothing is published at {where}: its bundle failed validation (the source check {SOURCE_CHECK} "
            "says why); the destination is unchanged")
    metadata = {"bundle_path": where, "destination_uri": root.uri(bundle_path), "published": False,
                "source_error": error}
    outcomes = {name: Outcome(name, True, text, dict(metadata)) for name in CHECK_NAMES}
    outcomes[DIGEST_CHECK] = Outcome(DIGEST_CHECK, True, text, dict(metadata))
    return outcomes


def evaluate_paths(
    site: Site, pipeline: Pipeline, destination: Destination, bundle_paths: Iterable[str], root: StorageBackend,
    log: Any,
) -> dict[str, dict[str, Outcome]]:
    """The outcomes of the three checks for each destination bundle path (destination opened once)."""
    paths = list(dict.fromkeys(bundle_paths))
    if not paths:
        return {}
    try:
        healths = inspect_paths(site.config, pipeline.id, destination.id, paths, environment=site.environment())
    except Exception as exc:  # the destination cannot be opened: every path fails its checks
        healths = {path: PathHealth(path, error=f"destination {root.uri()} cannot be read: {exc}") for path in paths}
    results = {}
    for path in paths:
        health = healths[path]
        if health.error:
            log.warning(f"{lp.display_path(path)}: {health.error}")
        elif health.report is not None:
            log.info(health.report.text_line(with_bundle=True))
        results[path] = outcomes(health, root)
    return results


def bundle_outcome(bundle_path: str, manifest_digest: str, error: BundleError | None) -> Outcome:
    """The source check ``bundle_valid`` for one validated bundle."""
    metadata: dict[str, Any] = {"bundle_path": lp.display_path(bundle_path)}
    if manifest_digest:
        metadata["manifest_digest"] = manifest_digest
    if error is None:
        return Outcome(SOURCE_CHECK, True, f"bundle {lp.display_path(bundle_path)} is valid", metadata)
    if isinstance(error, BundleValidationError) and error.path:
        metadata["file"] = error.path
        if error.expected:
            metadata["expected"] = error.expected
            metadata["actual"] = error.actual
    return Outcome(SOURCE_CHECK, False, f"bundle {lp.display_path(bundle_path)}: {error}", metadata)


def run_partition_keys(context: dg.OpExecutionContext) -> list[str] | None:
    """The partitions a run targets (one, or a range), ``None`` for an unpartitioned run."""
    if context.has_partition_key or context.has_partition_key_range:
        return list(context.partition_keys)
    return None


def checked_paths(context: dg.OpExecutionContext, key: dg.AssetKey, partitioned: bool) -> list[str]:
    """Destination bundle paths a checks-only evaluation looks at: an unpartitioned asset's root
    once it was materialized; a partitioned one's partitions of the run, or every partition it
    has materialized."""
    if not partitioned:
        return [""] if context.instance.fetch_materializations(key, limit=1).records else []
    keys = run_partition_keys(context)
    if keys is None:
        keys = sorted(context.instance.get_materialized_partitions(key))
    return [bundle_path(k) for k in keys]


def failed_blocking(results: Mapping[str, Mapping[str, Outcome]], blocking: tuple[str, ...]) -> list[str]:
    """``<path>: <check>: <description>`` for every failed blocking check."""
    return [
        f"{lp.display_path(path)}: {name}: {outcome.description}"
        for path, by_name in results.items()
        for name, outcome in by_name.items()
        if name in blocking and not outcome.passed and outcome.severity == dg.AssetCheckSeverity.ERROR
    ]

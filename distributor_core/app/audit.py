"""``audit``: re-read every managed output recorded in destination state and compare its bytes
with the record (issue 18 item 1; selection as resolutions B2).

An audit is read only: it takes no lock, settles no journal and writes nothing, so the
destination storage is opened as for a dry run. Each recorded output in scope is ``ok``,
``missing``, ``not_a_file``, ``size_mismatch`` or ``digest_mismatch`` (see
:mod:`distributor_core.app.output_check`: streamed through the storage protocol, or an S3 object's
stored whole-object ``ChecksumSHA256``); unmanaged entries are listed as ``reconcile-state`` lists
them. A writer working on the bundle path at the same time can make outputs it is replacing look
mismatched: the report warns when it sees a lock or journal, or when state changed while it read.

Library entry points for the CLI and Dagster: :func:`audit_destination` (one destination, one
bundle path or ``all_bundles``) and :func:`audit_config` (every destination of a config).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import msgspec

from distributor_core import paths as lp
from distributor_core.app import refusal as refusals
from distributor_core.app.audit_report import AuditReport
from distributor_core.app.bundle_set import BundleSetReport
from distributor_core.app.bundles import destination_storage, run_bundle_set
from distributor_core.app.config_walk import ConfigSetReport, walk_config
from distributor_core.app.guard import read_state, reader_warnings, stat_state
from distributor_core.app.output_check import MISSING, OutputCheck, check_outputs, outputs_in_scope
from distributor_core.app.policy import holds_bundle
from distributor_core.app.selection import (
    DISCOVERY_WALK_LIMIT,
    ConfigSource,
    Target,
    check_bundle_selection,
    require_ids,
    resolve_target,
)
from distributor_core.app.unmanaged import UNMANAGED_WALK_LIMIT, unmanaged_entries
from distributor_core.config import Config, Environment, load_config
from distributor_core.state import managed_paths, outputs_of
from distributor_core.storage.base import Storage


class AuditProgress(msgspec.Struct, frozen=True):
    """Where an audit is: ``bytes_done`` counts bytes verified (read and hashed, or vouched for
    by a stored checksum) of ``bytes_total`` (the recorded sizes of the outputs in scope)."""

    pipeline_id: str
    destination_id: str
    bundle_path: str
    files_done: int
    files_total: int
    bytes_done: int
    bytes_total: int


ProgressCallback = Callable[[AuditProgress], None]


class _Tracker:
    def __init__(self, target: Target, bundle_path: str, files: int, size: int, callback: ProgressCallback) -> None:
        self.target, self.bundle_path, self.callback = target, bundle_path, callback
        self.files_total, self.bytes_total = files, size
        self.files_done = self.bytes_done = 0

    def _emit(self) -> None:
        self.callback(
            AuditProgress(
                self.target.pipeline.id,
                self.target.destination.id,
                self.bundle_path,
                self.files_done,
                self.files_total,
                self.bytes_done,
                self.bytes_total,
            )
        )

    def on_bytes(self, count: int) -> None:
        self.bytes_done += count
        self._emit()

    def on_file(self, _check: OutputCheck) -> None:
        self.files_done += 1
        self._emit()


def audit_bundle(
    target: Target,
    storage: Storage,
    bundle_path: str,
    *,
    all_owners: bool = False,
    allow_unmanaged: bool = False,
    walk_limit: int = UNMANAGED_WALK_LIMIT,
    progress: ProgressCallback | None = None,
) -> AuditReport:
    """Audit one bundle path of an open destination root (never writes)."""
    warnings = reader_warnings(storage, bundle_path)
    loaded = read_state(storage, bundle_path)
    document = loaded.document
    records = outputs_in_scope(document, target.scope, all_owners=all_owners)
    tracker = None
    if progress is not None:
        tracker = _Tracker(target, bundle_path, len(records), sum(r.size for r in records), progress)
    checks = check_outputs(
        storage,
        bundle_path,
        records,
        on_bytes=tracker.on_bytes if tracker else None,
        on_file=tracker.on_file if tracker else None,
    )
    unmanaged, truncated = unmanaged_entries(storage, bundle_path, managed_paths(document), limit=walk_limit)
    if stat_state(storage, bundle_path).revision != loaded.revision:
        warnings.append("state changed while it was audited (a writer ran meanwhile); re-run the audit")
    report = AuditReport(
        pipeline_id=target.pipeline.id,
        destination_id=target.destination.id,
        backend=target.backend,
        root_path=target.root_path,
        root_text=target.root_text,
        bundle_path=bundle_path,
        warnings=warnings,
        state_schema=document.schema_version,
        owner_scope=target.scope,
        all_owners=all_owners and document.schema_version == 3,
        outputs=checks,
        unmanaged_entries=unmanaged,
        allow_unmanaged=allow_unmanaged,
        truncated=truncated,
    )
    mine = {output.path for output in outputs_of(document, target.scope)}
    present = sum(1 for check in checks if check.path in mine and check.status != MISSING)
    report.holds = holds_bundle(document, target.scope, target.destination, present)
    if not report.clean:
        report.refusal = refusals.audit_problems(
            target.destination.storage, target.pipeline.id, target.destination.id, bundle_path,
            [check.path for check in report.problems],
            [] if allow_unmanaged else [entry.path for entry in report.unmanaged_entries],
        )
    return report


def audit_destination(
    config_or_path: ConfigSource,
    pipeline_id: str,
    destination_id: str,
    *,
    bundle_path: str | None = "",
    all_bundles: bool = False,
    all_owners: bool = False,
    allow_unmanaged: bool = False,
    environment: Environment | None = None,
    storage: Storage | None = None,
    progress: ProgressCallback | None = None,
    walk_limit: int = UNMANAGED_WALK_LIMIT,
    discovery_limit: int = DISCOVERY_WALK_LIMIT,
) -> AuditReport | BundleSetReport[AuditReport]:
    """Audit one destination: its root's state file (default), ``bundle_path``, or every bundle
    path holding a ``.distributor.json`` (``all_bundles``, a :class:`BundleSetReport` whose
    failed sections carry their error; it is returned, never raised).

    ``report.clean`` tells whether anything is wrong; ``report.to_dict()`` is the JSON result.
    One bundle path raises what stops it: ``pipeline id is required`` and the other selection
    errors, a missing state file (storage ``not_found``), invalid state (``StateError``),
    ``state owner is <sp>/<sd>, not <p>/<d>``, a storage error other than *not found*.
    ``storage`` replaces the storage the config describes (tests, fault injection; not closed).
    """
    require_ids(pipeline_id, destination_id)
    bundle = check_bundle_selection(bundle_path, all_bundles)
    target = resolve_target(config_or_path, pipeline_id, destination_id, environment)

    options: dict[str, Any] = {
        "all_owners": all_owners,
        "allow_unmanaged": allow_unmanaged,
        "walk_limit": walk_limit,
        "progress": progress,
    }
    with destination_storage(target, dry_run=True, storage=storage) as opened:
        one = partial(audit_bundle, target, opened, **options)
        if not all_bundles:
            return one(bundle)
        return run_bundle_set(target, opened, dry_run=True, one=one, discovery_limit=discovery_limit)


def audit_config(
    config_or_path: ConfigSource,
    *,
    all_owners: bool = False,
    allow_unmanaged: bool = False,
    environment: Environment | None = None,
    progress: ProgressCallback | None = None,
    walk_limit: int = UNMANAGED_WALK_LIMIT,
    discovery_limit: int = DISCOVERY_WALK_LIMIT,
) -> ConfigSetReport[AuditReport]:
    """Audit every destination of every pipeline of a config (``audit --all``): each
    destination's bundle paths with state (``fixed``: the root's; ``preserve_relative``: every one
    under the root), one failing destination or bundle path not stopping the others."""
    config = config_or_path if isinstance(config_or_path, Config) else load_config(config_or_path)
    env = environment or Environment.from_config(config)

    options: dict[str, Any] = {
        "all_owners": all_owners,
        "allow_unmanaged": allow_unmanaged,
        "walk_limit": walk_limit,
        "progress": progress,
    }

    def one(target: Target, storage: Storage, bundles: list[str]) -> BundleSetReport[AuditReport]:
        bundle = partial(audit_bundle, target, storage, **options)
        return run_bundle_set(
            target, storage, dry_run=True, one=bundle, discovery_limit=discovery_limit, bundles=bundles
        )

    return walk_config(config, env, dry_run=True, one=one, discovery_limit=discovery_limit)


AnyAuditReport = AuditReport | BundleSetReport[AuditReport] | ConfigSetReport[AuditReport]


def audit_error_message(report: AnyAuditReport) -> str:
    """What is wrong, in one line (empty when ``report.clean``): failures first, as their sets
    word them, then ``audit found problems: <p>/<d> [<bundle>]: 1 missing, 2 digest_mismatch; ...``."""
    if report.clean:
        return ""
    failures = "" if isinstance(report, AuditReport) else report.error_message()
    reports = [report] if isinstance(report, AuditReport) else report.reports
    problems = [
        f"{r.pipeline_id}/{r.destination_id} [{lp.display_path(r.bundle_path)}]: {r.problem_summary()}"
        + (f" ({r.refusal.sentence()})" if r.refusal is not None else "")
        for r in reports
        if not r.clean
    ]
    parts = [failures] if failures else []
    if problems:
        parts.append("audit found problems: " + "; ".join(problems))
    return "; ".join(parts)

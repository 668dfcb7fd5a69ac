"""``reconcile-state``: drop records of managed outputs that no longer exist (core-semantics §7.1,
interfaces §2.6, resolutions A1, A3, B2).

It repairs the state record only: it never deletes files, never adopts unmanaged files, never
checks digests, never repairs invalid state and never rewrites mismatched state. Applying (the
default) holds the destination lock, settles a crashed writer's journal first, and rewrites
``.distributor.json`` atomically and conditionally on the revision it read under the lock.
"""

from __future__ import annotations

from datetime import datetime

from distributor_core import paths as lp
from distributor_core.app.bundle_set import BundleSetReport
from distributor_core.app.bundles import ReportedError, destination_storage, run_bundle_set
from distributor_core.app.guard import enter_bundle, read_state
from distributor_core.app.repair_report import MissingOutput, ReconcileStateReport
from distributor_core.app.selection import (
    DISCOVERY_WALK_LIMIT,
    ConfigSource,
    Target,
    check_bundle_selection,
    require_ids,
    resolve_target,
)
from distributor_core.app.unmanaged import UNMANAGED_WALK_LIMIT, unmanaged_entries
from distributor_core.config import Environment
from distributor_core.execute.lock import DEFAULT_WAIT
from distributor_core.execute.publish import default_holder
from distributor_core.state import (
    AnyOutputRecord,
    SharedOutputRecord,
    SharedRootState,
    check_owner,
    managed_paths,
    marshal_state,
    remove_missing_outputs,
)
from distributor_core.storage.base import Storage
from distributor_core.storage.errors import ErrorKind, StorageError
from distributor_core.timefmt import now_seconds


class ReconcileStateError(ReportedError):
    """Some bundle paths of an ``all_bundles`` repair failed; ``report`` is the
    :class:`BundleSetReport` with every section (failed ones carry their ``error``)."""


def _missing(storage: Storage, bundle_path: str, outputs: tuple[AnyOutputRecord, ...]) -> list[MissingOutput]:
    """Stat each output: not found is missing, a directory counts as present, any other error aborts."""
    missing = []
    for output in outputs:
        try:
            storage.stat(lp.join(bundle_path, output.path))
        except StorageError as exc:
            if exc.kind != ErrorKind.NOT_FOUND:
                raise
            owner = output.scope if isinstance(output, SharedOutputRecord) else None
            missing.append(MissingOutput(output.path, owner))
    return missing


def reconcile_bundle(
    target: Target,
    storage: Storage,
    bundle_path: str,
    *,
    all_owners: bool = False,
    dry_run: bool = False,
    now: datetime | None = None,
    holder: str | None = None,
    lock_wait: float = DEFAULT_WAIT,
    walk_limit: int = UNMANAGED_WALK_LIMIT,
) -> ReconcileStateReport:
    """Repair the state of one bundle path of an open destination root."""
    scope = target.scope
    with enter_bundle(
        storage, bundle_path, dry_run=dry_run, holder=holder or default_holder("reconcile-state"), lock_wait=lock_wait
    ) as guard:
        loaded = read_state(storage, bundle_path)
        document = loaded.document
        shared = isinstance(document, SharedRootState)
        if shared:
            outputs = document.outputs if all_owners else tuple(o for o in document.outputs if o.scope == scope)
        else:
            check_owner(document, scope)
            outputs = document.outputs
        missing = _missing(storage, bundle_path, outputs)
        unmanaged, truncated = unmanaged_entries(storage, bundle_path, managed_paths(document), limit=walk_limit)
        report = ReconcileStateReport(
            pipeline_id=target.pipeline.id,
            destination_id=target.destination.id,
            backend=target.backend,
            root_path=target.root_path,
            bundle_path=bundle_path,
            recovery=guard.recovery,
            warnings=list(guard.warnings),
            state_schema=document.schema_version,
            owner_scope=scope,
            all_owners=shared and all_owners,
            checked_count=len(outputs),
            missing_managed_outputs=missing,
            unmanaged_entries=unmanaged,
            would_change=dry_run and bool(missing),
            dry_run=dry_run,
            truncated=truncated,
        )
        if dry_run or not missing:
            return report
        repaired, changed = remove_missing_outputs(
            document,
            [item.path for item in missing],
            scope=scope,
            all_owners=all_owners,
            now=now if now is not None else now_seconds(),
        )
        if changed:
            data = marshal_state(repaired)  # validates first
            guard.ensure_held()
            storage.write_bytes(lp.state_path(bundle_path), data, overwrite=True, if_revision=loaded.revision)
        report.changed = changed
        return report


def reconcile_state(
    config_or_path: ConfigSource,
    *,
    pipeline_id: str,
    destination_id: str,
    all_owners: bool = False,
    dry_run: bool = False,
    bundle_path: str | None = "",
    all_bundles: bool = False,
    now: datetime | None = None,
    environment: Environment | None = None,
    storage: Storage | None = None,
    holder: str | None = None,
    lock_wait: float = DEFAULT_WAIT,
    walk_limit: int = UNMANAGED_WALK_LIMIT,
    discovery_limit: int = DISCOVERY_WALK_LIMIT,
) -> ReconcileStateReport | BundleSetReport[ReconcileStateReport]:
    """Repair destination state records of missing managed outputs (interfaces §2.6).

    ``config_or_path`` is a loaded :class:`~distributor_core.config.Config` or a config file.
    ``bundle_path`` (default the destination root) selects one bundle path; ``all_bundles``
    every bundle path holding a ``.distributor.json`` and returns a :class:`BundleSetReport`
    (raising :class:`ReconcileStateError` carrying it when any bundle failed). ``now`` stamps
    ``updated_at`` (default: the current UTC time). ``storage`` replaces the destination storage
    the config describes (tests, fault injection); it is not closed. Errors: ``pipeline id is
    required`` / ``destination id is required`` before any I/O, config lookup errors, the
    storage error of a missing state file, the parse error of invalid state,
    ``state owner is <sp>/<sd>, not <p>/<d>``, a lock ``conflict``.
    """
    require_ids(pipeline_id, destination_id)
    bundle = check_bundle_selection(bundle_path, all_bundles)
    target = resolve_target(config_or_path, pipeline_id, destination_id, environment)
    stamp = now if now is not None else now_seconds()

    def one(path: str) -> ReconcileStateReport:
        return reconcile_bundle(
            target,
            opened,
            path,
            all_owners=all_owners,
            dry_run=dry_run,
            now=stamp,
            holder=holder,
            lock_wait=lock_wait,
            walk_limit=walk_limit,
        )

    with destination_storage(target, dry_run=dry_run, storage=storage) as opened:
        if not all_bundles:
            return one(bundle)
        report = run_bundle_set(target, opened, dry_run=dry_run, one=one, discovery_limit=discovery_limit)
    if not report.ok:
        raise ReconcileStateError(report.error_message(), report)
    return report

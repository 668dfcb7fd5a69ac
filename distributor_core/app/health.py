"""What a destination bundle path looks like right now, read-only (the facts behind the Dagster
asset checks ``state_valid``, ``managed_outputs_present`` and ``no_unmanaged_content``).

For each bundle path it runs the ``reconcile-state`` dry run (state parsed and validated, recorded
outputs stat'ed, the unmanaged-entry walk) and, where the path holds no state file at all, still
walks it: files there are unmanaged content a publication would refuse (``fail_unmanaged``), so a
check never vouches for a path a publication could not write. The destination is opened once for
every path. Nothing is locked or written.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from distributor_core import paths as lp
from distributor_core.app.bundles import BUNDLE_ERRORS, destination_storage
from distributor_core.app.reconcile import reconcile_bundle
from distributor_core.app.repair_report import ReconcileStateReport
from distributor_core.app.selection import Target, resolve_target
from distributor_core.app.unmanaged import UNMANAGED_WALK_LIMIT, UnmanagedEntry, unmanaged_entries
from distributor_core.config import Config, Environment
from distributor_core.storage.base import Storage
from distributor_core.storage.errors import ErrorKind, StorageError


class PathHealth(msgspec.Struct):
    """One bundle path: the dry-run report, or why its state could not be read (``error``;
    ``state_missing`` when there is no state file, with the path's files in ``unmanaged``)."""

    bundle_path: str
    report: ReconcileStateReport | None = None
    error: str = ""
    state_missing: bool = False
    unmanaged: list[UnmanagedEntry] = msgspec.field(default_factory=list)
    truncated: bool = False

    @property
    def missing_outputs(self) -> list[str]:
        return [m.path for m in self.report.missing_managed_outputs] if self.report is not None else []

    @property
    def unmanaged_entries(self) -> list[UnmanagedEntry]:
        return list(self.report.unmanaged_entries) if self.report is not None else self.unmanaged

    @property
    def walk_truncated(self) -> bool:
        return self.report.truncated if self.report is not None else self.truncated


def _missing_state(storage: Storage, bundle_path: str, exc: StorageError, walk_limit: int) -> PathHealth | None:
    if exc.kind != ErrorKind.NOT_FOUND or storage.exists(lp.state_path(bundle_path)):
        return None
    health = PathHealth(
        bundle_path, state_missing=True,
        error=f"no {lp.STATE_FILE_NAME} at {lp.display_path(bundle_path)}: nothing is published there",
    )
    try:
        health.unmanaged, health.truncated = unmanaged_entries(storage, bundle_path, (), limit=walk_limit)
    except StorageError as walk_error:
        if walk_error.kind != ErrorKind.NOT_FOUND:
            health.error += f" (and its content could not be listed: {walk_error})"
    return health


def inspect_target(
    target: Target, bundle_paths: Iterable[str], *, walk_limit: int = UNMANAGED_WALK_LIMIT
) -> dict[str, PathHealth]:
    """:class:`PathHealth` of each bundle path of an already resolved destination."""
    result: dict[str, PathHealth] = {}
    with destination_storage(target, dry_run=True) as storage:
        for bundle_path in bundle_paths:
            try:
                report = reconcile_bundle(target, storage, bundle_path, dry_run=True, walk_limit=walk_limit)
            except StorageError as exc:
                health = _missing_state(storage, bundle_path, exc, walk_limit)
                result[bundle_path] = health if health is not None else PathHealth(bundle_path, error=str(exc))
                continue
            except BUNDLE_ERRORS as exc:
                result[bundle_path] = PathHealth(bundle_path, error=str(exc))
                continue
            result[bundle_path] = PathHealth(bundle_path, report=report)
    return result


def inspect_paths(
    config: Config,
    pipeline_id: str,
    destination_id: str,
    bundle_paths: Iterable[str],
    *,
    environment: Environment | None = None,
    walk_limit: int = UNMANAGED_WALK_LIMIT,
) -> dict[str, PathHealth]:
    """:class:`PathHealth` of each bundle path of one destination (opened once)."""
    target = resolve_target(config, pipeline_id, destination_id, environment)
    return inspect_target(target, bundle_paths, walk_limit=walk_limit)

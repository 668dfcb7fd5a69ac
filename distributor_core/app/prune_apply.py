"""Crash-safe prune apply (core-semantics §7.3, resolutions A1, C3).

Prune is the write protocol of A1 with no new outputs:

1. Write the intent journal ``<bundle>/.distributor.pending.json`` listing the outputs to delete
   (planned order) and the sha256 of the target state (state minus the planned records).
2. Write the target state atomically, conditional on the revision read under the lock. From
   here on state no longer records the outputs about to go.
3. Delete the planned outputs one at a time, in planned order (missing counts as deleted, empty
   parent directories are pruned; never the state file, never an unmanaged file).
4. Remove the journal.

A crash at any step is settled by the next writer's ``recover()`` with the journal's ordinary
rules: before step 2 the state differs from the journal's sha256, so the journal is rolled back
(it lists no writes; nothing was deleted); from step 2 on the state matches, so it is rolled
forward and the remaining deletes are finished. State therefore never records a deleted file.

A delete that fails (not a crash) stops the loop: state is rewritten to the original minus the
records of the confirmed deletions (the original bytes when there were none), so the failed and
unattempted records stay, and the journal is removed. If that rewrite itself fails the journal
stays and the next writer finishes the prune. A lost lock stops every write at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from distributor_core import paths as lp
from distributor_core.app.bundles import ReportedError
from distributor_core.app.guard import Guard, LoadedState
from distributor_core.execute import journal as jr
from distributor_core.state import OwnerScope, PruneCandidate, marshal_state, remove_outputs, remove_owner
from distributor_core.storage.errors import ErrorKind, StorageError


class PruneError(ReportedError):
    """A prune failed after it had a report to show.

    One bundle path: a planned delete failed (or the state rewrite after it, or, removing a whole
    bundle path, the state file's removal); ``report`` is the :class:`PruneReport` with
    ``failed_output`` and the confirmed ``deleted_outputs``; the message is the error.
    ``all_bundles``: some bundle failed; ``report`` is the :class:`BundleSetReport`.
    """


@dataclass
class PruneResult:
    """What apply did. ``error`` is the delete error (or the state-write error after it)."""

    deleted: list[PruneCandidate] = field(default_factory=list)
    failed: PruneCandidate | None = None
    error: Exception | None = None
    state_changed: bool = False
    warnings: list[str] = field(default_factory=list)


def _state_sha(guard: Guard) -> str | None:
    try:
        return jr.sha256_of(guard.storage.read_bytes(lp.state_path(guard.bundle_path)))
    except StorageError:
        return None


def _drop_journal(guard: Guard, journal: jr.Journal) -> list[str]:
    try:
        guard.storage.delete_file(journal.path)
    except StorageError as exc:
        if exc.kind == ErrorKind.NOT_FOUND:
            return []
        return [
            f"could not remove the intent journal {journal.path} ({exc}); "
            "the next run, prune or reconcile-state removes it"
        ]
    return []


def _write_state(guard: Guard, data: bytes, revision: str | None) -> str | None:
    """Write state conditionally; return the new revision (for the next conditional write)."""
    path = lp.state_path(guard.bundle_path)
    entry = guard.storage.write_bytes(path, data, overwrite=True, if_revision=revision)
    return entry.revision or guard.storage.stat(path).revision


def _commit_target(guard: Guard, journal: jr.Journal, data: bytes, revision: str | None) -> str | None:
    """Step 2. A failure that did not land the state removes the journal and re-raises."""
    guard.ensure_held()
    try:
        return _write_state(guard, data, revision)
    except Exception:
        if _state_sha(guard) == journal.state_sha256:  # the write landed; only its answer was lost
            return guard.storage.stat(lp.state_path(guard.bundle_path)).revision
        _drop_journal(guard, journal)
        raise


def _gone(guard: Guard, path: str) -> bool:
    try:
        guard.storage.stat(lp.join(guard.bundle_path, path))
    except StorageError as exc:
        return exc.kind == ErrorKind.NOT_FOUND
    return False


def _settle_failure(
    guard: Guard,
    journal: jr.Journal,
    loaded: LoadedState,
    result: PruneResult,
    *,
    revision: str | None,
    scope: OwnerScope,
    now: datetime,
) -> PruneResult:
    """Restore the records of the failed and unattempted outputs (state rewritten for the
    confirmed deletions only), then remove the journal."""
    assert result.failed is not None
    removed = [candidate.path for candidate in result.deleted]
    if _gone(guard, result.failed.path):
        # the failing delete took effect after all: never record a file that is not there
        removed.append(result.failed.path)
        result.warnings.append(
            f"{result.failed.path} no longer exists although its delete failed; its record was removed"
        )
    restored, changed = remove_outputs(loaded.document, removed, scope=scope, now=now)
    data = marshal_state(restored) if changed else loaded.data
    try:
        guard.ensure_held()
        _write_state(guard, data, revision)
    except Exception as exc:
        result.error = exc
        result.warnings.append(
            f"could not restore the records of outputs that were not deleted; {journal.path} stays and "
            "the next run, prune or reconcile-state finishes the prune"
        )
        return result
    result.state_changed = changed
    result.warnings.extend(_drop_journal(guard, journal))
    return result


def apply_prune(
    guard: Guard,
    loaded: LoadedState,
    planned: Sequence[PruneCandidate],
    *,
    scope: OwnerScope,
    now: datetime,
    holder: str,
    drop_owner: bool = False,
) -> PruneResult:
    """Delete ``planned`` (planned order) under the held lock of ``guard``. ``drop_owner`` (a
    bundle prune in shared-root state that other owners keep, issue 37): the target state also
    loses ``scope``'s owner record; a failure restores it with the records not deleted."""
    storage, bundle = guard.storage, guard.bundle_path
    target, changed = remove_outputs(loaded.document, [candidate.path for candidate in planned], scope=scope, now=now)
    if drop_owner:
        target, dropped = remove_owner(target, scope, now=now)
        changed = changed or dropped
    if not changed:
        return PruneResult()
    target_bytes = marshal_state(target)  # validates first
    journal = jr.new_journal(
        bundle,
        state_bytes=target_bytes,
        writes=[],
        deletes=[lp.join(bundle, candidate.path) for candidate in planned],
        holder=holder,
        now=now,
    )
    guard.ensure_held()
    storage.write_bytes(journal.path, journal.to_bytes(), overwrite=True)
    revision = _commit_target(guard, journal, target_bytes, loaded.revision)
    result = PruneResult(state_changed=True)
    for candidate in planned:
        try:
            storage.delete_managed_outputs(bundle, [candidate.path], ignore_missing=True, prune_empty_dirs=True)
        except Exception as exc:
            result.failed = candidate
            result.error = exc
            return _settle_failure(guard, journal, loaded, result, revision=revision, scope=scope, now=now)
        result.deleted.append(candidate)
    result.warnings.extend(_drop_journal(guard, journal))
    return result

"""Retention by bundle (issue 37 item 2): ``prune`` with ``retention.prune.bundles`` removes whole
bundle paths of a ``preserve_relative`` destination.

Planning reads the state of every bundle path under the root (one walk, no lock) and lets the
pure :func:`distributor_core.state.plan_bundle_retention` keep the newest bundles of the selected
owner; bundle paths of other owners are not candidates and are not listed. Removing one bundle
path is today's prune with every output of the owner planned (:mod:`.prune_apply`: under the
destination lock, after recovery, the intent journal, the target state written before any
delete, a failing delete leaving state that records exactly what is still there), then:

- single-owner state, or the last owner of shared-root state: ``.distributor.json`` is deleted
  (the journal is already gone, so a crash in between leaves a state without outputs, which the
  next prune removes), and once the lock is released the now-empty folders up to the root;
- shared-root state with other owners: the target state also drops the owner's record; the
  other owners' outputs and the state file stay.

A bundle path holding a lock and no state (a removal killed after its state file went, before the
lock was released) is cleared by the next apply once that lock's writer is gone.

Under the lock the bundle path is planned again: a bundle re-published since the plan (another
manifest) is kept with a warning, never removed on stale facts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from distributor_core import paths as lp
from distributor_core.app.bundle_set import BundleSection, BundleSetReport
from distributor_core.app.bundles import BUNDLE_ERRORS, run_bundle_set
from distributor_core.app.guard import LoadedState, enter_bundle, read_state
from distributor_core.app.policy import holds_bundle
from distributor_core.app.prune_apply import PruneError, apply_prune
from distributor_core.app.repair_report import PruneReport
from distributor_core.app.selection import Target
from distributor_core.app.unmanaged import unmanaged_entries
from distributor_core.execute.lock import DEFAULT_WAIT
from distributor_core.state import (
    KEEP,
    BundlePolicy,
    BundleVerdict,
    PruneCandidate,
    SingleOwnerState,
    StateError,
    bundle_candidate,
    check_owner,
    other_owners,
    plan_bundle_retention,
    prune_candidates,
)
from distributor_core.storage.base import Storage
from distributor_core.storage.errors import ErrorKind, StorageError


def _report(target: Target, bundle_path: str, verdict: BundleVerdict, outputs: list[PruneCandidate], *,
            dry_run: bool, loaded: LoadedState | None = None) -> PruneReport:
    removing = verdict.removed
    holds = holds_bundle(loaded.document if loaded else None, target.scope, target.destination, len(outputs))
    return PruneReport(
        pipeline_id=target.pipeline.id,
        destination_id=target.destination.id,
        backend=target.backend,
        root_path=target.root_path,
        root_text=target.root_text,
        bundle_path=bundle_path,
        owner_scope=target.scope,
        enabled=True,
        checked_count=len(outputs),
        planned_outputs=list(outputs) if removing else [],
        preserved_outputs=[] if removing else list(outputs),
        would_change=dry_run and removing,
        dry_run=dry_run,
        bundle_retention=verdict,
        holds=holds,
    )


def _owner_outputs(loaded: LoadedState, target: Target) -> list[PruneCandidate]:
    """The selected owner's outputs, in state order."""
    return list(prune_candidates(loaded.document, target.scope))


#: Unmanaged files a removed bundle path's warning looks for (and names up to five of).
_LISTED = 100


@dataclass
class _Plan:
    """The verdicts of one planning pass, with the states read for it."""

    verdicts: dict[str, BundleVerdict] = field(default_factory=dict)
    loaded: dict[str, LoadedState] = field(default_factory=dict)
    #: bundle paths whose state could not be read (each fails its own section)
    errors: dict[str, Exception] = field(default_factory=dict)
    #: the bundle paths reported on, in path order
    order: list[str] = field(default_factory=list)
    #: bundle paths with a lock and no state
    abandoned: list[str] = field(default_factory=list)


def _bundle_paths(storage: Storage, limit: int) -> tuple[list[str], list[str]]:
    """One walk of the root: the bundle paths holding a ``.distributor.json`` (sorted), and those
    holding a lock but no state (a removal or a first publication that died, or one at work)."""
    entries = storage.walk("", limit=limit, include_reserved=True, include_dirs=False)
    with_state, locked = set(), set()
    for entry in entries:
        directory, name = lp.parent(entry.path), lp.basename(entry.path)
        if lp.is_reserved_path(directory):
            continue
        if name == lp.STATE_FILE_NAME:
            with_state.add(directory)
        elif name == lp.LOCK_NAME:
            locked.add(directory)
    return sorted(with_state), sorted(locked - with_state)


def plan_bundles(target: Target, storage: Storage, policy: BundlePolicy, *, now: datetime,
                 discovery_limit: int) -> _Plan:
    """Read every bundle path's state (no lock) and decide which of the owner's bundles go."""
    plan = _Plan()
    candidates = []
    with_state, plan.abandoned = _bundle_paths(storage, discovery_limit)
    for path in with_state:
        try:
            loaded = read_state(storage, path)
        except BUNDLE_ERRORS as exc:
            plan.errors[path] = exc
            plan.order.append(path)
            continue
        candidate = bundle_candidate(loaded.document, target.scope, path)
        if candidate is None:
            continue  # another owner's bundle path: never a candidate
        plan.loaded[path] = loaded
        plan.order.append(path)
        candidates.append(candidate)
    plan.verdicts = {v.bundle_path: v for v in plan_bundle_retention(candidates, policy, now=now)}
    return plan


def _changed_since(verdict: BundleVerdict, loaded: LoadedState, target: Target) -> str:
    """Why the bundle path no longer is what was planned (empty when it still is)."""
    now_candidate = bundle_candidate(loaded.document, target.scope, verdict.bundle_path)
    if now_candidate is None:
        return "its state no longer records this destination"
    planned = verdict.candidate
    if (now_candidate.digest, now_candidate.created) != (planned.digest, planned.created):
        return f"another bundle was published there since it was planned ({now_candidate.bundle_id}, " \
               f"{now_candidate.digest})"
    return ""


def remove_bundle(target: Target, storage: Storage, verdict: BundleVerdict, *, dry_run: bool, now: datetime,
                  holder: str, lock_wait: float = DEFAULT_WAIT) -> PruneReport:
    """Remove (or, dry run, plan the removal of) one bundle path the policy selected."""
    path = verdict.bundle_path
    with enter_bundle(storage, path, dry_run=dry_run, holder=holder, lock_wait=lock_wait) as guard:
        loaded = read_state(storage, path)
        changed = _changed_since(verdict, loaded, target)
        if changed:
            kept = BundleVerdict(verdict.candidate, KEEP, f"not removed: {changed}")
            still_owner = bundle_candidate(loaded.document, target.scope, path) is not None
            report = _report(target, path, kept, _owner_outputs(loaded, target) if still_owner else [],
                             dry_run=dry_run, loaded=loaded)
            report.warnings.append(f"{lp.display_path(path)} was not removed: {changed}; run prune again")
            return report
        outputs = _owner_outputs(loaded, target)
        report = _report(target, path, verdict, outputs, dry_run=dry_run, loaded=loaded)
        report.recovery = guard.recovery
        report.warnings.extend(guard.warnings)
        if dry_run:
            return report
        others = other_owners(loaded.document, target.scope)
        result = apply_prune(guard, loaded, outputs, scope=target.scope, now=now, holder=holder,
                             drop_owner=bool(others))
        report.deleted_outputs = list(result.deleted)
        report.state_changed = result.state_changed
        report.warnings.extend(result.warnings)
        if result.error is not None:
            report.failed_output = result.failed
            report.holds = holds_bundle(loaded.document, target.scope, target.destination,
                                        len(outputs) - len(result.deleted))
            raise PruneError(str(result.error), report) from result.error
        report.bundle_removed = True
        report.holds = False
        if not others:
            guard.ensure_held()
            try:
                guard.storage.delete_file(lp.state_path(path))
            except StorageError as exc:
                if exc.kind != ErrorKind.NOT_FOUND:
                    raise PruneError(
                        f"{exc}; the outputs are deleted and the state records none: run prune again to remove it",
                        report,
                    ) from exc
            report.state_removed = True
            report.state_changed = True
    if report.state_removed:
        _remove_empty_folders(storage, path, report)
    return report


def _remove_empty_folders(storage: Storage, bundle_path: str, report: PruneReport) -> None:
    """The bundle path's folder and its parents up to the root, each only while empty; files
    distributor does not manage are never deleted, and the report says which keep it."""
    try:
        storage.prune_empty_parents(lp.state_path(bundle_path))
        left = unmanaged_entries(storage, bundle_path, (), limit=_LISTED)[0] if bundle_path else []
    except StorageError as exc:
        report.warnings.append(f"could not remove the empty folder {lp.display_path(bundle_path)}: {exc}")
        return
    if left:
        shown = ", ".join(entry.path for entry in left[:5]) + (" ..." if len(left) > 5 else "")
        report.warnings.append(
            f"{lp.display_path(bundle_path)} keeps files distributor does not manage, not deleted: {shown}"
        )


def keep_report(target: Target, verdict: BundleVerdict, loaded: LoadedState, *, dry_run: bool) -> PruneReport:
    return _report(target, verdict.bundle_path, verdict, _owner_outputs(loaded, target), dry_run=dry_run,
                   loaded=loaded)


def prune_by_bundle(
    target: Target,
    storage: Storage,
    policy: BundlePolicy,
    *,
    dry_run: bool,
    now: datetime,
    holder: str,
    lock_wait: float,
    discovery_limit: int,
    only: str | None = None,
) -> PruneReport | BundleSetReport[PruneReport]:
    """Plan over every bundle path, then keep or remove each of the owner's; ``only`` acts on that
    one bundle path (the plan still ranks all of them) and returns its report."""
    plan = plan_bundles(target, storage, policy, now=now, discovery_limit=discovery_limit)

    def one(path: str) -> PruneReport:
        if path in plan.errors:
            raise plan.errors[path]
        verdict = plan.verdicts.get(path)
        if verdict is None:
            _explain_not_candidate(storage, path, target)
            raise AssertionError("unreachable")  # pragma: no cover
        if verdict.removed:
            return remove_bundle(target, storage, verdict, dry_run=dry_run, now=now, holder=holder,
                                 lock_wait=lock_wait)
        return keep_report(target, verdict, plan.loaded[path], dry_run=dry_run)

    if only is not None:
        return one(only)
    report = run_bundle_set(target, storage, dry_run=dry_run, one=one, discovery_limit=discovery_limit,
                            bundles=plan.order)
    if not dry_run:
        for path in plan.abandoned:
            cleared = clear_abandoned(target, storage, path, holder=holder)
            if cleared is not None:
                report.sections.append(BundleSection(path, cleared))
    return report


def clear_abandoned(target: Target, storage: Storage, bundle_path: str, *, holder: str) -> PruneReport | None:
    """A bundle path holding a lock and no state: a removal that died after the state file went
    (or a first publication that died before it was written). When the lock's writer is gone (its
    lease expired, or its process on this host ended), settle what it left (its journal, its
    temporaries), release the lock and remove the folders left empty; a writer at work keeps it
    (``None``)."""
    try:  # the lock taken at once or not at all: a writer at work keeps its bundle path
        with enter_bundle(storage, bundle_path, dry_run=False, holder=holder, lock_wait=0,
                          require_state=False) as guard:
            recovery = guard.recovery
    except StorageError as exc:
        if exc.kind == ErrorKind.CONFLICT:
            return None
        raise
    report = PruneReport(
        pipeline_id=target.pipeline.id, destination_id=target.destination.id, backend=target.backend,
        root_path=target.root_path, root_text=target.root_text, bundle_path=bundle_path,
        owner_scope=target.scope, enabled=True, recovery=recovery, holds=False,
        warnings=[f"{lp.display_path(bundle_path)} held a lock left by a writer that is gone and no state: "
                  "the lock was cleared"],
    )
    _remove_empty_folders(storage, bundle_path, report)
    return report


def _explain_not_candidate(storage: Storage, path: str, target: Target) -> None:
    """The error for ``--bundle <path>`` naming a path that is not one of the owner's bundles."""
    document = read_state(storage, path).document  # a missing state file raises its storage error
    if isinstance(document, SingleOwnerState):
        check_owner(document, target.scope)  # state owner is <p>/<d>, not <p>/<d>
    raise StateError(f"state records no owner {target.scope}")

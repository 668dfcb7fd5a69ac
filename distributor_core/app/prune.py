"""``prune``: delete managed outputs the destination's retention policy selects
(core-semantics §7.2–7.3, interfaces §2.7, resolutions A1, A3, B2, B4, C3), or, with
``retention.prune.bundles``, whole bundle paths (issue 37, :mod:`.prune_bundles`).

Planning is the pure :func:`distributor_core.state.plan_prune`. Applying holds the destination
lock, settles a crashed writer's journal first and deletes with the crash-safe protocol of
:mod:`distributor_core.app.prune_apply`. Pruning never runs automatically after publication and
accepts no one-off overrides: the policy is the destination's ``retention.prune``.
"""

from __future__ import annotations

from datetime import datetime

from distributor_core.app.bundle_set import BundleSetReport
from distributor_core.app.bundles import destination_storage, run_bundle_set
from distributor_core.app.guard import enter_bundle, read_state
from distributor_core.app.policy import bundle_policy, holds_bundle
from distributor_core.app.prune_apply import PruneError, apply_prune
from distributor_core.app.prune_bundles import prune_by_bundle
from distributor_core.app.repair_report import PruneReport
from distributor_core.app.selection import (
    DISCOVERY_WALK_LIMIT,
    ConfigSource,
    Target,
    check_bundle_selection,
    require_ids,
    resolve_target,
)
from distributor_core.config import Destination, Environment
from distributor_core.execute.lock import DEFAULT_WAIT
from distributor_core.execute.publish import default_holder
from distributor_core.state import (
    OwnerScope,
    PruneCandidate,
    PrunePlan,
    PrunePolicy,
    StateDocument,
    current_publication_outputs,
    outputs_of,
    plan_prune,
)
from distributor_core.storage.base import Storage
from distributor_core.timefmt import now_seconds


def prune_policy(destination: Destination) -> PrunePolicy:
    """The destination's configured ``retention.prune`` as the planner's policy value."""
    configured = destination.retention.prune
    return PrunePolicy(
        enabled=configured.enabled, older_than=configured.older_than, keep_latest=configured.keep_latest
    )


def current_publication_warning(document: StateDocument, scope: OwnerScope, planned: list[PruneCandidate]) -> str:
    """Resolutions B4: name the planned outputs of the owner's currently recorded publication."""
    if not planned:
        return ""
    current = {output.path for output in current_publication_outputs(document, scope)}
    hit = [candidate.path for candidate in planned if candidate.path in current]
    if not hit:
        return ""
    return f"prune deletes outputs of the current publication of {scope}: {', '.join(hit)}"


def _report(target: Target, bundle_path: str, plan: PrunePlan, *, dry_run: bool) -> PruneReport:
    planned = list(plan.pruned_outputs)
    return PruneReport(
        pipeline_id=target.pipeline.id,
        destination_id=target.destination.id,
        backend=target.backend,
        root_path=target.root_path,
        root_text=target.root_text,
        bundle_path=bundle_path,
        owner_scope=plan.owner_scope,
        enabled=plan.enabled,
        checked_count=plan.checked_count,
        planned_outputs=planned,
        preserved_outputs=list(plan.preserved_outputs),
        would_change=dry_run and bool(planned),
        dry_run=dry_run,
    )


def prune_bundle(
    target: Target,
    storage: Storage,
    bundle_path: str,
    *,
    dry_run: bool,
    now: datetime,
    holder: str | None = None,
    lock_wait: float = DEFAULT_WAIT,
) -> PruneReport:
    """Plan and (unless ``dry_run``) apply the prune of one bundle path of an open root."""
    who = holder or default_holder("prune")
    with enter_bundle(storage, bundle_path, dry_run=dry_run, holder=who, lock_wait=lock_wait) as guard:
        loaded = read_state(storage, bundle_path)
        plan = plan_prune(
            loaded.document,
            prune_policy(target.destination),
            pipeline_id=target.pipeline.id,
            destination_id=target.destination.id,
            now=now,
        )
        report = _report(target, bundle_path, plan, dry_run=dry_run)
        report.recovery = guard.recovery
        report.warnings.extend(guard.warnings)
        warning = current_publication_warning(loaded.document, target.scope, report.planned_outputs)
        if warning:
            report.warnings.append(warning)
        recorded = len(outputs_of(loaded.document, target.scope))
        report.holds = holds_bundle(loaded.document, target.scope, target.destination, recorded)
        if dry_run or not report.planned_outputs:
            return report
        result = apply_prune(guard, loaded, plan.pruned_outputs, scope=target.scope, now=now, holder=who)
        report.deleted_outputs = list(result.deleted)
        report.state_changed = result.state_changed
        report.warnings.extend(result.warnings)
        report.holds = holds_bundle(loaded.document, target.scope, target.destination,
                                    recorded - len(result.deleted))
        if result.error is not None:
            report.failed_output = result.failed
            raise PruneError(str(result.error), report) from result.error
        return report


def prune(
    config_or_path: ConfigSource,
    *,
    pipeline_id: str,
    destination_id: str,
    dry_run: bool,
    bundle_path: str | None = "",
    all_bundles: bool = False,
    now: datetime | None = None,
    environment: Environment | None = None,
    storage: Storage | None = None,
    holder: str | None = None,
    lock_wait: float = DEFAULT_WAIT,
    discovery_limit: int = DISCOVERY_WALK_LIMIT,
) -> PruneReport | BundleSetReport[PruneReport]:
    """Prune managed outputs with the destination's retention policy (interfaces §2.7).

    ``bundle_path`` (default the destination root) selects one bundle path; ``all_bundles``
    every bundle path holding a ``.distributor.json`` and returns a :class:`BundleSetReport`.
    With ``retention.prune.bundles`` (issue 37, :mod:`.prune_bundles`) whole bundle paths are
    kept or removed: every bundle path of the owner unless ``bundle_path`` names one (the root
    cannot be named alone; it is one of every).
    ``now`` is the planning and ``updated_at`` time (default: the current UTC time). ``storage``
    replaces the destination storage the config describes (tests, fault injection); it is not
    closed. A failed delete raises :class:`PruneError` carrying the partial report; every other
    failure (selection, config, missing or invalid state, owner mismatch, lock conflict) raises
    its own error before anything is deleted or rewritten.
    """
    require_ids(pipeline_id, destination_id)
    bundle = check_bundle_selection(bundle_path, all_bundles)
    target = resolve_target(config_or_path, pipeline_id, destination_id, environment)
    stamp = now if now is not None else now_seconds()

    def one(path: str) -> PruneReport:
        return prune_bundle(target, opened, path, dry_run=dry_run, now=stamp, holder=holder, lock_wait=lock_wait)

    by_bundle = bundle_policy(target.destination)
    with destination_storage(target, dry_run=dry_run, storage=storage) as opened:
        if by_bundle is not None:  # whole bundle paths: every one, unless --bundle names one
            report = prune_by_bundle(
                target, opened, by_bundle, dry_run=dry_run, now=stamp, holder=holder or default_holder("prune"),
                lock_wait=lock_wait, discovery_limit=discovery_limit, only=bundle or None,
            )
            if isinstance(report, PruneReport):
                return report
        elif not all_bundles:
            return one(bundle)
        else:
            report = run_bundle_set(target, opened, dry_run=dry_run, one=one, discovery_limit=discovery_limit)
    if not report.ok:
        raise PruneError(report.error_message(), report)
    return report

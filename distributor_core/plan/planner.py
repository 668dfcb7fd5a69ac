"""Publish planning (core-semantics §4–6, resolutions B3, C1).

Planning performs only reads (state file, has-any, stat, bounded walks, Markdown sources) and is
the whole of a dry run. ``fail_*`` plans are returned, not raised: ``plan.error`` carries
``<action>: <reason>``. Anything that prevents a plan at all raises :class:`PlanError` or a
storage error.
"""

from __future__ import annotations

from distributor_core import paths as lp
from distributor_core.compare import (
    Comparison,
    DestinationStatus,
    Outcome,
    apply_fixed_refinement,
    compare_shared_root_owner,
    compare_single_owner,
    recorded_owner_manifest,
)
from distributor_core.gcpause import gc_paused
from distributor_core.plan import actions as act
from distributor_core.plan.model import Action, Plan, PlanError, PlanRequest, TakenOverOutput
from distributor_core.plan.outputs import apply_links, build_outputs, check_policy, normalize_policy
from distributor_core.state import StateError, fastcheck, parse_state_document, project_single_owner_outputs
from distributor_core.state.model import OwnerScope, SharedOutputRecord, SharedRootState
from distributor_core.storage.base import Storage
from distributor_core.storage.errors import ErrorKind, StorageError

#: Extra entries the replace-mode pre-check may walk beyond the recorded outputs (resolutions B2).
REPLACE_CHECK_SLACK = 10_000
#: Bound of the walk that lists what a forced replacement will delete.
FORCE_WALK_LIMIT = 1_000_000


def inspect_destination(storage: Storage, bundle_path: str) -> tuple[DestinationStatus, str]:
    """Read and parse ``<bundle>/.distributor.json`` (core-semantics §3.1).

    Returns the status and the state file's revision ("" when absent). The revision is taken
    before the read so a conditional write based on it can never overwrite a newer state.
    """
    path = lp.state_path(bundle_path)
    try:
        revision = storage.stat(path).revision or ""
        data = storage.read_bytes(path)
    except StorageError as exc:
        if exc.kind != ErrorKind.NOT_FOUND:
            raise
        has_contents = storage.has_any(bundle_path)
        return DestinationStatus(state=None, shared_root=None, state_error=None, has_contents=has_contents), ""
    try:
        document = parse_state_document(data)
    except StateError as exc:
        return DestinationStatus(state=None, shared_root=None, state_error=str(exc), has_contents=True), revision
    if isinstance(document, SharedRootState):
        return DestinationStatus(state=None, shared_root=document, state_error=None, has_contents=True), revision
    return DestinationStatus(state=document, shared_root=None, state_error=None, has_contents=True), revision


def current_owner_records(status: DestinationStatus, scope: OwnerScope) -> tuple[SharedOutputRecord, ...]:
    if status.shared_root is not None:
        return tuple(o for o in status.shared_root.outputs if o.scope == scope)
    if status.state is not None and status.state.scope == scope:
        return project_single_owner_outputs(status.state)
    return ()


#: manifests with at least this many files are planned with the cyclic garbage collector paused
LARGE_MANIFEST = 10_000


def build_plan(request: PlanRequest) -> Plan:
    """Plan one destination publication (reads only); see the module docstring."""
    with gc_paused(len(request.manifest.files) >= LARGE_MANIFEST):
        return _build_plan(request)


def _build_plan(request: PlanRequest) -> Plan:
    policy = normalize_policy(request.policy)
    check_policy(policy)
    if not request.pipeline_id or not request.destination_id:
        raise PlanError("plan request requires pipeline and destination ids")
    manifest = request.manifest
    bundle_path = "" if policy.path_mapping == "fixed" else request.source_bundle_path
    outputs = build_outputs(
        manifest_files=manifest.files,
        source=request.source,
        source_bundle_path=request.source_bundle_path,
        policy=policy,
        renderer=request.renderer,
    )
    outputs, primary_url = apply_links(outputs, bundle_path=bundle_path, policy=policy)
    # an unchanged destination records this very manifest: reuse it instead of rebuilding it
    with fastcheck.expected_manifests(manifest):
        status, revision = inspect_destination(request.destination, bundle_path)
    scope = OwnerScope(request.pipeline_id, request.destination_id)
    shared = policy.state_mode == "shared_root"

    if shared:
        comparison = compare_shared_root_owner(manifest, scope, status)
    else:
        comparison = compare_single_owner(manifest, request.pipeline_id, request.destination_id, status)
    recorded = recorded_owner_manifest(status, scope)
    if policy.path_mapping == "fixed":
        comparison = apply_fixed_refinement(comparison, manifest, recorded)

    decision = _takeover_decision(request, status, comparison, recorded, shared=shared)
    taken_over: list[TakenOverOutput] = []
    if decision is None:
        decision = act.map_outcome(comparison, policy.transfer, force=request.force, republish=request.republish)
    elif decision.action == Action.REPLACE_TAKEOVER and not shared and status.state is not None:
        previous = status.state
        taken_over = [TakenOverOutput(o.path, previous.scope, previous.manifest.id) for o in previous.outputs]

    plan = Plan(
        pipeline_id=request.pipeline_id,
        destination_id=request.destination_id,
        bundle_path=bundle_path,
        source_bundle_path=request.source_bundle_path,
        manifest=manifest,
        action=decision.action,
        reason=decision.reason,
        state_mode=policy.state_mode,
        reconciliation_mode=policy.reconciliation_mode,
        owner_scope=scope,
        comparison=comparison,
        outputs=tuple(outputs),
        primary_url=primary_url,
        existing_state=status.state,
        existing_shared_root=status.shared_root,
        state_revision=revision,
        taken_over_outputs=tuple(taken_over),
        source_content=request.source_content,
    )
    if shared:
        _plan_shared_root(plan, request, status)
    else:
        _plan_single_owner(plan, request)
    if plan.action == Action.FORCE_REPLACE:
        plan.deletes = _force_deletes(request.destination, plan)
    return plan


def _takeover_decision(
    request: PlanRequest,
    status: DestinationStatus,
    comparison: Comparison,
    recorded,
    *,
    shared: bool,
) -> act.Decision | None:
    """Evaluate takeover on valid parsed state (core-semantics §6.2–6.4(b)).

    Returns ``None`` when takeover does not apply (the caller maps the comparison through the
    transfer policy), the ``replace_takeover`` decision, or, when the ordering guard stops a
    permitted takeover, the transfer-policy decision for the guard's comparison.
    """
    mode = request.policy.takeover_mode
    manifest = request.manifest
    outcome = comparison.outcome
    if not shared:
        existing = status.state
        if existing is None or status.shared_root is not None:
            return None
        if outcome not in (Outcome.IDENTITY_MISMATCH, Outcome.DIFFERENT_SOURCE_CONFLICT):
            return None
        permitted = act.single_owner_takeover_permitted(
            mode,
            recorded_pipeline_id=existing.pipeline_id,
            recorded_source_id=existing.manifest.id,
            pipeline_id=request.pipeline_id,
            source_id=manifest.id,
        )
        if not permitted:
            return None
        guard = act.ordering_guard(existing.manifest, manifest)
        if guard is None:
            return act.Decision(Action.REPLACE_TAKEOVER, act.takeover_reason(mode, comparison.reason))
        return act.map_outcome(guard, request.policy.transfer, force=request.force, republish=request.republish)
    if outcome != Outcome.DIFFERENT_SOURCE_CONFLICT or recorded is None:
        return None
    if not act.owner_record_takeover_permitted(mode):
        return None
    guard = act.ordering_guard(recorded, manifest)
    if guard is None:
        return act.Decision(Action.REPLACE_TAKEOVER, act.takeover_reason(mode, comparison.reason))
    return act.map_outcome(guard, request.policy.transfer, force=request.force, republish=request.republish)


def _fail(plan: Plan, action: Action, reason: str) -> None:
    plan.action = action
    plan.reason = reason


def _stat_exists(storage: Storage, path: str) -> bool:
    try:
        storage.stat(path)
    except StorageError as exc:
        if exc.kind == ErrorKind.NOT_FOUND:
            return False
        raise
    return True


def _unmanaged_collision(storage: Storage, plan: Plan, managed: set[str]) -> str | None:
    for output in plan.outputs:
        if output.path in managed:
            continue
        if _stat_exists(storage, lp.join(plan.bundle_path, output.path)):
            return output.path
    return None


def _plan_single_owner(plan: Plan, request: PlanRequest) -> None:
    existing = plan.existing_state
    action = plan.action
    if action not in (Action.REPLACE_OLDER, Action.REPLACE_TAKEOVER) or existing is None:
        return
    merge = plan.reconciliation_mode == "merge"
    if action == Action.REPLACE_TAKEOVER:
        plan.merge_retention = merge and existing.manifest.id == plan.manifest.id
    else:
        plan.merge_retention = merge
    recorded = {o.path for o in existing.outputs}
    storage = request.destination
    if plan.merge_retention:
        collision = _unmanaged_collision(storage, plan, recorded)
        if collision is not None:
            _fail(
                plan,
                Action.FAIL_UNMANAGED,
                f"destination output path {lp.display_path(collision)} exists but is not managed by destination state",
            )
        return
    # replace semantics: the bundle path may hold nothing but recorded outputs and reserved names
    scan = storage.scan(
        plan.bundle_path,
        limit=len(recorded) + REPLACE_CHECK_SLACK,
        include_dirs=False,
    )
    for entry in scan.entries:
        relative = lp.relative_to(entry.path, plan.bundle_path)
        if relative not in recorded:
            _fail(
                plan,
                Action.FAIL_UNMANAGED,
                f"destination bundle path {lp.display_path(plan.bundle_path)} contains unmanaged content: {relative}",
            )
            return


def _plan_shared_root(plan: Plan, request: PlanRequest, status: DestinationStatus) -> None:
    scope = plan.owner_scope
    shared_root = status.shared_root
    others = tuple(o for o in shared_root.outputs if o.scope != scope) if shared_root is not None else ()
    if not plan.action.executable:
        plan.other_owner_outputs = others
        return
    if plan.action == Action.FORCE_REPLACE:
        return
    mode = request.policy.takeover_mode
    manifest = plan.manifest
    owner_of = {o.path: o for o in shared_root.outputs} if shared_root is not None else {}

    # (a) ownership, with path takeover
    taken: list[TakenOverOutput] = []
    for output in plan.outputs:
        record = owner_of.get(output.path)
        if record is None or record.scope == scope:
            continue
        owner = record.scope
        permitted = act.path_takeover_permitted(
            mode,
            owner_pipeline_id=owner.pipeline_id,
            record_source_id=record.source_id,
            pipeline_id=plan.pipeline_id,
            source_id=manifest.id,
        )
        if not permitted:
            _fail(plan, Action.FAIL_CONFLICT, f"destination output path {output.path} is owned by {owner}")
            return
        if not act.source_not_newer(record.source_created, manifest):
            _fail(
                plan,
                Action.FAIL_CONFLICT,
                f"destination output path {output.path} is owned by {owner} and its source is newer than "
                "the current source",
            )
            return
        taken.append(TakenOverOutput(output.path, owner, record.source_id))

    # (b) unmanaged collisions
    owned = current_owner_records(status, scope)
    managed = set(owner_of) if shared_root is not None else {o.path for o in owned}
    collision = _unmanaged_collision(request.destination, plan, managed)
    if collision is not None:
        _fail(
            plan,
            Action.FAIL_UNMANAGED,
            f"destination output path {lp.display_path(collision)} exists but is not managed by destination state",
        )
        return

    if taken:
        if plan.action != Action.REPLACE_TAKEOVER:
            first = taken[0]
            plan.reason = act.takeover_reason(
                mode, f"destination output path {first.path} is owned by {first.previous_owner}"
            )
        plan.action = Action.REPLACE_TAKEOVER
        plan.taken_over_outputs = tuple(taken)
    taken_paths = {t.path for t in taken}
    plan.other_owner_outputs = tuple(o for o in others if o.path not in taken_paths)

    planned = {o.path for o in plan.outputs}
    retained: list[SharedOutputRecord] = []
    to_delete: list[SharedOutputRecord] = []
    merge = plan.reconciliation_mode == "merge"
    for record in owned:
        if record.path in planned:
            continue
        if plan.action == Action.REPLACE_OLDER:
            (retained if merge else to_delete).append(record)
        elif plan.action == Action.REPLACE_TAKEOVER:
            if merge and record.source_id == manifest.id:
                retained.append(record)
            else:
                to_delete.append(record)
    plan.retained_owner_outputs = tuple(retained)
    plan.owner_outputs_to_delete = tuple(to_delete)


def _force_deletes(storage: Storage, plan: Plan) -> tuple[str, ...]:
    """Everything under the bundle path a forced replacement will remove (resolutions B3)."""
    scan = storage.scan(plan.bundle_path, limit=FORCE_WALK_LIMIT, include_dirs=False, include_reserved=True)
    if scan.truncated:
        raise PlanError(
            f"destination bundle path {lp.display_path(plan.bundle_path)} holds more than "
            f"{FORCE_WALK_LIMIT} entries; forced replacement refuses to run"
        )
    planned = {o.path for o in plan.outputs}
    deletes = []
    for entry in scan.entries:
        relative = lp.relative_to(entry.path, plan.bundle_path)
        # nested bundles' state goes with their outputs; locks, journals, temporaries and
        # backups belong to other writers (or to this one) and stay
        nested_state = lp.basename(relative) == lp.STATE_FILE_NAME and relative != lp.STATE_FILE_NAME
        if lp.is_reserved_path(relative) and not nested_state:
            continue
        if relative not in planned:
            deletes.append(relative)
    return tuple(deletes)

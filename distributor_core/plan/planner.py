"""Publish planning as a pure decision over facts (core-semantics §4–6, resolutions B3, C1).

:func:`prepare` turns a request (ids, validated manifest, policy, rendered Markdown) into a
:class:`Publication`: what would be written, wherever it goes. :func:`decide` takes that and
the :class:`~distributor_core.plan.facts.DestinationFacts` read so far and returns the frozen
:class:`~distributor_core.plan.model.Plan`, or the one fact request it needs answered first.
Neither touches storage: ``execute.facts`` drives the loop for real destinations, and tests
feed facts by hand.

``fail_*`` plans are returned, not raised (``plan.error`` is ``<action>: <reason>``). Anything
that prevents a plan at all raises :class:`~distributor_core.plan.model.PlanError`.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter
from typing import Any

import msgspec

from distributor_core import paths as lp
from distributor_core.bundle import Manifest
from distributor_core.compare import (
    Comparison,
    DestinationStatus,
    apply_fixed_refinement,
    compare_shared_root_owner,
    compare_single_owner,
    recorded_owner_manifest,
)
from distributor_core.plan.actions import Decision, map_outcome
from distributor_core.plan.facts import DestinationFacts, FactRequest, FirstExisting, HasAny, ListFiles
from distributor_core.plan.model import (
    Action,
    Blocker,
    DestinationPolicy,
    Obstacle,
    Plan,
    PlanError,
    PlannedOutput,
    TakenOverOutput,
)
from distributor_core.plan.modes import PathMapping, ReconciliationMode, StateMode
from distributor_core.plan.outputs import apply_links, build_outputs, bundle_path_for, normalize_policy
from distributor_core.plan.takeover import (
    TAKEOVER_OUTCOMES,
    ordering_guard,
    source_not_newer,
    takeover_permitted,
    takeover_reason,
)
from distributor_core.state import project_single_owner_outputs
from distributor_core.state.model import OwnerScope, SharedOutputRecord
from distributor_core.structeq import compare_without

_PATH = attrgetter("path")

#: Extra entries the replace-mode pre-check may list beyond the recorded outputs (resolutions B2).
REPLACE_CHECK_SLACK = 10_000
#: Bound of the listing that names what a forced replacement will delete.
FORCE_WALK_LIMIT = 1_000_000


@compare_without("source_content")
class Publication(msgspec.Struct, frozen=True):
    """One bundle bound for one destination, before anything about the destination is known."""

    pipeline_id: str
    destination_id: str
    manifest: Manifest
    #: normalised: every mode an enum member
    policy: DestinationPolicy
    source_bundle_path: str
    #: the destination bundle path (§4.4.4)
    bundle_path: str
    #: in plan order, with their URLs
    outputs: tuple[PlannedOutput, ...]
    primary_url: str = ""
    force: bool = False
    republish: bool = False
    #: handed through to the plan untouched (validated source bytes for execution)
    source_content: Any = None



    @property
    def scope(self) -> OwnerScope:
        return OwnerScope(self.pipeline_id, self.destination_id)


def check_request(pipeline_id: str, destination_id: str, policy: DestinationPolicy) -> DestinationPolicy:
    """Request validation (§4.1): the normalised policy, or :class:`PlanError`."""
    normalized = normalize_policy(policy)
    if not pipeline_id or not destination_id:
        raise PlanError("plan request requires pipeline and destination ids")
    return normalized


def prepare(
    manifest: Manifest,
    policy: DestinationPolicy,
    *,
    pipeline_id: str,
    destination_id: str,
    source_bundle_path: str,
    generated: Sequence[PlannedOutput] = (),
    force: bool = False,
    republish: bool = False,
    source_content: Any = None,
) -> Publication:
    """Outputs, links and bundle path of a publication (§4.4). ``manifest`` is the validated
    source manifest; ``generated`` the HTML outputs :func:`~distributor_core.plan.outputs.render_markdown`
    made from the Markdown sources :func:`~distributor_core.plan.outputs.markdown_sources` named."""
    policy = check_request(pipeline_id, destination_id, policy)
    bundle_path = bundle_path_for(policy, source_bundle_path)
    outputs = build_outputs(manifest=manifest, policy=policy, generated=generated)
    outputs, primary_url = apply_links(outputs, bundle_path=bundle_path, policy=policy)
    return Publication(
        pipeline_id=pipeline_id,
        destination_id=destination_id,
        manifest=manifest,
        policy=policy,
        source_bundle_path=source_bundle_path,
        bundle_path=bundle_path,
        outputs=tuple(outputs),
        primary_url=primary_url,
        force=force,
        republish=republish,
        source_content=source_content,
    )


def current_owner_records(status: DestinationStatus, scope: OwnerScope) -> tuple[SharedOutputRecord, ...]:
    """The outputs recorded for ``scope``: its shared-root records, or a same-scope single-owner
    state's outputs projected with that state's source identity (the migration case)."""
    if status.shared_root is not None:
        return tuple(o for o in status.shared_root.outputs if o.scope == scope)
    if status.state is not None and status.state.scope == scope:
        return project_single_owner_outputs(status.state)
    return ()


class _Draft(msgspec.Struct):
    """The plan's variable fields while :func:`decide` works (never leaves this module)."""

    action: Action
    reason: str
    taken_over_outputs: tuple[TakenOverOutput, ...] = ()
    other_owner_outputs: tuple[SharedOutputRecord, ...] = ()
    retained_owner_outputs: tuple[SharedOutputRecord, ...] = ()
    owner_outputs_to_delete: tuple[SharedOutputRecord, ...] = ()
    deletes: tuple[str, ...] = ()
    merge_retention: bool = False
    obstacle: Obstacle | None = None

    def refuse(self, action: Action, obstacle: Obstacle, bundle_path: str) -> None:
        """Refuse with ``action``, recording why as facts (the reason is worded from them)."""
        self.action = action
        self.obstacle = obstacle
        self.reason = obstacle.reason(bundle_path)


def decide(publication: Publication, facts: DestinationFacts) -> Plan | FactRequest:
    """The plan of ``publication`` given ``facts``, or the next fact request (see module doc).

    Deterministic: the same publication and facts give the same answer, and every request it
    returns is answered by a fact about the destination only.
    """
    pub = publication
    has_contents = True
    if not facts.state.present:
        ask = HasAny(pub.bundle_path)
        if not facts.answered(ask):
            return ask
        has_contents = facts.answer(ask)
    status = facts.state.status(has_contents)
    policy, manifest, scope = pub.policy, pub.manifest, pub.scope
    shared = policy.state_mode == StateMode.SHARED_ROOT

    if shared:
        comparison = compare_shared_root_owner(manifest, scope, status)
    else:
        comparison = compare_single_owner(manifest, pub.pipeline_id, pub.destination_id, status)
    recorded = recorded_owner_manifest(status, scope)
    if policy.path_mapping == PathMapping.FIXED:
        comparison = apply_fixed_refinement(comparison, manifest, recorded)

    decision = _takeover_decision(pub, status, comparison, recorded)
    taken_over: tuple[TakenOverOutput, ...] = ()
    if decision is None:
        decision = map_outcome(comparison, policy.transfer, force=pub.force, republish=pub.republish)
    elif decision.action == Action.REPLACE_TAKEOVER and not shared and status.state is not None:
        previous = status.state
        taken_over = tuple(TakenOverOutput(o.path, previous.scope, previous.manifest.id) for o in previous.outputs)
    draft = _Draft(decision.action, decision.reason, taken_over_outputs=taken_over)

    ask = _shared_root(pub, facts, status, draft) if shared else _single_owner(pub, facts, status, draft)
    if ask is not None:
        return ask
    if draft.action == Action.FORCE_REPLACE:
        ask = _force_deletes(pub, facts, draft)
        if ask is not None:
            return ask
    return Plan(
        pipeline_id=pub.pipeline_id,
        destination_id=pub.destination_id,
        bundle_path=pub.bundle_path,
        source_bundle_path=pub.source_bundle_path,
        manifest=manifest,
        action=draft.action,
        reason=draft.reason,
        state_mode=policy.state_mode,
        reconciliation_mode=policy.reconciliation_mode,
        owner_scope=scope,
        comparison=comparison,
        outputs=pub.outputs,
        primary_url=pub.primary_url,
        existing_state=status.state,
        existing_shared_root=status.shared_root,
        state_revision=facts.state.revision,
        other_owner_outputs=draft.other_owner_outputs,
        retained_owner_outputs=draft.retained_owner_outputs,
        owner_outputs_to_delete=draft.owner_outputs_to_delete,
        taken_over_outputs=draft.taken_over_outputs,
        deletes=draft.deletes,
        merge_retention=draft.merge_retention,
        obstacle=draft.obstacle,
        source_content=pub.source_content,
    )


def _takeover_decision(
    pub: Publication, status: DestinationStatus, comparison: Comparison, recorded: Manifest | None
) -> Decision | None:
    """Takeover on valid parsed state (§6.2–6.4(b)).

    ``None`` when takeover does not apply (the action table maps the comparison), the
    ``replace_takeover`` decision, or, when the ordering guard stops a permitted takeover, the
    table's decision for the guard's comparison.
    """
    policy, manifest = pub.policy, pub.manifest
    if comparison.outcome not in TAKEOVER_OUTCOMES[policy.state_mode]:
        return None
    if policy.state_mode == StateMode.SINGLE_OWNER:
        existing = status.state
        if existing is None:
            return None
        recorded_pipeline_id, recorded_manifest = existing.pipeline_id, existing.manifest
    else:
        if recorded is None:
            return None
        # the current owner's own record (§6.4(b)): its pipeline is the current one
        recorded_pipeline_id, recorded_manifest = pub.pipeline_id, recorded
    permitted = takeover_permitted(
        policy.takeover_mode,
        recorded_pipeline_id=recorded_pipeline_id,
        recorded_source_id=recorded_manifest.id,
        pipeline_id=pub.pipeline_id,
        source_id=manifest.id,
    )
    if not permitted:
        return None
    guard = ordering_guard(recorded_manifest, manifest)
    if guard is None:
        return Decision(Action.REPLACE_TAKEOVER, takeover_reason(policy.takeover_mode, comparison.reason))
    return map_outcome(guard, policy.transfer, force=pub.force, republish=pub.republish)


def _collision(
    pub: Publication, facts: DestinationFacts, managed: set[str] | frozenset[str]
) -> FirstExisting | str | None:
    """The first planned path not in ``managed`` that exists (C1), ``None``, or the request."""
    ask = FirstExisting(pub.bundle_path, tuple(o.path for o in pub.outputs if o.path not in managed))
    if not ask.paths:
        return None
    if not facts.answered(ask):
        return ask
    return facts.answer(ask)


def _single_owner(
    pub: Publication, facts: DestinationFacts, status: DestinationStatus, draft: _Draft
) -> FactRequest | None:
    existing = status.state
    if draft.action not in (Action.REPLACE_OLDER, Action.REPLACE_TAKEOVER) or existing is None:
        return None
    merge = pub.policy.reconciliation_mode == ReconciliationMode.MERGE
    if draft.action == Action.REPLACE_TAKEOVER:
        draft.merge_retention = merge and existing.manifest.id == pub.manifest.id
    else:
        draft.merge_retention = merge
    if draft.merge_retention:
        found = _collision(pub, facts, set(map(_PATH, existing.outputs)))
        if isinstance(found, FirstExisting):
            return found
        if found is not None:
            draft.refuse(Action.FAIL_UNMANAGED, Obstacle(Blocker.UNMANAGED_PATH, found), pub.bundle_path)
        return None
    # replace semantics: the bundle path may hold nothing but recorded outputs and reserved names
    ask = ListFiles(pub.bundle_path, limit=len(existing.outputs) + REPLACE_CHECK_SLACK)
    if not facts.answered(ask):
        return ask
    recorded = set(map(_PATH, existing.outputs))
    for relative in facts.answer(ask).paths:
        if relative not in recorded:
            draft.refuse(Action.FAIL_UNMANAGED, Obstacle(Blocker.UNMANAGED_CONTENT, relative), pub.bundle_path)
            break
    return None


def _shared_root(
    pub: Publication, facts: DestinationFacts, status: DestinationStatus, draft: _Draft
) -> FactRequest | None:
    scope = pub.scope
    shared_root = status.shared_root
    others = tuple(o for o in shared_root.outputs if o.scope != scope) if shared_root is not None else ()
    if not draft.action.executable:
        draft.other_owner_outputs = others
        return None
    if draft.action == Action.FORCE_REPLACE:
        return None
    mode = pub.policy.takeover_mode
    manifest = pub.manifest
    owner_of = {o.path: o for o in shared_root.outputs} if shared_root is not None else {}

    # (a) ownership, with path takeover (§4.5 step 3a, §6.4(a))
    taken: list[TakenOverOutput] = []
    for output in pub.outputs:
        record = owner_of.get(output.path)
        if record is None or record.scope == scope:
            continue
        owner = record.scope
        permitted = takeover_permitted(
            mode,
            recorded_pipeline_id=owner.pipeline_id,
            recorded_source_id=record.source_id,
            pipeline_id=pub.pipeline_id,
            source_id=manifest.id,
        )
        if not permitted:
            draft.refuse(Action.FAIL_CONFLICT, Obstacle(Blocker.OWNED_PATH, output.path, owner), pub.bundle_path)
            return None
        if not source_not_newer(record.source_created, manifest):
            obstacle = Obstacle(Blocker.OWNED_PATH, output.path, owner, source_newer=True)
            draft.refuse(Action.FAIL_CONFLICT, obstacle, pub.bundle_path)
            return None
        taken.append(TakenOverOutput(output.path, owner, record.source_id))

    # (b) unmanaged collisions (§4.5 step 3b)
    owned = current_owner_records(status, scope)
    managed = set(owner_of) if shared_root is not None else {o.path for o in owned}
    found = _collision(pub, facts, managed)
    if isinstance(found, FirstExisting):
        return found
    if found is not None:
        draft.refuse(Action.FAIL_UNMANAGED, Obstacle(Blocker.UNMANAGED_PATH, found), pub.bundle_path)
        return None

    if taken:
        if draft.action != Action.REPLACE_TAKEOVER:
            first = Obstacle(Blocker.OWNED_PATH, taken[0].path, taken[0].previous_owner)
            draft.reason = takeover_reason(mode, first.reason(pub.bundle_path))
        draft.action = Action.REPLACE_TAKEOVER
        draft.taken_over_outputs = tuple(taken)
    taken_paths = {t.path for t in taken}
    draft.other_owner_outputs = tuple(o for o in others if o.path not in taken_paths)

    # (c) partitions (§4.5 step 3c, §6.6)
    planned = set(map(_PATH, pub.outputs))
    retained: list[SharedOutputRecord] = []
    to_delete: list[SharedOutputRecord] = []
    merge = pub.policy.reconciliation_mode == ReconciliationMode.MERGE
    for record in owned:
        if record.path in planned:
            continue
        if draft.action == Action.REPLACE_OLDER:
            (retained if merge else to_delete).append(record)
        elif draft.action == Action.REPLACE_TAKEOVER:
            if merge and record.source_id == manifest.id:
                retained.append(record)
            else:
                to_delete.append(record)
    draft.retained_owner_outputs = tuple(retained)
    draft.owner_outputs_to_delete = tuple(to_delete)
    return None


def _force_deletes(pub: Publication, facts: DestinationFacts, draft: _Draft) -> ListFiles | None:
    """Everything under the bundle path a forced replacement will remove (resolutions B3)."""
    ask = ListFiles(pub.bundle_path, limit=FORCE_WALK_LIMIT, include_reserved=True)
    if not facts.answered(ask):
        return ask
    listing = facts.answer(ask)
    if listing.truncated:
        raise PlanError(
            f"destination bundle path {lp.display_path(pub.bundle_path)} holds more than "
            f"{FORCE_WALK_LIMIT} entries; forced replacement refuses to run"
        )
    planned = set(map(_PATH, pub.outputs))
    deletes = []
    for relative in listing.paths:
        # nested bundles' state goes with their outputs; locks, journals, temporaries and
        # backups belong to other writers (or to this one) and stay
        nested_state = lp.basename(relative) == lp.STATE_FILE_NAME and relative != lp.STATE_FILE_NAME
        if lp.is_reserved_path(relative) and not nested_state:
            continue
        if relative not in planned:
            deletes.append(relative)
    draft.deletes = tuple(deletes)
    return None


__all__ = [
    "FORCE_WALK_LIMIT",
    "REPLACE_CHECK_SLACK",
    "Publication",
    "check_request",
    "current_owner_records",
    "decide",
    "prepare",
]

"""Build the state a write action leaves behind (core-semantics §5.2 step 5, §5.5 step 4, §5.9, §6.6).

Pure functions of the plan and one ``now``; the record-level rules live in
:mod:`distributor_core.state.outputs`.
"""

from __future__ import annotations

from datetime import datetime

import msgspec

from distributor_core.compare import DestinationStatus
from distributor_core.plan import current_owner_records
from distributor_core.plan.model import Action, Plan
from distributor_core.plan.modes import ReconciliationMode, StateMode
from distributor_core.state import (
    OwnerRecord,
    SharedRootState,
    SingleOwnerState,
    merge_output_records,
    merge_owner_outputs,
    project_outputs,
    project_shared_outputs,
    replace_owner_outputs,
    shared_root_migration_base,
)


def build_single_owner_state(plan: Plan, *, now: datetime, version: str) -> SingleOwnerState:
    existing = plan.existing_state
    previous = existing.outputs if existing is not None else ()
    projected = project_outputs(plan.outputs, previous, now=now)
    retained = previous if plan.merge_retention else ()
    return SingleOwnerState(
        pipeline_id=plan.pipeline_id,
        destination_id=plan.destination_id,
        published_at=now,
        created_at=existing.created_at if existing is not None else now,
        updated_at=now,
        reconciliation_mode=plan.reconciliation_mode,
        manifest=plan.manifest,
        outputs=merge_output_records(retained, projected),
        primary_url=plan.primary_url,
        distributor_version=version,
    )


def _base(plan: Plan, *, now: datetime, version: str) -> SharedRootState:
    if plan.action != Action.FORCE_REPLACE:
        if plan.existing_shared_root is not None:
            return msgspec.structs.replace(plan.existing_shared_root, distributor_version=version, updated_at=now)
        if plan.existing_state is not None:
            return shared_root_migration_base(plan.existing_state, now=now, distributor_version=version)
    return SharedRootState(created_at=now, updated_at=now, owners=(), outputs=(), distributor_version=version)


def build_shared_root_state(plan: Plan, *, now: datetime, version: str) -> SharedRootState:
    scope = plan.owner_scope
    status = DestinationStatus(
        state=plan.existing_state, shared_root=plan.existing_shared_root, state_error=None, has_contents=True
    )
    planned = project_shared_outputs(
        plan.outputs, current_owner_records(status, scope), scope=scope, manifest=plan.manifest, now=now
    )
    owner = OwnerRecord(
        pipeline_id=scope.pipeline_id,
        destination_id=scope.destination_id,
        reconciliation_mode=plan.reconciliation_mode,
        manifest=plan.manifest,
        primary_url=plan.primary_url,
    )
    base = _base(plan, now=now, version=version)
    taken_over = {t.path for t in plan.taken_over_outputs}
    merge = plan.reconciliation_mode == ReconciliationMode.MERGE and plan.action in (
        Action.REPLACE_OLDER,
        Action.REPLACE_TAKEOVER,
    )
    if taken_over or (merge and plan.action == Action.REPLACE_TAKEOVER):
        keep = {r.path for r in plan.retained_owner_outputs} | {o.path for o in plan.outputs}
        base = msgspec.structs.replace(
            base,
            outputs=tuple(
                r
                for r in base.outputs
                if not (r.scope != scope and r.path in taken_over) and (r.scope != scope or r.path in keep)
            ),
        )
    combined = merge_owner_outputs(base, owner, planned) if merge else replace_owner_outputs(base, owner, planned)
    return msgspec.structs.replace(combined, updated_at=now, distributor_version=version)


def build_state(plan: Plan, *, now: datetime, version: str) -> SingleOwnerState | SharedRootState:
    if plan.state_mode == StateMode.SHARED_ROOT:
        return build_shared_root_state(plan, now=now, version=version)
    return build_single_owner_state(plan, now=now, version=version)

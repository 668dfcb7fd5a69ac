"""Prune planning (core-semantics §7.2): pure, never mutates state or touches storage."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import msgspec

from distributor_core.state.errors import StateError, StateOwnerError
from distributor_core.state.model import OwnerScope, SharedRootState, SingleOwnerState, StateDocument
from distributor_core.timefmt import format_seconds, to_utc


class PrunePolicy(msgspec.Struct, frozen=True):
    """A destination's ``retention.prune`` block (config validation happens elsewhere)."""

    enabled: bool = False
    older_than: timedelta | None = None
    keep_latest: int | None = None


class PruneCandidate(msgspec.Struct, frozen=True):
    """A managed output considered for pruning; ``owner`` is set for shared-root outputs only."""

    path: str
    updated_at: datetime
    owner: OwnerScope | None = None

    def to_dict(self) -> dict[str, Any]:
        record: dict[str, Any] = {"path": self.path, "updated_at": format_seconds(self.updated_at)}
        if self.owner is not None:
            record["owner"] = self.owner.to_dict()
        return record


class PrunePlan(msgspec.Struct, frozen=True):
    pipeline_id: str
    destination_id: str
    owner_scope: OwnerScope
    enabled: bool
    checked_count: int
    #: oldest first (``updated_at`` ascending, ties by path)
    pruned_outputs: tuple[PruneCandidate, ...]
    #: newest first (``updated_at`` descending, ties by path)
    preserved_outputs: tuple[PruneCandidate, ...]

    @property
    def pruned_paths(self) -> tuple[str, ...]:
        return tuple(candidate.path for candidate in self.pruned_outputs)

    def to_dict(self) -> dict[str, Any]:
        return {
            "pipeline_id": self.pipeline_id,
            "destination_id": self.destination_id,
            "owner_scope": self.owner_scope.to_dict(),
            "enabled": self.enabled,
            "checked_count": self.checked_count,
            "planned_outputs": [candidate.to_dict() for candidate in self.pruned_outputs],
            "preserved_outputs": [candidate.to_dict() for candidate in self.preserved_outputs],
        }


def check_owner(state: SingleOwnerState, scope: OwnerScope) -> None:
    """Single-owner state must belong to ``scope``: ``state owner is %s/%s, not %s/%s``."""
    if state.scope != scope:
        raise StateOwnerError(state.scope, scope)


def prune_candidates(doc: StateDocument | None, scope: OwnerScope) -> tuple[PruneCandidate, ...]:
    """Single-owner: every output, after the owner check. Shared-root: only ``scope``'s outputs,
    each carrying that owner (an absent owner gives no candidates); other owners never appear."""
    if isinstance(doc, SingleOwnerState):
        check_owner(doc, scope)
        return tuple(PruneCandidate(output.path, output.updated_at) for output in doc.outputs)
    if isinstance(doc, SharedRootState):
        return tuple(
            PruneCandidate(output.path, output.updated_at, output.scope)
            for output in doc.outputs
            if output.scope == scope
        )
    raise StateError("destination state document is empty")


def _newest_first(candidates: Sequence[PruneCandidate]) -> list[PruneCandidate]:
    """``updated_at`` descending, ties by path ascending (two stable sorts)."""
    by_path = sorted(candidates, key=lambda candidate: candidate.path)
    return sorted(by_path, key=lambda candidate: to_utc(candidate.updated_at), reverse=True)


def _oldest_first(candidates: Sequence[PruneCandidate]) -> list[PruneCandidate]:
    """``updated_at`` ascending, ties by path ascending."""
    return sorted(candidates, key=lambda candidate: (to_utc(candidate.updated_at), candidate.path))


def select_prune(
    candidates: Sequence[PruneCandidate], policy: PrunePolicy, *, now: datetime
) -> tuple[tuple[PruneCandidate, ...], tuple[PruneCandidate, ...]]:
    """Split candidates into ``(pruned oldest first, preserved newest first)`` (§7.2 steps 4–9).

    ``keep_latest`` preserves the newest K (negative counts as 0) before ``older_than`` is
    applied; with only ``keep_latest`` every other candidate is pruned; with ``older_than`` a
    candidate is pruned when its ``updated_at`` is strictly before ``now - older_than``; with
    neither everything is preserved. ``policy.enabled`` is not consulted here.
    """
    ordered = _newest_first(candidates)
    if policy.older_than is None and policy.keep_latest is None:
        return (), tuple(ordered)
    keep = 0
    if policy.keep_latest is not None:
        keep = min(max(policy.keep_latest, 0), len(ordered))
    cutoff = to_utc(now) - policy.older_than if policy.older_than is not None else None
    pruned: list[PruneCandidate] = []
    preserved: list[PruneCandidate] = list(ordered[:keep])
    for candidate in ordered[keep:]:
        if cutoff is None or to_utc(candidate.updated_at) < cutoff:
            pruned.append(candidate)
        else:
            preserved.append(candidate)
    return tuple(_oldest_first(pruned)), tuple(_newest_first(preserved))


def plan_prune(
    doc: StateDocument | None,
    policy: PrunePolicy,
    *,
    pipeline_id: str,
    destination_id: str,
    now: datetime,
) -> PrunePlan:
    """Plan a prune of ``pipeline_id``/``destination_id``'s managed outputs (§7.2).

    A disabled policy plans nothing and performs no owner check (Go behaviour). Otherwise the
    candidates of :func:`prune_candidates` are split by :func:`select_prune`.
    """
    scope = OwnerScope(pipeline_id, destination_id)
    if not policy.enabled:
        return PrunePlan(pipeline_id, destination_id, scope, False, 0, (), ())
    candidates = prune_candidates(doc, scope)
    pruned, preserved = select_prune(candidates, policy, now=now)
    return PrunePlan(pipeline_id, destination_id, scope, True, len(candidates), pruned, preserved)


__all__ = [
    "PruneCandidate",
    "PrunePlan",
    "PrunePolicy",
    "check_owner",
    "plan_prune",
    "prune_candidates",
    "select_prune",
]

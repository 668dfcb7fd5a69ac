"""Outcome → action mapping (core-semantics §4.3) and the takeover policy (§6).

Pure functions over comparison results, state records and policy values.
"""

from __future__ import annotations

from dataclasses import dataclass

from distributor_core.bundle import Manifest, manifests_equal
from distributor_core.compare import Comparison, Outcome
from distributor_core.plan.model import Action, TransferPolicy
from distributor_core.timefmt import truncate_seconds

CONFLICT_OUTCOMES = frozenset(
    {
        Outcome.INVALID_STATE,
        Outcome.IDENTITY_MISMATCH,
        Outcome.DIFFERENT_SOURCE_CONFLICT,
        Outcome.SAME_CREATED_CONFLICT,
    }
)

REASON_NEWER = "destination source is newer than source"
REASON_DIFFERENT_ID = "destination source id differs from source"
REASON_SAME_CREATED = "destination source has same id and created time but different digest"
REASON_REPUBLISH = "republish of same source requested"


@dataclass(frozen=True, slots=True)
class Decision:
    action: Action
    reason: str


def map_outcome(comparison: Comparison, transfer: TransferPolicy, *, force: bool, republish: bool) -> Decision:
    """The binding table of core-semantics §4.3 (plus ``--republish``, resolutions B3)."""
    outcome, reason = comparison.outcome, comparison.reason
    if outcome == Outcome.DESTINATION_ABSENT:
        return Decision(Action.PUBLISH_NEW, reason)
    if outcome == Outcome.DESTINATION_UNMANAGED:
        return Decision(Action.FORCE_REPLACE if force else Action.FAIL_UNMANAGED, reason)
    if outcome == Outcome.SAME_SOURCE:
        if republish:
            return Decision(Action.REPLACE_OLDER, REASON_REPUBLISH)
        if transfer.on_destination_same == "fail":
            return Decision(
                Action.FAIL_CONFLICT,
                "destination already matches source and transfer.on_destination_same is fail",
            )
        return Decision(Action.SKIP_SAME, reason)
    if outcome == Outcome.DESTINATION_OLDER:
        if transfer.on_destination_older == "fail":
            return Decision(Action.FAIL_CONFLICT, "destination is older and transfer.on_destination_older is fail")
        return Decision(Action.REPLACE_OLDER, reason)
    if outcome == Outcome.DESTINATION_NEWER:
        if transfer.on_destination_newer == "fail":
            return Decision(Action.FAIL_CONFLICT, "destination is newer and transfer.on_destination_newer is fail")
        if transfer.on_destination_newer == "replace":
            if force:
                return Decision(Action.FORCE_REPLACE, reason)
            return Decision(Action.FAIL_CONFLICT, "destination is newer and replacement requires --force")
        return Decision(Action.SKIP_DESTINATION_NEWER, reason)
    if outcome in CONFLICT_OUTCOMES:
        if transfer.on_conflict == "replace":
            if force:
                return Decision(Action.FORCE_REPLACE, reason)
            return Decision(Action.FAIL_CONFLICT, f"{reason}; replacement requires --force")
        return Decision(Action.FAIL_CONFLICT, reason)
    raise ValueError(f"unknown comparison outcome {outcome!r}")


def single_owner_takeover_permitted(
    mode: str, *, recorded_pipeline_id: str, recorded_source_id: str, pipeline_id: str, source_id: str
) -> bool:
    """core-semantics §6.3 permission for single-owner state."""
    if mode == "same_pipeline":
        return recorded_pipeline_id == pipeline_id
    if mode == "same_source":
        return recorded_source_id == source_id
    return mode == "any_managed"


def owner_record_takeover_permitted(mode: str) -> bool:
    """core-semantics §6.4(b): the current owner's own record with a different source id."""
    return mode in ("same_pipeline", "any_managed")


def path_takeover_permitted(mode: str, *, owner_pipeline_id: str, record_source_id: str, pipeline_id: str,
                            source_id: str) -> bool:
    """core-semantics §6.4(a): a planned path recorded under another shared-root owner."""
    if mode == "same_pipeline":
        return owner_pipeline_id == pipeline_id
    if mode == "same_source":
        return record_source_id == source_id
    return mode == "any_managed"


def ordering_guard(recorded: Manifest, source: Manifest) -> Comparison | None:
    """The ordering guard of core-semantics §6.3.

    Returns ``None`` when the takeover may proceed, otherwise the comparison to map instead
    (``destination_newer`` or a conflict).
    """
    if manifests_equal(recorded, source) or recorded.created < source.created:
        return None
    if recorded.created > source.created:
        return Comparison(Outcome.DESTINATION_NEWER, REASON_NEWER)
    if recorded.id != source.id:
        return Comparison(Outcome.DIFFERENT_SOURCE_CONFLICT, REASON_DIFFERENT_ID)
    return Comparison(Outcome.SAME_CREATED_CONFLICT, REASON_SAME_CREATED)


def takeover_reason(mode: str, original_reason: str) -> str:
    return f"takeover permitted by takeover.mode {mode}: {original_reason}"


def source_not_newer(record_source_created, source: Manifest) -> bool:
    """Path-takeover guard: the colliding record's source is not later than the current source
    (whole-second precision, since ``source_created`` is stored in seconds)."""
    return truncate_seconds(record_source_created) <= truncate_seconds(source.created)

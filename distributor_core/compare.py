"""The pure comparison of a source manifest with destination status (core-semantics §3).

Comparison never touches storage and never chooses an action; planning maps the outcome to an
action. ``DestinationStatus`` is what inspecting a destination bundle path produced.
"""

from __future__ import annotations

from enum import StrEnum

import msgspec

from distributor_core.bundle import Manifest, manifests_equal
from distributor_core.state import (
    OwnerScope,
    SharedRootState,
    SingleOwnerState,
    StateError,
    go_quote,
    validate_shared_root,
    validate_single_owner,
)


class Outcome(StrEnum):
    DESTINATION_ABSENT = "destination_absent"
    DESTINATION_UNMANAGED = "destination_unmanaged"
    INVALID_STATE = "invalid_state"
    IDENTITY_MISMATCH = "identity_mismatch"
    SAME_SOURCE = "same_source"
    DESTINATION_OLDER = "destination_older"
    DESTINATION_NEWER = "destination_newer"
    SAME_CREATED_CONFLICT = "same_created_conflict"
    DIFFERENT_SOURCE_CONFLICT = "different_source_conflict"


class Comparison(msgspec.Struct, frozen=True):
    outcome: Outcome
    reason: str


class DestinationStatus(msgspec.Struct, frozen=True):
    """What inspecting ``<bundle path>/.distributor.json`` found (§3.1).

    At most one of ``state`` / ``shared_root`` is set; ``state_error`` holds the parse or
    validation error text of an unusable state file; ``has_contents`` is true when a state file
    was read, or when the bundle path holds anything else. ``validated`` says the document has
    passed full validation already (the parser validates what it returns), so comparison need
    not run it again; a status built from a hand-made document leaves it false.
    """

    state: SingleOwnerState | None = None
    shared_root: SharedRootState | None = None
    state_error: str | None = None
    has_contents: bool = False
    validated: bool = False


UNMANAGED_REASON = "destination has content but no distributor state"
ABSENT_REASON = "destination state is absent"
SHARED_ROOT_MODE_MISMATCH_REASON = 'destination state mode "shared_root" does not match "single_owner"'


def compare_manifests(source: Manifest, recorded: Manifest) -> Comparison:
    """Compare the source manifest with the destination's recorded manifest (§3.3)."""
    if manifests_equal(source, recorded):
        return Comparison(Outcome.SAME_SOURCE, "destination source manifest matches source")
    if recorded.id != source.id:
        return Comparison(Outcome.DIFFERENT_SOURCE_CONFLICT, "destination source id differs from source")
    if recorded.created < source.created:
        return Comparison(Outcome.DESTINATION_OLDER, "destination source is older than source")
    if recorded.created > source.created:
        return Comparison(Outcome.DESTINATION_NEWER, "destination source is newer than source")
    if recorded.digest != source.digest:
        return Comparison(
            Outcome.SAME_CREATED_CONFLICT,
            "destination source has same id and created time but different digest",
        )
    return Comparison(
        Outcome.INVALID_STATE,
        "destination source differs from source without a supported comparison outcome",
    )


def _compare_single_owner_state(
    source: Manifest, scope: OwnerScope, state: SingleOwnerState, *, validated: bool
) -> Comparison:
    if not validated:
        try:
            validate_single_owner(state)
        except StateError as exc:
            return Comparison(Outcome.INVALID_STATE, str(exc))
    if state.pipeline_id != scope.pipeline_id:
        return Comparison(
            Outcome.IDENTITY_MISMATCH,
            f"pipeline id {go_quote(state.pipeline_id)} does not match {go_quote(scope.pipeline_id)}",
        )
    if state.destination_id != scope.destination_id:
        recorded, configured = go_quote(state.destination_id), go_quote(scope.destination_id)
        return Comparison(Outcome.IDENTITY_MISMATCH, f"destination id {recorded} does not match {configured}")
    return compare_manifests(source, state.manifest)


def _no_state(status: DestinationStatus) -> Comparison:
    if status.has_contents:
        return Comparison(Outcome.DESTINATION_UNMANAGED, UNMANAGED_REASON)
    return Comparison(Outcome.DESTINATION_ABSENT, ABSENT_REASON)


def compare_single_owner(
    source: Manifest, pipeline_id: str, destination_id: str, status: DestinationStatus
) -> Comparison:
    """Comparison for a ``state.mode: single_owner`` destination (§3.4).

    Shared-root state found by a single-owner destination is an explicit ``identity_mismatch``
    (a decision; Go treats it as unmanaged content).
    """
    if status.state_error is not None:
        return Comparison(Outcome.INVALID_STATE, status.state_error)
    if status.shared_root is not None:
        return Comparison(Outcome.IDENTITY_MISMATCH, SHARED_ROOT_MODE_MISMATCH_REASON)
    if status.state is None:
        return _no_state(status)
    return _compare_single_owner_state(
        source, OwnerScope(pipeline_id, destination_id), status.state, validated=status.validated
    )


def compare_shared_root_owner(source: Manifest, scope: OwnerScope, status: DestinationStatus) -> Comparison:
    """Comparison for a ``state.mode: shared_root`` destination, scoped to the current owner (§3.5).

    Shared-root state: an absent owner record is ``destination_absent`` for that owner; otherwise
    the owner's recorded manifest is compared. Single-owner state of the same scope (migration
    case) is compared like §3.4; of another scope it is an ``identity_mismatch``.
    """
    if status.state_error is not None:
        return Comparison(Outcome.INVALID_STATE, status.state_error)
    if status.shared_root is not None:
        if not status.validated:
            try:
                validate_shared_root(status.shared_root)
            except StateError as exc:
                return Comparison(Outcome.INVALID_STATE, str(exc))
        owner = status.shared_root.owner(scope)
        if owner is None:
            return Comparison(Outcome.DESTINATION_ABSENT, f"destination owner {scope} is absent")
        return compare_manifests(source, owner.manifest)
    if status.state is not None:
        return _compare_single_owner_state(source, scope, status.state, validated=status.validated)
    return _no_state(status)


def recorded_owner_manifest(status: DestinationStatus, scope: OwnerScope) -> Manifest | None:
    """The manifest recorded for ``scope``: its shared-root owner record, or a single-owner state
    of the same pipeline and destination; ``None`` otherwise (input for §3.6)."""
    if status.state_error is not None:
        return None
    if status.shared_root is not None:
        owner = status.shared_root.owner(scope)
        return owner.manifest if owner is not None else None
    if status.state is not None and status.state.scope == scope:
        return status.state.manifest
    return None


def apply_fixed_refinement(comparison: Comparison, source: Manifest, recorded: Manifest | None) -> Comparison:
    """Fixed path mapping refinement (§3.6), for ``path_mapping.mode: fixed`` destinations only.

    A ``different_source_conflict`` against the current owner's recorded manifest becomes
    ``destination_older`` / ``destination_newer`` by ``created``; equal instants keep the conflict.
    """
    if comparison.outcome != Outcome.DIFFERENT_SOURCE_CONFLICT or recorded is None:
        return comparison
    if recorded.created < source.created:
        return Comparison(Outcome.DESTINATION_OLDER, "fixed destination source is older than selected source")
    if recorded.created > source.created:
        return Comparison(Outcome.DESTINATION_NEWER, "fixed destination source is newer than selected source")
    return comparison

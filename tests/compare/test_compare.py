"""The pure comparison (core-semantics §3.7; Go internal/state/compare_test.go, shared_root_test.go)."""

from __future__ import annotations

from datetime import timedelta, timezone

import msgspec
import pytest

from distributor_core.bundle import ManifestFile, bundle_digest
from distributor_core.compare import (
    Comparison,
    DestinationStatus,
    Outcome,
    apply_fixed_refinement,
    compare_manifests,
    compare_shared_root_owner,
    compare_single_owner,
    recorded_owner_manifest,
)
from distributor_core.state import OwnerScope, StateError, parse_state_document
from tests.state.fixtures import (
    ARCHIVE,
    HTML,
    MANIFEST,
    OTHER_DIGEST,
    REPORT,
    SHARED_ROOT_TEXT,
    SINGLE_OWNER_TEXT,
    hours,
    make_manifest,
    shared_root,
    single_owner,
)

SOURCE = MANIFEST


def single(**changes: object) -> DestinationStatus:
    return DestinationStatus(state=single_owner(**changes), has_contents=True)


def compare(source: object, status: DestinationStatus) -> Comparison:
    return compare_single_owner(source, "reports", "archive", status)  # type: ignore[arg-type]


def test_outcome_values() -> None:
    assert [outcome.value for outcome in Outcome] == [
        "destination_absent",
        "destination_unmanaged",
        "invalid_state",
        "identity_mismatch",
        "same_source",
        "destination_older",
        "destination_newer",
        "same_created_conflict",
        "different_source_conflict",
    ]
    assert Outcome.SAME_SOURCE == "same_source"


class TestCompareSingleOwner:
    def test_absent(self) -> None:
        assert compare(SOURCE, DestinationStatus()) == Comparison(
            Outcome.DESTINATION_ABSENT, "destination state is absent"
        )

    def test_unmanaged(self) -> None:
        assert compare(SOURCE, DestinationStatus(has_contents=True)) == Comparison(
            Outcome.DESTINATION_UNMANAGED, "destination has content but no distributor state"
        )

    def test_invalid_state_reason_is_the_parse_error(self) -> None:
        with pytest.raises(StateError) as info:
            parse_state_document(b"{not json")
        status = DestinationStatus(state_error=str(info.value), has_contents=True)
        result = compare(SOURCE, status)
        assert result.outcome == Outcome.INVALID_STATE
        assert result.reason == str(info.value)
        assert result.reason.startswith("parse distributor state: ")

    def test_state_error_wins_over_everything(self) -> None:
        status = DestinationStatus(state=single_owner(), shared_root=None, state_error="boom", has_contents=True)
        assert compare(SOURCE, status) == Comparison(Outcome.INVALID_STATE, "boom")

    def test_invalid_state_value(self) -> None:
        result = compare(SOURCE, single(reconciliation_mode="append"))
        assert result == Comparison(Outcome.INVALID_STATE, "state reconciliation.mode must be replace or merge")

    def test_pipeline_mismatch(self) -> None:
        assert compare(SOURCE, single(pipeline_id="other")) == Comparison(
            Outcome.IDENTITY_MISMATCH, 'pipeline id "other" does not match "reports"'
        )

    def test_destination_mismatch(self) -> None:
        assert compare(SOURCE, single(destination_id="other")) == Comparison(
            Outcome.IDENTITY_MISMATCH, 'destination id "other" does not match "archive"'
        )

    def test_same_source(self) -> None:
        assert compare(SOURCE, single()) == Comparison(
            Outcome.SAME_SOURCE, "destination source manifest matches source"
        )

    def test_same_source_across_offsets(self) -> None:
        shifted = msgspec.structs.replace(SOURCE, created=SOURCE.created.astimezone(timezone(timedelta(hours=5))))
        assert compare(shifted, single()).outcome == Outcome.SAME_SOURCE

    def test_different_id(self) -> None:
        source = make_manifest("reports.weekly")
        assert compare(source, single()) == Comparison(
            Outcome.DIFFERENT_SOURCE_CONFLICT, "destination source id differs from source"
        )

    def test_destination_older(self) -> None:
        source = make_manifest(created=SOURCE.created + hours(1))
        assert compare(source, single()) == Comparison(
            Outcome.DESTINATION_OLDER, "destination source is older than source"
        )

    def test_destination_newer(self) -> None:
        source = make_manifest(created=SOURCE.created - hours(1))
        assert compare(source, single()) == Comparison(
            Outcome.DESTINATION_NEWER, "destination source is newer than source"
        )

    def test_same_created_different_files(self) -> None:
        source = make_manifest(files=(REPORT,))
        assert compare(source, single()) == Comparison(
            Outcome.SAME_CREATED_CONFLICT, "destination source has same id and created time but different digest"
        )

    def test_shared_root_state_is_an_identity_mismatch(self) -> None:
        status = DestinationStatus(shared_root=shared_root(), has_contents=True)
        assert compare(SOURCE, status) == Comparison(
            Outcome.IDENTITY_MISMATCH, 'destination state mode "shared_root" does not match "single_owner"'
        )

    def test_parsed_documents(self) -> None:
        state = parse_state_document(SINGLE_OWNER_TEXT.encode())
        assert compare(SOURCE, DestinationStatus(state=state, has_contents=True)).outcome == Outcome.SAME_SOURCE  # type: ignore[arg-type]


class TestCompareManifests:
    def test_equal_files_but_different_digest_is_not_possible_for_valid_manifests(self) -> None:
        # same id, created and digest but different file list can only come from an invalid
        # manifest; the comparison then has no supported outcome.
        files = (ManifestFile("other.txt", OTHER_DIGEST, 1),)
        recorded = msgspec.structs.replace(SOURCE, files=files)
        assert compare_manifests(SOURCE, recorded) == Comparison(
            Outcome.INVALID_STATE, "destination source differs from source without a supported comparison outcome"
        )

    def test_id_is_checked_before_created(self) -> None:
        recorded = make_manifest("other.id", created=SOURCE.created - hours(5))
        assert compare_manifests(SOURCE, recorded).outcome == Outcome.DIFFERENT_SOURCE_CONFLICT

    def test_created_is_checked_before_digest(self) -> None:
        recorded = make_manifest(created=SOURCE.created + hours(1), files=(REPORT,))
        assert recorded.digest == bundle_digest((REPORT,))
        assert compare_manifests(SOURCE, recorded).outcome == Outcome.DESTINATION_NEWER


class TestCompareSharedRootOwner:
    def test_scopes_current_owner(self) -> None:
        state = parse_state_document(SHARED_ROOT_TEXT.encode())
        source = make_manifest(created=SOURCE.created + hours(1))
        status = DestinationStatus(shared_root=state, has_contents=True)  # type: ignore[arg-type]
        assert compare_shared_root_owner(source, ARCHIVE, status) == Comparison(
            Outcome.DESTINATION_OLDER, "destination source is older than source"
        )
        assert compare_shared_root_owner(source, OwnerScope("missing", "archive"), status) == Comparison(
            Outcome.DESTINATION_ABSENT, "destination owner missing/archive is absent"
        )

    def test_compares_only_the_current_owners_manifest(self) -> None:
        newer_html = make_manifest(created=SOURCE.created + hours(3))
        base = shared_root()
        owners = (base.owners[0], msgspec.structs.replace(base.owners[1], manifest=newer_html))
        status = DestinationStatus(shared_root=msgspec.structs.replace(base, owners=owners), has_contents=True)
        assert compare_shared_root_owner(SOURCE, ARCHIVE, status).outcome == Outcome.SAME_SOURCE
        assert compare_shared_root_owner(SOURCE, HTML, status).outcome == Outcome.DESTINATION_NEWER

    def test_accepts_matching_single_owner_state(self) -> None:
        state = parse_state_document(SINGLE_OWNER_TEXT.encode())
        source = make_manifest(created=SOURCE.created + hours(1))
        status = DestinationStatus(state=state, has_contents=True)  # type: ignore[arg-type]
        assert compare_shared_root_owner(source, ARCHIVE, status).outcome == Outcome.DESTINATION_OLDER

    def test_unrelated_single_owner_state_is_a_mismatch(self) -> None:
        status = single(pipeline_id="other")
        assert compare_shared_root_owner(SOURCE, ARCHIVE, status) == Comparison(
            Outcome.IDENTITY_MISMATCH, 'pipeline id "other" does not match "reports"'
        )
        assert compare_shared_root_owner(SOURCE, HTML, single()) == Comparison(
            Outcome.IDENTITY_MISMATCH, 'destination id "archive" does not match "html"'
        )

    def test_invalid_shared_root_value(self) -> None:
        base = shared_root()
        status = DestinationStatus(shared_root=msgspec.structs.replace(base, owners=base.owners[:1]), has_contents=True)
        assert compare_shared_root_owner(SOURCE, ARCHIVE, status) == Comparison(
            Outcome.INVALID_STATE, "state outputs[1] references unknown owner reports/html"
        )

    def test_state_error(self) -> None:
        status = DestinationStatus(state_error="state outputs is required", has_contents=True)
        assert compare_shared_root_owner(SOURCE, ARCHIVE, status) == Comparison(
            Outcome.INVALID_STATE, "state outputs is required"
        )

    def test_no_state(self) -> None:
        assert compare_shared_root_owner(SOURCE, ARCHIVE, DestinationStatus(has_contents=True)) == Comparison(
            Outcome.DESTINATION_UNMANAGED, "destination has content but no distributor state"
        )
        assert compare_shared_root_owner(SOURCE, ARCHIVE, DestinationStatus()) == Comparison(
            Outcome.DESTINATION_ABSENT, "destination state is absent"
        )


class TestFixedRefinement:
    def test_single_owner_older_recorded_id(self) -> None:
        recorded = make_manifest("older.source", created=SOURCE.created - hours(1))
        status = single(manifest=recorded)
        comparison = compare(SOURCE, status)
        assert comparison.outcome == Outcome.DIFFERENT_SOURCE_CONFLICT
        refined = apply_fixed_refinement(comparison, SOURCE, recorded_owner_manifest(status, ARCHIVE))
        assert refined == Comparison(
            Outcome.DESTINATION_OLDER, "fixed destination source is older than selected source"
        )

    def test_newer_recorded_source(self) -> None:
        recorded = make_manifest("newer.source", created=SOURCE.created + hours(1))
        comparison = compare(SOURCE, single(manifest=recorded))
        refined = apply_fixed_refinement(comparison, SOURCE, recorded)
        assert refined == Comparison(
            Outcome.DESTINATION_NEWER, "fixed destination source is newer than selected source"
        )

    def test_equal_created_keeps_the_conflict(self) -> None:
        recorded = make_manifest("other.source")
        comparison = compare(SOURCE, single(manifest=recorded))
        assert apply_fixed_refinement(comparison, SOURCE, recorded) == comparison
        assert comparison.outcome == Outcome.DIFFERENT_SOURCE_CONFLICT

    def test_shared_root_owner(self) -> None:
        recorded = make_manifest("older.source", created=SOURCE.created - hours(1))
        base = shared_root()
        owners = (msgspec.structs.replace(base.owners[0], manifest=recorded), base.owners[1])
        status = DestinationStatus(shared_root=msgspec.structs.replace(base, owners=owners), has_contents=True)
        comparison = compare_shared_root_owner(SOURCE, ARCHIVE, status)
        refined = apply_fixed_refinement(comparison, SOURCE, recorded_owner_manifest(status, ARCHIVE))
        assert refined.outcome == Outcome.DESTINATION_OLDER

    def test_without_recorded_manifest_nothing_changes(self) -> None:
        comparison = Comparison(Outcome.DIFFERENT_SOURCE_CONFLICT, "destination source id differs from source")
        assert apply_fixed_refinement(comparison, SOURCE, None) == comparison

    @pytest.mark.parametrize(
        "outcome",
        [o for o in Outcome if o != Outcome.DIFFERENT_SOURCE_CONFLICT],
    )
    def test_other_outcomes_are_untouched(self, outcome: Outcome) -> None:
        comparison = Comparison(outcome, "reason")
        recorded = make_manifest("older.source", created=SOURCE.created - hours(1))
        assert apply_fixed_refinement(comparison, SOURCE, recorded) == comparison


class TestRecordedOwnerManifest:
    def test_cases(self) -> None:
        shared = DestinationStatus(shared_root=shared_root(), has_contents=True)
        assert recorded_owner_manifest(shared, ARCHIVE) == MANIFEST
        assert recorded_owner_manifest(shared, OwnerScope("x", "y")) is None
        assert recorded_owner_manifest(single(), ARCHIVE) == MANIFEST
        assert recorded_owner_manifest(single(), HTML) is None
        assert recorded_owner_manifest(DestinationStatus(), ARCHIVE) is None
        assert recorded_owner_manifest(DestinationStatus(state=single_owner(), state_error="x"), ARCHIVE) is None

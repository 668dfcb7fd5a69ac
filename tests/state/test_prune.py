"""Prune planning (core-semantics §7.2; Go internal/state/prune_test.go and app prune planning cases)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from distributor_core.state import (
    OwnerRecord,
    OwnerScope,
    PruneCandidate,
    PrunePlan,
    PrunePolicy,
    StateError,
    check_owner,
    plan_prune,
    prune_candidates,
    select_prune,
)
from tests.state.fixtures import ARCHIVE, HTML, MANIFEST, hours, output, shared_output, shared_root, single_owner

NOW = datetime(2026, 6, 8, 12, 0, tzinfo=UTC)


def paths(candidates: tuple[PruneCandidate, ...]) -> str:
    return ",".join(candidate.path for candidate in candidates)


def plan(candidates: list[PruneCandidate], **policy: object) -> tuple[str, str]:
    pruned, preserved = select_prune(candidates, PrunePolicy(enabled=True, **policy), now=NOW)  # type: ignore[arg-type]
    return paths(pruned), paths(preserved)


class TestSelectPrune:
    def test_older_than(self) -> None:
        candidates = [PruneCandidate("old.txt", NOW - hours(72)), PruneCandidate("fresh.txt", NOW - hours(24))]
        assert plan(candidates, older_than=hours(48)) == ("old.txt", "fresh.txt")

    def test_keep_latest(self) -> None:
        candidates = [
            PruneCandidate("old.txt", NOW - hours(72)),
            PruneCandidate("new.txt", NOW - hours(1)),
            PruneCandidate("middle.txt", NOW - hours(24)),
        ]
        assert plan(candidates, keep_latest=2) == ("old.txt", "new.txt,middle.txt")

    def test_combined_policy_preserves_latest_before_age_check(self) -> None:
        candidates = [
            PruneCandidate("oldest.txt", NOW - hours(96)),
            PruneCandidate("old.txt", NOW - hours(72)),
            PruneCandidate("fresh.txt", NOW - hours(24)),
        ]
        assert plan(candidates, older_than=hours(48), keep_latest=1) == ("oldest.txt,old.txt", "fresh.txt")

    def test_keep_latest_protects_old_outputs_from_age(self) -> None:
        candidates = [PruneCandidate("a.txt", NOW - hours(100)), PruneCandidate("b.txt", NOW - hours(90))]
        assert plan(candidates, older_than=hours(1), keep_latest=1) == ("a.txt", "b.txt")

    def test_deterministic_tie_breaking(self) -> None:
        candidates = [
            PruneCandidate("b.txt", NOW),
            PruneCandidate("a.txt", NOW),
            PruneCandidate("c.txt", NOW - hours(1)),
        ]
        assert plan(candidates, keep_latest=1) == ("c.txt,b.txt", "a.txt")

    def test_pruned_ties_sort_by_path_ascending(self) -> None:
        candidates = [PruneCandidate(name, NOW - hours(10)) for name in ("z.txt", "m.txt", "a.txt")]
        assert plan(candidates, older_than=hours(1)) == ("a.txt,m.txt,z.txt", "")
        assert plan(candidates, older_than=hours(100)) == ("", "a.txt,m.txt,z.txt")

    def test_neither_rule_preserves_everything_newest_first(self) -> None:
        candidates = [PruneCandidate("a.txt", NOW - hours(5)), PruneCandidate("b.txt", NOW - hours(1))]
        assert plan(candidates) == ("", "b.txt,a.txt")

    def test_cutoff_is_strict(self) -> None:
        candidates = [
            PruneCandidate("exact.txt", NOW - hours(48)),
            PruneCandidate("older.txt", NOW - hours(48) - timedelta(seconds=1)),
        ]
        assert plan(candidates, older_than=hours(48)) == ("older.txt", "exact.txt")

    @pytest.mark.parametrize(
        ("keep", "expected"), [(-3, ("a.txt,b.txt", "")), (0, ("a.txt,b.txt", "")), (9, ("", "b.txt,a.txt"))]
    )
    def test_keep_latest_is_clamped(self, keep: int, expected: tuple[str, str]) -> None:
        candidates = [PruneCandidate("a.txt", NOW - hours(2)), PruneCandidate("b.txt", NOW - hours(1))]
        assert plan(candidates, keep_latest=keep) == expected

    def test_mixed_offsets_compare_as_instants(self) -> None:
        plus_two = timezone(timedelta(hours=2))
        candidates = [
            PruneCandidate("utc.txt", datetime(2026, 6, 8, 10, 30, tzinfo=UTC)),
            PruneCandidate("local.txt", datetime(2026, 6, 8, 12, 0, tzinfo=plus_two)),  # 10:00 UTC
        ]
        assert plan(candidates, keep_latest=1) == ("local.txt", "utc.txt")


class TestPruneCandidates:
    def test_shared_root_candidates_preserve_other_owners(self) -> None:
        candidates = prune_candidates(shared_root(), ARCHIVE)
        assert paths(candidates) == "report.md"
        assert candidates[0].owner == ARCHIVE

    def test_shared_root_absent_owner_has_no_candidates(self) -> None:
        assert prune_candidates(shared_root(), OwnerScope("missing", "archive")) == ()

    def test_single_owner_candidates_have_no_owner(self) -> None:
        state = single_owner(outputs=(output("a.txt", NOW - hours(3)), output("b.txt", NOW)))
        candidates = prune_candidates(state, ARCHIVE)
        assert [(c.path, c.updated_at, c.owner) for c in candidates] == [
            ("a.txt", NOW - hours(3), None),
            ("b.txt", NOW, None),
        ]

    def test_single_owner_owner_mismatch(self) -> None:
        state = single_owner(pipeline_id="other")
        with pytest.raises(StateError) as info:
            prune_candidates(state, ARCHIVE)
        assert str(info.value) == "state owner is other/archive, not reports/archive"
        with pytest.raises(StateError, match=r"^state owner is reports/archive, not reports/html$"):
            check_owner(single_owner(), HTML)

    def test_empty_document(self) -> None:
        with pytest.raises(StateError, match=r"^destination state document is empty$"):
            prune_candidates(None, ARCHIVE)


class TestPlanPrune:
    def test_disabled_policy(self) -> None:
        result = plan_prune(
            single_owner(),
            PrunePolicy(enabled=False, keep_latest=0),
            pipeline_id="reports",
            destination_id="archive",
            now=NOW,
        )
        assert result == PrunePlan("reports", "archive", ARCHIVE, False, 0, (), ())

    def test_disabled_policy_skips_the_owner_check(self) -> None:
        result = plan_prune(
            single_owner(pipeline_id="other"), PrunePolicy(), pipeline_id="reports", destination_id="archive", now=NOW
        )
        assert result.enabled is False and result.checked_count == 0

    def test_single_owner_outputs(self) -> None:
        state = single_owner(outputs=(output("old.txt", NOW - hours(72)), output("fresh.txt", NOW - hours(24))))
        result = plan_prune(
            state,
            PrunePolicy(enabled=True, older_than=hours(48)),
            pipeline_id="reports",
            destination_id="archive",
            now=NOW,
        )
        assert result.enabled is True
        assert result.checked_count == 2
        assert paths(result.pruned_outputs) == "old.txt"
        assert paths(result.preserved_outputs) == "fresh.txt"
        assert result.pruned_paths == ("old.txt",)
        assert result.owner_scope == ARCHIVE

    def test_shared_root_current_owner_only(self) -> None:
        state = shared_root(
            owners=(
                OwnerRecord("reports", "archive", "replace", MANIFEST),
                OwnerRecord("reports", "html", "replace", MANIFEST),
            ),
            outputs=(
                shared_output("archive.txt", ARCHIVE, NOW - hours(5)),
                shared_output("html.txt", HTML, NOW - hours(9)),
            ),
        )
        result = plan_prune(
            state, PrunePolicy(enabled=True, keep_latest=0), pipeline_id="reports", destination_id="archive", now=NOW
        )
        assert result.checked_count == 1
        assert paths(result.pruned_outputs) == "archive.txt"
        assert result.preserved_outputs == ()
        assert result.pruned_outputs[0].owner == ARCHIVE

    def test_owner_mismatch(self) -> None:
        state = single_owner(pipeline_id="other")
        with pytest.raises(StateError, match=r"^state owner is other/archive, not reports/archive$"):
            plan_prune(
                state,
                PrunePolicy(enabled=True, keep_latest=0),
                pipeline_id="reports",
                destination_id="archive",
                now=NOW,
            )

    def test_plan_does_not_mutate_state(self) -> None:
        state = single_owner(outputs=(output("old.txt", NOW - hours(72)),))
        before = state.outputs
        plan_prune(
            state, PrunePolicy(enabled=True, keep_latest=0), pipeline_id="reports", destination_id="archive", now=NOW
        )
        assert state.outputs is before

    def test_to_dict(self) -> None:
        state = shared_root(
            outputs=(
                shared_output("report.md", ARCHIVE, NOW - hours(72)),
                shared_output("b.md", ARCHIVE, NOW - hours(1)),
            ),
            owners=shared_root().owners,
        )
        result = plan_prune(
            state, PrunePolicy(enabled=True, keep_latest=1), pipeline_id="reports", destination_id="archive", now=NOW
        )
        owner = {"pipeline_id": "reports", "destination_id": "archive"}
        assert result.to_dict() == {
            "pipeline_id": "reports",
            "destination_id": "archive",
            "owner_scope": owner,
            "enabled": True,
            "checked_count": 2,
            "planned_outputs": [{"path": "report.md", "updated_at": "2026-06-05T12:00:00Z", "owner": owner}],
            "preserved_outputs": [{"path": "b.md", "updated_at": "2026-06-08T11:00:00Z", "owner": owner}],
        }

    def test_single_owner_records_have_no_owner_key(self) -> None:
        candidate = PruneCandidate("a.txt", datetime(2026, 6, 8, 11, 0, 0, 500000, tzinfo=UTC))
        assert candidate.to_dict() == {"path": "a.txt", "updated_at": "2026-06-08T11:00:00Z"}

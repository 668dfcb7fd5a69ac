"""Outcome → action mapping (core-semantics §4.3, resolutions B3): the code's table against the
spec's rows, the table executed, and ``build_plan`` against real destinations for every outcome."""

from __future__ import annotations

import re
from itertools import product
from pathlib import Path

import pytest

from distributor_core.compare import Comparison, Outcome
from distributor_core.plan.actions import (
    ACTION_TABLE,
    COMPARISON_REASON,
    CONFLICT_OUTCOMES,
    POLICY_FIELD,
    REASON_REPUBLISH,
    ActionRule,
    map_outcome,
)
from distributor_core.plan.model import Action, TransferPolicy
from distributor_core.state import SharedRootState

from .conftest import CREATED, HOUR, Env, SharedOwner, manifest_for

# core-semantics §4.3, transcribed cell by cell (Outcome, Policy, force, Action, Reason); the
# test below checks this copy against the spec file itself wherever the spec is checked out
SPEC_ROWS = [
    ("`destination_absent`", "—", "any", "`publish_new`", "comparison reason"),
    ("`destination_unmanaged`", "—", "false", "`fail_unmanaged`", "comparison reason"),
    ("`destination_unmanaged`", "—", "true", "`force_replace`", "comparison reason"),
    ("`same_source`", "`on_destination_same: skip`", "any", "`skip_same`", "comparison reason"),
    (
        "`same_source`",
        "`on_destination_same: fail`",
        "any",
        "`fail_conflict`",
        "`destination already matches source and transfer.on_destination_same is fail`",
    ),
    ("`destination_older`", "`on_destination_older: replace`", "any", "`replace_older`", "comparison reason"),
    (
        "`destination_older`",
        "`on_destination_older: fail`",
        "any",
        "`fail_conflict`",
        "`destination is older and transfer.on_destination_older is fail`",
    ),
    ("`destination_newer`", "`on_destination_newer: skip`", "any", "`skip_destination_newer`", "comparison reason"),
    (
        "`destination_newer`",
        "`on_destination_newer: fail`",
        "any",
        "`fail_conflict`",
        "`destination is newer and transfer.on_destination_newer is fail`",
    ),
    (
        "`destination_newer`",
        "`on_destination_newer: replace`",
        "false",
        "`fail_conflict`",
        '`"destination is newer and replacement requires --force"` (exact, from troubleshooting docs)',
    ),
    ("`destination_newer`", "`on_destination_newer: replace`", "true", "`force_replace`", "comparison reason"),
    ("conflict outcome", "`on_conflict: fail`", "any", "`fail_conflict`", "comparison reason"),
    (
        "conflict outcome",
        "`on_conflict: replace`",
        "false",
        "`fail_conflict`",
        "`<comparison reason>; replacement requires --force`",
    ),
    ("conflict outcome", "`on_conflict: replace`", "true", "`force_replace`", "comparison reason"),
]


def _spec_file() -> Path | None:
    """``shared/spec/core-semantics.md`` beside the checkout or one level up (worktrees)."""
    for parent in Path(__file__).resolve().parents:
        candidate = parent / "shared" / "spec" / "core-semantics.md"
        if candidate.is_file():
            return candidate
    return None


def _plain(cell: str) -> str:
    """A reason cell without Markdown decoration: backticks, quotes, a trailing remark."""
    cell = re.sub(r"\s*\([^)]*\)$", "", cell.strip())
    return cell.strip("`").strip('"')


def _as_spec_row(rule: ActionRule) -> tuple[str, str, str, str, str]:
    """One rule of the code's table in the spec's words."""
    (outcome,) = rule.outcomes if len(rule.outcomes) == 1 else (None,)
    label = f"`{outcome}`" if outcome is not None else "conflict outcome"
    if rule.outcomes != {outcome} and rule.outcomes != CONFLICT_OUTCOMES:
        raise AssertionError(f"rule covers an outcome group the spec does not name: {rule}")
    field = POLICY_FIELD[next(iter(rule.outcomes))][0] if rule.choice is not None else None
    policy = f"`{field}: {rule.choice}`" if field else "—"
    force = "any" if rule.force is None else str(rule.force).lower()
    reason = "comparison reason" if rule.reason == COMPARISON_REASON else rule.reason
    return (label, policy, force, f"`{rule.action}`", reason.replace(COMPARISON_REASON, "<comparison reason>"))


def _spec_rule_rows() -> list[ActionRule]:
    """The code's rows that the spec table covers: all but resolutions B3's republish row."""
    return [rule for rule in ACTION_TABLE if rule.republish is not True]


def test_code_table_is_the_spec_table_row_by_row():
    code = [_as_spec_row(rule) for rule in _spec_rule_rows()]
    assert [row[:4] for row in code] == [row[:4] for row in SPEC_ROWS]
    assert [row[4] for row in code] == [
        "comparison reason" if cell == "comparison reason" else _plain(cell) for cell in (r[4] for r in SPEC_ROWS)
    ]


def test_spec_copy_matches_the_spec_file():
    spec = _spec_file()
    if spec is None:
        pytest.skip("shared/spec/core-semantics.md is not checked out beside this repository")
    text = spec.read_text(encoding="utf-8")
    section = text[text.index("### 4.3 Outcome → action mapping") : text.index("### 4.4 Output planning")]
    rows = [
        tuple(cell.strip() for cell in line.strip().strip("|").split("|"))
        for line in section.splitlines()
        if line.startswith("| ") and not line.startswith("| Outcome")
    ]
    assert rows == SPEC_ROWS


def test_republish_row_is_resolutions_b3():
    (rule,) = [rule for rule in ACTION_TABLE if rule.republish is True]
    assert rule.outcomes == {Outcome.SAME_SOURCE} and rule.choice is None and rule.force is None
    assert (rule.action, rule.reason) == (Action.REPLACE_OLDER, REASON_REPUBLISH)
    # and every other row applies with or without --republish, except same_source's own rows
    for other in ACTION_TABLE:
        if other is not rule:
            assert other.republish is None or other.outcomes == {Outcome.SAME_SOURCE}


def _cases():
    for outcome in Outcome:
        field = POLICY_FIELD.get(outcome)
        for choice, force, republish in product(
            (None,) if field is None else tuple(field[1]), (False, True), (False, True)
        ):
            yield outcome, field, choice, force, republish


@pytest.mark.parametrize(("outcome", "field", "choice", "force", "republish"), list(_cases()))
def test_map_outcome_executes_the_one_matching_row(outcome, field, choice, force, republish):
    rows = [rule for rule in ACTION_TABLE if rule.matches(outcome, choice, force, republish)]
    assert len(rows) == 1, rows
    transfer = TransferPolicy(**({field[0]: choice} if field else {}))
    decision = map_outcome(Comparison(outcome, "the reason"), transfer, force=force, republish=republish)
    assert (decision.action, decision.reason) == (rows[0].action, rows[0].reason_for("the reason"))


REASON = "comparison reason"
CONFLICTS = [
    Outcome.INVALID_STATE,
    Outcome.IDENTITY_MISMATCH,
    Outcome.DIFFERENT_SOURCE_CONFLICT,
    Outcome.SAME_CREATED_CONFLICT,
]

# (outcome, transfer, force, republish) -> (action, reason); "=" means the comparison reason
TABLE = [
    (Outcome.DESTINATION_ABSENT, {}, False, False, Action.PUBLISH_NEW, "="),
    (Outcome.DESTINATION_ABSENT, {}, True, False, Action.PUBLISH_NEW, "="),
    (Outcome.DESTINATION_UNMANAGED, {}, False, False, Action.FAIL_UNMANAGED, "="),
    (Outcome.DESTINATION_UNMANAGED, {}, True, False, Action.FORCE_REPLACE, "="),
    (Outcome.SAME_SOURCE, {}, False, False, Action.SKIP_SAME, "="),
    (Outcome.SAME_SOURCE, {}, True, False, Action.SKIP_SAME, "="),
    (
        Outcome.SAME_SOURCE,
        {"on_destination_same": "fail"},
        False,
        False,
        Action.FAIL_CONFLICT,
        "destination already matches source and transfer.on_destination_same is fail",
    ),
    (
        Outcome.SAME_SOURCE,
        {"on_destination_same": "fail"},
        True,
        False,
        Action.FAIL_CONFLICT,
        "destination already matches source and transfer.on_destination_same is fail",
    ),
    (Outcome.SAME_SOURCE, {}, False, True, Action.REPLACE_OLDER, "republish of same source requested"),
    (Outcome.SAME_SOURCE, {}, True, True, Action.REPLACE_OLDER, "republish of same source requested"),
    (Outcome.DESTINATION_OLDER, {}, False, False, Action.REPLACE_OLDER, "="),
    (Outcome.DESTINATION_OLDER, {}, True, False, Action.REPLACE_OLDER, "="),
    (Outcome.DESTINATION_OLDER, {}, False, True, Action.REPLACE_OLDER, "="),
    (
        Outcome.DESTINATION_OLDER,
        {"on_destination_older": "fail"},
        True,
        False,
        Action.FAIL_CONFLICT,
        "destination is older and transfer.on_destination_older is fail",
    ),
    (Outcome.DESTINATION_NEWER, {}, False, False, Action.SKIP_DESTINATION_NEWER, "="),
    (Outcome.DESTINATION_NEWER, {}, True, False, Action.SKIP_DESTINATION_NEWER, "="),
    (Outcome.DESTINATION_NEWER, {}, False, True, Action.SKIP_DESTINATION_NEWER, "="),
    (
        Outcome.DESTINATION_NEWER,
        {"on_destination_newer": "fail"},
        True,
        False,
        Action.FAIL_CONFLICT,
        "destination is newer and transfer.on_destination_newer is fail",
    ),
    (
        Outcome.DESTINATION_NEWER,
        {"on_destination_newer": "replace"},
        False,
        False,
        Action.FAIL_CONFLICT,
        "destination is newer and replacement requires --force",
    ),
    (Outcome.DESTINATION_NEWER, {"on_destination_newer": "replace"}, True, False, Action.FORCE_REPLACE, "="),
]
for _outcome in CONFLICTS:
    TABLE += [
        (_outcome, {}, False, False, Action.FAIL_CONFLICT, "="),
        (_outcome, {}, True, False, Action.FAIL_CONFLICT, "="),
        (_outcome, {}, False, True, Action.FAIL_CONFLICT, "="),
        (
            _outcome,
            {"on_conflict": "replace"},
            False,
            False,
            Action.FAIL_CONFLICT,
            f"{REASON}; replacement requires --force",
        ),
        (_outcome, {"on_conflict": "replace"}, True, False, Action.FORCE_REPLACE, "="),
    ]


@pytest.mark.parametrize(("outcome", "transfer", "force", "republish", "action", "reason"), TABLE)
def test_map_outcome_table(outcome, transfer, force, republish, action, reason):
    decision = map_outcome(Comparison(outcome, REASON), TransferPolicy(**transfer), force=force, republish=republish)
    assert decision.action == action
    assert decision.reason == (REASON if reason == "=" else reason)


# --------------------------------------------------------------------------- through build_plan


def _older_state(env: Env, **kwargs) -> None:
    env.seed_single_owner({"report.md": b"old"}, manifest=manifest_for({"report.md": b"old"}, created=CREATED - HOUR),
                          **kwargs)


def test_absent_destination_plans_publish_new(env: Env):
    manifest = env.source()
    for force in (False, True):
        plan = env.plan(manifest, force=force)
        assert (plan.action, plan.reason) == (Action.PUBLISH_NEW, "destination state is absent")
        assert plan.error is None
        assert plan.force is False


def test_empty_directories_do_not_count_as_content(env: Env):
    manifest = env.source()
    (env.dst_root / "bundle" / "empty" / "deeper").mkdir(parents=True)
    assert env.plan(manifest).action == Action.PUBLISH_NEW


def test_unmanaged_destination_fails_without_force(env: Env):
    manifest = env.source()
    env.put("bundle/notes.txt", b"hand made")
    plan = env.plan(manifest)
    assert plan.action == Action.FAIL_UNMANAGED
    assert plan.reason == "destination has content but no distributor state"
    assert plan.error == "fail_unmanaged: destination has content but no distributor state"


def test_unmanaged_destination_with_force_plans_force_replace(env: Env):
    manifest = env.source()
    env.put("bundle/notes.txt", b"hand made")
    plan = env.plan(manifest, force=True)
    assert (plan.action, plan.reason) == (Action.FORCE_REPLACE, "destination has content but no distributor state")
    assert plan.force is True
    assert plan.deletes == ("notes.txt",)


def test_same_source_skips_even_with_force(env: Env):
    manifest = env.source()
    env.publish_ok(manifest)
    for force in (False, True):
        plan = env.plan(manifest, force=force)
        assert (plan.action, plan.reason) == (Action.SKIP_SAME, "destination source manifest matches source")


def test_same_source_with_on_destination_same_fail(env: Env):
    manifest = env.source()
    env.publish_ok(manifest)
    plan = env.plan(manifest, transfer=TransferPolicy(on_destination_same="fail"))
    assert plan.action == Action.FAIL_CONFLICT
    assert plan.error == (
        "fail_conflict: destination already matches source and transfer.on_destination_same is fail"
    )


def test_republish_turns_same_source_into_replace_older(env: Env):
    manifest = env.source()
    env.publish_ok(manifest)
    plan = env.plan(manifest, republish=True)
    assert (plan.action, plan.reason) == (Action.REPLACE_OLDER, "republish of same source requested")


def test_destination_older_plans_replace_older(env: Env):
    manifest = env.source()
    _older_state(env)
    for force in (False, True):
        plan = env.plan(manifest, force=force)
        assert (plan.action, plan.reason) == (Action.REPLACE_OLDER, "destination source is older than source")
        assert plan.force is False


def test_destination_older_with_on_destination_older_fail(env: Env):
    manifest = env.source()
    _older_state(env)
    plan = env.plan(manifest, transfer=TransferPolicy(on_destination_older="fail"))
    assert plan.action == Action.FAIL_CONFLICT
    assert plan.reason == "destination is older and transfer.on_destination_older is fail"


def _newer_state(env: Env) -> None:
    newer = manifest_for({"report.md": b"newer"}, created=CREATED + HOUR)
    env.seed_single_owner({"report.md": b"newer"}, manifest=newer)


def test_destination_newer_is_skipped(env: Env):
    manifest = env.source()
    _newer_state(env)
    plan = env.plan(manifest, force=True)
    assert (plan.action, plan.reason) == (Action.SKIP_DESTINATION_NEWER, "destination source is newer than source")


def test_destination_newer_with_fail_policy(env: Env):
    manifest = env.source()
    _newer_state(env)
    plan = env.plan(manifest, transfer=TransferPolicy(on_destination_newer="fail"))
    assert plan.error == "fail_conflict: destination is newer and transfer.on_destination_newer is fail"


def test_destination_newer_replace_requires_force(env: Env):
    manifest = env.source()
    _newer_state(env)
    plan = env.plan(manifest, transfer=TransferPolicy(on_destination_newer="replace"))
    assert plan.action == Action.FAIL_CONFLICT
    assert plan.error == "fail_conflict: destination is newer and replacement requires --force"
    forced = env.plan(manifest, transfer=TransferPolicy(on_destination_newer="replace"), force=True)
    assert (forced.action, forced.reason) == (Action.FORCE_REPLACE, "destination source is newer than source")


def _conflict_destination(env: Env, kind: str) -> str:
    """Set up a destination whose comparison is the conflict ``kind``; return the reason."""
    if kind == "invalid_state":
        env.put("bundle/report.md", b"old")
        env.put("bundle/.distributor.json", b"{}")
        return "state schema_version is required"
    if kind == "identity_mismatch":
        _older_state(env, pipeline="other")
        return 'pipeline id "other" does not match "reports"'
    if kind == "identity_mismatch_destination":
        _older_state(env, destination="elsewhere")
        return 'destination id "elsewhere" does not match "archive"'
    if kind == "different_source_conflict":
        env.seed_single_owner({"report.md": b"old"}, manifest=manifest_for({"report.md": b"old"}, id="other.id",
                                                                         created=CREATED - HOUR))
        return "destination source id differs from source"
    if kind == "same_created_conflict":
        env.seed_single_owner({"report.md": b"old"}, manifest=manifest_for({"report.md": b"old"}, created=CREATED))
        return "destination source has same id and created time but different digest"
    raise AssertionError(kind)


CONFLICT_KINDS = [
    "invalid_state",
    "identity_mismatch",
    "identity_mismatch_destination",
    "different_source_conflict",
    "same_created_conflict",
]


@pytest.mark.parametrize("kind", CONFLICT_KINDS)
def test_conflict_outcomes_fail_by_default_even_with_force(env: Env, kind: str):
    manifest = env.source()
    reason = _conflict_destination(env, kind)
    for force in (False, True):
        plan = env.plan(manifest, force=force, takeover_mode="never")
        assert (plan.action, plan.reason) == (Action.FAIL_CONFLICT, reason)
        assert plan.error == f"fail_conflict: {reason}"


@pytest.mark.parametrize("kind", CONFLICT_KINDS)
def test_conflict_outcomes_with_on_conflict_replace(env: Env, kind: str):
    manifest = env.source()
    reason = _conflict_destination(env, kind)
    transfer = TransferPolicy(on_conflict="replace")
    plan = env.plan(manifest, transfer=transfer, takeover_mode="never")
    assert (plan.action, plan.reason) == (Action.FAIL_CONFLICT, f"{reason}; replacement requires --force")
    forced = env.plan(manifest, transfer=transfer, takeover_mode="never", force=True)
    assert (forced.action, forced.reason) == (Action.FORCE_REPLACE, reason)
    assert forced.force is True


def test_unparsable_state_is_invalid_state_with_parse_reason(env: Env):
    manifest = env.source()
    env.put("bundle/.distributor.json", b"")
    plan = env.plan(manifest, takeover_mode="any_managed")
    assert plan.comparison.outcome == Outcome.INVALID_STATE
    assert plan.error == "fail_conflict: parse distributor state: EOF"


def test_single_owner_destination_finding_shared_root_state_is_a_conflict(env: Env):
    manifest = env.source()
    env.seed_shared_root([SharedOwner("reports", "archive", manifest_for({"report.md": b"old"}, created=CREATED - HOUR),
                                      {"report.md": b"old"})])
    plan = env.plan(manifest, takeover_mode="any_managed")
    assert plan.comparison.outcome == Outcome.IDENTITY_MISMATCH
    assert plan.error == 'fail_conflict: destination state mode "shared_root" does not match "single_owner"'


def test_shared_root_owner_absent_reason(env: Env):
    manifest = env.source()
    env.seed_shared_root([SharedOwner("other", "archive", manifest_for({"x.md": b"x"}, id="other.id"), {"x.md": b"x"})])
    plan = env.plan(manifest, state_mode="shared_root")
    assert (plan.action, plan.reason) == (Action.PUBLISH_NEW, "destination owner reports/archive is absent")
    assert isinstance(plan.existing_shared_root, SharedRootState)
    assert plan.comparison.outcome == Outcome.DESTINATION_ABSENT

"""Outcome → action mapping (core-semantics §4.3, resolutions B3) as a table the code executes.

:data:`ACTION_TABLE` is the spec's binding table, one :class:`ActionRule` per row, plus B3's
``--republish`` row. :func:`map_outcome` looks the one matching row up; tests iterate the same
rows. The table is total and unambiguous — every (outcome, transfer choice, force, republish)
matches exactly one row — which is checked when this module is imported.
"""

from __future__ import annotations

from enum import StrEnum
from itertools import product

import msgspec

from distributor_core.compare import Comparison, Outcome
from distributor_core.plan.model import Action, TransferPolicy
from distributor_core.plan.modes import ConflictChoice, NewerChoice, OlderChoice, SameChoice

CONFLICT_OUTCOMES = frozenset(
    {
        Outcome.INVALID_STATE,
        Outcome.IDENTITY_MISMATCH,
        Outcome.DIFFERENT_SOURCE_CONFLICT,
        Outcome.SAME_CREATED_CONFLICT,
    }
)

#: the transfer policy field (and its choices) that decides each outcome; outcomes not listed
#: are decided by the table without a policy
POLICY_FIELD: dict[Outcome, tuple[str, type[StrEnum]]] = {
    Outcome.SAME_SOURCE: ("on_destination_same", SameChoice),
    Outcome.DESTINATION_OLDER: ("on_destination_older", OlderChoice),
    Outcome.DESTINATION_NEWER: ("on_destination_newer", NewerChoice),
    **{outcome: ("on_conflict", ConflictChoice) for outcome in CONFLICT_OUTCOMES},
}

#: a rule's ``reason`` template: ``{reason}`` is the comparison's reason
COMPARISON_REASON = "{reason}"
REASON_REPUBLISH = "republish of same source requested"


class ActionRule(msgspec.Struct, frozen=True):
    """One row: the outcomes it covers, the transfer choice (``None``: the outcome reads no
    policy), ``force`` / ``republish`` (``None``: either), and the action with its reason."""

    outcomes: frozenset[Outcome]
    choice: StrEnum | None
    force: bool | None
    republish: bool | None
    action: Action
    reason: str = COMPARISON_REASON

    def matches(self, outcome: Outcome, choice: StrEnum | None, force: bool, republish: bool) -> bool:
        return (
            outcome in self.outcomes
            and (self.choice is None or self.choice == choice)
            and (self.force is None or self.force == force)
            and (self.republish is None or self.republish == republish)
        )

    def reason_for(self, comparison_reason: str) -> str:
        return self.reason.replace(COMPARISON_REASON, comparison_reason)


def _rule(outcomes, choice, force, action, reason=COMPARISON_REASON, *, republish=None) -> ActionRule:
    outcomes = frozenset(outcomes) if isinstance(outcomes, frozenset) else frozenset({outcomes})
    return ActionRule(outcomes, choice, force, republish, action, reason)


_ANY = None
_O = Outcome

#: core-semantics §4.3 row by row (``force`` column: True / False / _ANY), then resolutions B3
ACTION_TABLE: tuple[ActionRule, ...] = (
    _rule(_O.DESTINATION_ABSENT, None, _ANY, Action.PUBLISH_NEW),
    _rule(_O.DESTINATION_UNMANAGED, None, False, Action.FAIL_UNMANAGED),
    _rule(_O.DESTINATION_UNMANAGED, None, True, Action.FORCE_REPLACE),
    _rule(_O.SAME_SOURCE, SameChoice.SKIP, _ANY, Action.SKIP_SAME, republish=False),
    _rule(
        _O.SAME_SOURCE,
        SameChoice.FAIL,
        _ANY,
        Action.FAIL_CONFLICT,
        "destination already matches source and transfer.on_destination_same is fail",
        republish=False,
    ),
    _rule(_O.DESTINATION_OLDER, OlderChoice.REPLACE, _ANY, Action.REPLACE_OLDER),
    _rule(
        _O.DESTINATION_OLDER,
        OlderChoice.FAIL,
        _ANY,
        Action.FAIL_CONFLICT,
        "destination is older and transfer.on_destination_older is fail",
    ),
    _rule(_O.DESTINATION_NEWER, NewerChoice.SKIP, _ANY, Action.SKIP_DESTINATION_NEWER),
    _rule(
        _O.DESTINATION_NEWER,
        NewerChoice.FAIL,
        _ANY,
        Action.FAIL_CONFLICT,
        "destination is newer and transfer.on_destination_newer is fail",
    ),
    _rule(
        _O.DESTINATION_NEWER,
        NewerChoice.REPLACE,
        False,
        Action.FAIL_CONFLICT,
        "destination is newer and replacement requires --force",
    ),
    _rule(_O.DESTINATION_NEWER, NewerChoice.REPLACE, True, Action.FORCE_REPLACE),
    _rule(CONFLICT_OUTCOMES, ConflictChoice.FAIL, _ANY, Action.FAIL_CONFLICT),
    _rule(
        CONFLICT_OUTCOMES,
        ConflictChoice.REPLACE,
        False,
        Action.FAIL_CONFLICT,
        "{reason}; replacement requires --force",
    ),
    _rule(CONFLICT_OUTCOMES, ConflictChoice.REPLACE, True, Action.FORCE_REPLACE),
    # resolutions B3: --republish turns same_source into replace_older, whatever the policy
    _rule(_O.SAME_SOURCE, None, _ANY, Action.REPLACE_OLDER, REASON_REPUBLISH, republish=True),
)


def _choices(outcome: Outcome) -> tuple[StrEnum | None, ...]:
    entry = POLICY_FIELD.get(outcome)
    return (None,) if entry is None else tuple(entry[1])


def _index(table: tuple[ActionRule, ...]) -> dict[tuple[Outcome, StrEnum | None, bool, bool], ActionRule]:
    """Every combination → its one rule; a gap or an overlap in the table is a bug."""
    index = {}
    for outcome in Outcome:
        for choice, force, republish in product(_choices(outcome), (False, True), (False, True)):
            rules = [rule for rule in table if rule.matches(outcome, choice, force, republish)]
            if len(rules) != 1:
                raise AssertionError(
                    f"action table: {len(rules)} rules for {outcome}/{choice}/force={force}/republish={republish}"
                )
            index[(outcome, choice, force, republish)] = rules[0]
    return index


_BY_CASE = _index(ACTION_TABLE)


class Decision(msgspec.Struct, frozen=True):
    action: Action
    reason: str


def rule_for(outcome: Outcome, transfer: TransferPolicy, *, force: bool, republish: bool) -> ActionRule:
    """The table row deciding ``outcome`` under ``transfer`` (a normalised policy)."""
    entry = POLICY_FIELD.get(outcome)
    choice = None if entry is None else entry[1](getattr(transfer, entry[0]))
    return _BY_CASE[(outcome, choice, bool(force), bool(republish))]


def map_outcome(comparison: Comparison, transfer: TransferPolicy, *, force: bool, republish: bool) -> Decision:
    """The action and reason :data:`ACTION_TABLE` gives ``comparison``."""
    rule = rule_for(comparison.outcome, transfer, force=force, republish=republish)
    return Decision(rule.action, rule.reason_for(comparison.reason))

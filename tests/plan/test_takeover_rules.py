"""The takeover tables of ``plan.takeover`` (core-semantics §6.1–6.4), iterated."""

from __future__ import annotations

from itertools import product

import pytest

from distributor_core.compare import Outcome
from distributor_core.plan.modes import StateMode, TakeoverMode
from distributor_core.plan.takeover import TAKEOVER_OUTCOMES, TAKEOVER_RULES, takeover_permitted

# §6.1: mode → permitted for (recorded pipeline is the current one, recorded source id is the current one)
SPEC = {
    TakeoverMode.SAME_PIPELINE: {(True, True): True, (True, False): True, (False, True): False, (False, False): False},
    TakeoverMode.SAME_SOURCE: {(True, True): True, (True, False): False, (False, True): True, (False, False): False},
    TakeoverMode.ANY_MANAGED: {(True, True): True, (True, False): True, (False, True): True, (False, False): True},
    TakeoverMode.NEVER: {(True, True): False, (True, False): False, (False, True): False, (False, False): False},
}


def test_every_mode_has_one_rule():
    assert set(TAKEOVER_RULES) == set(TakeoverMode) == set(SPEC)


CASES = list(product(TakeoverMode, (True, False), (True, False)))


@pytest.mark.parametrize(("mode", "same_pipeline", "same_source"), CASES)
def test_rule_table_is_section_6(mode, same_pipeline, same_source):
    permitted = takeover_permitted(
        mode,
        recorded_pipeline_id="reports" if same_pipeline else "other",
        recorded_source_id="src" if same_source else "other.src",
        pipeline_id="reports",
        source_id="src",
    )
    assert permitted is SPEC[mode][(same_pipeline, same_source)]
    assert takeover_permitted(str(mode), recorded_pipeline_id="reports" if same_pipeline else "other",
                              recorded_source_id="src" if same_source else "other.src",
                              pipeline_id="reports", source_id="src") is permitted


def test_owner_record_takeover_is_the_same_rule():
    """§6.4(b): the owner's own record (same pipeline) under different_source_conflict (other
    source id): same_pipeline and any_managed permit, same_source and never do not."""
    expected = {TakeoverMode.SAME_PIPELINE: True, TakeoverMode.ANY_MANAGED: True,
                TakeoverMode.SAME_SOURCE: False, TakeoverMode.NEVER: False}
    for mode, permitted in expected.items():
        assert SPEC[mode][(True, False)] is permitted


def test_takeover_is_evaluated_only_for_section_6_2_outcomes():
    assert TAKEOVER_OUTCOMES[StateMode.SINGLE_OWNER] == {Outcome.IDENTITY_MISMATCH, Outcome.DIFFERENT_SOURCE_CONFLICT}
    assert TAKEOVER_OUTCOMES[StateMode.SHARED_ROOT] == {Outcome.DIFFERENT_SOURCE_CONFLICT}

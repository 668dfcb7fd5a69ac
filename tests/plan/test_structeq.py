"""Structs whose payload fields are left out of equality and hashing (``structeq``)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from distributor_core.app.report import ActionReport
from distributor_core.bundle import Manifest
from distributor_core.plan.model import PlannedOutput
from distributor_core.state import SingleOwnerState
from distributor_core.structeq import compare_without, key_without

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def test_planned_outputs_equal_and_hash_alike_whatever_their_content() -> None:
    a = PlannedOutput("a.html", "generated", "a.md", "sha256:" + "0" * 64, 3, content=b"abc")
    b = PlannedOutput("a.html", "generated", "a.md", "sha256:" + "0" * 64, 3, content=None)
    assert a == b and hash(a) == hash(b)
    assert a != PlannedOutput("b.html", "generated", "a.md", "sha256:" + "0" * 64, 3)


def test_a_state_read_from_schema_1_equals_its_schema_2_rewrite() -> None:
    manifest = Manifest(1, "b", "sha256:" + "1" * 64, NOW)
    v2 = SingleOwnerState("p", "d", NOW, NOW, NOW, "replace", manifest, ())
    v1 = SingleOwnerState("p", "d", NOW, NOW, NOW, "replace", manifest, (), read_schema_version=1)
    assert v1 == v2 and hash(v1) == hash(v2)
    assert v1 != SingleOwnerState("p", "other", NOW, NOW, NOW, "replace", manifest, ())


def test_mutable_reports_compare_without_their_outcome_and_stay_unhashable() -> None:
    fields = dict(
        pipeline_id="p",
        destination_id="d",
        backend="local",
        bundle_path="b",
        destination_path="b",
        source_id="s",
        action="skip_same",
        reason="same",
        state_mode="single_owner",
        reconciliation_mode="replace",
        status="skipped",
    )
    a, b = ActionReport(**fields), ActionReport(**fields, outcome=object())  # type: ignore[arg-type]
    assert a == b
    assert a != ActionReport(**{**fields, "status": "failed"})
    with pytest.raises(TypeError):
        hash(a)


def test_values_of_another_type_are_unequal_and_a_key_needs_two_fields() -> None:
    import msgspec

    @compare_without("c")
    class One(msgspec.Struct, frozen=True):
        a: int
        b: int
        c: object = None

    @compare_without("c")
    class Two(msgspec.Struct, frozen=True):
        a: int
        b: int
        c: object = None

    assert One(1, 2, 3) == One(1, 2, 4)
    assert One(1, 2) != Two(1, 2)
    with pytest.raises(ValueError, match="at least two"):
        key_without(One, "b", "c")

"""The examples in docs/integrations/destination-state.md are real, valid state files."""

from __future__ import annotations

import re
from pathlib import Path

from distributor_core.state import SharedRootState, SingleOwnerState, marshal_state, parse_state_document

DOC = Path(__file__).resolve().parents[2] / "docs" / "integrations" / "destination-state.md"


def _json_blocks() -> list[str]:
    return re.findall(r"```json\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.DOTALL)


def test_doc_has_v2_v1_v3_examples_in_order() -> None:
    versions = [parse_state_document(block.encode()) for block in _json_blocks()]
    assert [type(doc) for doc in versions] == [SingleOwnerState, SingleOwnerState, SharedRootState]
    assert [getattr(doc, "read_schema_version", 3) for doc in versions] == [2, 1, 3]


def test_written_examples_are_byte_exact() -> None:
    v2, _, v3 = _json_blocks()
    assert marshal_state(parse_state_document(v2.encode())).decode() == v2
    assert marshal_state(parse_state_document(v3.encode())).decode() == v3


def test_legacy_example_normalises_to_the_v2_example() -> None:
    v2, v1, _ = _json_blocks()
    legacy = parse_state_document(v1.encode())
    current = parse_state_document(v2.encode())
    assert isinstance(legacy, SingleOwnerState) and isinstance(current, SingleOwnerState)
    # the v1 example is the v2 one without the v2-only keys (and without links)
    assert legacy.outputs == current.outputs
    assert legacy.manifest == current.manifest
    assert legacy.created_at == legacy.updated_at == current.published_at

"""state.model.records_from_columns builds what the constructor builds (issue 17 P4)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from distributor_core.state import OutputRecord, StateError
from distributor_core.state.model import records_from_columns

_T = datetime(2026, 1, 1, tzinfo=UTC)
_PLUS2 = datetime(2026, 1, 1, 2, tzinfo=timezone(timedelta(hours=2)))
_COLUMNS = (
    ["a", "b"],
    ["source", "generated"],
    ["a", "b.md"],
    ["sha256:" + "1" * 64] * 2,
    [1, 2],
    [_T, _PLUS2],
    [_T, _T],
    ["", "markdown"],
    ["", "https://h.example/b"],
)


def test_records_equal_the_constructors_and_post_init_runs() -> None:
    built = records_from_columns(OutputRecord, _COLUMNS)
    assert built == [OutputRecord(*row) for row in zip(*_COLUMNS, strict=True)]
    assert built[1].created_at.tzinfo is UTC and built[1].created_at == _PLUS2  # normalised by __post_init__
    with pytest.raises(AttributeError):
        built[0].path = "x"  # still frozen


def test_fewer_columns_than_fields_use_the_constructor_and_errors_still_raise() -> None:
    assert records_from_columns(OutputRecord, _COLUMNS[:7]) == [
        OutputRecord(*row) for row in zip(*_COLUMNS[:7], strict=True)
    ]
    with pytest.raises(StateError, match="created_at"):
        records_from_columns(OutputRecord, (*_COLUMNS[:5], ["not a time", "x"], *_COLUMNS[6:]))
    with pytest.raises(ValueError, match="equal length"):
        records_from_columns(OutputRecord, (*_COLUMNS[:4], [1], *_COLUMNS[5:]))


def test_output_records_are_values_frozen_hashable_picklable_and_replaceable() -> None:
    import pickle

    import msgspec

    record = OutputRecord(*[column[1] for column in _COLUMNS])
    assert record.created_at.tzinfo is UTC and record.created_at == _PLUS2  # __post_init__ normalised it
    assert pickle.loads(pickle.dumps(record)) == record
    assert hash(record) == hash(OutputRecord(*[column[1] for column in _COLUMNS]))
    moved = msgspec.structs.replace(record, path="c", updated_at=_PLUS2)
    assert moved.path == "c" and moved.updated_at.tzinfo is UTC and moved.kind == record.kind
    with pytest.raises(AttributeError):
        record.size = 3

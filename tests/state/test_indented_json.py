"""``jsonfmt.dumps_indented``, the one writer of every document (state, manifest, journal, upload
record), writes Go's ``json.MarshalIndent(v, "", "  ")`` text: the standard library's two-space
indented JSON with Go's HTML-safe escapes and one trailing newline, for any value."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from distributor_core import jsonfmt


def _reference(value: object) -> str:
    return jsonfmt.go_escape(json.dumps(value, ensure_ascii=False, indent=2, allow_nan=False)) + "\n"


_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(alphabet=st.sampled_from(list("ab<>&\"\\/é\n\t\x00\u2028\u2029 ")), max_size=6),
)
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.text(alphabet="ab<&é\"", max_size=3), inner, max_size=4),
        st.lists(inner, max_size=3).map(tuple),
    ),
    max_leaves=25,
)


@settings(max_examples=3000, deadline=None)
@given(_values)
def test_same_text_as_the_indented_standard_encoder_with_go_escapes(value) -> None:
    assert jsonfmt.dumps_indented(value) == _reference(value)
    assert jsonfmt.dumps_indented_bytes(value) == _reference(value).encode()


def test_non_string_keys_and_nan() -> None:
    value = {"a": {1: "x", None: [1, 2]}, "b": [{}, [], {"c": []}]}
    assert jsonfmt.dumps_indented(value) == _reference(value)
    for bad in ({"a": float("nan")}, [{"a": [float("inf")]}]):
        with pytest.raises(ValueError):
            jsonfmt.dumps_indented(bad)


_flat_records = st.lists(
    st.dictionaries(
        st.sampled_from(["path", "kind", "}", "{", "a,b"]),
        st.one_of(st.sampled_from(["}", "{", "},\n{", "}, {", "x}", "\u2028"]), st.integers(), st.none()),
        min_size=1,
        max_size=4,
    ),
    min_size=1,
    max_size=5,
)


@settings(max_examples=1500, deadline=None)
@given(_flat_records, st.integers(min_value=0, max_value=3))
def test_lists_of_flat_records(records, depth: int) -> None:
    value: object = records
    for _ in range(depth):
        value = {"outer": value, "n": 1}
    assert jsonfmt.dumps_indented(value) == _reference(value)

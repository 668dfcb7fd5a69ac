"""``state.fastjson.dumps_indented`` is byte for byte ``jsonfmt.dumps_indented`` (issue 8)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from distributor_core import jsonfmt
from distributor_core.state import fastjson

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
def test_same_bytes_as_jsonfmt(value) -> None:
    assert fastjson.dumps_indented(value) == jsonfmt.dumps_indented(value)


def test_non_string_keys_and_nan() -> None:
    value = {"a": {1: "x", None: [1, 2]}, "b": [{}, [], {"c": []}]}
    assert fastjson.dumps_indented(value) == jsonfmt.dumps_indented(value)
    for bad in ({"a": float("nan")}, [{"a": [float("inf")]}]):
        try:
            jsonfmt.dumps_indented(bad)
        except ValueError:
            pass
        else:  # pragma: no cover
            raise AssertionError("jsonfmt accepted NaN")
        try:
            fastjson.dumps_indented(bad)
        except ValueError:
            continue
        raise AssertionError("fastjson accepted NaN")


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
    assert fastjson.dumps_indented(value) == jsonfmt.dumps_indented(value)

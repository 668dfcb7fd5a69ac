"""Durations (Go syntax, Go string form) and byte sizes (interfaces §0.2)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from distributor_core.config import format_byte_size, format_duration, parse_byte_size, parse_duration
from distributor_core.config.units import (
    ByteSizeError,
    DurationError,
    format_duration_ns,
    parse_duration_ns,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("24h", timedelta(hours=24)),
        ("168h", timedelta(hours=168)),
        ("90m", timedelta(minutes=90)),
        ("1h30m", timedelta(hours=1, minutes=30)),
        ("1.5h", timedelta(hours=1, minutes=30)),
        ("2h45m30.5s", timedelta(hours=2, minutes=45, seconds=30.5)),
        ("500ms", timedelta(milliseconds=500)),
        ("250us", timedelta(microseconds=250)),
        ("250µs", timedelta(microseconds=250)),
        ("250μs", timedelta(microseconds=250)),
        (".5s", timedelta(milliseconds=500)),
        ("1.s", timedelta(seconds=1)),
        ("+5m", timedelta(minutes=5)),
        ("-1h", timedelta(hours=-1)),
        ("0", timedelta(0)),
        ("0s", timedelta(0)),
        ("1500ns", timedelta(microseconds=1)),
    ],
)
def test_parse_duration_accepts_go_syntax(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize(
    "text",
    ["", "forever", "1d", "24", "h", ".h", "1.5", "24 h", " 24h", "24h ", "1hh", "--1h", "1h-30m", "٣h", "0x10s",
     "9223372036855ms", "2562048h"],
)
def test_parse_duration_rejects_what_go_rejects(text: str) -> None:
    with pytest.raises(DurationError):
        parse_duration(text)


def test_parse_duration_rejects_non_strings() -> None:
    with pytest.raises(DurationError):
        parse_duration(24)  # type: ignore[arg-type]


def test_parse_duration_limits_are_gos() -> None:
    assert parse_duration_ns("2562047h47m16.854775807s") == (1 << 63) - 1
    assert parse_duration_ns("-2562047h47m16.854775808s") == -(1 << 63)
    with pytest.raises(DurationError):
        parse_duration_ns("2562047h47m16.854775808s")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (timedelta(hours=168), "168h0m0s"),
        (timedelta(hours=24), "24h0m0s"),
        (timedelta(hours=1, minutes=30), "1h30m0s"),
        (timedelta(minutes=90), "1h30m0s"),
        (timedelta(seconds=61), "1m1s"),
        (timedelta(seconds=1.5), "1.5s"),
        (timedelta(milliseconds=500), "500ms"),
        (timedelta(microseconds=1500), "1.5ms"),
        (timedelta(microseconds=1), "1µs"),
        (timedelta(0), "0s"),
        (timedelta(hours=-1), "-1h0m0s"),
    ],
)
def test_format_duration_is_gos_string_form(value: timedelta, expected: str) -> None:
    assert format_duration(value) == expected


def test_format_duration_ns_below_a_microsecond() -> None:
    assert format_duration_ns(1) == "1ns"
    assert format_duration_ns(1_500) == "1.5µs"


@given(st.integers(min_value=-(10**15), max_value=10**15))
def test_format_then_parse_round_trips(microseconds: int) -> None:
    value = timedelta(microseconds=microseconds)
    assert parse_duration(format_duration(value)) == value


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("20MB", 20 * 1024**2),
        ("32MB", 32 * 1024**2),
        ("0B", 0),
        ("1KB", 1024),
        ("1kb", 1024),
        ("2 MiB", 2 * 1024**2),
        ("3GiB", 3 * 1024**3),
        ("1TB", 1024**4),
        ("1tib", 1024**4),
        ("123", 123),
        ("7b", 7),
        (0, 0),
        (4096, 4096),
    ],
)
def test_parse_byte_size(value: str | int, expected: int) -> None:
    assert parse_byte_size(value) == expected


@pytest.mark.parametrize(
    "value", ["20XB", "", "MB", "-1MB", "1.5MB", "20  MB", " 20MB", "20MB ", "20PB", "1e3", -1, True, 1.0, None]
)
def test_parse_byte_size_rejects(value: object) -> None:
    with pytest.raises(ByteSizeError):
        parse_byte_size(value)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("size", "expected"),
    [(100 * 1024**2, "100MB"), (1536, "1536B"), (0, "0B"), (1024, "1KB"), (5 * 1024**4, "5TB"), (3 * 1024**3, "3GB")],
)
def test_format_byte_size(size: int, expected: str) -> None:
    assert format_byte_size(size) == expected
    assert parse_byte_size(expected) == size

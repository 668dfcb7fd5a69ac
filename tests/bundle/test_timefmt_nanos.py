"""Nanosecond timestamps (issue 15 item 4, resolutions G1): ``timefmt`` parses RFC 3339 with up
to nine fraction digits, keeps them through UTC conversion, orders and hashes by the full instant,
and formats as Go's ``time.RFC3339Nano`` does for a UTC time."""

from __future__ import annotations

import copy
import pickle
from datetime import UTC, datetime, timedelta, timezone

import pytest

from distributor_core.timefmt import (
    NanoTime,
    extra_ns,
    format_precise,
    format_seconds,
    nanosecond,
    parse_rfc3339,
    to_utc,
    truncate_seconds,
    with_nanoseconds,
)

BASE = datetime(2026, 6, 4, 12, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-06-04T12:00:00.123456789Z", "2026-06-04T12:00:00.123456789Z"),
        ("2026-06-04T12:00:00.123456780Z", "2026-06-04T12:00:00.12345678Z"),
        ("2026-06-04T12:00:00.123456000Z", "2026-06-04T12:00:00.123456Z"),
        ("2026-06-04T12:00:00.100Z", "2026-06-04T12:00:00.1Z"),
        ("2026-06-04T12:00:00.000000000Z", "2026-06-04T12:00:00Z"),
        ("2026-06-04T12:00:00Z", "2026-06-04T12:00:00Z"),
        ("2026-06-04T12:00:00.000000001Z", "2026-06-04T12:00:00.000000001Z"),
        # digits beyond the ninth are ignored, as Go does
        ("2026-06-04T12:00:00.1234567899999Z", "2026-06-04T12:00:00.123456789Z"),
        # offsets denote the same instant and are written in UTC with Z
        ("2026-06-04T14:00:00.123456789+02:00", "2026-06-04T12:00:00.123456789Z"),
        ("2026-06-04T12:00:00.5-00:00", "2026-06-04T12:00:00.5Z"),
        ("2026-06-05T00:30:00.999999999+12:30", "2026-06-04T12:00:00.999999999Z"),
    ],
)
def test_parse_and_format_round_trip_like_go(text: str, expected: str) -> None:
    value = parse_rfc3339(text)
    assert value.tzinfo is UTC
    assert format_precise(value) == expected
    assert format_precise(parse_rfc3339(expected)) == expected


def test_plain_datetime_unless_below_a_microsecond() -> None:
    assert type(parse_rfc3339("2026-06-04T12:00:00.123456Z")) is datetime
    assert type(parse_rfc3339("2026-06-04T12:00:00Z")) is datetime
    value = parse_rfc3339("2026-06-04T12:00:00.123456789Z")
    assert type(value) is NanoTime
    assert (value.microsecond, extra_ns(value), nanosecond(value)) == (123456, 789, 123456789)


def test_ordering_equality_and_hash_use_the_full_instant() -> None:
    nano = parse_rfc3339("2026-06-04T12:00:00.123456789Z")
    micro = BASE.replace(microsecond=123456)
    later = BASE.replace(microsecond=123457)
    assert micro < nano < later and later > nano > micro
    assert micro <= nano <= later and not nano <= micro and not nano >= later
    assert nano != micro and micro != nano
    assert (nano == micro, micro == nano) == (False, False)
    same = parse_rfc3339("2026-06-04T14:00:00.123456789+02:00")
    assert nano == same and hash(nano) == hash(same)
    assert (nano != same, same != nano) == (False, False)
    assert nano <= same and nano >= same and not nano < same
    assert parse_rfc3339("2026-06-04T12:00:00.123456001Z") < nano
    assert sorted([later, nano, micro]) == [micro, nano, later]
    assert max([micro, nano]) is nano
    assert len({nano, same, micro}) == 2
    # a NanoTime without extra nanoseconds equals (and hashes as) the plain datetime
    plain_nano = with_nanoseconds(micro, 123456000)
    assert type(plain_nano) is datetime and plain_nano == micro
    assert nano != "2026-06-04T12:00:00.123456789Z"


def test_utc_conversion_pickle_and_copy_keep_nanoseconds() -> None:
    nano = parse_rfc3339("2026-06-04T12:00:00.123456789Z")
    assert to_utc(nano) is nano
    shifted = with_nanoseconds(nano.astimezone(timezone(timedelta(hours=2))), 123456789)
    assert shifted.utcoffset() == timedelta(hours=2)
    assert to_utc(shifted) == nano and format_precise(shifted) == "2026-06-04T12:00:00.123456789Z"
    for copied in (pickle.loads(pickle.dumps(nano)), copy.copy(nano), copy.deepcopy(nano)):
        assert copied == nano and extra_ns(copied) == 789
    assert "extra_ns=789" in repr(nano)


def test_state_stamps_stay_whole_seconds() -> None:
    nano = parse_rfc3339("2026-06-04T12:00:00.999999999Z")
    assert format_seconds(nano) == "2026-06-04T12:00:00Z"
    assert truncate_seconds(nano) == BASE and type(truncate_seconds(nano)) is datetime


def test_fraction_out_of_range_is_refused() -> None:
    with pytest.raises(ValueError, match="out of range"):
        with_nanoseconds(BASE, 1_000_000_000)
    with pytest.raises(ValueError, match="naive"):
        to_utc(datetime(2026, 6, 4))

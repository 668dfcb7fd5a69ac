"""Strict RFC 3339 timestamps and the injectable clock (core-semantics §0.2).

Parsing accepts exactly what Go's ``time.RFC3339`` parser accepts: ``YYYY-MM-DDTHH:MM:SS``,
an optional ``.`` fraction of one or more digits, and a mandatory ``Z`` or ``±HH:MM`` offset.
Values are normalised to UTC; fractions beyond microseconds are truncated.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone

Clock = Callable[[], datetime]

ZERO_TIME = datetime(1, 1, 1, tzinfo=UTC)

_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(Z|[+-]\d{2}:\d{2})",
    re.ASCII,
)


class TimestampError(ValueError):
    """A timestamp does not follow RFC 3339."""


def parse_rfc3339(value: str) -> datetime:
    """Parse a strict RFC 3339 date-time into an aware UTC datetime."""
    if not isinstance(value, str):
        raise TimestampError(f"expected an RFC 3339 string, got {type(value).__name__}")
    match = _RFC3339.fullmatch(value)
    if match is None:
        raise TimestampError(f'parsing time "{value}": not an RFC 3339 date-time')
    year, month, day, hour, minute, second, fraction, offset = match.groups()
    micro = int((fraction or "0")[:6].ljust(6, "0"))
    if offset == "Z":
        tz = UTC
    else:
        sign = 1 if offset[0] == "+" else -1
        oh, om = int(offset[1:3]), int(offset[4:6])
        if oh > 23 or om > 59:
            raise TimestampError(f'parsing time "{value}": time zone offset out of range')
        tz = timezone(sign * timedelta(hours=oh, minutes=om))
    try:
        parsed = datetime(
            int(year), int(month), int(day), int(hour), int(minute), int(second), micro, tzinfo=tz
        )
    except ValueError as exc:
        raise TimestampError(f'parsing time "{value}": {exc}') from None
    try:
        return parsed.astimezone(UTC)
    except OverflowError:
        raise TimestampError(f'parsing time "{value}": out of range') from None


def to_utc(value: datetime) -> datetime:
    if value.tzinfo is None:
        raise ValueError("naive datetime values are not allowed; attach a timezone")
    return value.astimezone(UTC)


def truncate_seconds(value: datetime) -> datetime:
    return to_utc(value).replace(microsecond=0)


def format_seconds(value: datetime) -> str:
    """State/report form: UTC, whole seconds, literal ``Z`` (Go ``time.RFC3339``)."""
    return truncate_seconds(value).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_precise(value: datetime) -> str:
    """Manifest ``created`` form: UTC with ``Z``; the fraction only when non-zero, trailing zeros trimmed."""
    utc = to_utc(value)
    text = utc.strftime("%Y-%m-%dT%H:%M:%S")
    if utc.microsecond:
        text += "." + f"{utc.microsecond:06d}".rstrip("0")
    return text + "Z"


def is_zero(value: datetime | None) -> bool:
    return value is None or to_utc(value) == ZERO_TIME


def system_clock() -> datetime:
    return datetime.now(UTC)


def now_seconds(clock: Clock | None = None) -> datetime:
    """Read the clock once, convert to UTC and truncate to whole seconds."""
    return truncate_seconds((clock or system_clock)())


def compact_stamp(value: datetime) -> str:
    """``YYYYMMDDTHHMMSSZ`` (upload run ids)."""
    return truncate_seconds(value).strftime("%Y%m%dT%H%M%SZ")

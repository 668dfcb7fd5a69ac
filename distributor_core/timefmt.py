"""Strict RFC 3339 timestamps and the injectable clock (core-semantics §0.2).

Parsing accepts exactly what Go's ``time.RFC3339`` parser accepts: ``YYYY-MM-DDTHH:MM:SS``,
an optional ``.`` fraction of one or more digits, and a mandatory ``Z`` or ``±HH:MM`` offset.
Values are normalised to UTC and keep nanosecond precision (resolutions G1; digits beyond the
ninth are ignored, as Go does): an instant with a non-zero part below the microsecond is a
:class:`NanoTime`, a ``datetime`` that also carries those nanoseconds; any other instant is a plain
``datetime``, so the common case stays the exact built-in type the fast paths check for.
``format_precise`` writes what Go's ``time.RFC3339Nano`` writes for a UTC time (fraction only
when non-zero, trailing zeros trimmed, ``Z``); state stamps stay whole seconds (``format_seconds``,
Go's ``time.RFC3339``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from typing import Any, SupportsIndex

Clock = Callable[[], datetime]

ZERO_TIME = datetime(1, 1, 1, tzinfo=UTC)

_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(Z|[+-]\d{2}:\d{2})",
    re.ASCII,
)


class TimestampError(ValueError):
    """A timestamp does not follow RFC 3339."""


class NanoTime(datetime):
    """An aware ``datetime`` with nanosecond precision: ``microsecond`` as usual plus ``extra_ns``
    (1-999), the nanoseconds below it. Built by :func:`with_nanoseconds`; compares, hashes,
    pickles and copies by the full instant (a plain ``datetime`` is a ``NanoTime`` with no extra
    nanoseconds). Arithmetic, ``replace`` and ``astimezone`` are ``datetime``'s and drop the extra
    nanoseconds; use :func:`to_utc` to convert keeping them."""

    __slots__ = ("_extra_ns",)
    _extra_ns: int

    def __new__(cls, *args: Any, **kwargs: Any) -> NanoTime:
        self = super().__new__(cls, *args, **kwargs)
        self._extra_ns = 0
        return self

    @property
    def extra_ns(self) -> int:
        return self._extra_ns

    def __reduce_ex__(self, protocol: SupportsIndex) -> tuple[Any, ...]:
        return (with_nanoseconds, (_plain(self), self.microsecond * 1000 + self._extra_ns))

    def __repr__(self) -> str:
        return f"NanoTime({_plain(self)!r}, extra_ns={self._extra_ns})"

    def __hash__(self) -> int:
        base = datetime.__hash__(self)
        return hash((base, self._extra_ns)) if self._extra_ns else base

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, datetime):
            return NotImplemented
        return datetime.__eq__(self, other) and self._extra_ns == extra_ns(other)

    def __ne__(self, other: object) -> bool:
        if not isinstance(other, datetime):
            return NotImplemented
        return not self.__eq__(other)

    def __lt__(self, other: datetime) -> bool:
        if not isinstance(other, datetime):
            return NotImplemented
        return datetime.__lt__(self, other) or (datetime.__eq__(self, other) and self._extra_ns < extra_ns(other))

    def __gt__(self, other: datetime) -> bool:
        if not isinstance(other, datetime):
            return NotImplemented
        return datetime.__gt__(self, other) or (datetime.__eq__(self, other) and self._extra_ns > extra_ns(other))

    def __le__(self, other: datetime) -> bool:
        if not isinstance(other, datetime):
            return NotImplemented
        return not self.__gt__(other)

    def __ge__(self, other: datetime) -> bool:
        if not isinstance(other, datetime):
            return NotImplemented
        return not self.__lt__(other)


def _plain(value: datetime) -> datetime:
    return datetime(
        value.year, value.month, value.day, value.hour, value.minute, value.second, value.microsecond,
        value.tzinfo, fold=value.fold,
    )


def extra_ns(value: datetime) -> int:
    """The nanoseconds of ``value`` below its microsecond (0 for a plain ``datetime``)."""
    return value._extra_ns if isinstance(value, NanoTime) else 0


def nanosecond(value: datetime) -> int:
    """The fraction of the second of ``value`` in nanoseconds (0-999999999)."""
    return value.microsecond * 1000 + extra_ns(value)


def with_nanoseconds(value: datetime, fraction_ns: int) -> datetime:
    """``value`` with its fraction of a second set to ``fraction_ns`` nanoseconds: a plain
    ``datetime`` when that is a whole number of microseconds, else a :class:`NanoTime`."""
    if not 0 <= fraction_ns < 1_000_000_000:
        raise ValueError(f"fraction of a second out of range: {fraction_ns} ns")
    micro, extra = divmod(fraction_ns, 1000)
    base = _plain(value).replace(microsecond=micro)
    if not extra:
        return base
    result = NanoTime(
        base.year, base.month, base.day, base.hour, base.minute, base.second, micro, base.tzinfo, fold=base.fold
    )
    result._extra_ns = extra
    return result


def parse_rfc3339(value: str) -> datetime:
    """Parse a strict RFC 3339 date-time into an aware UTC datetime."""
    if not isinstance(value, str):
        raise TimestampError(f"expected an RFC 3339 string, got {type(value).__name__}")
    match = _RFC3339.fullmatch(value)
    if match is None:
        raise TimestampError(f'parsing time "{value}": not an RFC 3339 date-time')
    year, month, day, hour, minute, second, fraction, offset = match.groups()
    nanos = int(fraction[:9].ljust(9, "0")) if fraction else 0
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
            int(year), int(month), int(day), int(hour), int(minute), int(second), nanos // 1000, tzinfo=tz
        )
    except ValueError as exc:
        raise TimestampError(f'parsing time "{value}": {exc}') from None
    try:
        utc = parsed if tz is UTC else parsed.astimezone(UTC)
    except OverflowError:
        raise TimestampError(f'parsing time "{value}": out of range') from None
    extra = nanos % 1000
    if not extra:
        return utc
    result = NanoTime(utc.year, utc.month, utc.day, utc.hour, utc.minute, utc.second, utc.microsecond, UTC)
    result._extra_ns = extra
    return result


def to_utc(value: datetime) -> datetime:
    """``value`` in UTC, nanoseconds kept."""
    if value.tzinfo is None:
        raise ValueError("naive datetime values are not allowed; attach a timezone")
    if type(value) is NanoTime:
        if value.tzinfo is UTC:
            return value
        return with_nanoseconds(datetime.astimezone(_plain(value), UTC), nanosecond(value))
    return value.astimezone(UTC)


def truncate_seconds(value: datetime) -> datetime:
    utc = to_utc(value)
    if type(utc) is NanoTime:
        utc = _plain(utc)
    return utc.replace(microsecond=0)


def format_seconds(value: datetime) -> str:
    """State/report form: UTC, whole seconds, literal ``Z`` (Go ``time.RFC3339``)."""
    return truncate_seconds(value).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_precise(value: datetime) -> str:
    """Manifest ``created`` form, as Go's ``time.RFC3339Nano`` writes a UTC time: ``Z``, the
    fraction (up to nanoseconds) only when non-zero, trailing zeros trimmed."""
    utc = to_utc(value)
    text = utc.strftime("%Y-%m-%dT%H:%M:%S")
    fraction = nanosecond(utc)
    if fraction:
        text += "." + f"{fraction:09d}".rstrip("0")
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

"""Durations and byte sizes as written in the YAML config (interfaces §0.2).

Durations use Go's ``time.ParseDuration`` syntax (``24h``, ``1h30m``, ``1.5h``, ``90m``,
``500ms``; no ``d`` unit) and render in Go's ``Duration.String`` form (``168h0m0s``). They are
kept as :class:`datetime.timedelta`, so anything below a microsecond is truncated toward zero.

Byte sizes are a non-negative integer followed by an optional unit among ``B``, ``KB``, ``MB``,
``GB``, ``TB`` (powers of 1024; ``KiB``/``MiB``/``GiB``/``TiB`` are synonyms; case-insensitive;
one optional space before the unit). A bare integer means bytes.
"""

from __future__ import annotations

import re
from datetime import timedelta
from fractions import Fraction

_NANOSECOND = 1
_MICROSECOND = 1_000 * _NANOSECOND
_MILLISECOND = 1_000 * _MICROSECOND
_SECOND = 1_000 * _MILLISECOND
_MINUTE = 60 * _SECOND
_HOUR = 60 * _MINUTE

_DURATION_UNITS = {
    "ns": _NANOSECOND,
    "us": _MICROSECOND,
    "\u00b5s": _MICROSECOND,  # µ micro sign
    "\u03bcs": _MICROSECOND,  # μ Greek small letter mu
    "ms": _MILLISECOND,
    "s": _SECOND,
    "m": _MINUTE,
    "h": _HOUR,
}
_MAX_NANOSECONDS = (1 << 63) - 1
_DIGITS = frozenset("0123456789")
_NUMBER = re.compile(r"([0-9]*)(?:\.([0-9]*))?")

_BYTE_UNITS = {
    "b": 1,
    "kb": 1024,
    "kib": 1024,
    "mb": 1024**2,
    "mib": 1024**2,
    "gb": 1024**3,
    "gib": 1024**3,
    "tb": 1024**4,
    "tib": 1024**4,
}
_BYTE_SIZE = re.compile(r"([0-9]+)(?: ?([A-Za-z]+))?")
_FORMAT_UNITS = (("TB", 1024**4), ("GB", 1024**3), ("MB", 1024**2), ("KB", 1024))


class DurationError(ValueError):
    """Text that is not a Go duration."""


class ByteSizeError(ValueError):
    """A value that is not a byte size."""


def parse_duration_ns(text: str) -> int:
    """Parse Go duration syntax into whole nanoseconds, exactly as Go accepts it."""
    if not isinstance(text, str):
        raise DurationError(f"duration must be a string, not {type(text).__name__}")
    invalid = DurationError(f'invalid duration "{text}"')
    rest = text
    negative = False
    if rest[:1] in ("-", "+"):
        negative = rest[0] == "-"
        rest = rest[1:]
    if rest == "0":
        return 0
    if rest == "":
        raise invalid
    total = Fraction(0)
    while rest:
        match = _NUMBER.match(rest)
        assert match is not None  # the pattern matches the empty string
        whole, fraction = match.group(1), match.group(2)
        if whole == "" and not fraction:
            raise invalid
        rest = rest[match.end() :]
        end = 0
        while end < len(rest) and rest[end] != "." and rest[end] not in _DIGITS:
            end += 1
        unit_text, rest = rest[:end], rest[end:]
        if unit_text == "":
            raise DurationError(f'missing unit in duration "{text}"')
        unit = _DURATION_UNITS.get(unit_text)
        if unit is None:
            raise DurationError(f'unknown unit "{unit_text}" in duration "{text}"')
        value = Fraction(int(whole or "0"))
        if fraction:
            value += Fraction(int(fraction), 10 ** len(fraction))
        total += value * unit
        if total > _MAX_NANOSECONDS + 1:
            raise invalid
    nanoseconds = int(total)  # truncates toward zero, like Go
    if nanoseconds > _MAX_NANOSECONDS + (1 if negative else 0):
        raise invalid
    return -nanoseconds if negative else nanoseconds


def parse_duration(text: str) -> timedelta:
    """Parse Go duration syntax (``"24h"``, ``"1h30m"``) into a :class:`timedelta`."""
    nanoseconds = parse_duration_ns(text)
    micro = abs(nanoseconds) // _MICROSECOND
    return timedelta(microseconds=-micro if nanoseconds < 0 else micro)


def _format_fraction(value: int, precision: int) -> tuple[str, int]:
    digits = ""
    printing = False
    for _ in range(precision):
        digit = value % 10
        printing = printing or digit != 0
        if printing:
            digits = str(digit) + digits
        value //= 10
    return ("." + digits if printing else ""), value


def format_duration_ns(nanoseconds: int) -> str:
    """Go's ``Duration.String`` for a whole number of nanoseconds."""
    negative = nanoseconds < 0
    value = -nanoseconds if negative else nanoseconds
    if value == 0:
        return "0s"
    if value < _SECOND:
        if value < _MICROSECOND:
            precision, unit = 0, "ns"
        elif value < _MILLISECOND:
            precision, unit = 3, "\u00b5s"
        else:
            precision, unit = 6, "ms"
        fraction, whole = _format_fraction(value, precision)
        text = f"{whole}{fraction}{unit}"
    else:
        fraction, whole_seconds = _format_fraction(value, 9)
        text = f"{whole_seconds % 60}{fraction}s"
        minutes = whole_seconds // 60
        if minutes > 0:
            text = f"{minutes % 60}m{text}"
            hours = minutes // 60
            if hours > 0:
                text = f"{hours}h{text}"
    return "-" + text if negative else text


def format_duration(value: timedelta) -> str:
    """Render a :class:`timedelta` in Go's form: ``168h0m0s``, ``1h30m0s``, ``1.5s``, ``500ms``."""
    return format_duration_ns((value // timedelta(microseconds=1)) * _MICROSECOND)


def parse_byte_size(value: str | int) -> int:
    """Parse ``20MB``, ``32 MiB``, ``0B`` or a bare non-negative integer into bytes."""
    if isinstance(value, bool):
        raise ByteSizeError("byte size must be an integer or a string such as 20MB")
    if isinstance(value, int):
        if value < 0:
            raise ByteSizeError(f"byte size must not be negative: {value}")
        return value
    if not isinstance(value, str):
        raise ByteSizeError(f"byte size must be an integer or a string, not {type(value).__name__}")
    match = _BYTE_SIZE.fullmatch(value)
    if match is None:
        raise ByteSizeError(f'invalid byte size "{value}"')
    number, unit = match.groups()
    if unit is None:
        return int(number)
    factor = _BYTE_UNITS.get(unit.lower())
    if factor is None:
        raise ByteSizeError(f'unknown unit "{unit}" in byte size "{value}"')
    return int(number) * factor


def format_byte_size(size: int) -> str:
    """The largest unit that divides ``size`` exactly: ``104857600`` → ``100MB``, ``1536`` → ``1536B``."""
    if size < 0:
        raise ByteSizeError(f"byte size must not be negative: {size}")
    for unit, factor in _FORMAT_UNITS:
        if size >= factor and size % factor == 0:
            return f"{size // factor}{unit}"
    return f"{size}B"

"""``Label: key=value`` text lines, the style of every text report (interfaces §2.2)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from distributor_core.jsonfmt import go_json_string

_NEEDS_QUOTES = frozenset(' \t\r\n"\\')


def format_value(value: Any) -> str:
    """One ``key=value`` value: booleans lower-case, strings quoted (Go style) only when they are
    empty or contain whitespace, quotes, backslashes or control characters."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return '""'
    text = str(value)
    if text == "" or any(ch in _NEEDS_QUOTES or ord(ch) < 0x20 or ord(ch) == 0x7F for ch in text):
        return go_json_string(text)
    return text


def record_line(label: str, fields: Mapping[str, Any]) -> str:
    """``<Label>: k=v k=v`` — the text style of every report line."""
    pairs = " ".join(f"{key}={format_value(value)}" for key, value in fields.items())
    return f"{label}: {pairs}" if pairs else f"{label}:"

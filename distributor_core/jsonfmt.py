"""Go-compatible JSON reading and writing (core-semantics §0.3).

Every JSON document distributor writes (`manifest.json`, `.distributor.json`, journals, upload
records) goes through :func:`dumps_indented` so the bytes match Go's
``json.MarshalIndent(v, "", "  ")`` plus a trailing newline. Strict readers reject trailing data,
non-object top-level values and the non-standard constants ``NaN``/``Infinity``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

_GO_ESCAPES = (
    ("<", "\\u003c"),
    (">", "\\u003e"),
    ("&", "\\u0026"),
    ("\u2028", "\\u2028"),
    ("\u2029", "\\u2029"),
)

_JSON_WHITESPACE = " \t\r\n"


def go_escape(encoded: str) -> str:
    """Go's HTML-safe escapes applied to JSON text the standard encoder wrote (``ensure_ascii``
    off): ``<``, ``>``, ``&``, U+2028 and U+2029 as ``\\uXXXX``."""
    for ch, esc in _GO_ESCAPES:
        if ch in encoded:
            encoded = encoded.replace(ch, esc)
    return encoded


def go_json_string(value: str) -> str:
    """Encode one string exactly as Go's encoding/json does (raw UTF-8, HTML-safe escapes)."""
    return go_escape(json.dumps(value, ensure_ascii=False))


def dumps_compact(value: Any) -> str:
    """Compact JSON (no whitespace) with Go string escaping."""
    return go_escape(json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False))


def dumps_indented(value: Any) -> str:
    """Two-space indented JSON with Go string escaping and one trailing newline.

    Key order is the insertion order of the mappings given; callers build dicts in the
    documented key order. Empty lists render as ``[]`` and empty objects as ``{}`` like Go.
    """
    return go_escape(json.dumps(value, ensure_ascii=False, indent=2, allow_nan=False)) + "\n"


def dumps_indented_bytes(value: Any) -> bytes:
    return dumps_indented(value).encode("utf-8")


class JSONFormatError(ValueError):
    """Input is not one strict JSON value; ``detail`` is a short human-readable reason."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


def _reject_constant(name: str) -> Any:
    raise JSONFormatError(f"invalid JSON constant {name}")


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


def loads_strict(data: bytes | str) -> Any:
    """Decode exactly one JSON value; whitespace may follow, anything else is trailing data.

    Raises :class:`JSONFormatError` with detail ``trailing data`` for content after the value,
    ``EOF`` for empty input, or the decoder's message otherwise.
    """
    if isinstance(data, bytes | bytearray | memoryview):
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise JSONFormatError(f"invalid UTF-8 at byte {exc.start}") from None
    else:
        text = data
    if text.startswith("\ufeff"):
        raise JSONFormatError("invalid character BOM at start of document")
    start = len(text) - len(text.lstrip(_JSON_WHITESPACE))
    if start == len(text):
        raise JSONFormatError("EOF")
    try:
        value, end = _DECODER.raw_decode(text, start)
    except JSONFormatError:
        raise
    except json.JSONDecodeError as exc:
        raise JSONFormatError(f"{exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise JSONFormatError("document nesting is too deep") from None
    if text[end:].strip(_JSON_WHITESPACE):
        raise JSONFormatError("trailing data")
    return value


def loads_object(data: bytes | str) -> dict[str, Any]:
    """Decode one strict JSON value that must be an object."""
    value = loads_strict(data)
    if not isinstance(value, dict):
        raise JSONFormatError(f"top-level value must be an object, not {json_type_name(value)}")
    return value


def json_type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__


def is_json_int(value: Any) -> bool:
    """True for JSON integers only (Python ``bool`` is excluded explicitly)."""
    return isinstance(value, int) and not isinstance(value, bool)

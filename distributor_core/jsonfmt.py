"""Go-compatible JSON reading and writing (core-semantics §0.3).

Every JSON document distributor writes (`manifest.json`, `.distributor.json`, journals, upload
records) goes through :func:`dumps_indented` so the bytes match Go's
``json.MarshalIndent(v, "", "  ")`` plus a trailing newline. Strict readers reject trailing data,
non-object top-level values and the non-standard constants ``NaN``/``Infinity``.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from itertools import chain
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
    """Two-space indented JSON with Go string escaping and one trailing newline: the text of
    ``json.dumps(value, ensure_ascii=False, indent=2)`` with Go's escapes.

    Key order is the insertion order of the mappings given; callers build dicts in the
    documented key order. Empty lists render as ``[]`` and empty objects as ``{}`` like Go.

    The standard library only uses its C encoder when ``indent`` is ``None``, and a state of
    100,000 outputs is mostly innermost containers (records, lists of paths). Each such container
    is therefore encoded by one call of a public ``json.JSONEncoder`` without ``indent`` whose item
    separator carries the newline and indentation; only the levels above it are walked here.
    """
    return go_escape(_encode(value, 0)) + "\n"


def dumps_indented_bytes(value: Any) -> bytes:
    return dumps_indented(value).encode("utf-8")


#: the string encoder ``json.JSONEncoder(ensure_ascii=False)`` uses (the C one when available)
_encode_string = json.encoder.encode_basestring
_INDENT = "  "
#: value types the C encoder writes as scalars (exact types: subclasses take the general path)
_SCALARS = frozenset({str, int, float, bool, type(None)})


@functools.lru_cache(maxsize=64)
def _flat_encoder(item_separator: str) -> Any:
    """``encode`` of an encoder with ``item_separator`` (newline + indentation) and ``": "`` keys,
    no indent: the standard library then encodes in C."""
    return json.JSONEncoder(
        ensure_ascii=False, allow_nan=False, check_circular=False, separators=(item_separator, ": ")
    ).encode


def _scalar(value: Any) -> str | None:
    """The JSON text of a scalar, or ``None`` for a container."""
    kind = type(value)
    if kind is str:
        return _encode_string(value)
    if kind is int:
        return int.__repr__(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, dict | list | tuple):
        return None
    return json.dumps(value, ensure_ascii=False, allow_nan=False)


def _is_flat(container: Any) -> bool:
    values = container.values() if type(container) is dict else container
    return set(map(type, values)) <= _SCALARS


def _flat_records(items: Any) -> bool:
    """True for a list of non-empty dicts with string keys and scalar values only."""
    if set(map(type, items)) != {dict} or not all(items):
        return False
    if not set(map(type, chain.from_iterable(map(dict.values, items)))) <= _SCALARS:
        return False
    return set(map(type, chain.from_iterable(items))) == {str}


def _encode(value: Any, level: int) -> str:
    text = _scalar(value)
    if text is not None:
        return text
    if not value:
        return "{}" if isinstance(value, dict) else "[]"
    inner = "\n" + _INDENT * (level + 1)
    outer = "\n" + _INDENT * level
    if type(value) is dict:
        if not all(type(key) is str for key in value):
            return _stdlib(value, level)
        if _is_flat(value):
            return "{" + inner + _flat_encoder("," + inner)(value)[1:-1] + outer + "}"
        items = [_encode_string(key) + ": " + _encode(item, level + 1) for key, item in value.items()]
        return "{" + inner + ("," + inner).join(items) + outer + "}"
    if type(value) in (list, tuple):
        if _is_flat(value):
            return "[" + inner + _flat_encoder("," + inner)(value)[1:-1] + outer + "]"
        if _flat_records(value):
            return _records(value, level)
        return "[" + inner + ("," + inner).join([_encode(item, level + 1) for item in value]) + outer + "]"
    return _stdlib(value, level)


def _records(records: Any, level: int) -> str:
    """A list of non-empty flat dicts (state outputs, manifest files) in one C-encoder call: the
    record separator comes out as ``},<newline+field indent>{`` and is re-indented by ``replace``.
    A newline only ever comes from a separator (strings escape theirs), and ``}`` right before a
    separator only ends a record, so the replacement cannot touch content."""
    field = "\n" + _INDENT * (level + 2)
    record = "\n" + _INDENT * (level + 1)
    outer = "\n" + _INDENT * level
    text = _flat_encoder("," + field)(records)[2:-2]  # without the outer [{ and }]
    text = text.replace("}," + field + "{", record + "}," + record + "{" + field)
    return "[" + record + "{" + field + text + record + "}" + outer + "]"


def _stdlib(value: Any, level: int) -> str:
    """Anything unusual (non-string keys, container subclasses): the standard encoder, re-indented
    for its nesting level."""
    text = json.dumps(value, ensure_ascii=False, indent=2, allow_nan=False)
    return text.replace("\n", "\n" + _INDENT * level) if level else text


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

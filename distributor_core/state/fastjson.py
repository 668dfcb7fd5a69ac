"""``jsonfmt.dumps_indented`` for large documents, byte for byte (performance only).

The standard library only uses its C encoder when ``indent`` is ``None``; an indented document is
encoded by the pure-Python encoder, about ten times slower. Here every innermost container (a
dict or list holding only scalars, such as a state output record or a list of paths) is encoded
by one call of a public ``json.JSONEncoder`` without ``indent`` (so the C encoder runs) whose item
separator carries the newline and indentation, and only the levels above it are walked in
Python. Go's HTML-safe escapes are applied to the whole text afterwards exactly as ``jsonfmt``
does.
"""

from __future__ import annotations

import functools
import json
from itertools import chain
from typing import Any

from distributor_core.jsonfmt import go_escape

#: the string encoder ``json.JSONEncoder(ensure_ascii=False)`` uses (the C one when available)
_encode_string = json.encoder.encode_basestring
_INDENT = "  "


@functools.lru_cache(maxsize=64)
def _flat_encoder(item_separator: str) -> Any:
    """``encode`` of an encoder with ``item_separator`` (newline + indentation) and ``": "`` keys,
    no indent: the standard library then encodes in C."""
    return json.JSONEncoder(
        ensure_ascii=False, allow_nan=False, check_circular=False, separators=(item_separator, ": ")
    ).encode


def _c_encode(value: Any, item_separator: str) -> str:
    return _flat_encoder(item_separator)(value)


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


#: value types the C encoder writes as scalars (exact types: subclasses take the general path)
_SCALARS = frozenset({str, int, float, bool, type(None)})


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
            return "{" + inner + _c_encode(value, "," + inner)[1:-1] + outer + "}"
        items = [_encode_string(key) + ": " + _encode(item, level + 1) for key, item in value.items()]
        return "{" + inner + ("," + inner).join(items) + outer + "}"
    if type(value) in (list, tuple):
        if _is_flat(value):
            return "[" + inner + _c_encode(value, "," + inner)[1:-1] + outer + "]"
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
    text = _c_encode(records, "," + field)[2:-2]  # without the outer [{ and }]
    text = text.replace("}," + field + "{", record + "}," + record + "{" + field)
    return "[" + record + "{" + field + text + record + "}" + outer + "]"


def _stdlib(value: Any, level: int) -> str:
    """Anything unusual (non-string keys, container subclasses): the standard encoder, re-indented
    for its nesting level."""
    text = json.dumps(value, ensure_ascii=False, indent=2, allow_nan=False)
    return text.replace("\n", "\n" + _INDENT * level) if level else text


def dumps_indented(value: Any) -> str:
    """Exactly ``jsonfmt.dumps_indented(value)``."""
    return go_escape(_encode(value, 0)) + "\n"


def dumps_indented_bytes(value: Any) -> bytes:
    return dumps_indented(value).encode("utf-8")

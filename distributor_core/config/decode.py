"""Strict decoding of the YAML tree against the declared shape (interfaces §1.1 step 2, resolutions C5).

Walks the document in file order and reports, for every key, what is wrong with it:

- ``<path>: unknown field`` for a key the config does not know at that level;
- ``<ctx>.<field> is not supported for <backend> backend`` for a key that belongs to another
  backend than the one a source or destination names (this wins over "unknown field");
- ``<path> must be a boolean`` / ``an integer`` / ``a string`` / ``a list`` / ``a mapping``
  (a boolean field also takes the YAML 1.1 words yaml.v3 accepts there, ``yes``/``no``/``on``/
  ``off``/``y``/``n`` in their lower, title and upper case forms: resolutions G2);
- ``<path> must be a duration such as 24h`` and ``<path> must be a byte size such as 20MB``.

Values come out converted (durations to ``timedelta``, byte sizes to ``int``, numbers given for
string fields to their text). A null value means the key is absent; a null list item is the
item's zero value (an empty mapping or an empty string), like Go's decoder.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from distributor_core.config import shape
from distributor_core.config.loader import YAML11_BOOLEANS, YamlFloat, YamlInt
from distributor_core.config.shape import Key, Kind
from distributor_core.config.units import ByteSizeError, DurationError, parse_byte_size, parse_duration

_INVALID = object()
_BACKEND = Key(name="backend", kind=Kind.STRING)

_TYPE_MESSAGES = {
    Kind.STRING: "must be a string",
    Kind.BOOLEAN: "must be a boolean",
    Kind.INTEGER: "must be an integer",
    Kind.DURATION: "must be a duration such as 24h",
    Kind.BYTE_SIZE: "must be a byte size such as 20MB",
    Kind.STRING_LIST: "must be a list",
    Kind.STRING_MAP: "must be a mapping",
    Kind.MAPPING: "must be a mapping",
    Kind.MAPPING_LIST: "must be a list",
}


def child_path(path: str, key: str) -> str:
    return key if path == "" else f"{path}.{key}"


def scalar_text(value: Any) -> str | None:
    """The text of a string or number scalar (numbers as written); ``None`` for anything else."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return None
    if isinstance(value, YamlInt | YamlFloat):
        return value.yaml_text
    if isinstance(value, int | float):
        return str(value)
    return None


def decode_document(raw: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Decode the top-level mapping. Returns the clean tree and the messages, in document order."""
    messages: list[str] = []
    tree = _decode_mapping(raw, shape.root().keys, (), "", messages)
    return (tree if isinstance(tree, dict) else {}), messages


def _decode_mapping(
    value: Any, fields: Mapping[str, Key], backends: tuple[str, ...], path: str, messages: list[str]
) -> dict[str, Any] | object:
    if not isinstance(value, dict):
        messages.append(f"{path} {_TYPE_MESSAGES[Kind.MAPPING]}")
        return _INVALID
    allowed: dict[str, Key] = dict(fields)
    tables = shape.backends()
    chosen: str | None = None
    if backends:
        allowed["backend"] = _BACKEND
        named = scalar_text(value.get("backend"))
        if named in backends:
            chosen = named
            allowed.update(tables[named].keys)
        else:
            # Without a usable backend the owner of a backend key cannot be judged: accept them all
            # and let validation report the backend itself.
            for table in tables.values():
                allowed.update(table.keys)
    out: dict[str, Any] = {}
    for key, item in value.items():
        where = child_path(path, key)
        spec = allowed.get(key)
        if spec is None:
            if chosen is not None and key in shape.backend_key_owners():
                messages.append(f"{where} is not supported for {chosen} backend")
            else:
                messages.append(f"{where}: unknown field")
            continue
        if item is None:
            continue
        decoded = _decode_value(item, spec, where, messages)
        if decoded is not _INVALID:
            out[key] = decoded
    return out


def _decode_value(value: Any, spec: Key, path: str, messages: list[str]) -> Any:
    kind = spec.kind
    if kind is Kind.MAPPING:
        return _decode_mapping(value, spec.keys, spec.backends, path, messages)
    if kind is Kind.MAPPING_LIST:
        if not isinstance(value, list):
            messages.append(f"{path} {_TYPE_MESSAGES[kind]}")
            return _INVALID
        items = []
        for index, item in enumerate(value):
            decoded = _decode_mapping(
                {} if item is None else item, spec.keys, spec.backends, f"{path}[{index}]", messages
            )
            items.append(decoded if isinstance(decoded, dict) else {})
        return items
    if kind is Kind.STRING_LIST:
        if not isinstance(value, list):
            messages.append(f"{path} {_TYPE_MESSAGES[kind]}")
            return _INVALID
        strings = []
        for index, item in enumerate(value):
            text = "" if item is None else scalar_text(item)
            if text is None:
                messages.append(f"{path}[{index}] {_TYPE_MESSAGES[Kind.STRING]}")
                text = ""
            strings.append(text)
        return strings
    if kind is Kind.STRING_MAP:
        if not isinstance(value, dict):
            messages.append(f"{path} {_TYPE_MESSAGES[kind]}")
            return _INVALID
        pairs = []
        for key, item in value.items():
            text = "" if item is None else scalar_text(item)
            if text is None:
                messages.append(f"{child_path(path, str(key))} {_TYPE_MESSAGES[Kind.STRING]}")
                continue
            pairs.append((scalar_text(key) or str(key), text))
        return pairs  # (key, value) pairs in file order: the model keeps them as a tuple
    result = _decode_scalar(value, kind)
    if result is _INVALID:
        messages.append(f"{path} {_TYPE_MESSAGES[kind]}")
    return result


def _decode_scalar(value: Any, kind: Kind) -> Any:
    if kind is Kind.STRING:
        text = scalar_text(value)
        return _INVALID if text is None else text
    if kind is Kind.BOOLEAN:
        if isinstance(value, bool):
            return value
        return YAML11_BOOLEANS.get(value, _INVALID) if type(value) is str else _INVALID
    if kind is Kind.INTEGER:
        return int(value) if isinstance(value, int) and not isinstance(value, bool) else _INVALID
    if kind is Kind.DURATION:
        if not isinstance(value, str):
            return _INVALID
        try:
            return parse_duration(value)
        except DurationError:
            return _INVALID
    if kind is Kind.BYTE_SIZE:
        if isinstance(value, bool) or not isinstance(value, int | str):
            return _INVALID
        try:
            return parse_byte_size(int(value) if isinstance(value, int) else value)
        except ByteSizeError:
            return _INVALID
    raise AssertionError(f"unhandled kind {kind}")

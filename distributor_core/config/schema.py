"""JSON Schema (draft 2020-12) of the YAML config, for editors and ``distributor config schema``.

Generated from the declaration the strict decoder reads (:mod:`.models` through :mod:`.shape`), so
it names exactly the keys the loader accepts, with their defaults, documented values and bounds.
Backend fields are inline: a source or destination allows the keys of the backend its ``backend``
names, expressed with ``if``/``then`` branches.

The schema describes the documented form, including the YAML 1.1 words boolean fields accept
(``yes``/``no``/``on``/``off``/``y``/``n``, resolutions G2). The loader is a little more lenient in two
ways the schema does not mirror: a ``null`` value means "absent", and a number written for a string field
is taken as its text. Rules between fields (ids unique, upload tokens referencing upload
pipelines, retention needing a policy when enabled, ...) are checked by the loader only.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from distributor_core.config import shape
from distributor_core.config.loader import YAML11_BOOLEANS
from distributor_core.config.shape import Key, Kind

DRAFT = "https://json-schema.org/draft/2020-12/schema"
DURATION_PATTERN = r"^[-+]?(0|(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$"
BYTE_SIZE_PATTERN = r"^[0-9]+( ?([bB]|[kKmMgGtT][iI]?[bB]))?$"

_DEFS = {
    "boolean": {
        "anyOf": [{"type": "boolean"}, {"enum": list(YAML11_BOOLEANS)}],
        "description": "true or false; the YAML 1.1 words yes/no, on/off, y/n (lower, Title or UPPER case) "
        "are accepted in boolean fields, as by the Go tool's loader",
    },
    "duration": {
        "type": "string",
        "pattern": DURATION_PATTERN,
        "description": "Go duration such as 24h, 90m, 1h30m or 1.5h (units ns, us, ms, s, m, h; no d)",
    },
    "byte_size": {
        "anyOf": [
            {"type": "integer", "minimum": 0},
            {"type": "string", "pattern": BYTE_SIZE_PATTERN},
        ],
        "description": "bytes, or a size such as 20MB (B, KB, MB, GB, TB; powers of 1024; KiB... accepted)",
    },
}


def config_json_schema() -> dict[str, Any]:
    """The JSON Schema of the config file, as a fresh ``dict`` (safe to mutate)."""
    schema: dict[str, Any] = {
        "$schema": DRAFT,
        "title": "distributor configuration",
        "description": "Configuration file of distributor (see docs/config.md).",
    }
    root = shape.root()
    schema.update(_object(root.keys, (), root.required))
    schema["$defs"] = {name: dict(value) for name, value in _DEFS.items()}
    return schema


def _object(fields: Mapping[str, Key], backends: tuple[str, ...], required: tuple[str, ...]) -> dict[str, Any]:
    properties = {name: _field(spec) for name, spec in fields.items()}
    if not backends:
        result: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
        if required:
            result["required"] = list(required)
        return result
    properties["backend"] = {"enum": list(backends), "description": "storage backend; its fields are inline"}
    branches = []
    for backend in backends:
        allowed: dict[str, Any] = {name: {} for name in properties}
        allowed["backend"] = {"const": backend}
        table = shape.backends()[backend]
        allowed.update({name: _field(spec) for name, spec in table.keys.items()})
        then: dict[str, Any] = {"properties": allowed, "additionalProperties": False}
        if table.required:
            then["required"] = list(table.required)
        branches.append(
            {"if": {"properties": {"backend": {"const": backend}}, "required": ["backend"]}, "then": then}
        )
    return {
        "type": "object",
        "properties": properties,
        "required": sorted(set(required) | {"backend"}, key=[*fields, "backend"].index),
        "allOf": branches,
    }


def _field(spec: Key) -> dict[str, Any]:
    kind = spec.kind
    if kind is Kind.STRING:
        result: dict[str, Any] = {"type": "string"}
        if spec.choices:
            result["enum"] = list(spec.choices)
        if spec.pattern:
            result["pattern"] = spec.pattern
        if spec.max_length is not None:
            result["maxLength"] = spec.max_length
    elif kind is Kind.BOOLEAN:
        result = {"$ref": "#/$defs/boolean"}
    elif kind is Kind.INTEGER:
        result = {"type": "integer"}
        minimum = spec.gt + 1 if spec.gt is not None else spec.ge
        if minimum is not None:
            result["minimum"] = minimum
        if spec.le is not None:
            result["maximum"] = spec.le
    elif kind is Kind.DURATION:
        result = {"$ref": "#/$defs/duration"}
    elif kind is Kind.BYTE_SIZE:
        result = {"$ref": "#/$defs/byte_size"}
    elif kind is Kind.STRING_LIST:
        result = {"type": "array", "items": {"type": "string"}}
    elif kind is Kind.STRING_MAP:
        result = {"type": "object", "additionalProperties": {"type": "string"}}
    elif kind is Kind.MAPPING:
        result = _object(spec.keys, spec.backends, spec.required)
    else:
        result = {"type": "array", "items": _object(spec.keys, spec.backends, spec.required)}
    if kind in (Kind.STRING_LIST, Kind.MAPPING_LIST) and spec.min_items is not None:
        result["minItems"] = spec.min_items
    result["description"] = plain(spec.doc)
    default = shape.written_default(spec)
    if default is not None:
        result["default"] = default
    return result


_LINK = re.compile(r"\[([^\]]+)\]\([^)]*\)")


def plain(text: str) -> str:
    """A description without its Markdown links (``[validation cache](operations.md#...)`` →
    ``validation cache``): docs/config.md links its sections, a schema's reader has no such page."""
    return _LINK.sub(r"\1", text)

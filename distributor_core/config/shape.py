"""The YAML shape of the config, read from its one declaration (:mod:`.models`).

:func:`root` walks the model Structs with ``msgspec.inspect`` once and answers a :class:`Key` per
YAML key: its kind as the YAML writes it, description, default, documented values and bounds,
and for a mapping its own keys. The strict decoder (``decode.py``), the defaults (``fill.py``),
the JSON Schema (``schema.py``), the reference tables of docs/config.md (``reference.py``) and
the bounds and choices ``validate.py`` checks all read this table, so a key is written once, in
its model. Pure data: building it imports nothing but msgspec.
"""

from __future__ import annotations

import enum
import typing
from collections.abc import Iterator, Mapping
from datetime import timedelta
from functools import cache
from pathlib import Path
from types import MappingProxyType
from typing import Any

import msgspec
from msgspec import inspect as mi

from distributor_core.config import models


class Kind(enum.Enum):
    STRING = "string"
    BOOLEAN = "boolean"
    INTEGER = "integer"
    DURATION = "duration"
    BYTE_SIZE = "byte size"
    STRING_LIST = "list of strings"
    STRING_MAP = "mapping of strings"
    MAPPING = "mapping"
    MAPPING_LIST = "list of mappings"


_NO_KEYS: Mapping[str, Key] = MappingProxyType({})
class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


#: the default of a key that has none: the YAML must write it (its absence is worded by validation)
REQUIRED: Any = _Required()


class Key(msgspec.Struct, frozen=True, kw_only=True):
    """One YAML key (or, for :func:`root` and :func:`backend`, a whole mapping)."""

    name: str
    kind: Kind
    doc: str = ""
    #: a mapping's keys (of its Struct; a backend union has none of its own but ``backend``)
    keys: Mapping[str, Key] = _NO_KEYS
    #: the Struct a mapping (or each item of a list of mappings) becomes
    model: type[msgspec.Struct] | None = None
    #: a mapping whose ``backend`` key picks the member of a union (a source; a destination,
    #: whose backend keys are inline): the tags it accepts
    backends: tuple[str, ...] = ()
    #: the field of ``model`` that holds the inline backend (``storage``), and its description
    inline: str | None = None
    inline_doc: str = ""
    #: a mapping's keys that have no default
    required: tuple[str, ...] = ()
    choices: tuple[str, ...] = ()
    pattern: str | None = None
    max_length: int | None = None
    gt: int | None = None
    ge: int | None = None
    le: int | None = None
    min_items: int | None = None
    #: the typed default (:data:`REQUIRED` for none); ``None`` for an optional key
    default: Any = REQUIRED
    #: the default in words, when it depends on other keys
    default_text: str | None = None
    #: ``None`` is a value (an optional mapping or scalar)
    optional: bool = False
    #: a local path (resolved against the config file's directory), ``~`` expanded or not
    path: bool = False
    expand_user: bool = False
    #: an empty string is a value (elsewhere it means the default, or absent)
    keeps_empty: bool = False
    #: how docs/config.md names the type, where the kind does not say it
    shown: str | None = None

    def __hash__(self) -> int:  # ``keys`` (a read-only mapping) and the model are not part of it
        return hash((self.name, self.kind, self.doc))

    @property
    def is_required(self) -> bool:
        return self.default is REQUIRED and self.default_text is None


def _unwrap(info: mi.Type) -> tuple[mi.Type, dict[str, Any], dict[str, Any]]:
    """The type under its metadata, with the metadata's ``extra`` and JSON Schema extras merged."""
    extra: dict[str, Any] = {}
    schema: dict[str, Any] = {}
    while isinstance(info, mi.Metadata):
        extra.update(info.extra or {})
        schema.update(info.extra_json_schema or {})
        info = info.type
    return info, extra, schema


def _is_struct(info: mi.Type) -> bool:
    return isinstance(info, mi.StructType)


def _literal_values(annotation: Any) -> tuple[str, ...]:
    """A ``Literal``'s values in the order written (``msgspec.inspect`` sorts them; messages and
    the schema list them as declared)."""
    if typing.get_origin(annotation) is typing.Literal:
        return tuple(typing.get_args(annotation))
    for arg in typing.get_args(annotation):
        values = _literal_values(arg)
        if values:
            return values
    return ()


def _key(name: str, field_type: mi.Type, default: Any, annotation: Any = None) -> Key:
    info, extra, schema = _unwrap(field_type)
    optional = False
    if isinstance(info, mi.UnionType) and any(isinstance(t, mi.NoneType) for t in info.types):
        rest = [t for t in info.types if not isinstance(t, mi.NoneType)]
        optional = True
        info, more, more_schema = _unwrap(rest[0] if len(rest) == 1 else mi.UnionType(tuple(rest)))
        extra.update(more)
        schema.update(more_schema)
    common: dict[str, Any] = {
        "name": name,
        "doc": schema.get("description", ""),
        "default": default,
        "default_text": extra.get("default"),
        "optional": optional,
        "shown": extra.get("shown"),
        "keeps_empty": bool(extra.get("keeps_empty")),
    }
    if isinstance(info, mi.StructType):
        return _mapping(info.cls, **common)
    if isinstance(info, mi.UnionType):  # a tagged union of backends
        return Key(kind=Kind.MAPPING, backends=tuple(t.tag for t in info.types), inline=None,
                   **common)
    if isinstance(info, mi.VarTupleType):
        item, _, _ = _unwrap(info.item_type)
        if _is_struct(item):
            assert isinstance(item, mi.StructType)
            nested = _mapping(item.cls, name=name)
            return Key(kind=Kind.MAPPING_LIST, keys=nested.keys, model=item.cls, backends=nested.backends,
                       inline=nested.inline, required=nested.required, min_items=info.min_length, **common)
        if isinstance(item, mi.TupleType):  # (key, value) pairs: a mapping of strings in file order
            return Key(kind=Kind.STRING_MAP, **common)
        return Key(kind=Kind.STRING_LIST, min_items=info.min_length, **common)
    if isinstance(info, mi.BoolType):
        return Key(kind=Kind.BOOLEAN, **common)
    if isinstance(info, mi.IntType):
        kind = Kind.BYTE_SIZE if extra.get("kind") == "byte size" else Kind.INTEGER
        return Key(kind=kind, gt=info.gt, ge=info.ge, le=info.le, **common)
    if isinstance(info, mi.TimeDeltaType):
        return Key(kind=Kind.DURATION, gt=extra.get("gt"), **common)
    if isinstance(info, mi.LiteralType):
        return Key(kind=Kind.STRING, choices=_literal_values(annotation) or tuple(info.values), **common)
    if isinstance(info, mi.StrType):
        return Key(kind=Kind.STRING, pattern=info.pattern, max_length=info.max_length, **common)
    if isinstance(info, mi.CustomType) and issubclass(info.cls, Path):
        return Key(kind=Kind.STRING, path=True, expand_user=bool(extra.get("expand_user")), **common)
    raise TypeError(f"config key {name}: no YAML form for {info!r}")


@cache
def _infos() -> Mapping[type, mi.StructType]:
    """Every model of the declaration, read by ``msgspec.inspect`` in one pass."""
    found: dict[type, mi.StructType] = {}

    def collect(info: mi.Type) -> None:
        if isinstance(info, mi.StructType):
            if info.cls in found:
                return
            found[info.cls] = info
            for field in info.fields:
                collect(field.type)
        elif isinstance(info, mi.Metadata):
            collect(info.type)
        elif isinstance(info, mi.UnionType):
            for member in info.types:
                collect(member)
        elif isinstance(info, mi.VarTupleType):
            collect(info.item_type)

    for info in mi.multi_type_info([models.Config, models.SourceBackend]):
        collect(info)
    return MappingProxyType(found)


def _mapping(model: type[msgspec.Struct], **common: Any) -> Key:
    """The key of a mapping that fills ``model``; an inline union field adds ``backend``."""
    info = _infos().get(model) or mi.type_info(model)
    assert isinstance(info, mi.StructType)
    hints = typing.get_type_hints(model, include_extras=True)
    keys: dict[str, Key] = {}
    backends: tuple[str, ...] = ()
    inline, inline_doc = None, ""
    for field in info.fields:
        field_info, extra, schema = _unwrap(field.type)
        if extra.get("derived"):
            continue
        if field.default_factory is not msgspec.NODEFAULT:
            default = field.default_factory()
        else:
            default = REQUIRED if field.default is msgspec.NODEFAULT else field.default
        if extra.get("inline"):
            assert isinstance(field_info, mi.UnionType)
            backends, inline = tuple(t.tag for t in field_info.types), field.name
            inline_doc = schema.get("description", "")
            continue
        keys[field.name] = _key(field.name, field.type, default, hints[field.name])
    required = tuple(name for name, key in keys.items() if key.is_required)
    if inline is not None:
        required = (*required, "backend")
    common.setdefault("name", "")
    return Key(kind=Kind.MAPPING, keys=MappingProxyType(keys), model=model, backends=backends, inline=inline,
               inline_doc=inline_doc, required=required, **common)


@cache
def root() -> Key:
    """The whole config file: a mapping that fills :class:`~distributor_core.config.models.Config`."""
    return _mapping(models.Config)


@cache
def backends() -> Mapping[str, Key]:
    """Each backend's mapping by its tag, in declaration order (sources' order: local, ssh, s3,
    http_upload)."""
    result: dict[str, Key] = {}
    for member in _union(models.SourceBackend):
        result[str(member.tag)] = _mapping(member.cls, name=member.tag)
    return MappingProxyType(result)


def _union(union: Any) -> tuple[mi.StructType, ...]:
    """The members of a backend union, in declaration order."""
    infos = _infos()
    return tuple(infos[member] for member in typing.get_args(union))


@cache
def source_backends() -> tuple[str, ...]:
    return tuple(backends())


@cache
def destination_backends() -> tuple[str, ...]:
    return tuple(str(member.tag) for member in _union(models.StorageBackend))


@cache
def backend_key_owners() -> Mapping[str, tuple[str, ...]]:
    """Every key that belongs to some backend, with the backends that own it."""
    tables = backends()
    names = dict.fromkeys(name for table in tables.values() for name in table.keys)
    return MappingProxyType({
        name: tuple(tag for tag, table in tables.items() if name in table.keys) for name in names
    })


@cache
def mapping_of(model: type[msgspec.Struct]) -> Key:
    """The mapping that fills ``model``."""
    return _mapping(model)


def field(model: type[msgspec.Struct], name: str) -> Key:
    """The key of ``model.name`` (a validator's bounds and choices come from here)."""
    return fields_of(model)[name]


def fields_of(model: type[msgspec.Struct]) -> Mapping[str, Key]:
    """The YAML keys of ``model``, in declaration order."""
    return mapping_of(model).keys


def walk(key: Key, prefix: str = "") -> Iterator[tuple[str, Key]]:
    """Every key below ``key`` as ``(dotted path, key)``, depth first in declaration order (a
    union's backend keys are under :func:`backends`)."""
    for name, child in key.keys.items():
        path = f"{prefix}{name}"
        yield path, child
        yield from walk(child, f"{path}.")


def written_default(key: Key) -> Any:
    """A key's default as the YAML writes it (``24h``, ``100MB``, ``.distributor/staging``), or
    ``None`` when it has none to show (required, optional, a mapping, an empty list)."""
    value = key.default
    if value is REQUIRED or value is None or isinstance(value, msgspec.Struct | tuple):
        return None
    if key.kind is Kind.DURATION:
        return format_short_duration(value)
    if key.kind is Kind.BYTE_SIZE:
        from distributor_core.config.units import format_byte_size

        return format_byte_size(value)
    if isinstance(value, Path):
        return str(value)
    return value


def format_short_duration(value: timedelta) -> str:
    """A default as the config writes it: whole hours in hours (``24h``), else whole seconds in
    seconds (``60s``, ``120s``: the spec's and the examples' form); anything finer in Go's syntax
    (:func:`~distributor_core.config.units.format_duration`)."""
    seconds = value.total_seconds()
    if seconds > 0 and seconds % 3600 == 0:
        return f"{int(seconds) // 3600}h"
    if seconds > 0 and seconds == int(seconds):
        return f"{int(seconds)}s"
    from distributor_core.config.units import format_duration

    return format_duration(value)

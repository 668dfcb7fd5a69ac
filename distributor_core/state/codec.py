"""Reading and writing ``.distributor.json`` (core-semantics §0.3, §2.2–2.7).

Reading is one typed decoding (:mod:`.wire`: every schema's fields, each key's JSON type checked
while parsing), one conversion to the model with the contract's ``state ... is required`` /
``... must be RFC3339`` messages, and one validation (:mod:`.validate`), so a successfully parsed
document is always valid. A document the typed decoder refuses is read again by the exact walk
below, which words the problem as Go's decoder does (``parse distributor state: <detail>``) and
then goes through the same conversion and validation; it also reads the rare document only a
generic reader takes (a lone UTF-16 surrogate escape, which Go turns into U+FFFD). Keys match
exactly; unknown keys are ignored; a JSON ``null`` counts as absent.

Writing validates first, then emits the documented key order with omit-empty rules, whole-second
UTC timestamps and Go string escaping, two-space indented with a trailing newline.
"""

from __future__ import annotations

import re
import types
import typing
from datetime import datetime
from operator import attrgetter
from typing import Any

import msgspec

from distributor_core.bundle import (
    ManifestError,
    ValidManifest,
    manifest_from_obj,
    manifest_to_obj,
    validate_manifest,
)
from distributor_core.bundle.codec import DECODE_ERRORS, ManifestWire, manifest_from_wire
from distributor_core.gcpause import gc_paused
from distributor_core.jsonfmt import JSONFormatError, dumps_indented_bytes, is_json_int, loads_object
from distributor_core.state import wire
from distributor_core.state.errors import StateError, go_quote
from distributor_core.state.model import (
    RECONCILIATION_REPLACE,
    SHARED_ROOT_SCHEMA_VERSION,
    SINGLE_OWNER_SCHEMA_VERSION,
    STATE_MODE_SHARED_ROOT,
    STATE_MODE_SINGLE_OWNER,
    OutputRecord,
    OwnerRecord,
    SharedOutputRecord,
    SharedRootState,
    SingleOwnerState,
    StateDocument,
)
from distributor_core.state.validate import (
    Columns,
    _validate_shared_root,
    _validate_single_owner,
    validate_shared_root,
    validate_single_owner,
)
from distributor_core.timefmt import TimestampError, format_seconds, parse_rfc3339

_PARSE = "parse distributor state: "
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_SURROGATE = re.compile("[\ud800-\udfff]")

#: the validated manifest the caller expects the document to record (planning passes the source
#: manifest); when a record describes it exactly it is used as that record, without building
#: and validating an equal value again
Expected = ValidManifest | None

#: documents at least this large are parsed with the cyclic garbage collector paused
LARGE_DOCUMENT = 1024 * 1024

# -- the exact walk: Go's decoder's messages for a document the typed decoder refused ---------

_STR, _INT, _ANY = "string", "integer", "any"


def _shape(annotation: Any) -> Any:
    """The walk's shape of a :mod:`.wire` field type: a string, an integer, an array of a shape,
    an object of named shapes, or anything (a manifest: its own reader words it)."""
    args = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        return _shape(args[0])
    if typing.get_origin(annotation) is typing.Annotated:
        return _shape(args[0])
    if typing.get_origin(annotation) is list:
        return [_shape(args[0])]
    if annotation is str:
        return _STR
    if annotation is int:
        return _INT
    if annotation is ManifestWire:
        return _ANY
    return _object_shape(annotation)


def _object_shape(cls: type[msgspec.Struct]) -> dict[str, Any]:
    shape: dict[str, Any] = {}
    tag_field = cls.__struct_config__.tag_field
    if tag_field is not None:
        shape[tag_field] = _INT
    for field in msgspec.structs.fields(cls):
        shape[field.encode_name] = _shape(field.type)
    return shape


_SINGLE_OWNER_SHAPE = _object_shape(wire.SingleOwner)
_SHARED_ROOT_SHAPE = _object_shape(wire.SharedRoot)


def _shape_error(field: str, expected: str) -> StateError:
    return StateError(f"{_PARSE}{field} must be {expected}")


def _conform(value: Any, shape: Any, field: str) -> Any:
    """Type-check ``value`` against ``shape``; objects come back with every known key (``None``
    when absent or null), arrays with ``null`` elements turned into empty objects (Go's zero
    struct), strings with unpaired surrogates replaced by U+FFFD (as Go decodes them)."""
    if value is None:
        return None
    if shape == _ANY:
        return value
    if shape == _STR:
        if not isinstance(value, str):
            raise _shape_error(field, "a string")
        return _SURROGATE.sub("\ufffd", value)
    if shape == _INT:
        if not is_json_int(value):
            raise _shape_error(field, "an integer")
        if not _INT64_MIN <= value <= _INT64_MAX:
            raise _shape_error(field, "a 64-bit integer")
        return value
    if isinstance(shape, list):
        if not isinstance(value, list):
            raise _shape_error(field, "an array")
        element = shape[0]
        return [
            _conform({} if item is None else item, element, f"{field}[{index}]") for index, item in enumerate(value)
        ]
    if not isinstance(value, dict):
        raise _shape_error(field, "an object")
    prefix = f"{field}." if field else ""
    return {key: _conform(value.get(key), sub, prefix + key) for key, sub in shape.items()}


def _decode(data: bytes | str) -> dict[str, Any]:
    try:
        return loads_object(data)
    except JSONFormatError as exc:
        raise StateError(_PARSE + exc.detail) from None


def _schema_version(obj: dict[str, Any]) -> int:
    value = obj.get("schema_version")
    if value is None:
        raise StateError("state schema_version is required")
    return _conform(value, _INT, "schema_version")


class _UnreadManifest:
    """A recorded manifest the typed decoding refused: its own reader words it when the
    conversion reaches it (after every state field before it)."""

    def __init__(self, obj: Any) -> None:
        self.obj = obj


def _wire_manifest(obj: Any) -> ManifestWire | _UnreadManifest | None:
    if obj is None:
        return None
    try:
        return msgspec.convert(obj, ManifestWire)
    except (msgspec.ValidationError, UnicodeError):  # a lone surrogate: the exact reader takes it
        return _UnreadManifest(obj)


def _to_wire(conformed: dict[str, Any], cls: type) -> Any:
    """The conformed document as its :mod:`.wire` class; the recorded manifests, which the walk
    leaves as they are, are converted on their own."""
    sources = [conformed.get("source")] + [owner["source"] for owner in conformed.get("owners") or ()]
    manifests = [source.pop("manifest") if source is not None else None for source in sources]
    doc = msgspec.convert(conformed, cls)
    wire_sources = [doc.source] if isinstance(doc, wire.SingleOwner) else [None]
    wire_sources += [owner.source for owner in doc.owners or ()] if isinstance(doc, wire.SharedRoot) else []
    for source, manifest in zip(wire_sources, manifests, strict=True):
        if source is not None:
            source.manifest = _wire_manifest(manifest)
    return doc


def _exact_single_owner(obj: dict[str, Any]) -> wire.SingleOwner:
    conformed = _conform(obj, _SINGLE_OWNER_SHAPE, "")
    version = conformed["schema_version"]
    if version is None:
        raise StateError("state schema_version is required")
    if version not in (1, SINGLE_OWNER_SCHEMA_VERSION):
        raise StateError("state schema_version must be 1 or 2")
    return _to_wire(conformed, wire.Legacy if version == 1 else wire.SingleOwner)


def _exact_shared_root(obj: dict[str, Any]) -> wire.SharedRoot:
    conformed = _conform(obj, _SHARED_ROOT_SHAPE, "")
    version = conformed["schema_version"]
    if version is None:
        raise StateError("state schema_version is required")
    if version != SHARED_ROOT_SCHEMA_VERSION:
        raise StateError("state schema_version must be 3")
    return _to_wire(conformed, wire.SharedRoot)


def _exact_any(obj: dict[str, Any]) -> wire.Document:
    if _schema_version(obj) == SHARED_ROOT_SCHEMA_VERSION:
        return _exact_shared_root(obj)
    return _exact_single_owner(obj)


# -- conversion to the model (both ways in) --------------------------------------------------


def _required_str(value: str | None, context: str) -> str:
    if not value:
        raise StateError(f"{context} is required")
    return value


def _required_time(value: str | None, context: str) -> datetime:
    if not value:
        raise StateError(f"{context} is required")
    try:
        return parse_rfc3339(value)
    except TimestampError as exc:
        raise StateError(f"{context} must be RFC3339: {exc}") from None


def _mode(value: wire.Mode | None, context: str) -> str:
    if value is None or not value.mode:
        raise StateError(f"{context} is required")
    return value.mode


def _manifest(source: wire.Source | None, context: str, expected: Expected) -> ValidManifest:
    recorded: Any = source.manifest if source is not None else None
    if recorded is None:
        raise StateError(f"{context} is required")
    try:
        if isinstance(recorded, _UnreadManifest):
            return validate_manifest(manifest_from_obj(recorded.obj))
        return manifest_from_wire(recorded, expected)
    except ManifestError as exc:
        raise StateError(f"{context}: {exc}") from None


def _primary_url(links: wire.Links | None) -> str:
    return (links.primary_url or "") if links is not None else ""


_TEXT, _SIZE, _TIME, _OPTIONAL = "text", "size", "time", "optional"


def _field_kinds(record: type[msgspec.Struct]) -> dict[str, str]:
    """A model record's fields, in its order, by how the wire carries them: a required string,
    the size, a time, an optional string (``""`` when absent)."""
    kinds = {}
    for field in msgspec.structs.fields(record):
        if field.type is datetime:
            kinds[field.name] = _TIME
        elif field.type is int:
            kinds[field.name] = _SIZE
        elif field.default is msgspec.NODEFAULT:
            kinds[field.name] = _TEXT
        else:
            kinds[field.name] = _OPTIONAL
    return kinds


_KINDS = {record: _field_kinds(record) for record in (OutputRecord, SharedOutputRecord)}


def _records(
    items: list[Any], record: type, published_at: datetime | None, unique: bool
) -> tuple[list[Any], Columns]:
    """The model records of the wire outputs ``items``, each field taken once by name, a whole
    column at a time, and those columns; the first problem is worded per record (fields in the
    record's order). ``published_at``: a schema 1 document's time, which every record's times
    take. ``unique``: a repeated path is an error (single-owner state)."""
    kinds = _KINDS[record]
    columns = {name: list(map(attrgetter(name), items)) for name in kinds}
    plain = True
    parsed: dict[str, datetime] = {}
    for name, kind in kinds.items():
        column = columns[name]
        if kind == _OPTIONAL:
            if None in column:
                columns[name] = [value or "" for value in column]
        elif kind == _TEXT:
            plain = plain and all(column)
        elif kind == _SIZE:
            plain = plain and None not in column
        elif published_at is not None:
            columns[name] = [published_at] * len(items)
        else:
            try:
                for value in set(column) - parsed.keys():
                    parsed[value] = parse_rfc3339(value)  # TypeError for None
                columns[name] = list(map(parsed.__getitem__, column))
            except (TypeError, TimestampError):
                plain = False
    if plain and unique and len(set(columns["path"])) != len(items):
        plain = False
    if not plain:
        _word_first_problem(items, kinds, legacy=published_at is not None, unique=unique)
    return list(map(record, *(columns[name] for name in record.__struct_fields__))), columns


def _word_first_problem(items: list[Any], kinds: dict[str, str], *, legacy: bool, unique: bool) -> None:
    seen: set[str] = set()
    for index, item in enumerate(items):
        prefix = f"state outputs[{index}]"
        for name, kind in kinds.items():
            if kind == _TEXT:
                _required_str(getattr(item, name), f"{prefix}.{name}")
            elif kind == _SIZE and getattr(item, name) is None:
                raise StateError(f"{prefix}.{name} is required")
            elif kind == _TIME and not legacy:
                _required_time(getattr(item, name), f"{prefix}.{name}")
        if unique:
            if item.path in seen:
                raise StateError(f"{prefix}.path duplicates {go_quote(item.path)}")
            seen.add(item.path)


def _single_owner(doc: wire.SingleOwner, expected: Expected) -> SingleOwnerState:
    legacy = isinstance(doc, wire.Legacy)
    pipeline_id = _required_str(doc.pipeline_id, "state pipeline_id")
    destination_id = _required_str(doc.destination_id, "state destination_id")
    published_at = _required_time(doc.published_at, "state published_at")
    if legacy:
        created_at = updated_at = published_at
        state_mode: str = STATE_MODE_SINGLE_OWNER
        reconciliation_mode: str = RECONCILIATION_REPLACE
    else:
        created_at = _required_time(doc.created_at, "state created_at")
        updated_at = _required_time(doc.updated_at, "state updated_at")
        state_mode = _mode(doc.state, "state state.mode")
        reconciliation_mode = _mode(doc.reconciliation, "state reconciliation.mode")
    manifest = _manifest(doc.source, "state source.manifest", expected)
    primary_url = _primary_url(doc.links)
    if doc.outputs is None:
        raise StateError("state outputs is required")
    outputs, table = _records(doc.outputs, OutputRecord, published_at if legacy else None, unique=True)
    state = SingleOwnerState(
        pipeline_id=pipeline_id,
        destination_id=destination_id,
        published_at=published_at,
        created_at=created_at,
        updated_at=updated_at,
        reconciliation_mode=reconciliation_mode,
        manifest=manifest,
        outputs=tuple(outputs),
        primary_url=primary_url,
        distributor_version=doc.distributor_version or "",
        read_schema_version=1 if legacy else SINGLE_OWNER_SCHEMA_VERSION,
    )
    return _validate_single_owner(state, state_mode=state_mode, table=table)


def _owner(index: int, owner: wire.Owner, expected: Expected) -> OwnerRecord:
    prefix = f"state owners[{index}]"
    return OwnerRecord(
        pipeline_id=_required_str(owner.pipeline_id, f"{prefix}.pipeline_id"),
        destination_id=_required_str(owner.destination_id, f"{prefix}.destination_id"),
        reconciliation_mode=_mode(owner.reconciliation, f"{prefix}.reconciliation.mode"),
        manifest=_manifest(owner.source, f"{prefix}.source.manifest", expected),
        primary_url=_primary_url(owner.links),
    )


def _shared_root(doc: wire.SharedRoot, expected: Expected) -> SharedRootState:
    created_at = _required_time(doc.created_at, "state created_at")
    updated_at = _required_time(doc.updated_at, "state updated_at")
    state_mode = _mode(doc.state, "state state.mode")
    if doc.owners is None:
        raise StateError("state owners is required")
    owners = tuple(_owner(index, owner, expected) for index, owner in enumerate(doc.owners))
    if doc.outputs is None:
        raise StateError("state outputs is required")
    outputs, table = _records(doc.outputs, SharedOutputRecord, None, unique=False)
    state = SharedRootState(
        created_at=created_at,
        updated_at=updated_at,
        owners=owners,
        outputs=tuple(outputs),
        distributor_version=doc.distributor_version or "",
    )
    return _validate_shared_root(state, state_mode=state_mode, table=table)


def _model(doc: wire.Document, expected: Expected) -> StateDocument:
    if isinstance(doc, wire.SharedRoot):
        return _shared_root(doc, expected)
    return _single_owner(doc, expected)


def _read(data: bytes | str, kinds: tuple[type, ...], exact: Any, expected: Expected) -> StateDocument:
    """Decode ``data`` into one of the wire ``kinds`` (the exact walk ``exact`` words a refusal),
    convert it to the model and validate it once."""
    with gc_paused(len(data) >= LARGE_DOCUMENT):
        try:
            doc = wire.DECODER.decode(data)
        except DECODE_ERRORS:
            doc = None
        if not isinstance(doc, kinds):
            doc = exact(_decode(data))
        return _model(doc, expected)


def parse_single_owner(data: bytes | str, *, source_manifest: Expected = None) -> SingleOwnerState:
    """Parse and validate schema 1 or 2 state (schema 1 is normalised to 2).

    ``source_manifest``: a validated manifest the caller expects the document to record (the
    source bundle being planned); a recorded manifest equal to it is that very object (no second
    build and validation of an equal value)."""
    return _read(data, (wire.SingleOwner,), _exact_single_owner, source_manifest)  # type: ignore[return-value]


def parse_shared_root(data: bytes | str, *, source_manifest: Expected = None) -> SharedRootState:
    """Parse and validate schema 3 state (``source_manifest`` as for :func:`parse_single_owner`)."""
    return _read(data, (wire.SharedRoot,), _exact_shared_root, source_manifest)  # type: ignore[return-value]


def parse_state_document(data: bytes | str, *, source_manifest: Expected = None) -> StateDocument:
    """Parse either shape, dispatching on ``schema_version`` (3 → shared root, else single owner);
    ``source_manifest`` as for :func:`parse_single_owner`."""
    return _read(data, (wire.SingleOwner, wire.SharedRoot), _exact_any, source_manifest)


# -- writing ---------------------------------------------------------------------------------


class _SecondsCache(dict):
    """``format_seconds`` memoised for one document: outputs share a handful of timestamps."""

    def __missing__(self, value: datetime) -> str:
        text = self[value] = format_seconds(value)
        return text


def _output_obj(output: OutputRecord | SharedOutputRecord, seconds: Any = None) -> dict[str, Any]:
    fmt = seconds.__getitem__ if seconds is not None else format_seconds
    obj: dict[str, Any] = {"path": output.path, "kind": output.kind, "source_path": output.source_path}
    if output.transform:
        obj["transform"] = output.transform
    if output.url:
        obj["url"] = output.url
    obj["sha256"] = output.sha256
    obj["size"] = output.size
    if isinstance(output, SharedOutputRecord):
        obj["pipeline_id"] = output.pipeline_id
        obj["destination_id"] = output.destination_id
        obj["source_id"] = output.source_id
        obj["source_digest"] = output.source_digest
        obj["source_created"] = fmt(output.source_created)
    obj["created_at"] = fmt(output.created_at)
    obj["updated_at"] = fmt(output.updated_at)
    return obj


def _single_owner_obj(state: SingleOwnerState) -> dict[str, Any]:
    obj: dict[str, Any] = {"schema_version": SINGLE_OWNER_SCHEMA_VERSION}
    if state.distributor_version:
        obj["distributor_version"] = state.distributor_version
    obj["pipeline_id"] = state.pipeline_id
    obj["destination_id"] = state.destination_id
    obj["published_at"] = format_seconds(state.published_at)
    obj["created_at"] = format_seconds(state.created_at)
    obj["updated_at"] = format_seconds(state.updated_at)
    obj["state"] = {"mode": STATE_MODE_SINGLE_OWNER}
    obj["reconciliation"] = {"mode": state.reconciliation_mode}
    obj["source"] = {"manifest": manifest_to_obj(state.manifest)}
    if state.primary_url:
        obj["links"] = {"primary_url": state.primary_url}
    seconds = _SecondsCache()
    obj["outputs"] = [_output_obj(output, seconds) for output in state.outputs]
    return obj


def _owner_obj(owner: OwnerRecord) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "pipeline_id": owner.pipeline_id,
        "destination_id": owner.destination_id,
        "reconciliation": {"mode": owner.reconciliation_mode},
        "source": {"manifest": manifest_to_obj(owner.manifest)},
    }
    if owner.primary_url:
        obj["links"] = {"primary_url": owner.primary_url}
    return obj


def _shared_root_obj(state: SharedRootState) -> dict[str, Any]:
    obj: dict[str, Any] = {"schema_version": SHARED_ROOT_SCHEMA_VERSION}
    if state.distributor_version:
        obj["distributor_version"] = state.distributor_version
    obj["created_at"] = format_seconds(state.created_at)
    obj["updated_at"] = format_seconds(state.updated_at)
    obj["state"] = {"mode": STATE_MODE_SHARED_ROOT}
    obj["owners"] = [_owner_obj(owner) for owner in state.owners]
    seconds = _SecondsCache()
    obj["outputs"] = [_output_obj(output, seconds) for output in state.outputs]
    return obj


def state_to_obj(doc: StateDocument) -> dict[str, Any]:
    """The document as the JSON-ready dict that :func:`marshal_state` writes (no validation)."""
    if isinstance(doc, SingleOwnerState):
        return _single_owner_obj(doc)
    if isinstance(doc, SharedRootState):
        return _shared_root_obj(doc)
    raise StateError("destination state document is empty")


def marshal_state(doc: StateDocument) -> bytes:
    """Validate, then encode as the ``.distributor.json`` bytes (schema 2 or 3); a recorded
    :class:`~distributor_core.bundle.ValidManifest` is not validated again."""
    if isinstance(doc, SingleOwnerState):
        validate_single_owner(doc)
    elif isinstance(doc, SharedRootState):
        validate_shared_root(doc)
    else:
        raise StateError("destination state document is empty")
    return dumps_indented_bytes(state_to_obj(doc))


__all__ = [
    "marshal_state",
    "parse_shared_root",
    "parse_single_owner",
    "parse_state_document",
    "state_to_obj",
]

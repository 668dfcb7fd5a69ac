"""Reading and writing ``.distributor.json`` (core-semantics §0.3, §2.2–2.7).

Reading happens in two phases like the Go decoder: first every known key is type-checked
(a wrong JSON type anywhere is a ``parse distributor state: <detail>`` error, as Go's decoder
reports it), then fields are extracted with the contract's ``state ... is required`` /
``... must be RFC3339`` messages, and finally the full validation of :mod:`.validate` runs, so a
successfully parsed document is always valid. Keys match exactly; unknown keys are ignored; a
JSON ``null`` counts as absent.

Writing validates first, then emits the documented key order with omit-empty rules, whole-second
UTC timestamps and Go string escaping, two-space indented with a trailing newline.
"""

from __future__ import annotations

import re
from datetime import datetime
from itertools import repeat
from typing import Any

from distributor_core.bundle import (
    ManifestError,
    ValidManifest,
    manifest_from_obj,
    manifest_to_obj,
    validate_manifest,
)
from distributor_core.bundle.codec import expected_manifest_for, valid_manifest_from_obj
from distributor_core.gcpause import gc_paused
from distributor_core.jsonfmt import JSONFormatError, dumps_indented_bytes, is_json_int, loads_object
from distributor_core.state import typed
from distributor_core.state.errors import StateError, go_quote
from distributor_core.state.model import (
    LEGACY_SCHEMA_VERSION,
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
    records_from_columns,
)
from distributor_core.state.validate import (
    _validate_shared_root,
    _validate_single_owner,
    validate_shared_root,
    validate_single_owner,
)
from distributor_core.timefmt import TimestampError, format_seconds, parse_rfc3339

_PARSE = "parse distributor state: "
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_SURROGATE = re.compile("[\ud800-\udfff]")

# -- phase 1: shapes -------------------------------------------------------------------------

_STR, _INT, _ANY = "string", "integer", "any"

_OUTPUT_SHAPE: dict[str, Any] = {
    "path": _STR,
    "kind": _STR,
    "source_path": _STR,
    "transform": _STR,
    "url": _STR,
    "sha256": _STR,
    "size": _INT,
    "created_at": _STR,
    "updated_at": _STR,
}
_SHARED_OUTPUT_SHAPE: dict[str, Any] = {
    **_OUTPUT_SHAPE,
    "pipeline_id": _STR,
    "destination_id": _STR,
    "source_id": _STR,
    "source_digest": _STR,
    "source_created": _STR,
}
_MODE_SHAPE: dict[str, Any] = {"mode": _STR}
_SOURCE_SHAPE: dict[str, Any] = {"manifest": _ANY}
_LINKS_SHAPE: dict[str, Any] = {"primary_url": _STR}

_SINGLE_OWNER_SHAPE: dict[str, Any] = {
    "schema_version": _INT,
    "distributor_version": _STR,
    "pipeline_id": _STR,
    "destination_id": _STR,
    "published_at": _STR,
    "created_at": _STR,
    "updated_at": _STR,
    "state": _MODE_SHAPE,
    "reconciliation": _MODE_SHAPE,
    "source": _SOURCE_SHAPE,
    "links": _LINKS_SHAPE,
    "outputs": [_OUTPUT_SHAPE],
}
_OWNER_SHAPE: dict[str, Any] = {
    "pipeline_id": _STR,
    "destination_id": _STR,
    "reconciliation": _MODE_SHAPE,
    "source": _SOURCE_SHAPE,
    "links": _LINKS_SHAPE,
}
_SHARED_ROOT_SHAPE: dict[str, Any] = {
    "schema_version": _INT,
    "distributor_version": _STR,
    "created_at": _STR,
    "updated_at": _STR,
    "state": _MODE_SHAPE,
    "owners": [_OWNER_SHAPE],
    "outputs": [_SHARED_OUTPUT_SHAPE],
}


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


# -- phase 2: fields -------------------------------------------------------------------------


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


def _mode(raw: dict[str, Any] | None, context: str) -> str:
    if raw is None or not raw["mode"]:
        raise StateError(f"{context} is required")
    return raw["mode"]


#: the validated manifest the caller expects the document to record (planning passes the source
#: manifest); when a record describes it exactly it is used as that record, without building
#: and validating an equal value again
Expected = ValidManifest | None


def _manifest(raw_source: dict[str, Any] | None, context: str, known: Expected) -> ValidManifest:
    """The recorded manifest, valid: the expected manifest when the object describes it exactly,
    else the one the object describes (an invalid one's error names ``context``)."""
    if raw_source is None or raw_source["manifest"] is None:
        raise StateError(f"{context} is required")
    fast = expected_manifest_for(raw_source["manifest"], known) or valid_manifest_from_obj(raw_source["manifest"])
    if fast is not None:
        return fast
    try:
        return validate_manifest(manifest_from_obj(raw_source["manifest"]))
    except ManifestError as exc:
        raise StateError(f"{context}: {exc}") from None


def _primary_url(raw_links: dict[str, Any] | None) -> str:
    if raw_links is None:
        return ""
    return raw_links["primary_url"] or ""


def _output_basics(index: int, raw: dict[str, Any]) -> dict[str, Any]:
    prefix = f"state outputs[{index}]"
    values = {
        "path": _required_str(raw["path"], f"{prefix}.path"),
        "kind": _required_str(raw["kind"], f"{prefix}.kind"),
        "source_path": _required_str(raw["source_path"], f"{prefix}.source_path"),
        "sha256": _required_str(raw["sha256"], f"{prefix}.sha256"),
    }
    if raw["size"] is None:
        raise StateError(f"{prefix}.size is required")
    values["size"] = raw["size"]
    values["transform"] = raw["transform"] or ""
    values["url"] = raw["url"] or ""
    return values


def _single_owner_from_raw(
    raw: dict[str, Any],
    known: Expected,
    fast_outputs: list[OutputRecord] | None = None,
    fast_manifest: ValidManifest | None = None,
) -> tuple[SingleOwnerState, str]:
    version = raw["schema_version"]
    if version is None:
        raise StateError("state schema_version is required")
    if version not in (LEGACY_SCHEMA_VERSION, SINGLE_OWNER_SCHEMA_VERSION):
        raise StateError("state schema_version must be 1 or 2")
    legacy = version == LEGACY_SCHEMA_VERSION
    pipeline_id = _required_str(raw["pipeline_id"], "state pipeline_id")
    destination_id = _required_str(raw["destination_id"], "state destination_id")
    published_at = _required_time(raw["published_at"], "state published_at")
    if legacy:
        created_at = updated_at = published_at
        state_mode = STATE_MODE_SINGLE_OWNER
        reconciliation_mode = RECONCILIATION_REPLACE
    else:
        created_at = _required_time(raw["created_at"], "state created_at")
        updated_at = _required_time(raw["updated_at"], "state updated_at")
        state_mode = _mode(raw["state"], "state state.mode")
        reconciliation_mode = _mode(raw["reconciliation"], "state reconciliation.mode")
    manifest = fast_manifest or _manifest(raw["source"], "state source.manifest", known)
    primary_url = _primary_url(raw["links"])
    if raw["outputs"] is None:
        raise StateError("state outputs is required")
    if fast_outputs is not None:
        raw = {**raw, "outputs": ()}
    outputs: list[OutputRecord] = list(fast_outputs or ())
    seen: set[str] = set()
    for index, raw_output in enumerate(raw["outputs"]):
        values = _output_basics(index, raw_output)
        if legacy:
            values["created_at"] = values["updated_at"] = published_at
        else:
            prefix = f"state outputs[{index}]"
            values["created_at"] = _required_time(raw_output["created_at"], f"{prefix}.created_at")
            values["updated_at"] = _required_time(raw_output["updated_at"], f"{prefix}.updated_at")
        if values["path"] in seen:
            raise StateError(f"state outputs[{index}].path duplicates {go_quote(values['path'])}")
        seen.add(values["path"])
        outputs.append(OutputRecord(**values))
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
        distributor_version=raw["distributor_version"] or "",
        read_schema_version=version,
    )
    return state, state_mode


def _owner_from_raw(index: int, raw: dict[str, Any], known: Expected) -> OwnerRecord:
    prefix = f"state owners[{index}]"
    pipeline_id = _required_str(raw["pipeline_id"], f"{prefix}.pipeline_id")
    destination_id = _required_str(raw["destination_id"], f"{prefix}.destination_id")
    reconciliation_mode = _mode(raw["reconciliation"], f"{prefix}.reconciliation.mode")
    manifest = _manifest(raw["source"], f"{prefix}.source.manifest", known)
    return OwnerRecord(
        pipeline_id=pipeline_id,
        destination_id=destination_id,
        reconciliation_mode=reconciliation_mode,
        manifest=manifest,
        primary_url=_primary_url(raw["links"]),
    )


def _shared_output_from_raw(index: int, raw: dict[str, Any]) -> SharedOutputRecord:
    prefix = f"state outputs[{index}]"
    values = _output_basics(index, raw)
    values["pipeline_id"] = _required_str(raw["pipeline_id"], f"{prefix}.pipeline_id")
    values["destination_id"] = _required_str(raw["destination_id"], f"{prefix}.destination_id")
    values["source_id"] = _required_str(raw["source_id"], f"{prefix}.source_id")
    values["source_digest"] = _required_str(raw["source_digest"], f"{prefix}.source_digest")
    values["source_created"] = _required_time(raw["source_created"], f"{prefix}.source_created")
    values["created_at"] = _required_time(raw["created_at"], f"{prefix}.created_at")
    values["updated_at"] = _required_time(raw["updated_at"], f"{prefix}.updated_at")
    return SharedOutputRecord(**values)


def _shared_root_from_raw(raw: dict[str, Any], known: Expected) -> tuple[SharedRootState, str]:
    version = raw["schema_version"]
    if version is None:
        raise StateError("state schema_version is required")
    if version != SHARED_ROOT_SCHEMA_VERSION:
        raise StateError("state schema_version must be 3")
    created_at = _required_time(raw["created_at"], "state created_at")
    updated_at = _required_time(raw["updated_at"], "state updated_at")
    state_mode = _mode(raw["state"], "state state.mode")
    if raw["owners"] is None:
        raise StateError("state owners is required")
    owners = tuple(_owner_from_raw(index, item, known) for index, item in enumerate(raw["owners"]))
    if raw["outputs"] is None:
        raise StateError("state outputs is required")
    outputs = tuple(_shared_output_from_raw(index, item) for index, item in enumerate(raw["outputs"]))
    state = SharedRootState(
        created_at=created_at,
        updated_at=updated_at,
        owners=owners,
        outputs=outputs,
        distributor_version=raw["distributor_version"] or "",
    )
    return state, state_mode


def _single_owner_from_obj(obj: dict[str, Any], known: Expected, *, plain_strings: bool = False) -> SingleOwnerState:
    fast = _single_owner_fast(obj, known) if plain_strings else None
    if fast is not None:
        state, state_mode = fast
    else:
        state, state_mode = _single_owner_from_raw(_conform(obj, _SINGLE_OWNER_SHAPE, ""), known)
    return _validate_single_owner(state, state_mode=state_mode)


_TOP_SHAPE = {key: shape for key, shape in _SINGLE_OWNER_SHAPE.items() if key != "outputs"}


def _single_owner_fast(obj: dict[str, Any], known: Expected) -> tuple[SingleOwnerState, str] | None:
    """Schema 2 state whose outputs are all plain, complete records, read without the generic
    shape walk: the top level still goes through :func:`_conform` (its errors are the exact
    ones), the outputs are type-checked in one pass and built directly. ``None`` when any output
    is unusual; the caller then takes the exact path from the start, so errors never differ."""
    if obj.get("schema_version") != SINGLE_OWNER_SCHEMA_VERSION or type(obj.get("outputs")) is not list:
        return None
    top = _conform({key: obj.get(key) for key in _TOP_SHAPE}, _TOP_SHAPE, "")
    outputs = _outputs_fast(obj["outputs"])
    if outputs is None:
        return None
    return _single_owner_from_raw({**top, "outputs": ()}, known, outputs)


_OUTPUT_KEYS = ("path", "kind", "source_path", "sha256", "size", "created_at", "updated_at", "transform", "url")


def _outputs_fast(raw_outputs: list[Any]) -> list[OutputRecord] | None:
    """Output records when every item is an object with non-empty string ``path``, ``kind``,
    ``source_path``, ``sha256``, created/updated times that parse, an int64 ``size``, optional
    string ``transform``/``url``, and paths are unique; else ``None``. Works column by column
    so each check is one pass in C over all records."""
    items = raw_outputs
    if set(map(type, items)) - {dict}:
        return None
    get = dict.get
    # columns through map() (C loops, no Python frame per record)
    return _outputs_from_columns([list(map(get, items, repeat(key, len(items)))) for key in _OUTPUT_KEYS])


def _outputs_from_columns(columns: list[list[Any]]) -> list[OutputRecord] | None:
    """:func:`_outputs_fast` on the nine columns of ``_OUTPUT_KEYS`` (``None`` for absent)."""
    rows = _output_rows(columns)
    return None if rows is None else _records(*rows)


def _outputs_from_typed_columns(columns: list[list[Any]]) -> list[OutputRecord] | None:
    """Output records from the typed decoder's columns (``typed.output_columns``: every required
    string present and non-empty, int64 sizes, optional strings as strings); ``None`` when a
    time does not parse or a path repeats (the exact decoder words it)."""
    paths, _, _, _, _, created, updated, _, _ = columns
    times = _unique_paths_and_times(paths, created, updated)
    return None if times is None else _records(columns, times)


def _output_rows(columns: list[list[Any]]) -> tuple[list[list[Any]], dict[str, datetime]] | None:
    """The columns in record field order (optional strings ``""`` for absent, times still
    text) and the parsed time of each distinct text, or ``None`` when a record is unusual."""
    paths, kinds, sources, shas, sizes, created, updated, transforms, urls = columns
    for column in (paths, kinds, sources, shas, created, updated):
        if set(map(type, column)) - {str} or not all(column):
            return None
    for column in (transforms, urls):  # optional: absent or null means ""
        if set(map(type, column)) - {str, type(None)}:
            return None
    transforms = [value or "" for value in transforms]
    urls = [value or "" for value in urls]
    if set(map(type, sizes)) - {int}:
        return None
    if sizes and not (min(sizes) >= _INT64_MIN and max(sizes) <= _INT64_MAX):
        return None
    times = _unique_paths_and_times(paths, created, updated)
    if times is None:
        return None
    return [paths, kinds, sources, shas, sizes, created, updated, transforms, urls], times


def _unique_paths_and_times(paths: list[str], created: list[str], updated: list[str]) -> dict[str, datetime] | None:
    """The parsed time of each distinct created/updated text, or ``None`` when a path repeats or
    a time does not parse."""
    if len(set(paths)) != len(paths):
        return None
    try:
        return {text: parse_rfc3339(text) for text in {*created, *updated}}
    except TimestampError:
        return None


def _records(columns: list[list[Any]], times: dict[str, datetime]) -> list[OutputRecord]:
    paths, kinds, sources, shas, sizes, created, updated, transforms, urls = columns
    made = list(map(times.__getitem__, created))
    changed = list(map(times.__getitem__, updated))
    # one C constructor call per record (OutputRecord is a msgspec Struct)
    return records_from_columns(OutputRecord, (paths, kinds, sources, shas, sizes, made, changed, transforms, urls))


def _shared_root_from_obj(obj: dict[str, Any], known: Expected) -> SharedRootState:
    state, state_mode = _shared_root_from_raw(_conform(obj, _SHARED_ROOT_SHAPE, ""), known)
    return _validate_shared_root(state, state_mode=state_mode)


#: a JSON escape that can decode to a surrogate (the generic shape walk replaces unpaired ones)
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_SURROGATE_TEXT = re.compile("\\\\u[dD][89a-fA-F]|[\ud800-\udfff]")


def _plain_strings(data: bytes | str) -> bool:
    """True when no decoded string can hold a surrogate: valid UTF-8 cannot encode one, so in
    bytes only ``\\uD8xx``-style escapes could (a false alarm merely takes the generic path)."""
    if isinstance(data, str):
        return _SURROGATE_TEXT.search(data) is None
    data = data if isinstance(data, bytes) else bytes(data)
    return b"\\u" not in data or _SURROGATE_ESCAPE.search(data) is None


def parse_single_owner(data: bytes | str, *, source_manifest: Expected = None) -> SingleOwnerState:
    """Parse and validate schema 1 or 2 state (schema 1 is normalised to 2).

    ``source_manifest``: a validated manifest the caller expects the document to record (the
    source bundle being planned); a recorded manifest equal to it is that very object (no second
    build and validation of an equal value)."""
    return _single_owner_from_obj(_decode(data), source_manifest, plain_strings=_plain_strings(data))


def parse_shared_root(data: bytes | str, *, source_manifest: Expected = None) -> SharedRootState:
    """Parse and validate schema 3 state (``source_manifest`` as for :func:`parse_single_owner`)."""
    return _shared_root_from_obj(_decode(data), source_manifest)


#: documents at least this large are parsed with the cyclic garbage collector paused
LARGE_DOCUMENT = 1024 * 1024
#: documents at least this large try the typed decoder first (below it the exact path is as fast)
TYPED_DECODE_MIN = 64 * 1024


def _single_owner_typed(data: bytes | str, known: Expected) -> SingleOwnerState | None:
    """Schema 2 state read by the typed decoder (:mod:`.typed`) when the document is plain and
    valid; ``None`` otherwise, and the exact decoder then reads it (so errors never differ)."""
    doc = typed.decode_single_owner(data)
    if doc is None:
        return None
    manifest = typed.manifest(doc, known)
    columns = typed.output_columns(doc) if manifest is not None else None
    outputs = _outputs_from_typed_columns(columns) if columns is not None else None
    if outputs is None:
        return None
    try:
        top = _conform(typed.top_level(doc), _TOP_SHAPE, "")
        state, state_mode = _single_owner_from_raw({**top, "outputs": ()}, known, outputs, manifest)
        return _validate_single_owner(state, state_mode=state_mode)
    except StateError:
        return None


def parse_state_document(data: bytes | str, *, source_manifest: Expected = None) -> StateDocument:
    """Parse either shape, dispatching on ``schema_version`` (3 → shared root, else single owner).

    ``source_manifest`` as for :func:`parse_single_owner`. Large plain schema 2 documents are
    read by the typed decoder first (:mod:`.typed`), with the same result."""
    known = source_manifest
    with gc_paused(len(data) >= LARGE_DOCUMENT):
        if len(data) >= TYPED_DECODE_MIN:
            state = _single_owner_typed(data, known)
            if state is not None:
                return state
        obj = _decode(data)
        if _schema_version(obj) == SHARED_ROOT_SCHEMA_VERSION:
            return _shared_root_from_obj(obj, known)
        return _single_owner_from_obj(obj, known, plain_strings=_plain_strings(data))


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

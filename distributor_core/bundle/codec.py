"""Reading and writing ``manifest.json`` (core-semantics §0.3, §1.2, §1.8).

Reading is strict JSON (one object, no trailing data, no ``NaN``); keys are matched exactly;
unknown keys are ignored and never written back (spec README resolution 1). Integers must be
JSON integers (floats and booleans are refused). Writing validates first and produces the
Go-compatible indented layout with keys in the documented order and a trailing newline.
"""

from __future__ import annotations

import re
from operator import attrgetter
from typing import Annotated, Any

import msgspec

from distributor_core.bundle.errors import ManifestError
from distributor_core.bundle.model import SCHEMA_VERSION, Manifest, ManifestFile
from distributor_core.bundle.validate import ValidManifest, validate_manifest
from distributor_core.jsonfmt import JSONFormatError, dumps_indented_bytes, go_json_string, is_json_int, loads_object
from distributor_core.timefmt import TimestampError, format_precise, parse_rfc3339

_PATH, _SHA256, _SIZE = attrgetter("path"), attrgetter("sha256"), attrgetter("size")
#: a JSON integer Go reads into an int64
Int64 = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]


def utf8_problem(value: str) -> str | None:
    """Why ``value`` is not UTF-8 text (``is not valid UTF-8: ...``), or ``None``. JSON's
    ``"\\ud800"`` escape carries a lone UTF-16 surrogate into a string, which no UTF-8 document
    (a state record, an upload record, a report, a Dagster tag) can hold."""
    if value.isascii():
        return None
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        return (f"is not valid UTF-8: character {exc.start + 1} is an unpaired UTF-16 surrogate "
                f"(\\u{ord(value[exc.start]):04x})")
    return None


#: a key named as it is in a message (``files[0].path``); any other is quoted (``["a b"]``)
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_]{1,64}", re.ASCII)


def _member(name: str, key: str) -> str:
    """How a message names ``key`` of the object at ``name``: one line, at most ~70 characters
    of an unknown key's name."""
    if _PLAIN_KEY.fullmatch(key):
        return f"{name}.{key}" if name else key
    shown = key if len(key) <= 64 else key[:64] + "..."
    return f"{name}[{go_json_string(shown)}]"


def _text_problem(node: Any) -> tuple[str, str] | None:
    """The first string of a decoded manifest document, in document order, that is not UTF-8
    text: ``(field, problem)``, the field as the manifest messages name it (``id``,
    ``files[0].path``; an unknown key's value too, and a key itself as ``key in files[0]``)."""
    stack: list[tuple[str, Any]] = [("", node)]
    while stack:
        name, value = stack.pop()
        if isinstance(value, str):
            problem = utf8_problem(value)
            if problem:
                return name, problem
        elif isinstance(value, dict):
            children = []
            for key, child in value.items():
                problem = utf8_problem(key)
                if problem:
                    return (f"key in {name}" if name else "key"), problem
                children.append((_member(name, key), child))
            stack.extend(reversed(children))
        elif isinstance(value, list):
            stack.extend(reversed([(f"{name}[{index}]", child) for index, child in enumerate(value)]))
    return None


def _required(obj: dict[str, Any], key: str, field: str) -> Any:
    value = obj.get(key)
    if value is None:
        raise ManifestError(f"manifest {field} is required")
    return value


def _string(obj: dict[str, Any], key: str, field: str, *, allow_empty: bool = True) -> str:
    value = _required(obj, key, field)
    if not isinstance(value, str):
        raise ManifestError(f"manifest {field} must be a string")
    if value == "" and not allow_empty:
        raise ManifestError(f"manifest {field} is required")
    return value


def _integer(obj: dict[str, Any], key: str, field: str) -> int:
    value = _required(obj, key, field)
    if not is_json_int(value):
        raise ManifestError(f"manifest {field} must be an integer")
    return value


def manifest_from_obj(obj: dict[str, Any]) -> Manifest:
    """Extract a :class:`Manifest` from a decoded JSON object.

    Checks presence and JSON types of every field in key order (``manifest <field> is required``
    for an absent, ``null`` or empty top-level value,
    ``... must be a string``, ``... must be an integer``, ``manifest created must be RFC3339: ...``),
    after every string of the document, unknown keys' and key names included, is checked as UTF-8
    text (``manifest <field> is not valid UTF-8: ...``: JSON's ``"\\ud800"`` escapes; the typed
    decoder refuses them, so only documents read here can hold one)
    and, as the first concern of validation, that ``schema_version`` is 1. It does not run the
    remaining manifest rules; call :func:`validate_manifest` (``parse_manifest`` does).
    """
    if not isinstance(obj, dict):
        raise ManifestError("manifest must be a JSON object")
    found = _text_problem(obj)
    if found is not None:  # before any rule quotes a value back (issue 35, item 1)
        raise ManifestError(f"manifest {found[0]} {found[1]}")
    schema_version = _integer(obj, "schema_version", "schema_version")
    if schema_version != SCHEMA_VERSION:
        raise ManifestError(f"manifest schema_version must be {SCHEMA_VERSION}")
    manifest_id = _string(obj, "id", "id", allow_empty=False)
    digest = _string(obj, "digest", "digest", allow_empty=False)
    created_text = _string(obj, "created", "created", allow_empty=False)
    try:
        created = parse_rfc3339(created_text)
    except TimestampError as exc:
        raise ManifestError(f"manifest created must be RFC3339: {exc}") from None
    raw_files = _required(obj, "files", "files")
    if not isinstance(raw_files, list):
        raise ManifestError("manifest files must be an array")
    files: list[ManifestFile] = []
    for index, item in enumerate(raw_files):
        prefix = f"files[{index}]"
        if not isinstance(item, dict):
            raise ManifestError(f"manifest {prefix} must be an object")
        files.append(
            ManifestFile(
                path=_string(item, "path", f"{prefix}.path"),
                sha256=_string(item, "sha256", f"{prefix}.sha256"),
                size=_integer(item, "size", f"{prefix}.size"),
            )
        )
    return Manifest(
        schema_version=schema_version, id=manifest_id, digest=digest, created=created, files=files
    )


def manifest_to_obj(manifest: Manifest) -> dict[str, Any]:
    """The manifest as a JSON-ready dict, keys in the documented order (no validation)."""
    return {
        "schema_version": manifest.schema_version,
        "id": manifest.id,
        "digest": manifest.digest,
        "created": format_precise(manifest.created),
        "files": [{"path": f.path, "sha256": f.sha256, "size": f.size} for f in manifest.files],
    }


class FileWire(msgspec.Struct, gc=False):
    """One ``files`` entry as JSON carries it (every key optional: absence is worded later)."""

    path: str | None = None
    sha256: str | None = None
    size: Int64 | None = None


class ManifestWire(msgspec.Struct):
    """``manifest.json`` as JSON carries it: the one typed decoding of a manifest, also inside
    ``.distributor.json``. Decoding checks every key's JSON type; unknown keys are ignored."""

    schema_version: int | None = None
    id: str | None = None
    digest: str | None = None
    created: str | None = None
    files: list[FileWire] | None = None


_DECODER = msgspec.json.Decoder(ManifestWire)
#: what a failed typed decode raises (a lone surrogate in ``str`` input is a UnicodeError)
DECODE_ERRORS = (msgspec.DecodeError, msgspec.ValidationError, UnicodeError)


def manifest_from_wire(wire: ManifestWire, expected: ValidManifest | None = None) -> ValidManifest:
    """The valid manifest ``wire`` describes (the contract's messages, as
    :func:`manifest_from_obj` then :func:`validate_manifest` give them).

    ``expected``: a validated manifest the caller expects (the source manifest being planned):
    when ``wire`` describes it exactly it is returned as it is; when ``wire`` lists exactly its
    files, the result shares them (``ValidManifest.with_identity``)."""
    if wire.schema_version is None:
        raise ManifestError("manifest schema_version is required")
    if wire.schema_version != SCHEMA_VERSION:
        raise ManifestError(f"manifest schema_version must be {SCHEMA_VERSION}")
    for name in ("id", "digest", "created"):
        if not getattr(wire, name):
            raise ManifestError(f"manifest {name} is required")
    try:
        created = parse_rfc3339(wire.created)
    except TimestampError as exc:
        raise ManifestError(f"manifest created must be RFC3339: {exc}") from None
    if wire.files is None:
        raise ManifestError("manifest files is required")
    files = wire.files
    paths, shas, sizes = list(map(_PATH, files)), list(map(_SHA256, files)), list(map(_SIZE, files))
    if None in paths or None in shas or None in sizes:
        for index, item in enumerate(files):
            for name in ("path", "sha256", "size"):
                if getattr(item, name) is None:
                    raise ManifestError(f"manifest files[{index}].{name} is required")
    if isinstance(expected, ValidManifest) and (
        paths == list(map(_PATH, expected.files))
        and shas == list(map(_SHA256, expected.files))
        and sizes == list(map(_SIZE, expected.files))
    ):
        if (wire.schema_version, wire.id, wire.digest, created) == (
            expected.schema_version,
            expected.id,
            expected.digest,
            expected.created,
        ):
            return expected
        return expected.with_identity(wire.schema_version, wire.id, wire.digest, created)
    made = tuple(map(ManifestFile, paths, shas, sizes))
    return ValidManifest(wire.schema_version, wire.id, wire.digest, created, made)


def parse_manifest(data: bytes | str) -> ValidManifest:
    """Strictly decode ``manifest.json`` bytes and validate the result (manifest-only rules).

    One typed decoding (:class:`ManifestWire`); a document it refuses is read again by the
    exact walk of :func:`manifest_from_obj`, which words the problem (or, for the rare document
    only the generic reader takes, such as one with a lone UTF-16 surrogate escape, reads it)."""
    try:
        wire = _DECODER.decode(data)
    except DECODE_ERRORS:
        try:
            obj = loads_object(data)
        except JSONFormatError as exc:
            raise ManifestError(f"manifest is not valid JSON: {exc.detail}") from None
        return validate_manifest(manifest_from_obj(obj))
    return manifest_from_wire(wire)


def marshal_manifest(manifest: Manifest) -> bytes:
    """Validate, then encode as Go-compatible two-space indented JSON plus a trailing newline."""
    validate_manifest(manifest)
    return dumps_indented_bytes(manifest_to_obj(manifest))


__all__ = [
    "manifest_from_obj",
    "manifest_to_obj",
    "marshal_manifest",
    "parse_manifest",
    "utf8_problem",
]

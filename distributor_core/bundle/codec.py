"""Reading and writing ``manifest.json`` (core-semantics §0.3, §1.2, §1.8).

Reading is strict JSON (one object, no trailing data, no ``NaN``); keys are matched exactly;
unknown keys are ignored and never written back (spec README resolution 1). Integers must be
JSON integers (floats and booleans are refused). Writing validates first and produces the
Go-compatible indented layout with keys in the documented order and a trailing newline.
"""

from __future__ import annotations

from operator import attrgetter, itemgetter
from typing import Any

from distributor_core.bundle.errors import ManifestError
from distributor_core.bundle.model import SCHEMA_VERSION, Manifest, ManifestFile
from distributor_core.bundle.validate import ValidManifest, validate_manifest
from distributor_core.jsonfmt import JSONFormatError, dumps_indented_bytes, is_json_int, loads_object
from distributor_core.timefmt import TimestampError, format_precise, parse_rfc3339

_PATH, _SHA256, _SIZE = attrgetter("path"), attrgetter("sha256"), attrgetter("size")


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
    ``... must be a string``, ``... must be an integer``, ``manifest created must be RFC3339: ...``)
    and, as the first concern of validation, that ``schema_version`` is 1. It does not run the
    remaining manifest rules; call :func:`validate_manifest` (``parse_manifest`` does).
    """
    if not isinstance(obj, dict):
        raise ManifestError("manifest must be a JSON object")
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


def parse_manifest(data: bytes | str) -> ValidManifest:
    """Strictly decode ``manifest.json`` bytes and validate the result (manifest-only rules)."""
    try:
        obj = loads_object(data)
    except JSONFormatError as exc:
        raise ManifestError(f"manifest is not valid JSON: {exc.detail}") from None
    return validate_manifest(manifest_from_obj(obj))


def valid_manifest_from_obj(obj: Any) -> ValidManifest | None:
    """The manifest ``manifest_from_obj`` + ``validate_manifest`` would return, built without
    per-field checks, when every field has its plain expected type and the result is valid;
    ``None`` otherwise (the exact path then reports)."""
    try:
        if type(obj) is not dict:
            return None
        version, manifest_id, digest, created = obj["schema_version"], obj["id"], obj["digest"], obj["created"]
        if type(version) is not int or type(manifest_id) is not str or type(digest) is not str:
            return None
        if type(created) is not str or type(obj["files"]) is not list:
            return None
        items = obj["files"]
        if set(map(type, items)) - {dict}:
            return None
        paths, shas, sizes = (list(map(itemgetter(key), items)) for key in ("path", "sha256", "size"))
        if set(map(type, paths)) - {str} or set(map(type, shas)) - {str} or set(map(type, sizes)) - {int}:
            return None
        return ValidManifest(
            schema_version=version,
            id=manifest_id,
            digest=digest,
            created=parse_rfc3339(created),
            files=tuple(map(ManifestFile, paths, shas, sizes)),
        )
    except (KeyError, TypeError, TimestampError, ManifestError):
        return None


def expected_manifest_for(obj: Any, expected: ValidManifest | None) -> ValidManifest | None:
    """``expected`` (a validated manifest the document is expected to record, such as the source
    manifest being planned) when ``obj``, a decoded manifest object, describes it exactly:
    parsing ``obj`` would build an equal manifest, so that one can be used instead."""
    if isinstance(expected, ValidManifest) and _describes(obj, expected):
        return expected
    return None


def _describes(obj: Any, manifest: Manifest) -> bool:
    try:
        if type(obj) is not dict:
            return False
        if type(obj["schema_version"]) is not int or obj["schema_version"] != manifest.schema_version:
            return False
        if obj["id"] != manifest.id or obj["digest"] != manifest.digest or type(obj["created"]) is not str:
            return False
        items, files = obj["files"], manifest.files
        if type(items) is not list or len(items) != len(files) or set(map(type, items)) - {dict}:
            return False
        if parse_rfc3339(obj["created"]) != manifest.created:
            return False
        for key, getter, kind in (("path", _PATH, str), ("sha256", _SHA256, str), ("size", _SIZE, int)):
            column = list(map(itemgetter(key), items))
            if set(map(type, column)) - {kind} or column != list(map(getter, files)):
                return False
        return True
    except (KeyError, TypeError, TimestampError):
        return False


def marshal_manifest(manifest: Manifest) -> bytes:
    """Validate, then encode as Go-compatible two-space indented JSON plus a trailing newline."""
    validate_manifest(manifest)
    return dumps_indented_bytes(manifest_to_obj(manifest))


__all__ = [
    "manifest_from_obj",
    "manifest_to_obj",
    "marshal_manifest",
    "parse_manifest",
]

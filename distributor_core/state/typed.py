"""Typed decoding of schema 2 state with msgspec (performance only, issue 17 P4).

``msgspec.json`` decodes the document straight into the small structs below: every known key
has its JSON type checked while parsing, unknown keys are skipped, and no dict is built per
record. Only plain documents take this path: any value of another type (``null`` inside an
array, a float size, a boolean, a lone-surrogate escape, trailing data, a schema 1 or 3
document ...) makes the decode fail, and the caller then parses the bytes with the exact
decoder (:mod:`.codec`), which reports the contract's error. So this module never changes a
result, only how fast a valid document is read. Times stay strings here: they are parsed by
``timefmt`` exactly as on the exact path.
"""

from __future__ import annotations

from operator import attrgetter
from typing import Annotated

import msgspec

from distributor_core.bundle import ManifestError, ManifestFile, ValidManifest
from distributor_core.state.model import records_from_columns
from distributor_core.timefmt import TimestampError, parse_rfc3339

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1

#: a string the exact decoder takes as present (absent, null and "" are "required" errors there)
_Text = Annotated[str, msgspec.Meta(min_length=1)]
_Int64 = Annotated[int, msgspec.Meta(ge=_INT64_MIN, le=_INT64_MAX)]


class _File(msgspec.Struct, gc=False):
    path: _Text
    sha256: _Text
    size: _Int64


class _Manifest(msgspec.Struct):
    schema_version: int | None = None
    id: str | None = None
    digest: str | None = None
    created: str | None = None
    files: list[_File] | None = None


class _Source(msgspec.Struct):
    manifest: _Manifest | None = None


class _Mode(msgspec.Struct):
    mode: str | None = None


class _Links(msgspec.Struct):
    primary_url: str | None = None


class Output(msgspec.Struct, gc=False):
    """A complete, plain output record: required strings present and non-empty, an int64 size,
    optional strings absent, null or strings (anything else fails the decode)."""

    path: _Text
    kind: _Text
    source_path: _Text
    sha256: _Text
    size: _Int64
    created_at: _Text
    updated_at: _Text
    transform: str | None = ""
    url: str | None = ""


class SingleOwner(msgspec.Struct, tag_field="schema_version", tag=2):
    distributor_version: str | None = None
    pipeline_id: str | None = None
    destination_id: str | None = None
    published_at: str | None = None
    created_at: str | None = None
    updated_at: str | None = None
    state: _Mode | None = None
    reconciliation: _Mode | None = None
    source: _Source | None = None
    links: _Links | None = None
    outputs: list[Output] | None = None


class _Other(msgspec.Struct, tag_field="schema_version", tag=3):
    """Shared-root state: skipped here (read by the exact decoder)."""


_DECODER = msgspec.json.Decoder(SingleOwner | _Other)


def decode_single_owner(data: bytes | str) -> SingleOwner | None:
    """The schema 2 document when every known key has its plain JSON type, else ``None``."""
    try:
        doc = _DECODER.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeError):  # e.g. a lone surrogate in str input
        return None
    return doc if isinstance(doc, SingleOwner) else None


def top_level(doc: SingleOwner) -> dict:
    """The document's top-level fields as the exact decoder's shape walk returns them (every
    known key, ``None`` when absent; ``outputs`` and ``source`` left to the caller)."""

    def mode(value: _Mode | None) -> dict | None:
        return None if value is None else {"mode": value.mode}

    return {
        "schema_version": 2,
        "distributor_version": doc.distributor_version,
        "pipeline_id": doc.pipeline_id,
        "destination_id": doc.destination_id,
        "published_at": doc.published_at,
        "created_at": doc.created_at,
        "updated_at": doc.updated_at,
        "state": mode(doc.state),
        "reconciliation": mode(doc.reconciliation),
        "links": None if doc.links is None else {"primary_url": doc.links.primary_url},
    }


_PATH, _SHA256, _SIZE = attrgetter("path"), attrgetter("sha256"), attrgetter("size")


def manifest(doc: SingleOwner, expected: ValidManifest | None) -> ValidManifest | None:
    """The recorded manifest, valid: ``expected`` when the record describes it exactly; the
    record's identity over ``expected``'s files when it lists exactly those (a newer build of the
    same content); or the manifest the record describes when it is valid. ``None`` when none of
    these (the exact decoder then words the error)."""
    raw = doc.source.manifest if doc.source is not None else None
    if raw is None or not raw.files or raw.created is None:
        return None
    if raw.schema_version is None or raw.id is None or raw.digest is None:
        return None
    files = raw.files
    # the decoder checked every file: non-empty path and sha256 strings, an int64 size
    paths, shas, sizes = list(map(_PATH, files)), list(map(_SHA256, files)), list(map(_SIZE, files))
    try:
        created = parse_rfc3339(raw.created)
        if expected is not None and (
            len(files) == len(expected.files)
            and paths == list(map(_PATH, expected.files))
            and shas == list(map(_SHA256, expected.files))
            and sizes == list(map(_SIZE, expected.files))
        ):
            if (raw.schema_version, raw.id, raw.digest, created) == (
                expected.schema_version,
                expected.id,
                expected.digest,
                expected.created,
            ):
                return expected
            return expected.with_identity(raw.schema_version, raw.id, raw.digest, created)
        return ValidManifest(
            schema_version=raw.schema_version,
            id=raw.id,
            digest=raw.digest,
            created=created,
            files=tuple(records_from_columns(ManifestFile, (paths, shas, sizes))),
        )
    except (TimestampError, ManifestError):
        return None


_OUTPUT_COLUMNS = tuple(
    attrgetter(name)
    for name in ("path", "kind", "source_path", "sha256", "size", "created_at", "updated_at", "transform", "url")
)


def output_columns(doc: SingleOwner) -> list[list] | None:
    """The outputs as the nine columns of :class:`Output` (types and presence checked by the
    decoder; a null optional string is ``""`` here, as on the exact path), or ``None`` when
    there is no outputs array."""
    outputs = doc.outputs
    if outputs is None:
        return None
    columns = [list(map(getter, outputs)) for getter in _OUTPUT_COLUMNS]
    for index in (7, 8):  # transform, url
        if columns[index].count(None):
            columns[index] = [value or "" for value in columns[index]]
    return columns

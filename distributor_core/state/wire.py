"""``.distributor.json`` as JSON carries it (core-semantics §2.2–2.5): the one typed decoding of
every schema (1, 2 and 3), each field written once.

Every key is optional here (``None`` when absent or ``null``): presence and values are the
codec's to word (``state ... is required``); what decoding checks is each key's JSON type, the
int64 range, and the schema version (the tag). Unknown keys are ignored. The exact shape walk
of the codec, which words a type error the way Go's decoder does, is derived from these
classes.
"""

from __future__ import annotations

import msgspec

from distributor_core.bundle.codec import Int64, ManifestWire


class Mode(msgspec.Struct):
    mode: str | None = None


class Links(msgspec.Struct):
    primary_url: str | None = None


class Source(msgspec.Struct):
    manifest: ManifestWire | None = None


class Output(msgspec.Struct, gc=False):
    """A single-owner output record (also the first fields of a shared-root one)."""

    path: str | None = None
    kind: str | None = None
    source_path: str | None = None
    transform: str | None = None
    url: str | None = None
    sha256: str | None = None
    size: Int64 | None = None
    created_at: str | None = None
    updated_at: str | None = None


class SharedOutput(Output, gc=False):
    """A shared-root output record: an output plus its owner and producing source."""

    pipeline_id: str | None = None
    destination_id: str | None = None
    source_id: str | None = None
    source_digest: str | None = None
    source_created: str | None = None


class SingleOwner(msgspec.Struct, tag_field="schema_version", tag=2):
    """Schema 2 state."""

    distributor_version: str | None = None
    pipeline_id: str | None = None
    destination_id: str | None = None
    published_at: str | None = None
    created_at: str | None = None
    updated_at: str | None = None
    state: Mode | None = None
    reconciliation: Mode | None = None
    source: Source | None = None
    links: Links | None = None
    outputs: list[Output] | None = None


class Legacy(SingleOwner, tag=1):
    """Schema 1 state: read with the fields of schema 2 (the times and modes it lacks are
    taken from ``published_at`` and the defaults)."""


class Owner(msgspec.Struct):
    pipeline_id: str | None = None
    destination_id: str | None = None
    reconciliation: Mode | None = None
    source: Source | None = None
    links: Links | None = None


class SharedRoot(msgspec.Struct, tag_field="schema_version", tag=3):
    """Schema 3 state."""

    distributor_version: str | None = None
    created_at: str | None = None
    updated_at: str | None = None
    state: Mode | None = None
    owners: list[Owner] | None = None
    outputs: list[SharedOutput] | None = None


Document = SingleOwner | Legacy | SharedRoot

DECODER = msgspec.json.Decoder(Document)

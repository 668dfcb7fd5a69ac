"""The destination state model (core-semantics §2): frozen values for schema 2 and 3.

Schema 1 documents are normalised to :class:`SingleOwnerState` when read (``read_schema_version``
remembers that); nothing ever writes schema 1. Datetimes must be timezone-aware and are stored
in UTC; sequences are stored as tuples. Construction does not validate — the codec's
``validate_single_owner`` / ``validate_shared_root`` do, and ``marshal_state`` runs them first.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from enum import StrEnum
from itertools import repeat
from typing import TypeAlias

import msgspec

from distributor_core.bundle import Manifest
from distributor_core.state.errors import StateError
from distributor_core.timefmt import to_utc

LEGACY_SCHEMA_VERSION = 1
SINGLE_OWNER_SCHEMA_VERSION = 2
SHARED_ROOT_SCHEMA_VERSION = 3


class StateMode(StrEnum):
    """``state.mode``: who a destination bundle path belongs to (core-semantics §2.1)."""

    SINGLE_OWNER = "single_owner"
    SHARED_ROOT = "shared_root"


class ReconciliationMode(StrEnum):
    """``reconciliation.mode``: what happens to outputs a new publication omits (§5.2)."""

    REPLACE = "replace"
    MERGE = "merge"


STATE_MODE_SINGLE_OWNER = StateMode.SINGLE_OWNER
STATE_MODE_SHARED_ROOT = StateMode.SHARED_ROOT

RECONCILIATION_REPLACE = ReconciliationMode.REPLACE
RECONCILIATION_MERGE = ReconciliationMode.MERGE
RECONCILIATION_MODES = tuple(ReconciliationMode)

OUTPUT_KIND_SOURCE = "source"
OUTPUT_KIND_GENERATED = "generated"
OUTPUT_KINDS = (OUTPUT_KIND_SOURCE, OUTPUT_KIND_GENERATED)


def _utc(owner: object, name: str) -> None:
    value = getattr(owner, name)
    if type(value) is datetime and value.tzinfo is UTC:
        return  # already normalised (what parsing produces)
    if not isinstance(value, datetime):
        raise StateError(f"state {name} must be a datetime")
    if value.tzinfo is None or value.utcoffset() is None:
        raise StateError(f"state {name} must be timezone-aware")
    setter = msgspec.structs.force_setattr if isinstance(owner, msgspec.Struct) else object.__setattr__
    setter(owner, name, to_utc(value))


def records_from_columns(cls: type, columns: Sequence[Sequence[object]], *, normalised: bool = False) -> list:
    """``[cls(*row) for row in zip(*columns)]`` for a frozen, slotted record dataclass (or a
    msgspec Struct, whose constructor is simply mapped over the columns), built
    column by column from C loops (performance only: 100,000 output records of a large state).

    Each field is set through its slot descriptor (what the generated ``__init__`` does with
    ``object.__setattr__``), then ``__post_init__`` runs on every record as construction runs
    it, so the records are the ones the constructor would build. ``columns`` are the leading
    fields in order, of equal length; when they are not every field (a field with a default
    added later), the constructor builds the records instead. ``normalised``: the caller has
    checked that ``__post_init__`` would change nothing (e.g. every time already a UTC
    ``datetime``), so it is not run."""
    if len({len(column) for column in columns}) > 1:
        raise ValueError("records_from_columns needs columns of equal length")
    if issubclass(cls, msgspec.Struct):  # its constructor already runs in C
        return list(map(cls, *columns))
    names = [f.name for f in fields(cls)]
    if len(columns) != len(names):
        return list(map(cls, *columns))
    count = len(columns[0]) if columns else 0
    records = list(map(object.__new__, repeat(cls, count)))
    for name, column in zip(names, columns, strict=True):
        deque(map(getattr(cls, name).__set__, records, column), maxlen=0)
    post_init = None if normalised else getattr(cls, "__post_init__", None)
    if post_init is not None:
        deque(map(post_init, records), maxlen=0)
    return records


def _tuple(owner: object, name: str) -> None:
    value = getattr(owner, name)
    if not isinstance(value, tuple):
        object.__setattr__(owner, name, tuple(value))


@dataclass(frozen=True, slots=True, order=True)
class OwnerScope:
    """The (pipeline id, destination id) pair doing the work; rendered ``P/D``."""

    pipeline_id: str
    destination_id: str

    def __str__(self) -> str:
        return f"{self.pipeline_id}/{self.destination_id}"

    def to_dict(self) -> dict[str, str]:
        return {"pipeline_id": self.pipeline_id, "destination_id": self.destination_id}


class OutputRecord(msgspec.Struct, frozen=True, gc=False):
    """One managed output of single-owner state.

    A frozen msgspec Struct rather than a dataclass: a large state holds one per output, and a
    Struct is built in C (issue 17 P4). Copy with changes through ``msgspec.structs.replace``."""

    path: str
    kind: str
    source_path: str
    sha256: str
    size: int
    created_at: datetime
    updated_at: datetime
    transform: str = ""
    url: str = ""

    def __post_init__(self) -> None:
        # inline fast path of _utc: parsed and computed times are already UTC
        created, updated = self.created_at, self.updated_at
        if not (type(created) is datetime and created.tzinfo is UTC):
            _utc(self, "created_at")
        if not (type(updated) is datetime and updated.tzinfo is UTC):
            _utc(self, "updated_at")


@dataclass(frozen=True, slots=True)
class SingleOwnerState:
    """Schema 2 state (also the in-memory form of a schema 1 file)."""

    pipeline_id: str
    destination_id: str
    published_at: datetime
    created_at: datetime
    updated_at: datetime
    reconciliation_mode: str
    manifest: Manifest
    outputs: tuple[OutputRecord, ...]
    primary_url: str = ""
    distributor_version: str = ""
    #: 1 when this value was normalised from a schema 1 file; never serialised.
    read_schema_version: int = field(default=SINGLE_OWNER_SCHEMA_VERSION, compare=False)

    def __post_init__(self) -> None:
        _utc(self, "published_at")
        _utc(self, "created_at")
        _utc(self, "updated_at")
        _tuple(self, "outputs")

    @property
    def schema_version(self) -> int:
        return SINGLE_OWNER_SCHEMA_VERSION

    @property
    def state_mode(self) -> str:
        return STATE_MODE_SINGLE_OWNER

    @property
    def scope(self) -> OwnerScope:
        return OwnerScope(self.pipeline_id, self.destination_id)


@dataclass(frozen=True, slots=True)
class OwnerRecord:
    """One owner of a shared root: its latest manifest, reconciliation mode and primary URL."""

    pipeline_id: str
    destination_id: str
    reconciliation_mode: str
    manifest: Manifest
    primary_url: str = ""

    @property
    def scope(self) -> OwnerScope:
        return OwnerScope(self.pipeline_id, self.destination_id)


@dataclass(frozen=True, slots=True)
class SharedOutputRecord:
    """One managed output of shared-root state, with its owner and producing source identity."""

    path: str
    kind: str
    source_path: str
    sha256: str
    size: int
    pipeline_id: str
    destination_id: str
    source_id: str
    source_digest: str
    source_created: datetime
    created_at: datetime
    updated_at: datetime
    transform: str = ""
    url: str = ""

    def __post_init__(self) -> None:
        _utc(self, "source_created")
        _utc(self, "created_at")
        _utc(self, "updated_at")

    @property
    def scope(self) -> OwnerScope:
        return OwnerScope(self.pipeline_id, self.destination_id)


@dataclass(frozen=True, slots=True)
class SharedRootState:
    """Schema 3 state: several owners publishing disjoint outputs into one root."""

    created_at: datetime
    updated_at: datetime
    owners: tuple[OwnerRecord, ...]
    outputs: tuple[SharedOutputRecord, ...]
    distributor_version: str = ""

    def __post_init__(self) -> None:
        _utc(self, "created_at")
        _utc(self, "updated_at")
        _tuple(self, "owners")
        _tuple(self, "outputs")

    @property
    def schema_version(self) -> int:
        return SHARED_ROOT_SCHEMA_VERSION

    @property
    def state_mode(self) -> str:
        return STATE_MODE_SHARED_ROOT

    def owner(self, scope: OwnerScope) -> OwnerRecord | None:
        """The owner record with ``scope``, or ``None``."""
        for record in self.owners:
            if record.scope == scope:
                return record
        return None


StateDocument: TypeAlias = SingleOwnerState | SharedRootState

AnyOutputRecord: TypeAlias = OutputRecord | SharedOutputRecord

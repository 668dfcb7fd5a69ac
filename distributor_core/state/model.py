"""The destination state model (core-semantics §2): frozen values for schema 2 and 3.

Schema 1 documents are normalised to :class:`SingleOwnerState` when read (``read_schema_version``
remembers that); nothing ever writes schema 1. Datetimes must be timezone-aware and are stored
in UTC; sequences are stored as tuples. Construction does not validate — the codec's
``validate_single_owner`` / ``validate_shared_root`` do, and ``marshal_state`` runs them first.
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import TypeAlias

import msgspec

from distributor_core.bundle import Manifest
from distributor_core.state.errors import StateError
from distributor_core.state.scope import OwnerScope
from distributor_core.structeq import compare_without
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
    msgspec.structs.force_setattr(owner, name, to_utc(value))


def _tuple(owner: msgspec.Struct, name: str) -> None:
    value = getattr(owner, name)
    if not isinstance(value, tuple):
        msgspec.structs.force_setattr(owner, name, tuple(value))


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


@compare_without("read_schema_version")
class SingleOwnerState(msgspec.Struct, frozen=True):
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
    #: Not compared or hashed: a schema 1 file read equals its schema 2 rewrite.
    read_schema_version: int = SINGLE_OWNER_SCHEMA_VERSION

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


class OwnerRecord(msgspec.Struct, frozen=True):
    """One owner of a shared root: its latest manifest, reconciliation mode and primary URL."""

    pipeline_id: str
    destination_id: str
    reconciliation_mode: str
    manifest: Manifest
    primary_url: str = ""

    @property
    def scope(self) -> OwnerScope:
        return OwnerScope(self.pipeline_id, self.destination_id)


class SharedOutputRecord(msgspec.Struct, frozen=True):
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
        # inline fast path of _utc: parsed and computed times are already UTC
        for name, value in (
            ("source_created", self.source_created),
            ("created_at", self.created_at),
            ("updated_at", self.updated_at),
        ):
            if not (type(value) is datetime and value.tzinfo is UTC):
                _utc(self, name)

    @property
    def scope(self) -> OwnerScope:
        return OwnerScope(self.pipeline_id, self.destination_id)


class SharedRootState(msgspec.Struct, frozen=True):
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


__all__ = [
    "LEGACY_SCHEMA_VERSION",
    "OUTPUT_KINDS",
    "OUTPUT_KIND_GENERATED",
    "OUTPUT_KIND_SOURCE",
    "RECONCILIATION_MERGE",
    "RECONCILIATION_MODES",
    "RECONCILIATION_REPLACE",
    "SHARED_ROOT_SCHEMA_VERSION",
    "SINGLE_OWNER_SCHEMA_VERSION",
    "STATE_MODE_SHARED_ROOT",
    "STATE_MODE_SINGLE_OWNER",
    "AnyOutputRecord",
    "OutputRecord",
    "OwnerRecord",
    "OwnerScope",
    "SharedOutputRecord",
    "SharedRootState",
    "SingleOwnerState",
    "StateDocument",
]

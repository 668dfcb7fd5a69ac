"""Pure helpers on managed outputs (core-semantics §4.5, §5.5, §5.6, §7.1, §7.3).

Nothing here touches storage or reads a clock: callers pass ``now`` (one value per operation),
and every function returns new values instead of mutating its input.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Protocol

import msgspec

from distributor_core.bundle import Manifest
from distributor_core.state.errors import PathOwnerError, StateError, go_quote
from distributor_core.state.model import (
    AnyOutputRecord,
    OutputRecord,
    OwnerRecord,
    OwnerScope,
    SharedOutputRecord,
    SharedRootState,
    SingleOwnerState,
    StateDocument,
)
from distributor_core.timefmt import truncate_seconds


class PlannedOutput(Protocol):
    """What planning knows about one output before it is recorded in state."""

    @property
    def path(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def source_path(self) -> str: ...
    @property
    def transform(self) -> str: ...
    @property
    def url(self) -> str: ...
    @property
    def sha256(self) -> str: ...
    @property
    def size(self) -> int: ...


def _require_document(doc: object) -> None:
    if not isinstance(doc, SingleOwnerState | SharedRootState):
        raise StateError("destination state document is empty")


# -- lookups ---------------------------------------------------------------------------------


def managed_paths(doc: StateDocument) -> tuple[str, ...]:
    """Every managed output path of the document, all owners, in state order."""
    _require_document(doc)
    return tuple(output.path for output in doc.outputs)


def outputs_of(doc: StateDocument, scope: OwnerScope) -> tuple[AnyOutputRecord, ...]:
    """The outputs ``scope`` owns: a shared root's records of that owner; a single-owner state's
    outputs when its pipeline and destination are ``scope``, otherwise none."""
    _require_document(doc)
    if isinstance(doc, SingleOwnerState):
        return doc.outputs if doc.scope == scope else ()
    return tuple(output for output in doc.outputs if output.scope == scope)


def owned_paths(doc: StateDocument, scope: OwnerScope | None = None) -> tuple[str, ...]:
    """Paths owned by ``scope`` (:func:`outputs_of`), or every managed path when ``scope`` is None."""
    if scope is None:
        return managed_paths(doc)
    return tuple(output.path for output in outputs_of(doc, scope))


def find_output(doc: StateDocument, path: str) -> AnyOutputRecord | None:
    """The record of ``path`` (any owner), or ``None``."""
    _require_document(doc)
    for output in doc.outputs:
        if output.path == path:
            return output
    return None


def output_owner(shared: SharedRootState, path: str) -> OwnerScope | None:
    """The owner of ``path`` in shared-root state, or ``None`` when it is not managed."""
    for output in shared.outputs:
        if output.path == path:
            return output.scope
    return None


def path_ownership_conflict(
    shared: SharedRootState, scope: OwnerScope, paths: Iterable[str]
) -> tuple[str, OwnerScope] | None:
    """The first of ``paths`` (in the given order) recorded under an owner other than ``scope``."""
    owners = {output.path: output.scope for output in shared.outputs}
    for path in paths:
        owner = owners.get(path)
        if owner is not None and owner != scope:
            return path, owner
    return None


def current_publication_outputs(doc: StateDocument, scope: OwnerScope) -> tuple[AnyOutputRecord, ...]:
    """The outputs of ``scope``'s currently recorded publication (for prune warnings, resolutions B4).

    Single-owner: the owner's outputs whose ``updated_at`` equals ``published_at`` (every output
    the latest publication wrote; merge-retained outputs keep an older ``updated_at``, and repair
    and prune change neither value). Shared-root: the owner's outputs whose ``source_id`` and
    ``source_digest`` are those of the owner record's manifest.
    """
    _require_document(doc)
    if isinstance(doc, SingleOwnerState):
        return tuple(output for output in outputs_of(doc, scope) if output.updated_at == doc.published_at)
    owner = doc.owner(scope)
    if owner is None:
        return ()
    return tuple(
        output
        for output in doc.outputs
        if output.scope == scope
        and output.source_id == owner.manifest.id
        and output.source_digest == owner.manifest.digest
    )


# -- projections (publish) -------------------------------------------------------------------


def project_single_owner_outputs(state: SingleOwnerState) -> tuple[SharedOutputRecord, ...]:
    """Single-owner outputs as shared-root records of the state's own scope (§5.6 migration).

    Each record carries the single-owner manifest's identity (id, digest, created) and keeps its
    own ``created_at`` / ``updated_at``.
    """
    manifest = state.manifest
    return tuple(
        SharedOutputRecord(
            path=output.path,
            kind=output.kind,
            source_path=output.source_path,
            sha256=output.sha256,
            size=output.size,
            pipeline_id=state.pipeline_id,
            destination_id=state.destination_id,
            source_id=manifest.id,
            source_digest=manifest.digest,
            source_created=manifest.created,
            created_at=output.created_at,
            updated_at=output.updated_at,
            transform=output.transform,
            url=output.url,
        )
        for output in state.outputs
    )


def owner_record_of(state: SingleOwnerState) -> OwnerRecord:
    """The shared-root owner record equivalent to a single-owner state."""
    return OwnerRecord(
        pipeline_id=state.pipeline_id,
        destination_id=state.destination_id,
        reconciliation_mode=state.reconciliation_mode,
        manifest=state.manifest,
        primary_url=state.primary_url,
    )


def shared_root_migration_base(
    state: SingleOwnerState, *, now: datetime, distributor_version: str = ""
) -> SharedRootState:
    """Shared-root state converted from single-owner state of the same scope (§5.5, §5.6).

    ``created_at`` is the single-owner ``created_at``; ``updated_at`` is ``now``; the single owner
    becomes the only owner record and its outputs are projected with
    :func:`project_single_owner_outputs` (so merge keeps them recorded — the Go quirk of dropping
    them is not reproduced).
    """
    return SharedRootState(
        created_at=state.created_at,
        updated_at=truncate_seconds(now),
        owners=(owner_record_of(state),),
        outputs=project_single_owner_outputs(state),
        distributor_version=distributor_version,
    )


def project_outputs(
    planned: Sequence[PlannedOutput], existing: Sequence[OutputRecord], *, now: datetime
) -> tuple[OutputRecord, ...]:
    """Single-owner records for planned outputs: ``created_at`` kept from an existing record of
    the same path, else ``now``; ``updated_at`` = ``now``."""
    stamp = truncate_seconds(now)
    created = {output.path: output.created_at for output in existing}
    return tuple(
        OutputRecord(
            path=item.path,
            kind=item.kind,
            source_path=item.source_path,
            sha256=item.sha256,
            size=item.size,
            created_at=created.get(item.path, stamp),
            updated_at=stamp,
            transform=item.transform,
            url=item.url,
        )
        for item in planned
    )


def project_shared_outputs(
    planned: Sequence[PlannedOutput],
    existing: Sequence[SharedOutputRecord],
    *,
    scope: OwnerScope,
    manifest: Manifest,
    now: datetime,
) -> tuple[SharedOutputRecord, ...]:
    """Shared-root records for planned outputs of ``scope`` (§5.5 "planned records").

    Source identity is ``manifest``'s; ``created_at`` is kept from the current owner's existing
    record of the same path (never from another owner's), else ``now``; ``updated_at`` = ``now``.
    """
    stamp = truncate_seconds(now)
    created = {output.path: output.created_at for output in existing if output.scope == scope}
    return tuple(
        SharedOutputRecord(
            path=item.path,
            kind=item.kind,
            source_path=item.source_path,
            sha256=item.sha256,
            size=item.size,
            pipeline_id=scope.pipeline_id,
            destination_id=scope.destination_id,
            source_id=manifest.id,
            source_digest=manifest.digest,
            source_created=manifest.created,
            created_at=created.get(item.path, stamp),
            updated_at=stamp,
            transform=item.transform,
            url=item.url,
        )
        for item in planned
    )


# -- combining (publish) ---------------------------------------------------------------------


def merge_output_records(retained: Sequence[OutputRecord], planned: Sequence[OutputRecord]) -> tuple[OutputRecord, ...]:
    """Single-owner merge: keep ``retained`` in order, replace same-path records in place,
    append new ones. Duplicates within either list: ``state output path %q is duplicated``."""
    outputs: list[OutputRecord] = []
    index_by_path: dict[str, int] = {}
    for output in retained:
        if output.path in index_by_path:
            raise StateError(f"state output path {go_quote(output.path)} is duplicated")
        index_by_path[output.path] = len(outputs)
        outputs.append(output)
    seen: set[str] = set()
    for output in planned:
        if output.path in seen:
            raise StateError(f"state output path {go_quote(output.path)} is duplicated")
        seen.add(output.path)
        if output.path in index_by_path:
            outputs[index_by_path[output.path]] = output
        else:
            index_by_path[output.path] = len(outputs)
            outputs.append(output)
    return tuple(outputs)


def upsert_owner(owners: Sequence[OwnerRecord], owner: OwnerRecord) -> tuple[OwnerRecord, ...]:
    """Replace the record with ``owner``'s scope in place, or append it."""
    result = list(owners)
    for index, existing in enumerate(result):
        if existing.scope == owner.scope:
            result[index] = owner
            return tuple(result)
    result.append(owner)
    return tuple(result)


def _check_planned_shared(base: SharedRootState, scope: OwnerScope, planned: Sequence[SharedOutputRecord]) -> None:
    conflict = path_ownership_conflict(base, scope, (output.path for output in planned))
    if conflict is not None:
        path, owner = conflict
        raise PathOwnerError(path, owner)
    seen: set[str] = set()
    for output in planned:
        if output.path in seen:
            raise StateError(f"state output path {go_quote(output.path)} is duplicated")
        seen.add(output.path)
    for output in planned:
        if output.scope != scope:
            raise PathOwnerError(output.path, output.scope, scope)


def replace_owner_outputs(
    base: SharedRootState, owner: OwnerRecord, planned: Sequence[SharedOutputRecord]
) -> SharedRootState:
    """Every write action except merge-mode ``replace_older`` (§5.5 "replace owner outputs"):
    upsert ``owner``, keep other owners' records in order, drop the owner's records, append
    ``planned``. Rejects planned paths owned by another owner, duplicates, and foreign records."""
    scope = owner.scope
    _check_planned_shared(base, scope, planned)
    kept = [output for output in base.outputs if output.scope != scope]
    return msgspec.structs.replace(base, owners=upsert_owner(base.owners, owner), outputs=(*kept, *planned))


def merge_owner_outputs(
    base: SharedRootState, owner: OwnerRecord, planned: Sequence[SharedOutputRecord]
) -> SharedRootState:
    """Merge-mode ``replace_older`` (§5.5 "merge owner outputs"): upsert ``owner``, keep every
    existing record in order, replace same-path records in place, append new ones."""
    scope = owner.scope
    _check_planned_shared(base, scope, planned)
    outputs = list(base.outputs)
    index_by_path = {output.path: index for index, output in enumerate(outputs)}
    for output in planned:
        if output.path in index_by_path:
            outputs[index_by_path[output.path]] = output
        else:
            index_by_path[output.path] = len(outputs)
            outputs.append(output)
    return msgspec.structs.replace(base, owners=upsert_owner(base.owners, owner), outputs=tuple(outputs))


# -- removal (reconcile-state, prune) ------------------------------------------------------


def _remove(
    doc: StateDocument, paths: Iterable[str], scope: OwnerScope | None, now: datetime
) -> tuple[StateDocument, bool]:
    _require_document(doc)
    targets = set(paths)
    if not targets:
        return doc, False

    def removable(output: AnyOutputRecord) -> bool:
        if output.path not in targets:
            return False
        return scope is None or not isinstance(output, SharedOutputRecord) or output.scope == scope

    kept = tuple(output for output in doc.outputs if not removable(output))
    if len(kept) == len(doc.outputs):
        return doc, False
    return msgspec.structs.replace(doc, outputs=kept, updated_at=truncate_seconds(now)), True


def remove_missing_outputs(
    doc: StateDocument,
    missing_paths: Iterable[str],
    *,
    scope: OwnerScope | None = None,
    all_owners: bool = False,
    now: datetime,
) -> tuple[StateDocument, bool]:
    """Drop the records of outputs found missing in storage (§7.1 apply).

    Single-owner state: every record whose path is missing (``scope`` and ``all_owners`` are
    ignored). Shared-root state: only records of ``scope``, or of any owner with ``all_owners``;
    owner records are kept even when left without outputs. Returns ``(document, changed)``;
    ``updated_at`` becomes ``now`` only when a record was removed, nothing else changes, and an
    empty ``missing_paths`` returns the input unchanged.
    """
    _require_document(doc)
    if isinstance(doc, SharedRootState) and not all_owners and scope is None:
        raise StateError("owner scope is required unless all owners are selected")
    return _remove(doc, missing_paths, None if all_owners else scope, now)


def remove_outputs(
    doc: StateDocument, paths: Iterable[str], *, scope: OwnerScope, now: datetime
) -> tuple[StateDocument, bool]:
    """Drop the records of outputs a prune confirmed deleted (§7.3): single-owner, every record
    with one of ``paths``; shared-root, only ``scope``'s. ``updated_at`` = ``now`` if changed."""
    return _remove(doc, paths, scope, now)


def remove_owner(doc: StateDocument, scope: OwnerScope, *, now: datetime) -> tuple[StateDocument, bool]:
    """Drop ``scope`` from shared-root state: its output records and its owner record (a bundle
    prune of that owner, issue 37). Other owners are untouched; ``updated_at`` = ``now`` if
    changed. Single-owner state is returned unchanged (a bundle path ends with its owner)."""
    _require_document(doc)
    if not isinstance(doc, SharedRootState):
        return doc, False
    owners = tuple(owner for owner in doc.owners if owner.scope != scope)
    outputs = tuple(output for output in doc.outputs if output.scope != scope)
    if len(owners) == len(doc.owners) and len(outputs) == len(doc.outputs):
        return doc, False
    return msgspec.structs.replace(doc, owners=owners, outputs=outputs, updated_at=truncate_seconds(now)), True


def other_owners(doc: StateDocument, scope: OwnerScope) -> tuple[OwnerScope, ...]:
    """The owners recorded in ``doc`` besides ``scope`` (single-owner state: its owner, unless it
    is ``scope``)."""
    _require_document(doc)
    if isinstance(doc, SingleOwnerState):
        return () if doc.scope == scope else (doc.scope,)
    return tuple(owner.scope for owner in doc.owners if owner.scope != scope)


__all__ = [
    "PlannedOutput",
    "current_publication_outputs",
    "find_output",
    "managed_paths",
    "merge_output_records",
    "merge_owner_outputs",
    "other_owners",
    "output_owner",
    "outputs_of",
    "owned_paths",
    "owner_record_of",
    "path_ownership_conflict",
    "project_outputs",
    "project_shared_outputs",
    "project_single_owner_outputs",
    "remove_missing_outputs",
    "remove_outputs",
    "remove_owner",
    "replace_owner_outputs",
    "shared_root_migration_base",
    "upsert_owner",
]

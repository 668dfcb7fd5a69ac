"""Adoption: record as managed the unmanaged files of a bundle path that are exactly what the
current source would publish there (issue 18 item 3), so a copy made by hand or by another tool
becomes managed without a rewrite.

What "would publish there" means is decided by the core's own output planning
(:mod:`distributor_core.plan.outputs`: ``render_markdown``, ``build_outputs``, ``apply_links``) with the destination's
*current* policy, so the planned list is the one ``distributor run`` plans: source copies,
generated HTML (Markdown sources are read and rendered), link URLs. The source bundle is the one
mapped to the bundle path: under ``preserve_relative`` the source bundle at that path, under
``fixed`` the newest source bundle (as ``run`` picks it). Its manifest is read and validated;
its other files are not re-hashed (the destination files are compared with the manifest's sizes
and sha256).

A planned output is adopted when no owner records its path and the file there has the planned
size and sha256 (streamed, or an S3 object's stored whole-object checksum), and did not change
while it was read. Everything else stays unmanaged and is listed with the reason. The rules per
kind of state (:func:`plan_adoption`):

- **State of the selected owner, same source manifest** (single-owner state, or the owner's
  record in a shared root): the matching files are added to the recorded publication, as if it
  had written them (single-owner records take its ``published_at`` as their times; shared-root
  records carry the manifest's identity and ``now``).
- **No state here** (or a shared root without a record of this owner): adoption records a new
  publication of the source, exactly the state ``run`` would write for it, but only when *every*
  planned output is present and matches; otherwise nothing is adopted (a partial record would
  make ``run`` skip the missing outputs as already published).
- **The recorded manifest is not the source's** (an older or another source): nothing is
  adopted; ``run`` publishes the new source.

Adoption writes nothing but state, under the repair's lock and conditional state write
(:mod:`distributor_core.app.reconcile`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import msgspec

from distributor_core import __version__
from distributor_core import paths as lp
from distributor_core.app.output_check import (
    DIGEST_MISMATCH,
    MISSING,
    NOT_A_FILE,
    OK,
    READ,
    SIZE_MISMATCH,
    OutputCheck,
    check_file,
)
from distributor_core.app.policy import destination_policy
from distributor_core.app.selection import Target
from distributor_core.app.unmanaged import UnmanagedEntry
from distributor_core.bundle import Manifest, manifests_equal, validate_manifest
from distributor_core.plan.model import PlannedOutput
from distributor_core.plan.outputs import (
    apply_links,
    build_outputs,
    markdown_sources,
    normalize_policy,
    render_markdown,
)
from distributor_core.source import (
    SourceBundle,
    discover_bundles,
    load_source_manifest,
    manifest_path,
    select_newest,
)
from distributor_core.state import (
    OutputRecord,
    OwnerRecord,
    OwnerScope,
    SharedRootState,
    SingleOwnerState,
    StateDocument,
    managed_paths,
    project_outputs,
    project_shared_outputs,
    replace_owner_outputs,
)
from distributor_core.storage.base import BytesCallback, Storage
from distributor_core.storage.errors import ErrorKind, StorageError
from distributor_core.storage.factory import open_source_storage
from distributor_core.timefmt import format_precise, truncate_seconds

#: a planned output whose file matched but changed while it was read (never adopted)
CHANGED = "changed"


class AdoptError(ValueError):
    """Adoption cannot work for this destination (an upload pipeline has no source to plan from)."""


@dataclass(frozen=True)
class SourcePlan:
    """What the source publishes into one destination bundle path."""

    source_bundle_path: str
    manifest: Manifest
    outputs: tuple[PlannedOutput, ...]
    primary_url: str
    reconciliation_mode: str
    state_mode: str


class SourceView:
    """The pipeline's source, opened read-only, planning per destination bundle path."""

    def __init__(self, target: Target, storage: Storage) -> None:
        self.target = target
        self.storage = storage
        self.policy = normalize_policy(destination_policy(target.destination))  # checks it too
        self._newest: SourceBundle | None = None
        self._looked = False

    @property
    def fixed(self) -> bool:
        return self.policy.path_mapping == "fixed"

    def bundle_paths(self) -> list[str]:
        """Destination bundle paths this source publishes to (``fixed``: the root, if any)."""
        found = discover_bundles(self.storage)
        if self.fixed:
            return [""] if found else []
        return found

    def _newest_bundle(self) -> SourceBundle | None:
        if not self._looked:
            bundles = [SourceBundle(path, self._manifest(path)) for path in discover_bundles(self.storage)]
            self._newest = select_newest(bundles)
            self._looked = True
        return self._newest

    def _manifest(self, source_path: str) -> Manifest:
        manifest = load_source_manifest(self.storage, source_path)
        validate_manifest(manifest)
        return manifest

    def plan_for(self, bundle_path: str) -> SourcePlan | None:
        """The plan for destination ``bundle_path``, ``None`` when no source bundle maps there."""
        if self.fixed:
            if bundle_path != "":
                return None
            newest = self._newest_bundle()
            if newest is None:
                return None
            source_path, manifest = newest.path, newest.manifest
        else:
            source_path = bundle_path
            if not self.storage.exists(manifest_path(source_path)):
                return None
            manifest = self._manifest(source_path)
        generated = [
            render_markdown(record, self.storage.read_bytes(lp.join(source_path, record.path)), self.policy)
            for record in markdown_sources(manifest.files, self.policy)
        ]
        outputs = build_outputs(manifest=manifest, policy=self.policy, generated=generated)
        outputs, primary = apply_links(outputs, bundle_path=bundle_path, policy=self.policy)
        return SourcePlan(
            source_path,
            manifest,
            tuple(outputs),
            primary,
            self.policy.reconciliation_mode,
            self.policy.state_mode,
        )


def open_source_view(target: Target) -> tuple[SourceView, Storage]:
    """Open the pipeline's source read-only (caller closes the storage)."""
    pipeline = target.pipeline
    if pipeline.is_upload:
        raise AdoptError(
            f"pipeline {pipeline.id} has an http_upload source: adoption needs a source bundle to plan from"
        )
    storage = open_source_storage(pipeline.source, target.environment, dry_run=True)
    try:
        return SourceView(target, storage), storage
    except BaseException:
        storage.close()
        raise


@dataclass(frozen=True, slots=True)
class AdoptedOutput:
    path: str
    kind: str
    size: int
    sha256: str
    checked_by: str = ""

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"path": self.path, "kind": self.kind, "size": self.size, "sha256": self.sha256}
        if self.checked_by:
            data["checked_by"] = self.checked_by
        return data


@dataclass
class Adoption:
    """What adoption found for one bundle path (``reason``: why nothing is adopted)."""

    source_bundle_path: str = ""
    source_id: str = ""
    planned_count: int = 0
    reason: str = ""
    adopted: list[AdoptedOutput] = field(default_factory=list)
    #: bundle-relative path -> why that planned output's file was not adopted
    refused: dict[str, str] = field(default_factory=dict)
    #: planned outputs that no owner records and that are not there at all
    missing: list[str] = field(default_factory=list)
    creates_state: bool = False
    #: the source's plan for this bundle path (not serialised)
    plan: SourcePlan | None = field(default=None, repr=False)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "source_bundle_path": self.source_bundle_path,
            "source_id": self.source_id,
            "planned_count": self.planned_count,
        }
        if self.creates_state:
            data["creates_state"] = True
        if self.missing:
            data["missing_planned_outputs"] = list(self.missing)
        if self.reason:
            data["reason"] = self.reason
        return data


@dataclass(frozen=True)
class AdoptionPlan:
    """The pure part: which planned outputs to look for, and whether all of them must match."""

    candidates: tuple[PlannedOutput, ...]
    complete_required: bool
    reason: str = ""


def _manifest_text(manifest: Manifest) -> str:
    return f"{manifest.id} created {format_precise(manifest.created)}"


def plan_adoption(document: StateDocument | None, scope: OwnerScope, source: SourcePlan) -> AdoptionPlan:
    """Which planned outputs may be adopted into ``document`` for ``scope`` (see the module doc).
    Single-owner state must already have been checked to belong to ``scope``."""
    if document is None:
        return AdoptionPlan(source.outputs, True)
    managed = set(managed_paths(document))
    unrecorded = tuple(output for output in source.outputs if output.path not in managed)
    if isinstance(document, SingleOwnerState):
        recorded: Manifest | None = document.manifest
    else:
        owner = document.owner(scope)
        if owner is None:
            owners = {output.path: output.scope for output in document.outputs}
            taken = [output.path for output in source.outputs if output.path in owners]
            if taken:
                return AdoptionPlan((), True, f"planned output {taken[0]} is recorded for {owners[taken[0]]}")
            return AdoptionPlan(unrecorded, True)
        recorded = owner.manifest
    if not manifests_equal(recorded, source.manifest):
        return AdoptionPlan(
            (),
            False,
            f"state records source {_manifest_text(recorded)}, the source bundle is "
            f"{_manifest_text(source.manifest)}: publish it with run; adoption only completes the "
            "recorded publication",
        )
    return AdoptionPlan(unrecorded, False)


def _refusal(check: OutputCheck) -> str:
    if check.status == MISSING:
        return "planned output is missing"
    if check.status == NOT_A_FILE:
        return f"planned output path holds a {check.entry_type or 'non-file'}, not a regular file"
    if check.status == SIZE_MISMATCH:
        return f"size {check.actual_size} differs from the planned {check.size}"
    if check.status == DIGEST_MISMATCH:
        return f"sha256 {check.actual_sha256} differs from the planned {check.sha256}"
    return "changed while it was read"


def check_candidates(
    storage: Storage,
    bundle_path: str,
    plan: AdoptionPlan,
    source: SourcePlan,
    *,
    on_bytes: BytesCallback | None = None,
) -> Adoption:
    """Read the candidates' files and decide what is adopted (storage reads only)."""
    adoption = Adoption(
        source.source_bundle_path,
        source.manifest.id,
        len(source.outputs),
        plan.reason,
        creates_state=plan.complete_required and not plan.reason,
    )
    if plan.reason:
        return adoption
    matched: list[AdoptedOutput] = []
    for output in plan.candidates:
        target = lp.join(bundle_path, output.path)
        check = check_file(storage, target, path=output.path, size=output.size, sha256=output.sha256,
                           on_bytes=on_bytes)
        if check.status == OK and check.checked_by == READ and not _unchanged(storage, target, check):
            check = msgspec.structs.replace(check, status=CHANGED)
        if check.status == OK:
            matched.append(AdoptedOutput(output.path, output.kind, output.size, output.sha256, check.checked_by))
        else:
            adoption.refused[output.path] = _refusal(check)
            if check.status == MISSING:
                adoption.missing.append(output.path)
    if plan.complete_required and len(matched) != len(plan.candidates):
        first = next(output.path for output in plan.candidates if output.path in adoption.refused)
        adoption.reason = (
            "no state records this owner here: a publication is recorded only when every planned output "
            f"is present and matches; {len(matched)} of {len(plan.candidates)} do (first that does not: "
            f"{first}: {adoption.refused[first]})"
        )
        adoption.creates_state = False
        return adoption
    adoption.adopted = matched
    return adoption


def _unchanged(storage: Storage, target: str, check: OutputCheck) -> bool:
    """The file's revision is still the one stat saw before it was read."""
    try:
        return storage.stat(target).revision == check.revision
    except StorageError as exc:
        if exc.kind == ErrorKind.NOT_FOUND:
            return False
        raise


def annotate_unmanaged(entries: list[UnmanagedEntry], adoption: Adoption) -> list[UnmanagedEntry]:
    """The unmanaged entries that stay unmanaged, each with why (adopted ones are left out)."""
    adopted = {output.path for output in adoption.adopted}
    kept = []
    for entry in entries:
        if entry.path in adopted:
            continue
        if entry.path in adoption.refused:
            reason = adoption.refused[entry.path]
        elif adoption.reason:
            reason = "nothing is adopted in this bundle path (see adoption.reason)"
        else:
            reason = "not an output the source plans here"
        kept.append(msgspec.structs.replace(entry, reason=reason))
    return kept


def adopt_into(
    document: StateDocument | None,
    scope: OwnerScope,
    source: SourcePlan,
    adopted: list[AdoptedOutput],
    *,
    now: datetime,
    version: str = __version__,
) -> StateDocument | None:
    """The state with the adopted outputs recorded (``document`` itself when nothing is)."""
    if not adopted:
        return document
    stamp = truncate_seconds(now)
    wanted = {output.path for output in adopted}
    planned = [output for output in source.outputs if output.path in wanted]  # plan order
    owner = OwnerRecord(
        scope.pipeline_id, scope.destination_id, source.reconciliation_mode, source.manifest, source.primary_url
    )
    if document is None:
        if source.state_mode == "shared_root":
            base = SharedRootState(
                created_at=stamp, updated_at=stamp, owners=(), outputs=(), distributor_version=version
            )
            records = project_shared_outputs(planned, (), scope=scope, manifest=source.manifest, now=stamp)
            return replace_owner_outputs(base, owner, records)
        return SingleOwnerState(
            pipeline_id=scope.pipeline_id,
            destination_id=scope.destination_id,
            published_at=stamp,
            created_at=stamp,
            updated_at=stamp,
            reconciliation_mode=source.reconciliation_mode,
            manifest=source.manifest,
            outputs=project_outputs(planned, (), now=stamp),
            primary_url=source.primary_url,
            distributor_version=version,
        )
    if isinstance(document, SingleOwnerState):
        published = document.published_at
        records = tuple(
            OutputRecord(o.path, o.kind, o.source_path, o.sha256, o.size, published, published, o.transform, o.url)
            for o in planned
        )
        return msgspec.structs.replace(document, outputs=(*document.outputs, *records), updated_at=stamp)
    shared = project_shared_outputs(planned, (), scope=scope, manifest=source.manifest, now=stamp)
    if document.owner(scope) is None:
        return msgspec.structs.replace(replace_owner_outputs(document, owner, shared), updated_at=stamp)
    return msgspec.structs.replace(document, outputs=(*document.outputs, *shared), updated_at=stamp)

"""Reports of ``reconcile-state`` and ``prune`` (interfaces §2.6, §2.7; resolutions A1, B2, B4).

``to_dict()`` gives the fields of the interface tables in their order, lists as ``[]`` (never
null), ``all_owners``/``size``/``owner``/``failed_output`` omitted when false, zero or absent.
Issue 18 adds, to ``reconcile-state`` reports only when asked for: ``mismatched_managed_outputs``
after ``missing_managed_outputs`` (``audit``), then ``adopted_outputs`` and ``adoption``
(``adopt``); unmanaged entries then carry a ``reason``. Other additions, all omitted when empty so
a root report of an uneventful operation has exactly the documented fields: ``bundle_path``
right after ``root_path`` (when not the root, or always inside an ``all_bundles`` report), then
at the end ``truncated`` (the unmanaged walk hit its bound), ``recovery`` (a crashed writer's
journal was settled first) and ``warnings``.

Text lines follow Go's ``%s`` formatting (values unquoted), with ``bundle=<path>`` after
``root=`` for a bundle path other than the root.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

from distributor_core import paths as lp
from distributor_core.app.output_check import OutputCheck
from distributor_core.app.unmanaged import UnmanagedEntry
from distributor_core.execute.journal import Recovery
from distributor_core.jsonfmt import go_json_string
from distributor_core.state import BundleVerdict, OwnerScope, PruneCandidate
from distributor_core.timefmt import format_precise

if TYPE_CHECKING:  # adoption's planning (plan, source) is not imported by audits and prunes
    from distributor_core.app.adopt import AdoptedOutput, Adoption


def flag_text(value: bool) -> str:
    return "true" if value else "false"


def fields_line(label: str, fields: dict[str, Any]) -> str:
    """``<Label>: k=v k=v`` with values unquoted (Go ``%s``), like every repair report line."""
    return f"{label}: " + " ".join(f"{key}={value}" for key, value in fields.items())


def scope_dict(scope: OwnerScope, *, all_owners: bool) -> dict[str, Any]:
    """``owner_scope`` of a report: the selection, ``all_owners: true`` only when set."""
    data: dict[str, Any] = scope.to_dict()
    if all_owners:
        data["all_owners"] = True
    return data


def status_label(changed: bool, would_change: bool) -> str:
    """``changed`` if changed, else ``would_change`` if it would, else ``unchanged``."""
    if changed:
        return "changed"
    return "would_change" if would_change else "unchanged"


class ReportHeader(msgspec.Struct):
    pipeline_id: str
    destination_id: str
    backend: str
    root_path: str
    bundle_path: str = ""
    #: the root as the text line shows it (absolute for a local root); JSON keeps ``root_path``
    root_text: str = ""

    def _head(self, *, with_bundle_path: bool) -> dict[str, Any]:
        data: dict[str, Any] = {
            "pipeline_id": self.pipeline_id,
            "destination_id": self.destination_id,
            "backend": self.backend,
            "root_path": self.root_path,
        }
        if self.bundle_path or with_bundle_path:
            data["bundle_path"] = self.bundle_path
        return data

    def _where(self, *, with_bundle: bool) -> str:
        text = (
            f"pipeline={self.pipeline_id} destination={self.destination_id} "
            f"backend={self.backend} root={self.root_text or self.root_path}"
        )
        if self.bundle_path or with_bundle:
            text += f" bundle={lp.display_path(self.bundle_path)}"
        return text


class ReportExtras(ReportHeader):
    """The header fields, then the recovery and warnings every report ends with."""

    recovery: Recovery | None = None
    warnings: list[str] = msgspec.field(default_factory=list)

    def _tail(self, data: dict[str, Any]) -> dict[str, Any]:
        if self.recovery is not None:
            data["recovery"] = self.recovery.to_dict()
        if self.warnings:
            data["warnings"] = list(self.warnings)
        return data

    def _extra_lines(self, header: ReportHeader) -> list[str]:
        lines = []
        if self.recovery is not None:
            lines.append(
                f"Recovery: pipeline={header.pipeline_id} destination={header.destination_id} "
                f"path={lp.display_path(self.recovery.bundle_path)} direction={self.recovery.direction}"
            )
        lines.extend(f"Warning: {warning}" for warning in self.warnings)
        return lines


class MissingOutput(msgspec.Struct, frozen=True):
    """A recorded managed output that ``stat`` did not find; ``owner`` for shared-root only."""

    path: str
    owner: OwnerScope | None = None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"path": self.path}
        if self.owner is not None:
            data["owner_scope"] = self.owner.to_dict()
        data["storage_status"] = "missing"
        return data


class ReconcileStateReport(ReportExtras):
    """Result of ``reconcile_state`` for one bundle path (interfaces §2.6)."""

    state_schema: int = 0
    owner_scope: OwnerScope = msgspec.field(default_factory=lambda: OwnerScope("", ""))
    all_owners: bool = False
    checked_count: int = 0
    missing_managed_outputs: list[MissingOutput] = msgspec.field(default_factory=list)
    unmanaged_entries: list[UnmanagedEntry] = msgspec.field(default_factory=list)
    changed: bool = False
    would_change: bool = False
    dry_run: bool = False
    truncated: bool = False
    #: issue 18: records of outputs whose bytes no longer match (``audit``)
    audit: bool = False
    mismatched_managed_outputs: list[OutputCheck] = msgspec.field(default_factory=list)
    #: issue 18: adoption of unmanaged files (``adopt``)
    adopt: bool = False
    adoption: Adoption | None = None
    #: whether the bundle path holds the owner's publication (outputs there, by this report's
    #: findings); not in the JSON, the Dagster partitions follow it (issue 37)
    holds: bool | None = None

    @property
    def status(self) -> str:
        return status_label(self.changed, self.would_change)

    @property
    def failed_output(self) -> None:
        return None

    @property
    def adopted_outputs(self) -> list[AdoptedOutput]:
        return list(self.adoption.adopted) if self.adoption is not None else []

    def to_dict(self, *, with_bundle_path: bool = False) -> dict[str, Any]:
        data = self._head(with_bundle_path=with_bundle_path)
        data.update(
            {
                "state_schema": self.state_schema,
                "owner_scope": scope_dict(self.owner_scope, all_owners=self.all_owners),
                "checked_count": self.checked_count,
                "missing_managed_outputs": [item.to_dict() for item in self.missing_managed_outputs],
            }
        )
        if self.audit:
            data["mismatched_managed_outputs"] = [
                item.to_dict(status_key="storage_status") for item in self.mismatched_managed_outputs
            ]
        if self.adopt:
            data["adopted_outputs"] = [item.to_dict() for item in self.adopted_outputs]
            data["adoption"] = self.adoption.to_dict() if self.adoption is not None else {}
        data.update(
            {
                "unmanaged_entries": [item.to_dict() for item in self.unmanaged_entries],
                "changed": self.changed,
                "would_change": self.would_change,
                "dry_run": self.dry_run,
            }
        )
        if self.truncated:
            data["truncated"] = True
        return self._tail(data)

    def text_line(self, *, with_bundle: bool = False) -> str:
        counts = f"checked={self.checked_count} missing={len(self.missing_managed_outputs)} "
        if self.audit:
            counts += f"mismatched={len(self.mismatched_managed_outputs)} "
        if self.adopt:
            counts += f"adopted={len(self.adopted_outputs)} "
        line = (
            f"Reconcile state: {self._where(with_bundle=with_bundle)} status={self.status} "
            f"{counts}unmanaged={len(self.unmanaged_entries)} dry_run={flag_text(self.dry_run)}"
        )
        return line + (" truncated=true" if self.truncated else "")

    def text_lines(self, *, with_bundle: bool = False) -> list[str]:
        lines = [self.text_line(with_bundle=with_bundle)]
        lines.extend(fields_line("Mismatched", item.text_fields()) for item in self.mismatched_managed_outputs)
        lines.extend(
            fields_line("Adopted", {"path": a.path, "kind": a.kind, "size": a.size, "sha256": a.sha256})
            for a in self.adopted_outputs
        )
        if self.adopt:
            for entry in self.unmanaged_entries:
                lines.append(f"Unmanaged: path={entry.path} type={entry.type} reason={go_json_string(entry.reason)}")
            if self.adoption is not None and self.adoption.reason:
                lines.append(f"Adoption: reason={go_json_string(self.adoption.reason)}")
        return [*lines, *self._extra_lines(self)]


#: what a prune of a destination without a retention policy says (it plans nothing)
DISABLED_NOTE = (
    "retention.prune is disabled for destination {destination}: nothing is pruned "
    "(set retention.prune.enabled: true, with older_than and/or keep_latest, to prune)"
)


class PruneReport(ReportExtras):
    """Result of ``prune`` for one bundle path (interfaces §2.7, resolutions B4, C3)."""

    owner_scope: OwnerScope = msgspec.field(default_factory=lambda: OwnerScope("", ""))
    enabled: bool = False
    checked_count: int = 0
    planned_outputs: list[PruneCandidate] = msgspec.field(default_factory=list)
    deleted_outputs: list[PruneCandidate] = msgspec.field(default_factory=list)
    preserved_outputs: list[PruneCandidate] = msgspec.field(default_factory=list)
    failed_output: PruneCandidate | None = None
    state_changed: bool = False
    would_change: bool = False
    dry_run: bool = False
    #: issue 37, ``retention.prune.bundles``: what the policy does with this bundle path, and
    #: whether this owner's publication there (``bundle_removed``) and the bundle path's
    #: ``.distributor.json`` (``state_removed``, when no other owner remains) are gone
    bundle_retention: BundleVerdict | None = None
    bundle_removed: bool = False
    state_removed: bool = False
    #: whether the bundle path still holds the owner's publication afterwards (``None``: not
    #: known); not in the report's JSON, the Dagster partitions follow it (issue 37)
    holds: bool | None = None

    @property
    def status(self) -> str:
        return status_label(self.state_changed, self.would_change)

    def to_dict(self, *, with_bundle_path: bool = False) -> dict[str, Any]:
        data = self._head(with_bundle_path=with_bundle_path)
        data.update(
            {
                "owner_scope": self.owner_scope.to_dict(),
                "enabled": self.enabled,
                "checked_count": self.checked_count,
                "planned_outputs": [item.to_dict() for item in self.planned_outputs],
                "deleted_outputs": [item.to_dict() for item in self.deleted_outputs],
                "preserved_outputs": [item.to_dict() for item in self.preserved_outputs],
            }
        )
        if self.failed_output is not None:
            data["failed_output"] = self.failed_output.to_dict()
        data.update({"state_changed": self.state_changed, "would_change": self.would_change, "dry_run": self.dry_run})
        if self.bundle_retention is not None:
            data["bundle_retention"] = self.bundle_retention.to_dict()
            data["bundle_removed"] = self.bundle_removed
            data["state_removed"] = self.state_removed
        return self._tail(data)

    def text_line(self, *, with_bundle: bool = False) -> str:
        line = (
            f"Prune: {self._where(with_bundle=with_bundle)} status={self.status} checked={self.checked_count} "
            f"planned={len(self.planned_outputs)} deleted={len(self.deleted_outputs)} "
            f"preserved={len(self.preserved_outputs)} dry_run={flag_text(self.dry_run)}"
        )
        verdict = self.bundle_retention
        if verdict is not None:
            line += f" bundle_action={verdict.action} created={format_precise(verdict.candidate.created)}"
            if self.bundle_removed:
                line += " removed=true"
        return line

    def text_lines(self, *, with_bundle: bool = False) -> list[str]:
        lines = [self.text_line(with_bundle=with_bundle), *self._extra_lines(self)]
        if not self.enabled:
            lines.append(DISABLED_NOTE.format(destination=self.destination_id))
        return lines

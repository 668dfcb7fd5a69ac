"""Run reports: what ``distributor run``, the upload server and Dagster show (interfaces §2.5, resolutions C2)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

from distributor_core import paths as lp
from distributor_core.app.refusal import Refusal
from distributor_core.plan.model import ACTION_ORDER
from distributor_core.structeq import compare_without
from distributor_core.textfmt import record_line

if TYPE_CHECKING:
    from distributor_core.execute.publish import PublishOutcome


@compare_without("outcome")
class ActionReport(msgspec.Struct):
    pipeline_id: str
    destination_id: str
    backend: str
    bundle_path: str
    destination_path: str
    source_id: str
    action: str | None
    reason: str
    state_mode: str
    reconciliation_mode: str
    status: str
    error: str = ""
    primary_url: str = ""
    outputs: list[dict[str, Any]] = msgspec.field(default_factory=list)
    deletes: list[str] = msgspec.field(default_factory=list)
    taken_over_outputs: list[dict[str, Any]] = msgspec.field(default_factory=list)
    bytes_written: int = 0
    recovery: dict[str, Any] | None = None
    planned_action: str | None = None
    warnings: list[str] = msgspec.field(default_factory=list)
    #: where and how to fix a refusal or failure (``refusal`` in JSON, a ``Refusal:`` text line)
    refusal: Refusal | None = None
    #: the storage error kind of a failure (``unavailable``, ``permission``...; not serialised):
    #: the failure's class in what a producer is told (:mod:`distributor_core.app.public`)
    error_kind: str = ""
    #: the outcome this entry was made from (not serialised); Dagster reads plans from it
    outcome: PublishOutcome | None = None


    @property
    def failed(self) -> bool:
        return self.status == "failed"

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "pipeline_id": self.pipeline_id,
            "destination_id": self.destination_id,
            "backend": self.backend,
            "bundle_path": self.bundle_path,
            "destination_path": self.destination_path,
            "source_id": self.source_id,
            "action": self.action,
            "reason": self.reason,
            "state_mode": self.state_mode,
            "reconciliation_mode": self.reconciliation_mode,
            "primary_url": self.primary_url,
            "outputs": list(self.outputs),
            "status": self.status,
            "error": self.error,
            "bytes_written": self.bytes_written,
        }
        if self.deletes:
            data["deletes"] = list(self.deletes)
        if self.taken_over_outputs:
            data["taken_over_outputs"] = list(self.taken_over_outputs)
        if self.recovery is not None:
            data["recovery"] = self.recovery
        if self.planned_action is not None:
            data["planned_action"] = self.planned_action
        if self.warnings:
            data["warnings"] = list(self.warnings)
        if self.refusal is not None:
            data["refusal"] = self.refusal.to_dict()
        return data

    def failure_text(self) -> str:
        """The error with the facts an operator acts on: root, paths, remedy, docs link."""
        if self.refusal is None:
            return self.error
        return f"{self.error} ({self.refusal.sentence()})"

    def text_line(self, dry_run: bool) -> str:
        """``path`` is the source bundle path, ``destination_path`` the bundle path inside the
        destination root (``.`` for the root itself), as ``bundle_path``/``destination_path`` in JSON."""
        return (
            f"Action: pipeline={self.pipeline_id} destination={self.destination_id} backend={self.backend} "
            f"path={lp.display_path(self.bundle_path)} destination_path={lp.display_path(self.destination_path)} "
            f"action={self.action or 'none'} status={self.status} dry_run={'true' if dry_run else 'false'}"
        )


class PipelineReport(msgspec.Struct):
    id: str
    source_backend: str
    bundle_count: int = 0
    error: str = ""

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"id": self.id, "source_backend": self.source_backend, "bundle_count": self.bundle_count}
        if self.error:
            data["error"] = self.error
        return data


class RunReport(msgspec.Struct):
    dry_run: bool = False
    force: bool = False
    republish: bool = False
    pipelines: list[PipelineReport] = msgspec.field(default_factory=list)
    actions: list[ActionReport] = msgspec.field(default_factory=list)
    #: about the run as a whole (a validation cache location that was not trusted); the actions
    #: carry their own
    warnings: list[str] = msgspec.field(default_factory=list)

    @property
    def failed_actions(self) -> list[ActionReport]:
        return [a for a in self.actions if a.failed]

    @property
    def ok(self) -> bool:
        return not self.failed_actions and not any(p.error for p in self.pipelines)

    def summary(self) -> dict[str, int]:
        counts = {action.value: 0 for action in ACTION_ORDER}
        for entry in self.actions:
            if entry.action in counts:
                counts[entry.action] += 1
        counts["failed"] = len(self.failed_actions)
        return counts

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "dry_run": self.dry_run,
            "force": self.force,
            "republish": self.republish,
            "pipelines": [p.to_dict() for p in self.pipelines],
            "actions": [a.to_dict() for a in self.actions],
            "summary": self.summary(),
        }
        if self.warnings:
            data["warnings"] = list(self.warnings)
        return data

    def text_lines(self) -> list[str]:
        lines = []
        for entry in self.actions:
            lines.append(entry.text_line(self.dry_run))
            if entry.refusal is not None:
                lines.append(record_line("Refusal", {"pipeline": entry.pipeline_id, "destination": entry.destination_id,
                                                     **entry.refusal.fields()}))
            # what a forced replacement removes (or, in a dry run, would remove): the JSON ``deletes``
            for path in entry.deletes:
                lines.append(record_line("Delete", {"pipeline": entry.pipeline_id, "destination": entry.destination_id,
                                                    "destination_path": lp.display_path(entry.destination_path),
                                                    "path": path}))
        for entry in self.actions:
            if entry.recovery is not None:
                lines.append(f"Recovery: pipeline={entry.pipeline_id} destination={entry.destination_id} "
                             f"path={lp.display_path(entry.destination_path)} direction={entry.recovery['direction']}")
        lines.append(
            f"Run: pipelines={len(self.pipelines)} actions={len(self.actions)} failed={len(self.failed_actions)} "
            f"dry_run={'true' if self.dry_run else 'false'}"
        )
        return lines

    def error_message(self) -> str:
        """``<n> destination(s) failed: <p>/<d> [<bundle>]: <error>; ...`` (resolutions C2)."""
        failed = self.failed_actions
        parts = [f"{a.pipeline_id}/{a.destination_id} [{lp.display_path(a.bundle_path)}]: {a.failure_text()}"
                 for a in failed]
        message = f"{len(failed)} destination(s) failed: " + "; ".join(parts) if failed else ""
        pipeline_errors = [f"pipeline {p.id}: {p.error}" for p in self.pipelines if p.error and not any(
            a.pipeline_id == p.id and a.failed for a in failed)]
        if pipeline_errors:
            message = "; ".join(filter(None, [message, *pipeline_errors]))
        return message

"""The report of ``audit`` for one bundle path (issue 18 item 1).

``to_dict()``::

    {"pipeline_id", "destination_id", "backend", "root_path", ["bundle_path"], "state_schema",
     "owner_scope": {..., ["all_owners": true]}, "status": "ok" | "problems",
     "checked_count", "counts": {"ok", "missing", "not_a_file", "size_mismatch",
     "digest_mismatch", "unmanaged"}, "bytes_read", "allow_unmanaged",
     "outputs": [<every checked output>], "unmanaged_entries": [...],
     ["truncated"], ["warnings"]}

``outputs`` lists every recorded output in scope in state order with its ``status`` (see
:class:`~distributor_core.app.output_check.OutputCheck`). ``status`` is ``problems`` when an output
is not ``ok``, or when there are unmanaged entries and ``allow_unmanaged`` is false.

Text: ``Audit: ... status=<s> checked=<n> ok=<n> missing=<n> not_a_file=<n> size_mismatch=<n>
digest_mismatch=<n> unmanaged=<n> bytes_read=<n>`` (``truncated=true`` at the end when the
unmanaged walk hit its bound), then an ``Output:`` line per output that is not ok, an
``Unmanaged:`` line per unmanaged entry and a ``Warning:`` line per warning.
"""

from __future__ import annotations

from typing import Any

import msgspec

from distributor_core.app.output_check import OK, STATUSES, OutputCheck
from distributor_core.app.refusal import Refusal
from distributor_core.app.repair_report import ReportExtras, fields_line, scope_dict
from distributor_core.app.unmanaged import UnmanagedEntry
from distributor_core.state import OwnerScope


class AuditReport(ReportExtras):
    """Result of auditing one bundle path (read only: nothing is locked or written)."""

    state_schema: int = 0
    owner_scope: OwnerScope = msgspec.field(default_factory=lambda: OwnerScope("", ""))
    all_owners: bool = False
    outputs: list[OutputCheck] = msgspec.field(default_factory=list)
    unmanaged_entries: list[UnmanagedEntry] = msgspec.field(default_factory=list)
    allow_unmanaged: bool = False
    truncated: bool = False
    #: where and how to fix what the audit found (``refusal`` in JSON), when it is not clean
    refusal: Refusal | None = None
    #: whether the bundle path holds the owner's publication (outputs there); not in the JSON,
    #: the Dagster partitions follow it (issue 37)
    holds: bool | None = None

    @property
    def checked_count(self) -> int:
        return len(self.outputs)

    @property
    def bytes_read(self) -> int:
        return sum(check.bytes_read for check in self.outputs)

    @property
    def counts(self) -> dict[str, int]:
        counts = dict.fromkeys(STATUSES, 0)
        for check in self.outputs:
            counts[check.status] += 1
        counts["unmanaged"] = len(self.unmanaged_entries)
        return counts

    @property
    def problems(self) -> list[OutputCheck]:
        return [check for check in self.outputs if not check.ok]

    @property
    def clean(self) -> bool:
        """Nothing wrong: every output ok, and no unmanaged entry (unless they are allowed)."""
        return not self.problems and (self.allow_unmanaged or not self.unmanaged_entries)

    @property
    def status(self) -> str:
        return "ok" if self.clean else "problems"

    @property
    def failed_output(self) -> None:
        return None

    def problem_summary(self) -> str:
        """``1 missing, 2 digest_mismatch, 1 unmanaged`` (empty when clean)."""
        counts = self.counts
        parts = [f"{counts[name]} {name}" for name in STATUSES if name != OK and counts[name]]
        if counts["unmanaged"] and not self.allow_unmanaged:
            parts.append(f"{counts['unmanaged']} unmanaged")
        return ", ".join(parts)

    def to_dict(self, *, with_bundle_path: bool = False) -> dict[str, Any]:
        data = self._head(with_bundle_path=with_bundle_path)
        data.update(
            {
                "state_schema": self.state_schema,
                "owner_scope": scope_dict(self.owner_scope, all_owners=self.all_owners),
                "status": self.status,
                "checked_count": self.checked_count,
                "counts": self.counts,
                "bytes_read": self.bytes_read,
                "allow_unmanaged": self.allow_unmanaged,
                "outputs": [check.to_dict() for check in self.outputs],
                "unmanaged_entries": [entry.to_dict() for entry in self.unmanaged_entries],
            }
        )
        if self.truncated:
            data["truncated"] = True
        if self.refusal is not None:
            data["refusal"] = self.refusal.to_dict()
        return self._tail(data)

    def text_line(self, *, with_bundle: bool = False) -> str:
        counts = self.counts
        line = (
            f"Audit: {self._where(with_bundle=with_bundle)} status={self.status} checked={self.checked_count} "
            + " ".join(f"{name}={counts[name]}" for name in (*STATUSES, "unmanaged"))
            + f" bytes_read={self.bytes_read}"
        )
        return line + (" truncated=true" if self.truncated else "")

    def text_lines(self, *, with_bundle: bool = False) -> list[str]:
        lines = [self.text_line(with_bundle=with_bundle)]
        lines.extend(fields_line("Output", check.text_fields()) for check in self.problems)
        lines.extend(
            fields_line("Unmanaged", {"path": e.path, "type": e.type, "size": e.size}) for e in self.unmanaged_entries
        )
        lines.extend(self._extra_lines(self))
        return lines

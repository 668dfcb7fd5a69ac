"""The ``all_bundles`` report: one section per bundle path (resolutions B2); and one destination's
section of a run over several destinations (:class:`DestinationSection`).

``to_dict()``::

    {"pipeline_id", "destination_id", "backend", "root_path", "all_bundles": true,
     "dry_run", "bundle_count", "failed_count",
     "bundles": [<section>, ...]}

A section is the bundle's own report (``reconcile-state`` or ``prune`` shape, always with
``bundle_path``) plus ``error`` when that bundle failed; a bundle that failed before it had a
report (invalid or mismatched state, lock conflict, ...) is ``{"bundle_path", "error"}``.
Bundles are independent: one failing does not stop the others.
"""

from __future__ import annotations

from typing import Any, Generic, Protocol, TypeVar

import msgspec

from distributor_core import paths as lp
from distributor_core.app.refusal import Refusal
from distributor_core.state import PruneCandidate


class SectionReport(Protocol):
    bundle_path: str
    warnings: list[str]

    @property
    def failed_output(self) -> PruneCandidate | None: ...

    def to_dict(self, *, with_bundle_path: bool = False) -> dict[str, Any]: ...

    def text_lines(self, *, with_bundle: bool = False) -> list[str]: ...


R = TypeVar("R", bound=SectionReport)


class BundleSection(msgspec.Struct, Generic[R]):
    bundle_path: str
    report: R | None = None
    error: str = ""
    #: where and how to fix the failure (``refusal`` in JSON), when it has a known remedy
    refusal: Refusal | None = None

    @property
    def failed(self) -> bool:
        return bool(self.error)

    def to_dict(self) -> dict[str, Any]:
        if self.report is not None:
            data = self.report.to_dict(with_bundle_path=True)
        else:
            data = {"bundle_path": self.bundle_path}
        if self.error:
            data["error"] = self.error
        if self.refusal is not None:
            data["refusal"] = self.refusal.to_dict()
        return data

    def failed_line(self) -> str:
        """``Failed: bundle=<b> [path=<failed output>] error=<e>``."""
        text = f"Failed: bundle={lp.display_path(self.bundle_path)}"
        failed = self.report.failed_output if self.report is not None else None
        if failed is not None:
            text += f" path={failed.path}"
        return f"{text} error={self.error}"

    def text_lines(self) -> list[str]:
        lines = self.report.text_lines(with_bundle=True) if self.report is not None else []
        if self.error:
            lines.append(self.failed_line())
        return lines


class BundleSetReport(msgspec.Struct, Generic[R]):
    """Result of ``reconcile_state`` or ``prune`` with ``all_bundles``."""

    pipeline_id: str
    destination_id: str
    backend: str
    root_path: str
    dry_run: bool
    sections: list[BundleSection[R]] = msgspec.field(default_factory=list)
    #: the root as the text line shows it (absolute for a local root); JSON keeps ``root_path``
    root_text: str = ""

    @property
    def reports(self) -> list[R]:
        return [section.report for section in self.sections if section.report is not None]

    @property
    def failed(self) -> list[BundleSection[R]]:
        return [section for section in self.sections if section.failed]

    @property
    def ok(self) -> bool:
        return not self.failed

    @property
    def clean(self) -> bool:
        """No bundle failed and every report is clean (an audit found nothing wrong)."""
        return self.ok and all(getattr(report, "clean", True) for report in self.reports)

    @property
    def warnings(self) -> list[str]:
        """Every section's warnings, prefixed with its bundle path."""
        return [
            f"{lp.display_path(report.bundle_path)}: {warning}"
            for report in self.reports
            for warning in report.warnings
        ]

    def error_message(self) -> str:
        """``<n> bundle(s) failed: <bundle>: <error>; ...`` (empty when none failed)."""
        failed = self.failed
        if not failed:
            return ""
        parts = "; ".join(f"{lp.display_path(section.bundle_path)}: {section.error}" for section in failed)
        return f"{len(failed)} bundle(s) failed: {parts}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "pipeline_id": self.pipeline_id,
            "destination_id": self.destination_id,
            "backend": self.backend,
            "root_path": self.root_path,
            "all_bundles": True,
            "dry_run": self.dry_run,
            "bundle_count": len(self.sections),
            "failed_count": len(self.failed),
            "bundles": [section.to_dict() for section in self.sections],
        }

    def text_lines(self) -> list[str]:
        lines = [line for section in self.sections for line in section.text_lines()]
        lines.append(
            f"Bundles: pipeline={self.pipeline_id} destination={self.destination_id} backend={self.backend} "
            f"root={self.root_text or self.root_path} bundles={len(self.sections)} failed={len(self.failed)} "
            f"dry_run={'true' if self.dry_run else 'false'}"
        )
        return lines


class DestinationSection(msgspec.Struct, Generic[R]):
    """One destination of a run over several destinations (``--all``, the Dagster maintenance
    jobs): its report (a bundle set's, or one bundle path's) and the error that failed it.

    ``to_dict()`` is the report's, or ``{"pipeline_id", "destination_id", "backend", "root_path"}``
    when the destination failed before it had one, plus ``error`` when it failed.
    """

    pipeline_id: str
    destination_id: str
    backend: str
    root_path: str
    report: BundleSetReport[R] | R | None = None
    error: str = ""
    #: where and how to fix ``error``, when it has a known remedy
    refusal: Refusal | None = None

    @property
    def refusals(self) -> list[Refusal]:
        """This destination's refusal and those of its failed bundle paths."""
        found = [self.refusal] if self.refusal is not None else []
        if isinstance(self.report, BundleSetReport):
            for section in self.report.sections:
                found += [section.refusal] if section.refusal is not None else []
                found += [r for r in (getattr(section.report, "refusal", None),) if r is not None]
        elif getattr(self.report, "refusal", None) is not None:
            found.append(self.report.refusal)  # type: ignore[union-attr]
        return found

    @property
    def name(self) -> str:
        return f"{self.pipeline_id}/{self.destination_id}"

    @property
    def failed(self) -> bool:
        return bool(self.error) or (isinstance(self.report, BundleSetReport) and not self.report.ok)

    @property
    def clean(self) -> bool:
        return not self.failed and (self.report is None or bool(getattr(self.report, "clean", True)))

    def error_text(self) -> str:
        """The error that failed the destination, or its bundle set's failures (empty when none)."""
        if self.error:
            return self.error
        return self.report.error_message() if isinstance(self.report, BundleSetReport) else ""

    def to_dict(self) -> dict[str, Any]:
        if self.report is not None:
            data = self.report.to_dict()
        else:
            data = {
                "pipeline_id": self.pipeline_id,
                "destination_id": self.destination_id,
                "backend": self.backend,
                "root_path": self.root_path,
            }
        if self.error:
            data["error"] = self.error
        if self.refusal is not None:
            data["refusal"] = self.refusal.to_dict()
        return data

    def text_lines(self) -> list[str]:
        if self.report is not None:
            return self.report.text_lines()
        return [f"Failed: pipeline={self.pipeline_id} destination={self.destination_id} error={self.error}"]

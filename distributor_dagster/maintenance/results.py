"""Collecting per-bundle reports of prune and repair runs into the CLI's result shape."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import dagster as dg

from distributor_core.app.bundle_set import BundleSection, BundleSetReport
from distributor_core.app.bundles import BUNDLE_ERRORS
from distributor_core.app.selection import SelectionError
from distributor_core.config import ConfigLookupError, Destination, Pipeline

#: What fails one bundle path of a prune or repair without stopping the others.
MAINTENANCE_ERRORS: tuple[type[Exception], ...] = (*BUNDLE_ERRORS, SelectionError, ConfigLookupError)


@dataclass
class Sections:
    """One report (or error) per selected bundle path, in selection order."""

    all_bundles: bool
    dry_run: bool
    sections: list[BundleSection[Any]] = field(default_factory=list)

    def add(self, bundle_path: str, report: Any = None, error: str = "") -> None:
        self.sections.append(BundleSection(bundle_path, report, error))

    @property
    def failed(self) -> list[BundleSection[Any]]:
        return [section for section in self.sections if section.failed]

    def result(self, pipeline: Pipeline, destination: Destination) -> dict[str, Any]:
        """The ``result`` object ``distributor prune`` / ``reconcile-state`` print for this selection."""
        if not self.all_bundles and len(self.sections) == 1 and self.sections[0].report is not None:
            return self.sections[0].report.to_dict()
        report: BundleSetReport[Any] = BundleSetReport(
            pipeline.id, destination.id, destination.backend, destination.storage.root_path, self.dry_run,
            sections=list(self.sections),
        )
        return report.to_dict()

    def text_lines(self) -> list[str]:
        return [line for section in self.sections for line in section.text_lines()]

    def error_message(self) -> str:
        failed = self.failed
        if not failed:
            return ""
        if not self.all_bundles and len(self.sections) == 1:
            return failed[0].error
        return BundleSetReport("", "", "", "", self.dry_run, sections=list(self.sections)).error_message()

    def raise_if_failed(self, result: dict[str, Any] | None = None) -> None:
        """Fail the step with the error, keeping the (partial) report as failure metadata."""
        message = self.error_message()
        if message:
            metadata = {"report": dg.MetadataValue.json(result)} if result is not None else None
            raise dg.Failure(description=message, metadata=metadata)

    def output(self, result: dict[str, Any]) -> dg.Output[dict[str, Any]]:
        self.raise_if_failed(result)
        return dg.Output(result, metadata={"dry_run": self.dry_run, "report": dg.MetadataValue.json(result)})

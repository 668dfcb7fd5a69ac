"""Whole-config repair and audit: every destination of every pipeline (issue 18 item 2).

Each destination is opened once and worked on bundle path by bundle path: ``fixed`` destinations
keep their state at the root (worked on when it exists), ``preserve_relative`` ones in every
bundle path, found by the walk of resolutions B2 (bounded at 1,000,000 entries). One
destination failing (its storage cannot be opened, the walk fails) or one bundle path failing
does not stop the others.

``ConfigSetReport.to_dict()``::

    {"all": true, "dry_run", "destination_count", "failed_count",
     "destinations": [<the destination's all_bundles report> (+ "error"), ...]}

A destination that failed before it had a report is ``{"pipeline_id", "destination_id",
"backend", "root_path", "error"}``. Text: each destination's lines (a line per bundle path, its
``Failed:`` lines and its ``Bundles:`` summary, or ``Failed: pipeline=<p> destination=<d>
error=<e>``), then ``Destinations: destinations=<n> failed=<k> dry_run=<b>``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

import msgspec

from distributor_core import paths as lp
from distributor_core.app.bundle_set import BundleSetReport, DestinationSection, SectionReport
from distributor_core.app.bundles import destination_storage, run_destinations
from distributor_core.app.repair_report import flag_text
from distributor_core.app.selection import Target, discover_state_bundles
from distributor_core.config import Config, Environment
from distributor_core.storage.base import Storage

R = TypeVar("R", bound=SectionReport)


class ConfigSetReport(msgspec.Struct, Generic[R]):
    """Result of a whole-config ``reconcile-state --all`` or ``audit --all``."""

    dry_run: bool
    destinations: list[DestinationSection[R]] = msgspec.field(default_factory=list)

    @property
    def failed(self) -> list[DestinationSection[R]]:
        return [section for section in self.destinations if section.failed]

    @property
    def ok(self) -> bool:
        return not self.failed

    @property
    def clean(self) -> bool:
        return all(section.clean for section in self.destinations)

    @property
    def reports(self) -> list[R]:
        return [r for section in self.destinations if section.report is not None for r in section.report.reports]

    @property
    def warnings(self) -> list[str]:
        return [
            f"{section.name} {warning}"
            for section in self.destinations
            if section.report is not None
            for warning in section.report.warnings
        ]

    def error_message(self) -> str:
        """``<n> destination(s) failed: <p>/<d>: <error>; ...`` (empty when none failed)."""
        failed = self.failed
        if not failed:
            return ""
        parts = "; ".join(f"{section.name}: {section.error_text()}" for section in failed)
        return f"{len(failed)} destination(s) failed: {parts}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "all": True,
            "dry_run": self.dry_run,
            "destination_count": len(self.destinations),
            "failed_count": len(self.failed),
            "destinations": [section.to_dict() for section in self.destinations],
        }

    def text_lines(self) -> list[str]:
        lines = [line for section in self.destinations for line in section.text_lines()]
        lines.append(
            f"Destinations: destinations={len(self.destinations)} failed={len(self.failed)} "
            f"dry_run={flag_text(self.dry_run)}"
        )
        return lines


def state_bundles(target: Target, storage: Storage, *, discovery_limit: int) -> list[str]:
    """The bundle paths of a destination that hold its state: a ``fixed`` destination's root
    (when it has a state file), every bundle path with one under a ``preserve_relative`` root."""
    if target.destination.path_mapping.mode == "fixed":
        return [""] if storage.exists(lp.STATE_FILE_NAME) else []
    return discover_state_bundles(storage, limit=discovery_limit)


OneDestination = Callable[[Target, Storage, list[str]], BundleSetReport[R]]


def walk_config(
    config: Config,
    environment: Environment,
    *,
    dry_run: bool,
    one: OneDestination[R],
    discovery_limit: int,
) -> ConfigSetReport[R]:
    """Run ``one(target, storage, bundle paths)`` for every destination, in config order, through
    the one destination loop (:func:`~distributor_core.app.bundles.run_destinations`)."""

    def work(target: Target) -> BundleSetReport[R]:
        with destination_storage(target, dry_run=dry_run) as storage:
            return one(target, storage, state_bundles(target, storage, discovery_limit=discovery_limit))

    targets = [
        Target(config, pipeline, destination, environment)
        for pipeline in config.pipelines
        for destination in pipeline.destinations
    ]
    return ConfigSetReport(dry_run, list(run_destinations(targets, work)))

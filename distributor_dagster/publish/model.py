"""Values passed between the publish graph's steps. They are pickled by the IO manager, so they
hold plain data: no open storage, no plan objects with generated content."""

from __future__ import annotations

from dataclasses import dataclass, field

import msgspec

from distributor_core.app.report import ActionReport
from distributor_core.app.run_options import RunOptions
from distributor_core.timefmt import Clock


@dataclass(frozen=True)
class Selection:
    """What ``discover`` decided: the bundles, the target destinations and the run flags.

    ``destinations`` are the ids this run publishes to (config order): the selected destination
    assets, restricted by the ``destination`` run config. Empty when the run only evaluates checks.
    """

    pipeline_id: str
    bundle_paths: tuple[str, ...]
    destinations: tuple[str, ...] = ()
    dry_run: bool = False
    force: bool = False
    republish: bool = False
    upload_run_id: str | None = None
    #: the staged bundle directory of an upload (published as a local source, bundle path "")
    source_root: str | None = None

    def selects(self, destination_id: str) -> bool:
        return destination_id in self.destinations

    def run_options(
        self, destination_id: str, *, dry_run: bool, clock: Clock | None = None, holder: str | None = None
    ) -> RunOptions:
        return RunOptions(
            dry_run=dry_run,
            force=self.force,
            republish=self.republish,
            pipeline_id=self.pipeline_id,
            destination_id=destination_id,
            clock=clock,
            holder=holder,
        )


def detached(entry: ActionReport) -> ActionReport:
    """The report entry without its in-memory outcome (which holds open storage)."""
    return msgspec.structs.replace(entry, outcome=None, outputs=list(entry.outputs), warnings=list(entry.warnings))


@dataclass
class DestinationPlan:
    """The ``plan`` step's result for one destination: one entry per bundle it publishes."""

    destination_id: str
    entries: list[ActionReport] = field(default_factory=list)
    error: str = ""


@dataclass
class DestinationResult:
    """The ``execute`` step's result for one destination (also when the step fails)."""

    destination_id: str
    entries: list[ActionReport] = field(default_factory=list)
    error: str = ""

    @property
    def failed(self) -> bool:
        return bool(self.error) or any(entry.failed for entry in self.entries)

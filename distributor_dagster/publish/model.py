"""Values passed between the steps of a publish graph. They are pickled by the IO manager, so they
hold plain data: no open storage, no plan objects with generated content, no source bytes."""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from distributor_core.app.report import ActionReport
from distributor_core.app.run_options import RunOptions
from distributor_core.bundle import Manifest
from distributor_core.timefmt import Clock


@dataclass(frozen=True)
class Item:
    """One bundle a run publishes: a source-relative bundle path, or a staged upload (bundle path
    ``""`` of its staged bundle, read through the pipeline's upload store; ``source_root`` says
    where it is, for messages: its staging directory, or its ``s3://`` location in a shared
    staging store)."""

    bundle_path: str
    upload_run_id: str | None = None
    source_root: str | None = None

    @property
    def key(self) -> str:
        """Unique within a run: the upload run id, or the bundle path."""
        return self.upload_run_id or self.bundle_path

    @property
    def label(self) -> str:
        return f"upload {self.upload_run_id}" if self.upload_run_id else f"bundle {self.bundle_path or '.'}"


@dataclass(frozen=True)
class RunScope:
    """What ``discover`` decided: the bundles, the target destinations and the run flags.

    ``destinations`` are the ids this run publishes to (config order): the selected destination
    assets of this graph, restricted by the ``destination`` run config. Empty when the run only
    evaluates checks. ``targeted`` is true when the run names its bundles (partitions, a
    ``bundle_path`` or uploads) rather than publishing every bundle of the source.
    """

    pipeline_id: str
    items: tuple[Item, ...]
    destinations: tuple[str, ...] = ()
    dry_run: bool = False
    force: bool = False
    republish: bool = False

    def selects(self, destination_id: str) -> bool:
        return destination_id in self.destinations

    @property
    def upload_run_ids(self) -> tuple[str, ...]:
        return tuple(item.upload_run_id for item in self.items if item.upload_run_id)

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


@dataclass(frozen=True)
class Valid:
    """A bundle that passed validation (manifest rules, every file's size and sha256)."""

    item: Item
    manifest: Manifest


@dataclass(frozen=True)
class Validated:
    """The ``validate`` step's result: the valid bundles in order, and one error per invalid one
    (``item``, message). Invalid bundles are the source's problem: destinations never see them."""

    selection: RunScope
    valid: tuple[Valid, ...] = ()
    invalid: tuple[tuple[Item, str], ...] = ()


def detached(entry: ActionReport) -> ActionReport:
    """The report entry without its in-memory outcome (which holds open storage)."""
    return msgspec.structs.replace(entry, outcome=None, outputs=list(entry.outputs), warnings=list(entry.warnings))


@dataclass(frozen=True)
class DestinationResult:
    """What one ``publish_<d>`` step did: one entry per (item, destination), in item order, and
    the error of a step that could not even start publishing."""

    destination_id: str
    entries: tuple[tuple[Item, ActionReport], ...] = ()
    error: str = ""

    @property
    def failed(self) -> bool:
        return bool(self.error) or any(entry.failed for _, entry in self.entries)

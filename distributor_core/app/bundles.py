"""Running ``reconcile-state`` or ``prune`` over the selected bundle paths (resolutions B2).

One storage is opened for the destination root (or the caller's, which is left open). A single
bundle path returns its report or raises; ``all_bundles`` finds every bundle path with a state
file and runs each one independently, collecting a :class:`BundleSetReport`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from distributor_core.app.bundle_set import BundleSection, BundleSetReport, SectionReport
from distributor_core.app.selection import Target, discover_state_bundles
from distributor_core.execute.journal import JournalError
from distributor_core.paths import PathError
from distributor_core.state import StateError
from distributor_core.storage.base import Storage
from distributor_core.storage.errors import StorageError
from distributor_core.storage.factory import open_destination_storage

#: Errors that fail one bundle path of an ``all_bundles`` run without stopping the others.
BUNDLE_ERRORS: tuple[type[Exception], ...] = (StorageError, StateError, JournalError, PathError)

R = TypeVar("R", bound=SectionReport)


class ReportedError(Exception):
    """A failure that still has a report to show (``report``); the message is the error."""

    def __init__(self, message: str, report: object) -> None:
        super().__init__(message)
        self.report = report


@contextmanager
def destination_storage(target: Target, *, dry_run: bool, storage: Storage | None = None) -> Iterator[Storage]:
    """The destination root's storage: ``storage`` when given (not closed here), else opened
    from the config (an SSH dry run never writes ``known_hosts``) and closed afterwards."""
    if storage is not None:
        yield storage
        return
    opened = open_destination_storage(target.destination, target.environment, dry_run=dry_run)
    with opened:
        yield opened


def run_bundle_set(
    target: Target,
    storage: Storage,
    *,
    dry_run: bool,
    one: Callable[[str], R],
    discovery_limit: int,
    bundles: list[str] | None = None,
) -> BundleSetReport[R]:
    """Run ``one`` for every bundle path holding state (or each of ``bundles``), in path order."""
    report: BundleSetReport[R] = BundleSetReport(
        target.pipeline.id, target.destination.id, target.backend, target.root_path, dry_run
    )
    if bundles is None:
        bundles = discover_state_bundles(storage, limit=discovery_limit)
    for bundle in bundles:
        try:
            report.sections.append(BundleSection(bundle, one(bundle)))
        except ReportedError as exc:
            report.sections.append(BundleSection(bundle, exc.report, str(exc)))  # type: ignore[arg-type]
        except BUNDLE_ERRORS as exc:
            report.sections.append(BundleSection(bundle, None, str(exc)))
    return report

"""The two loops of the maintenance operations (``reconcile-state``, ``prune``, ``audit``), shared
by the CLI and the Dagster maintenance jobs (resolutions B2).

- :func:`run_bundle_set`: the bundle paths of one destination root, each independently,
  collected in a :class:`BundleSetReport` (one storage is opened for the root, or the caller's
  is used and left open; a single bundle path returns its report or raises instead);
- :func:`run_destinations`: several destinations in the order given (``--all``, the site-wide
  Dagster jobs), one :class:`DestinationSection` each as soon as it is done; one destination
  failing never stops the others.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from distributor_core.app.bundle_set import BundleSection, BundleSetReport, DestinationSection, SectionReport
from distributor_core.app.refusal import for_maintenance_error
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
        target.pipeline.id, target.destination.id, target.backend, target.root_path, dry_run,
        root_text=target.root_text,
    )
    if bundles is None:
        bundles = discover_state_bundles(storage, limit=discovery_limit)
    for bundle in bundles:
        try:
            report.sections.append(BundleSection(bundle, one(bundle)))
        except ReportedError as exc:
            report.sections.append(BundleSection(bundle, exc.report, str(exc)))  # type: ignore[arg-type]
        except BUNDLE_ERRORS as exc:
            refusal = for_maintenance_error(target.destination.storage, target.pipeline.id, target.destination.id,
                                            bundle, exc)
            report.sections.append(BundleSection(bundle, None, str(exc), refusal))
    return report


def run_destinations(targets: Iterable[Target], work: Callable[[Target], Any]) -> Iterator[DestinationSection[Any]]:
    """Run ``work`` (returning the destination's report: a bundle set's, or one bundle path's)
    on every target in the order given, yielding each destination's section as
    soon as it is done. A :class:`ReportedError` keeps its report beside the error; any other
    failure is the destination's error (its first line) and the next destination goes on."""
    for target in targets:
        section: DestinationSection[Any] = DestinationSection(
            target.pipeline.id, target.destination.id, target.backend, target.root_path
        )
        try:
            section.report = work(target)
        except ReportedError as exc:
            section.report, section.error = exc.report, one_line(exc)
        except Exception as exc:  # one destination's failure never stops the others
            section.error = one_line(exc)
            section.refusal = for_maintenance_error(
                target.destination.storage, target.pipeline.id, target.destination.id, "", exc)
        yield section


def one_line(exc: BaseException) -> str:
    """An error as one line: its message's first line, or its type's name when it has none."""
    text = str(exc).strip()
    return (text.splitlines()[0] if text else "") or type(exc).__name__

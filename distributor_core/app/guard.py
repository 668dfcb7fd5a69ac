"""Lock, recover, read: how repair and prune enter a bundle path (resolutions A1, A3).

A write (not a dry run) first checks that the bundle path has a state file (a missing one fails
before anything is created), then holds ``<bundle>/.distributor.lock`` for the rest of the
operation and settles a journal a crashed writer left before state is read. A dry run takes no
lock and changes nothing; when it sees a journal it says so in a warning.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import msgspec

from distributor_core import paths as lp
from distributor_core.execute.journal import Recovery, recover
from distributor_core.execute.lock import DEFAULT_LEASE, DEFAULT_WAIT, DestinationLock
from distributor_core.state import StateDocument, parse_state_document
from distributor_core.storage.base import Entry, Storage
from distributor_core.storage.errors import ErrorKind, StorageError


class LoadedState(msgspec.Struct, frozen=True):
    """The parsed state, its exact bytes and the revision read before them (for ``if_revision``)."""

    document: StateDocument
    data: bytes
    revision: str | None


class Guard(msgspec.Struct):
    """What entering a bundle path produced: the storage to write through (fenced by the lock),
    the held lock (``None`` in dry runs), the recovery that ran, and warnings for the report."""

    storage: Storage
    bundle_path: str
    lock: DestinationLock | None = None
    recovery: Recovery | None = None
    warnings: list[str] = msgspec.field(default_factory=list)

    def ensure_held(self) -> None:
        """Raise ``conflict`` if the lock was lost; call before every write."""
        if self.lock is not None:
            self.lock.ensure()


def _shown(storage: Storage, path: str) -> str:
    root = storage.root_display.rstrip("/") or "."
    return path if root == "." else f"{root}/{path}"


def stat_state(storage: Storage, bundle_path: str) -> Entry:
    """Stat ``<bundle>/.distributor.json``; a missing file is a ``not_found`` storage error
    ``destination state <root>/<bundle>/.distributor.json does not exist`` (at the root, with a
    hint about selecting bundle paths below it)."""
    path = lp.state_path(bundle_path)
    try:
        return storage.stat(path)
    except StorageError as exc:
        if exc.kind != ErrorKind.NOT_FOUND:
            raise
        message = f"destination state {_shown(storage, path)} does not exist"
        if bundle_path == "":
            message += (
                "; for state in bundle paths below the root select one with bundle_path (--bundle <path>)"
                " or all of them with all_bundles (--all-bundles)"
            )
        raise StorageError("read", storage.backend, path, ErrorKind.NOT_FOUND, message=message) from None


def read_state(storage: Storage, bundle_path: str) -> LoadedState:
    """Read and parse ``<bundle>/.distributor.json``: a missing or unreadable file raises the
    storage error, an invalid one the parse error (``StateError``)."""
    revision = stat_state(storage, bundle_path).revision
    data = storage.read_bytes(lp.state_path(bundle_path))
    return LoadedState(parse_state_document(data), data, revision)


def _journal_warning(storage: Storage, bundle_path: str) -> list[str]:
    journal = lp.journal_path(bundle_path)
    try:
        present = storage.exists(journal)
    except StorageError:
        return []
    if not present:
        return []
    return [
        f"an interrupted write left {journal}; the next run, prune or reconcile-state "
        "that is not a dry run recovers it first"
    ]


def reader_warnings(storage: Storage, bundle_path: str) -> list[str]:
    """Warnings for a reader that takes no lock (a dry run, an audit): a journal a crashed or
    running writer left, and a lock another writer holds right now."""
    warnings = _journal_warning(storage, bundle_path)
    lock = lp.lock_path(bundle_path)
    try:
        held = storage.exists(lock)
    except StorageError:
        held = False
    if held:
        warnings.append(
            f"{lock} is held by a writer; outputs it is replacing right now can show as mismatched: "
            "re-run once it has finished"
        )
    return warnings


@contextmanager
def enter_bundle(
    storage: Storage,
    bundle_path: str,
    *,
    dry_run: bool,
    holder: str,
    lock_wait: float = DEFAULT_WAIT,
    lock_lease: float = DEFAULT_LEASE,
    require_state: bool = True,
) -> Iterator[Guard]:
    """Dry run: no lock, no recovery. Otherwise hold the lock and recover first; the guard's
    ``storage`` writes only while the lock is held (:meth:`DestinationLock.fenced`).
    ``require_state=False`` (adoption into a bundle path without state) skips the state check."""
    if dry_run:
        yield Guard(storage, bundle_path, warnings=_journal_warning(storage, bundle_path))
        return
    if require_state:
        stat_state(storage, bundle_path)
    with DestinationLock(storage, bundle_path, holder=holder, wait=lock_wait, lease=lock_lease) as lock:
        fenced = lock.fenced()
        recovery = recover(fenced, bundle_path, deep_sweep=lock.took_over, grant=lock.grant)
        yield Guard(fenced, bundle_path, lock=lock, recovery=recovery)

"""The intent journal and crash recovery (resolutions A1, A2).

``<bundle path>/.distributor.pending.json`` is written atomically before any output touches its
final name. It lists every write (final path, the temporary it is staged under, the backup an
existing file is moved to), the paths to delete once state is committed, and the sha256 of the
state about to be written. Recovery compares that sha256 with the stored state: equal means the
publication committed and is rolled forward (deletes and backups removed); anything else rolls it
back (backups restored, new files and temporaries removed). Either way the journal goes last.

A journal carries the lock grant (epoch, generation) of the writer that wrote it: a writer never
settles the journal of a newer grant than its own (it lost the lock), and a rollback never
deletes or overwrites a file the current state records with the bytes it holds (a newer
publication's). A writer that lost its lock settles its own journal only while it is still the
one on storage (:func:`abandon`); otherwise its successor did, and it only puts back what it did
itself.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Any

import msgspec

from distributor_core import jsonfmt
from distributor_core import paths as lp
from distributor_core.lease import LeaseLost
from distributor_core.state import StateError, parse_state_document
from distributor_core.storage.base import Storage
from distributor_core.storage.errors import ErrorKind, StorageError
from distributor_core.timefmt import format_seconds

JOURNAL_SCHEMA_VERSION = 1


class JournalWrite(msgspec.Struct, frozen=True):
    path: str
    temp: str | None = None
    backup: str | None = None
    #: digest of the bytes this write places at ``path``: rollback removes only those
    sha256: str = ""

    def to_obj(self) -> dict[str, Any]:
        data: dict[str, Any] = {"path": self.path}
        if self.temp:
            data["temp"] = self.temp
        if self.backup:
            data["backup"] = self.backup
        if self.sha256:
            data["sha256"] = self.sha256
        return data


class Journal(msgspec.Struct, frozen=True):
    bundle_path: str
    state_sha256: str
    writes: tuple[JournalWrite, ...] = ()
    deletes: tuple[str, ...] = ()
    holder: str = ""
    created_at: str = ""
    #: the destination lock's grant that wrote it (``("", 0)``: a journal of an earlier release)
    lease_epoch: str = ""
    lease_generation: int = 0

    @property
    def path(self) -> str:
        return lp.journal_path(self.bundle_path)

    def to_bytes(self) -> bytes:
        lease = {"lease_epoch": self.lease_epoch, "lease_generation": self.lease_generation} if self.lease_epoch else {}
        return jsonfmt.dumps_indented_bytes(
            {
                "schema_version": JOURNAL_SCHEMA_VERSION,
                "bundle_path": self.bundle_path,
                "holder": self.holder,
                "created_at": self.created_at,
                **lease,
                "state_sha256": self.state_sha256,
                "writes": [w.to_obj() for w in self.writes],
                "deletes": list(self.deletes),
            }
        )


class JournalError(Exception):
    """A journal exists but cannot be used; the operator has to look at the destination."""


def _str(obj: dict[str, Any], key: str, *, required: bool = True) -> str:
    value = obj.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        raise JournalError(f"journal {key} must be a string")
    return value


def parse_journal(data: bytes) -> Journal:
    try:
        obj = jsonfmt.loads_object(data)
    except jsonfmt.JSONFormatError as exc:
        raise JournalError(f"journal is not valid JSON: {exc.detail}") from None
    if obj.get("schema_version") != JOURNAL_SCHEMA_VERSION:
        raise JournalError("journal schema_version must be 1")
    writes_obj = obj.get("writes")
    deletes_obj = obj.get("deletes")
    if not isinstance(writes_obj, list) or not isinstance(deletes_obj, list):
        raise JournalError("journal writes and deletes must be lists")
    writes = []
    for item in writes_obj:
        if not isinstance(item, dict):
            raise JournalError("journal writes must hold objects")
        writes.append(
            JournalWrite(
                path=_checked(_str(item, "path")),
                temp=_checked(_str(item, "temp", required=False)) or None,
                backup=_checked(_str(item, "backup", required=False)) or None,
                sha256=_str(item, "sha256", required=False),
            )
        )
    deletes = []
    for item in deletes_obj:
        if not isinstance(item, str):
            raise JournalError("journal deletes must hold strings")
        deletes.append(_checked(item))
    bundle = _str(obj, "bundle_path")
    if lp.check_path(bundle) and bundle != "":
        raise JournalError(f"journal bundle_path {bundle!r} is invalid")
    generation = obj.get("lease_generation", 0)
    if not jsonfmt.is_json_int(generation):
        raise JournalError("journal lease_generation must be an integer")
    return Journal(
        bundle_path=bundle,
        state_sha256=_str(obj, "state_sha256"),
        writes=tuple(writes),
        deletes=tuple(deletes),
        holder=_str(obj, "holder", required=False),
        created_at=_str(obj, "created_at", required=False),
        lease_epoch=_str(obj, "lease_epoch", required=False),
        lease_generation=generation,
    )


def _checked(path: str) -> str:
    if path and lp.check_path(path):
        raise JournalError(f"journal path {path!r} is invalid")
    return path


def new_journal(
    bundle_path: str,
    *,
    state_bytes: bytes,
    writes: list[JournalWrite],
    deletes: list[str],
    holder: str,
    now: datetime,
    grant: tuple[str, int] = ("", 0),
) -> Journal:
    return Journal(
        bundle_path=bundle_path,
        state_sha256=sha256_of(state_bytes),
        writes=tuple(writes),
        deletes=tuple(deletes),
        holder=holder,
        created_at=format_seconds(now),
        lease_epoch=grant[0],
        lease_generation=grant[1],
    )


def sha256_of(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


class Recovery(msgspec.Struct):
    """What recovery did: ``direction`` is ``forward`` or ``back``."""

    bundle_path: str
    direction: str
    holder: str = ""
    created_at: str = ""
    restored: list[str] = msgspec.field(default_factory=list)
    removed: list[str] = msgspec.field(default_factory=list)

    def describe(self) -> str:
        verb = "rolled forward" if self.direction == "forward" else "rolled back"
        who = f" left by {self.holder}" if self.holder else ""
        return f"recovered an interrupted write{who} in {lp.display_path(self.bundle_path)}: {verb}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "bundle_path": self.bundle_path,
            "direction": self.direction,
            "holder": self.holder,
            "created_at": self.created_at,
            "restored": list(self.restored),
            "removed": list(self.removed),
        }


def _delete_if_present(storage: Storage, path: str, *, prune: bool = False) -> bool:
    try:
        storage.delete_file(path)
    except StorageError as exc:
        if exc.kind == ErrorKind.NOT_FOUND:
            return False
        raise
    if prune:
        storage.prune_empty_parents(path)
    return True


def _state_bytes(storage: Storage, bundle_path: str) -> bytes | None:
    try:
        return storage.read_bytes(lp.state_path(bundle_path))
    except StorageError as exc:
        if exc.kind == ErrorKind.NOT_FOUND:
            return None
        raise


def _recorded(data: bytes | None, bundle_path: str) -> dict[str, str]:
    """Final path -> sha256 of every output the current state records (none when unreadable)."""
    if data is None:
        return {}
    try:
        document = parse_state_document(data)
    except StateError:
        return {}
    return {lp.join(bundle_path, o.path): o.sha256 for o in document.outputs}


def _holds(storage: Storage, path: str, sha256: str) -> bool:
    """True when ``path`` holds ``sha256`` (any bytes when no digest is given)."""
    if not sha256:
        return True
    try:
        return storage.sha256(path).sha256 == sha256
    except StorageError as exc:
        if exc.kind == ErrorKind.NOT_FOUND:
            return False
        raise


def _newer(storage: Storage, path: str, recorded: dict[str, str], own: str) -> bool:
    """Whether ``path`` holds what the current state records for it, other than ``own``: a
    publication committed after the journal's, whose file no rollback may touch."""
    theirs = recorded.get(path)
    return theirs is not None and theirs != own and _holds(storage, path, theirs)


def roll_forward(storage: Storage, journal: Journal, recovery: Recovery) -> None:
    for write in journal.writes:
        if write.temp and _delete_if_present(storage, write.temp):
            recovery.removed.append(write.temp)
    for path in journal.deletes:
        if _delete_if_present(storage, path, prune=True):
            recovery.removed.append(path)
    for write in journal.writes:
        if write.backup and _delete_if_present(storage, write.backup):
            recovery.removed.append(write.backup)
    _delete_if_present(storage, journal.path)


def roll_back(
    storage: Storage, journal: Journal, recovery: Recovery, *, committed: set[str] | None = None,
    recorded: dict[str, str] | None = None, protected: frozenset[str] = frozenset(), keep_journal: bool = False,
) -> None:
    """Undo a publication.

    A staged file still under its temporary name never reached its final path, so only the
    temporary goes. Otherwise a new final path is this attempt's and is removed, and an
    overwritten one gets its backup back. ``committed`` (known only in-process) names the final
    paths this attempt tried to place; crash recovery, which cannot know, treats every listed
    path as possibly placed. ``recorded`` (the current state's outputs) protects the files of a
    publication committed since, ``protected`` those another writer's journal lists: they are
    never removed nor overwritten by a backup.
    """
    recorded = {} if recorded is None else recorded
    for write in reversed(journal.writes):
        if write.temp and storage.exists(write.temp):
            _delete_if_present(storage, write.temp, prune=True)
            recovery.removed.append(write.temp)
            placed = False
        else:
            placed = committed is None or write.path in committed
        if write.backup:
            if storage.exists(write.backup):
                if _newer(storage, write.path, recorded, write.sha256) or (
                        write.path in protected and storage.exists(write.path)):
                    _delete_if_present(storage, write.backup)
                else:
                    storage.rename(write.backup, write.path, overwrite=True)
                    recovery.restored.append(write.path)
            # no backup on storage: the original never moved and is still in place
        elif (placed and write.path not in protected and recorded.get(write.path) != write.sha256
              and _holds(storage, write.path, write.sha256) and _delete_if_present(storage, write.path, prune=True)):
            recovery.removed.append(write.path)
    if not keep_journal:
        _delete_if_present(storage, journal.path)


def finish(storage: Storage, journal: Journal, *, committed: set[str] | None = None) -> Recovery:
    """Settle a journal whose publication is in any state: forward when the state committed."""
    recovery = Recovery(journal.bundle_path, "forward", journal.holder, journal.created_at)
    state = _state_bytes(storage, journal.bundle_path)
    if state is not None and sha256_of(state) == journal.state_sha256:
        roll_forward(storage, journal, recovery)
    else:
        recovery.direction = "back"
        roll_back(storage, journal, recovery, committed=committed, recorded=_recorded(state, journal.bundle_path))
    return recovery


def abandon(storage: Storage, journal: Journal, *, committed: set[str]) -> Recovery:
    """Settle what a writer that lost its lock left: its journal as :func:`finish` does while
    that journal is still the one on storage; otherwise its successor settled it, and only what
    this writer did since goes back (its temporaries; files it moved aside or placed, never one
    the successor's journal or the current state claims)."""
    try:
        current = read_journal(storage, journal.bundle_path)
    except JournalError:
        current = None
    if current == journal:
        return finish(storage, journal, committed=committed)
    listed = frozenset({w.path for w in current.writes} | set(current.deletes) if current is not None else ())
    recovery = Recovery(journal.bundle_path, "back", journal.holder, journal.created_at)
    state = _state_bytes(storage, journal.bundle_path)
    roll_back(storage, journal, recovery, committed=committed, recorded=_recorded(state, journal.bundle_path),
              protected=listed, keep_journal=True)
    return recovery


def read_journal(storage: Storage, bundle_path: str) -> Journal | None:
    try:
        data = storage.read_bytes(lp.journal_path(bundle_path))
    except StorageError as exc:
        if exc.kind == ErrorKind.NOT_FOUND:
            return None
        raise
    try:
        journal = parse_journal(data)
    except JournalError as exc:
        raise JournalError(
            f"destination bundle path {lp.display_path(bundle_path)} has an unusable intent journal "
            f"({lp.JOURNAL_NAME}): {exc}; inspect the destination and remove the journal by hand"
        ) from None
    if journal.bundle_path != bundle_path:
        raise JournalError(
            f"intent journal in {lp.display_path(bundle_path)} names bundle path "
            f"{lp.display_path(journal.bundle_path)}; inspect the destination and remove it by hand"
        )
    return journal


def sweep_temporaries(storage: Storage, bundle_path: str, *, recursive: bool) -> list[str]:
    """Remove ``.distributor-tmp-*`` files a dead writer left behind (lock holders only).

    Non-recursive sweeps look only at the bundle directory (lock, journal and state temporaries).
    Recursive sweeps skip nested bundle paths that hold their own state or lock.
    """
    entries = storage.walk(
        bundle_path, recursive=recursive, include_reserved=True, limit=1_000_000, include_dirs=False
    )
    nested_roots = {
        lp.parent(e.path)
        for e in entries
        if lp.basename(e.path) in (lp.STATE_FILE_NAME, lp.LOCK_NAME) and lp.parent(e.path) != bundle_path
    }
    removed = []
    for entry in entries:
        if not lp.basename(entry.path).startswith(lp.TEMP_PREFIX):
            continue
        directory = lp.parent(entry.path)
        if any(lp.is_under(directory, root) for root in nested_roots):
            continue
        if _delete_if_present(storage, entry.path, prune=True):
            removed.append(entry.path)
    return removed


def recover(
    storage: Storage, bundle_path: str, *, deep_sweep: bool = False, grant: tuple[str, int] = ("", 0)
) -> Recovery | None:
    """Run under the destination lock (its ``grant``) before reading state: settle a journal left
    by a crashed writer and sweep temporaries. Returns what was done when a journal was found. A
    journal of a newer grant of the same lock means this writer lost it: :class:`LeaseLost`."""
    journal = read_journal(storage, bundle_path)
    if journal is not None and grant[0] and journal.lease_epoch == grant[0] and journal.lease_generation > grant[1]:
        raise LeaseLost(
            "recover", storage.backend, journal.path, ErrorKind.CONFLICT,
            message=f"destination {lp.display_path(bundle_path)} holds the intent journal of a newer lock holder "
                    f"({journal.holder}, generation {journal.lease_generation}): this writer lost the lock",
        )
    recovery = finish(storage, journal) if journal is not None else None
    sweep_temporaries(storage, bundle_path, recursive=deep_sweep or recovery is not None)
    return recovery

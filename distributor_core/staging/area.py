"""What only the ``serve`` process does to a staging path: directory checks, the one-process
lock, the startup sweep, admission commits and expiry (resolutions D1, D4).

:mod:`distributor_core.staging.records` reads and writes single records.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import secrets
import stat as st
from dataclasses import dataclass, field
from pathlib import Path

from distributor_core.staging import layout as ly
from distributor_core.staging.fsio import atomic_write, fsync_dir, remove_tree, sync_paths, sync_tree
from distributor_core.staging.index import key_sha256, read_small, remove_index, write_index
from distributor_core.staging.layout import RecordError
from distributor_core.staging.records import PublicText, UploadRecord, mark_finished, read_record, record_bytes
from distributor_core.staging.scan import iter_run_ids


class StagingSetupError(Exception):
    """A staging directory cannot be used; the message names it."""


class PromotedError(Exception):
    """Promotion failed after the record became visible and could not be undone: the upload is
    on disk, indexed, and will be published; the caller must answer it as accepted."""

    def __init__(self, run_id: str) -> None:
        super().__init__(f"upload {run_id} is staged but could not be made durable or rolled back")
        self.run_id = run_id


#: the error of an unfinished record that shares its idempotency scope with an earlier one
DUPLICATE_ERROR = "duplicate of upload {keeper} (same idempotency key); not published"


def ensure_private_dir(path: Path) -> None:
    """Create ``path`` (and missing ancestors) with mode 0700, or check an existing one: it must
    be a directory owned by this user and not writable by group or others."""
    missing: list[Path] = []
    current = path
    while not current.exists() and not current.is_symlink():
        missing.append(current)
        if current.parent == current:
            break
        current = current.parent
    for directory in reversed(missing):
        try:
            os.mkdir(directory, 0o700)
        except FileExistsError:
            pass
        except OSError as exc:
            raise StagingSetupError(f"staging directory {directory} cannot be created: {exc.strerror}") from None
        with contextlib.suppress(OSError):
            if os.stat(directory).st_uid == os.geteuid():
                os.chmod(directory, 0o700)
    check_private_dir(path)


def check_private_dir(path: Path) -> None:
    try:
        info = os.stat(path)
    except OSError as exc:
        raise StagingSetupError(f"staging directory {path} cannot be used: {exc.strerror}") from None
    if not st.S_ISDIR(info.st_mode):
        raise StagingSetupError(f"staging directory {path} is not a directory")
    if info.st_uid != os.geteuid():
        raise StagingSetupError(f"staging directory {path} is owned by another user (uid {info.st_uid})")
    if info.st_mode & 0o022:
        raise StagingSetupError(
            f"staging directory {path} is writable by group or others (mode {st.S_IMODE(info.st_mode):04o})"
        )


@dataclass(frozen=True)
class Placement:
    """An upload made visible under its run id by :meth:`PipelineStaging.place`, not yet
    durable: where it came from and went, its record, its idempotency entry."""

    incoming: Path
    target: Path
    record: UploadRecord
    index_entry: Path | None


@dataclass
class SweepReport:
    incoming_removed: int = 0
    temp_files_removed: int = 0
    stale_index_entries: int = 0
    #: ``(run id, reason)`` of records that could not be read (an I/O error): left where they are
    unreadable_records: list[tuple[str, str]] = field(default_factory=list)
    #: ``(run id, reason)`` of records that are not valid: their run directory set aside in
    #: ``.quarantine/`` (never published, never counted in the queue)
    quarantined: list[tuple[str, str]] = field(default_factory=list)
    #: ``(path, reason)`` of leftovers that could not be listed or removed (left for the operator)
    unremovable: list[tuple[str, str]] = field(default_factory=list)
    #: ``(duplicate run id, kept run id)`` of records failed because they shared a scope
    duplicates: list[tuple[str, str]] = field(default_factory=list)


class PipelineStaging:
    """One pipeline's staging path, held by this process."""

    def __init__(self, pipeline_id: str, path: Path, *, durable: bool = True) -> None:
        self.pipeline_id = pipeline_id
        self.path = path
        self.durable = durable
        self.incoming = path / ly.INCOMING_DIR
        self.index_root = path / ly.IDEMPOTENCY_DIR
        self._lock_fd: int | None = None
        self.last_seq = 0

    # ------------------------------------------------------------------ lifecycle

    def open(self) -> None:
        ensure_private_dir(self.path)
        self._acquire_lock()
        try:
            for directory in (self.incoming, self.index_root):
                with contextlib.suppress(FileExistsError):
                    os.mkdir(directory, 0o700)
                check_private_dir(directory)
        except BaseException:
            self.close()
            raise

    def _acquire_lock(self) -> None:
        lock_path = self.path / ly.LOCK_NAME
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise StagingSetupError(
                    f"staging directory {self.path} is in use by another distributor serve process"
                ) from None
            raise
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._lock_fd = fd

    def close(self) -> None:
        if self._lock_fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            os.close(self._lock_fd)
            self._lock_fd = None

    def sweep(self) -> tuple[list[UploadRecord], dict[tuple[str, str], str], SweepReport]:
        """Startup: empty ``.incoming``, drop temp files of interrupted record writes, read every
        record and the idempotency index (dropping entries whose record is gone).

        Nothing an upload left can make it fail: trees of any depth are removed iteratively, and
        an entry that cannot be removed or read is reported (``SweepReport``) and left alone.
        """
        report = SweepReport()
        for entry in _scan_names(self.incoming, report):
            if self._remove(self.incoming / entry, report):
                report.incoming_removed += 1
        records: list[UploadRecord] = []
        for run_id in iter_run_ids(self.path):
            directory = self.path / run_id
            for name in _scan_names(directory, report):
                if name.startswith(ly.TEMP_PREFIX) and self._remove(directory / name, report):
                    report.temp_files_removed += 1
            try:
                record = read_record(self.path, run_id)
            except RecordError as exc:
                self._quarantine(run_id, str(exc), report)
                continue
            except OSError as exc:
                report.unreadable_records.append((run_id, str(exc)))
                continue
            if record.pipeline_id != self.pipeline_id:
                self._quarantine(run_id, f"record belongs to pipeline {record.pipeline_id}", report)
                continue
            records.append(record)
        records.sort(key=lambda r: (r.seq, r.run_id))
        records = self._settle_duplicates(records, report)
        by_id = {r.run_id: r for r in records}
        index: dict[tuple[str, str], str] = {}
        for token_dir in _scandirs(self.index_root):
            for name in _scan_names(Path(token_dir.path), report):
                path = Path(token_dir.path) / name
                run_id = read_small(path)
                record = by_id.get(run_id or "")
                if name.startswith(ly.TEMP_PREFIX) or record is None or record.token_id != token_dir.name \
                        or record.idempotency_key is None or key_sha256(record.idempotency_key) != name:
                    if self._remove(path, report):
                        report.stale_index_entries += 1
                    continue
                index[(token_dir.name, name)] = record.run_id
        for record in records:  # an index entry lost by hand is rebuilt from its record
            if record.idempotency_key is not None:
                scope = (record.token_id, key_sha256(record.idempotency_key))
                if scope not in index:
                    self.write_index(record.token_id, scope[1], record.run_id)
                    index[scope] = record.run_id
        recorded = self._read_seq()
        self.last_seq = max([recorded, *(r.seq for r in records)])
        if self.last_seq != recorded:  # a lost .seq update (it is not fsynced): readers rely on it
            atomic_write(self.path / ly.SEQ_NAME, f"{self.last_seq}\n".encode(), temp_prefix=ly.SEQ_TEMP_PREFIX)
        return records, index, report

    def _settle_duplicates(self, records: list[UploadRecord], report: SweepReport) -> list[UploadRecord]:
        """One idempotency scope, one publication: when several records share a (token, key)
        scope (left by a version that could answer 500 after promoting), the one already published
        or being published wins, else the one the index names, else the first admitted; the other
        ``accepted``/``queued`` ones become ``failed`` without being published."""
        groups: dict[tuple[str, str], list[UploadRecord]] = {}
        for record in records:
            if record.idempotency_key is not None:
                groups.setdefault((record.token_id, key_sha256(record.idempotency_key)), []).append(record)
        replaced: dict[str, UploadRecord] = {}
        for (token_id, key_hash), group in groups.items():
            if len(group) < 2:
                continue
            indexed = read_small(ly.idempotency_path(self.path, token_id, key_hash))
            attempted = [r for r in group if not r.pending]
            named = [r for r in group if r.run_id == indexed]
            keeper = (attempted or named or group)[0]
            for record in group:
                if record is keeper or not record.pending:
                    continue
                try:
                    replaced[record.run_id] = mark_finished(
                        self.path, record.run_id, error=PublicText(DUPLICATE_ERROR.format(keeper=keeper.run_id))
                    )
                except (OSError, RecordError) as exc:
                    report.unreadable_records.append((record.run_id, f"duplicate not settled: {exc}"))
                    continue
                report.duplicates.append((record.run_id, keeper.run_id))
            if indexed != keeper.run_id:
                try:
                    self.write_index(token_id, key_hash, keeper.run_id)
                except OSError as exc:
                    report.unremovable.append((str(ly.idempotency_path(self.path, token_id, key_hash)),
                                               exc.strerror or type(exc).__name__))
        return [replaced.get(r.run_id, r) for r in records]

    def _quarantine(self, run_id: str, reason: str, report: SweepReport) -> None:
        """Set the run directory of an invalid record aside (``.quarantine/<run id>``, a suffix
        added when that name is taken), so that nothing reads it again; left in place (and
        reported unreadable) when it cannot be moved."""
        aside = self.path / ly.QUARANTINE_DIR
        try:
            aside.mkdir(mode=0o700, exist_ok=True)
            target = aside / run_id
            while target.exists():
                target = aside / f"{run_id}.{secrets.token_hex(4)}"
            os.rename(self.path / run_id, target)
            if self.durable:
                fsync_dir(self.path)
        except OSError as exc:
            report.unreadable_records.append((run_id, f"{reason}; cannot set it aside: {exc.strerror or exc}"))
            return
        report.quarantined.append((run_id, reason))

    @staticmethod
    def _remove(path: Path, report: SweepReport) -> bool:
        try:
            remove_tree(path)
        except OSError as exc:
            report.unremovable.append((str(path), exc.strerror or type(exc).__name__))
            return False
        return True

    def _read_seq(self) -> int:
        text = read_small(self.path / ly.SEQ_NAME)
        try:
            return max(0, int(text or "0"))
        except ValueError:
            return 0

    # ------------------------------------------------------------------ admission

    def new_incoming(self) -> Path:
        directory = self.incoming / secrets.token_hex(16)
        os.mkdir(directory, 0o700)
        return directory

    def next_seq(self) -> int:
        """The next admission number (in memory; :meth:`write_seq` records it once the upload is
        settled)."""
        self.last_seq += 1
        return self.last_seq

    def write_seq(self, seq: int) -> None:
        """Record ``seq`` in ``.seq``, the highest number issued, so numbers are never reused
        after every record expired and the Dagster sensor sees that something was admitted. The
        records carry their own numbers, so a lost update (no fsync here) is repaired from them at
        the next start; the caller writes numbers in increasing order."""
        atomic_write(self.path / ly.SEQ_NAME, f"{seq}\n".encode(), temp_prefix=ly.SEQ_TEMP_PREFIX, durable=False)

    def write_index(self, token_id: str, key_hash: str, run_id: str, *, durable: bool = True) -> Path:
        return write_index(self.path, token_id, key_hash, run_id, durable=durable and self.durable)

    def remove_index(self, token_id: str, key_hash: str, *, expected: str | None = None) -> None:
        remove_index(self.path, token_id, key_hash, expected=expected)

    def sync_bundle(self, bundle: Path) -> None:
        """Make an extracted bundle durable (every file and directory below ``bundle``) before
        its upload is placed. Runs outside the commit lock, so the fsyncs of concurrent uploads
        overlap (the filesystem commits them together) instead of queueing behind each other."""
        if self.durable:
            sync_tree(bundle)

    def place(self, incoming: Path, record: UploadRecord) -> Placement:
        """Write the record next to the extracted bundle, then make it visible under its run id
        (the commit lock's part of an admission: cheap, no fsync). :meth:`settle` must follow.

        The idempotency entry is written before the rename: a crash in between leaves an entry
        whose record does not exist, which the next startup drops; never an accepted upload
        that a retry could duplicate.
        """
        atomic_write(incoming / ly.RECORD_NAME, record_bytes(record), temp_prefix=ly.TEMP_PREFIX, durable=False)
        entry: Path | None = None
        if record.idempotency_key is not None:
            entry = self.write_index(record.token_id, key_sha256(record.idempotency_key), record.run_id,
                                     durable=False)
        target = self.path / record.run_id
        try:
            os.rename(incoming, target)
        except BaseException:
            if record.idempotency_key is not None:
                self.remove_index(record.token_id, key_sha256(record.idempotency_key))
            raise
        return Placement(incoming, target, record, entry)

    def settle(self, placement: Placement) -> None:
        """Make a placed upload durable, before its ``202``: the record, its directory (the
        record's and the bundle's names in it), the idempotency entry and its directory, and the
        staging directory (the run id's name). With :meth:`sync_bundle` before the placement,
        that is every file and directory of the upload. Needs no lock: nothing else touches a
        placed upload's paths until it is registered, and concurrent settles share the
        filesystem's journal commits.

        When a fsync fails the placement is undone (:meth:`_demote`) and the error raised; when
        even that fails, :class:`PromotedError`.
        """
        files = [placement.target / ly.RECORD_NAME]
        directories = [placement.target]
        if placement.index_entry is not None:
            files.append(placement.index_entry)
            directories.append(placement.index_entry.parent)
        directories.append(self.path)
        try:
            if self.durable:
                sync_paths(files, directories)
        except BaseException as exc:
            try:
                self._demote(placement.target, placement.incoming, placement.record)
            except BaseException:
                raise PromotedError(placement.record.run_id) from exc
            raise

    def _demote(self, target: Path, incoming: Path, record: UploadRecord) -> None:
        """Undo a promotion: the idempotency entry first (a retry must not be answered from it),
        then the directory back into ``.incoming``, where the request's cleanup removes it. A
        crash in between leaves a record without an entry, which the next start indexes again:
        the upload is then published once, and a retry is answered as that upload."""
        if record.idempotency_key is not None:
            self.remove_index(record.token_id, key_sha256(record.idempotency_key), expected=record.run_id)
        os.rename(target, incoming)
        with contextlib.suppress(OSError):
            fsync_dir(self.path)

    def retire(self, run_id: str, token_id: str, key: str | None) -> Path | None:
        """Expire a record: drop its idempotency entry (if it still names this run) and move its
        directory into ``.incoming`` (out of sight of readers; swept at startup). Returns where it
        went, for the caller to delete, or ``None`` when it was already gone."""
        if key is not None:
            self.remove_index(token_id, key_sha256(key), expected=run_id)
        trash = self.incoming / f"expired-{secrets.token_hex(8)}"
        try:
            os.rename(self.path / run_id, trash)
        except FileNotFoundError:
            return None
        return trash


def _scandirs(path: Path) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(path) as entries:
            return [e for e in entries if e.is_dir(follow_symlinks=False)]
    except FileNotFoundError:
        return []


def _scan_names(path: Path, report: SweepReport) -> list[str]:
    try:
        with os.scandir(path) as entries:
            return [entry.name for entry in entries]
    except FileNotFoundError:
        return []
    except OSError as exc:
        report.unremovable.append((str(path), exc.strerror or type(exc).__name__))
        return []

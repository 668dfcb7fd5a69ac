"""The destination lock (resolutions A3).

``<bundle path>/.distributor.lock`` is created exclusively (no-clobber link locally, exclusive
rename over SFTP, ``If-None-Match: *`` on S3) and holds JSON ``{holder, host, pid, acquired_at,
expires_at, token}``. The holder renews it while it works. A contender waits up to ``wait``
seconds, sleeping between attempts on every path; a lock past ``expires_at``, or one whose
``host`` is this host and whose ``pid`` is gone, may be broken with a conditional overwrite of the
exact revision that was judged stale. A bundle path (or destination root) that exists but is not
a directory is an ``invalid_path`` error naming it (after a second refusal, so a release racing an
S3 key of that name is not mistaken for it).
"""

from __future__ import annotations

import os
import threading
import time
from datetime import datetime, timedelta
from typing import Any

import msgspec

from distributor_core import jsonfmt
from distributor_core import paths as lp
from distributor_core.storage.base import Storage
from distributor_core.storage.errors import ErrorKind, StorageError
from distributor_core.timefmt import Clock, format_seconds, now_seconds, parse_rfc3339, system_clock

DEFAULT_LEASE = 120.0
DEFAULT_WAIT = 30.0
#: times a lock write is retried when its staged temporary vanished under it (a lock holder's
#: recovery sweeps unlisted temporaries in the bundle directory, contenders' included)
_VANISHED_RETRIES = 5


def _hostname() -> str:
    """``socket.gethostname()`` without importing ``socket`` on every command's start: on POSIX
    both are the kernel's node name."""
    if hasattr(os, "uname"):
        return os.uname().nodename
    import socket

    return socket.gethostname()


def pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists on this host (one of another user's counts)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    return True


class LockInfo(msgspec.Struct, frozen=True):
    holder: str
    host: str
    pid: int
    acquired_at: datetime
    expires_at: datetime
    token: str

    def to_bytes(self) -> bytes:
        return jsonfmt.dumps_indented_bytes(
            {
                "holder": self.holder,
                "host": self.host,
                "pid": self.pid,
                "acquired_at": format_seconds(self.acquired_at),
                "expires_at": format_seconds(self.expires_at),
                "token": self.token,
            }
        )

    @classmethod
    def parse(cls, data: bytes) -> LockInfo | None:
        try:
            obj: dict[str, Any] = jsonfmt.loads_object(data)
            return cls(
                holder=str(obj.get("holder", "")),
                host=str(obj.get("host", "")),
                pid=int(obj.get("pid", 0)),
                acquired_at=parse_rfc3339(obj["acquired_at"]),
                expires_at=parse_rfc3339(obj["expires_at"]),
                token=str(obj.get("token", "")),
            )
        except (jsonfmt.JSONFormatError, KeyError, ValueError, TypeError):
            return None


class DestinationLock:
    """Context manager holding ``<bundle>/.distributor.lock`` for the duration of a write."""

    def __init__(
        self,
        storage: Storage,
        bundle_path: str,
        *,
        holder: str,
        lease: float = DEFAULT_LEASE,
        wait: float = DEFAULT_WAIT,
        clock: Clock | None = None,
        renew: bool = True,
    ) -> None:
        self.storage = storage
        self.bundle_path = bundle_path
        self.path = lp.lock_path(bundle_path)
        self.holder = holder
        self.lease = lease
        self.wait = wait
        self.clock = clock or system_clock
        self.renew_enabled = renew
        self.host = _hostname()
        self.pid = os.getpid()
        self.token = os.urandom(8).hex()
        self.held = False
        self.broke_stale = False
        self.lost: str | None = None
        self._revision: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._io_lock = threading.Lock()

    # ------------------------------------------------------------------ helpers

    def _info(self) -> LockInfo:
        now = now_seconds(self.clock)
        return LockInfo(
            holder=self.holder,
            host=self.host,
            pid=self.pid,
            acquired_at=now,
            expires_at=now + timedelta(seconds=self.lease),
            token=self.token,
        )

    def _display(self) -> str:
        root = self.storage.root_display.rstrip("/") or "."
        if self.bundle_path:
            return f"{root}/{self.bundle_path}" if root != "." else self.bundle_path
        return root

    def _stale(self, current: LockInfo | None, modified: datetime | None) -> bool:
        now = now_seconds(self.clock)
        if current is None:
            # unreadable lock (a writer died while creating it): stale once a lease has passed
            return modified is None or modified + timedelta(seconds=self.lease) < now
        if current.expires_at < now:
            return True
        return current.host == self.host and not pid_alive(current.pid)

    def _read_current(self) -> tuple[LockInfo | None, str | None, datetime | None] | None:
        try:
            entry = self.storage.stat(self.path)
            data = self.storage.read_bytes(self.path, max_size=64 * 1024)
        except StorageError as exc:
            if exc.kind == ErrorKind.NOT_FOUND:
                return None
            raise
        return LockInfo.parse(data), entry.revision, entry.mtime

    # ------------------------------------------------------------------ acquire / release

    def acquire(self) -> None:
        deadline = time.monotonic() + self.wait
        delay = 0.05
        current: LockInfo | None = None
        vanished = 0
        not_directory = 0
        while True:
            info = self._info()
            try:
                entry = self.storage.write_bytes(self.path, info.to_bytes(), overwrite=False)
            except StorageError as exc:
                if exc.kind == ErrorKind.NOT_FOUND and vanished < _VANISHED_RETRIES:
                    # the staged temporary of this attempt was swept by the holder's recovery
                    # (it removes unlisted temporaries in the bundle directory): try again
                    vanished += 1
                    continue
                if exc.kind not in (ErrorKind.ALREADY_EXISTS, ErrorKind.CONFLICT):
                    raise
            else:
                self._acquired(entry.revision)
                return
            vanished = 0  # counts consecutive vanished attempts only
            found = self._read_current()
            if found is None:
                # the create was refused but there is no lock to read: released meanwhile, or the
                # bundle path (the destination root) is not a directory; either way the wait
                # below keeps its deadline and its sleep. Twice in a row over a non-directory is
                # conclusive (once could be a release racing a key of that name on S3, where a
                # file never blocks the keys below it)
                not_directory = self._not_directory(not_directory)
            else:
                not_directory = 0
                current, revision, modified = found
                if self._stale(current, modified) and revision is not None:
                    try:
                        entry = self.storage.write_bytes(
                            self.path, self._info().to_bytes(), overwrite=True, if_revision=revision
                        )
                    except StorageError as exc:
                        if exc.kind not in (ErrorKind.CONFLICT, ErrorKind.ALREADY_EXISTS, ErrorKind.NOT_FOUND):
                            raise
                    else:
                        self.broke_stale = True
                        self._acquired(entry.revision)
                        return
            if time.monotonic() >= deadline:
                who = current.holder if current else "an unknown writer"
                since = format_seconds(current.acquired_at) if current else "an unknown time"
                raise StorageError(
                    "lock",
                    self.storage.backend,
                    self.path,
                    ErrorKind.CONFLICT,
                    message=f"destination {self._display()} is locked by {who} since {since}",
                )
            time.sleep(delay)
            delay = min(delay * 2, 1.0)

    def _not_directory(self, seen: int) -> int:
        """How many refusals in a row found the lock's directory to be something else; the
        second one is an ``invalid_path`` error naming it."""
        try:
            entry = self.storage.stat(self.bundle_path)
        except StorageError:
            return 0
        if entry.type == "directory":
            return 0
        if seen == 0:
            return 1
        what = "destination root" if self.bundle_path == "" else "destination bundle path"
        raise StorageError(
            "lock", self.storage.backend, self.path, ErrorKind.INVALID_PATH,
            message=f"{what} {self._display()} is not a directory",
        )

    def _acquired(self, revision: str | None) -> None:
        self.held = True
        try:
            self._revision = revision or self.storage.stat(self.path).revision
        except StorageError:
            self._revision = None
        if self.renew_enabled:
            self._stop.clear()
            self._thread = threading.Thread(target=self._renew_loop, name="distributor-lock-renew", daemon=True)
            self._thread.start()

    def _renew_loop(self) -> None:
        interval = max(self.lease / 4, 0.05)
        while not self._stop.wait(interval):
            try:
                self.renew()
            except Exception as exc:
                self.lost = f"could not renew destination lock: {exc}"
                return

    def renew(self) -> None:
        with self._io_lock:
            if not self.held or self.lost:
                return
            found = self._read_current()
            if found is None or found[0] is None or found[0].token != self.token:
                self.lost = f"destination {self._display()} lock was taken over by another writer"
                return
            for attempt in range(_VANISHED_RETRIES + 1):
                try:
                    entry = self.storage.write_bytes(
                        self.path, self._info().to_bytes(), overwrite=True, if_revision=found[1]
                    )
                except StorageError as exc:
                    # a temporary swept by a concurrent recovery sweep: write it again
                    if exc.kind != ErrorKind.NOT_FOUND or attempt == _VANISHED_RETRIES:
                        raise
                else:
                    self._revision = entry.revision
                    return

    def confirm(self) -> bool:
        """Re-read the lock file now: ``False`` (and :attr:`lost` set) when another writer has
        taken the lock over (broken as stale while this holder stalled). An unreadable lock
        cannot tell and counts as held."""
        with self._io_lock:
            if self.lost:
                return False
            if not self.held:
                return True
            try:
                found = self._read_current()
            except StorageError:
                return True
            if found is None or found[0] is None or found[0].token != self.token:
                self.lost = f"destination {self._display()} lock was taken over by another writer"
                return False
            return True

    def ensure_held(self) -> None:
        """Raise a ``conflict`` error when the lock was lost (expired and taken by another writer)."""
        if self.lost:
            raise StorageError("lock", self.storage.backend, self.path, ErrorKind.CONFLICT, message=self.lost)

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        with self._io_lock:
            if not self.held:
                return
            self.held = False
            try:
                found = self._read_current()
                if found is not None and found[0] is not None and found[0].token == self.token:
                    self.storage.delete_file(self.path)
                    self.storage.prune_empty_parents(self.path)
            except StorageError:
                pass  # an expired lock is harmless; the next writer breaks it

    def __enter__(self) -> DestinationLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

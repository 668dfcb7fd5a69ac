"""Deterministic regression tests for the failures the reliability suites found (issue 9).

1. A lock holder's recovery sweeps unlisted ``.distributor-tmp-*`` files in the bundle directory;
   a contender's lock attempt stages its lock file there, so the sweep could delete it mid-write
   and the contender failed with ``write local .distributor.lock: not_found`` instead of waiting
   for the lock (found by the 8-writer shared-root race). The lock now retries such an attempt.
2. A writer whose lock expired while it stalled, and was broken by another writer, reported
   whichever step then tripped over the other's work (``rename ... not_found``, ``write
   .distributor.json: conflict: stored revision changed``); it now reports that its lock was taken
   over (found by the stalled-writer tests in ``test_concurrency.py``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from distributor_core import paths as lp
from distributor_core.execute import journal as jr
from distributor_core.execute.lock import DestinationLock
from distributor_core.lease import LeaseRecord, parse_record
from distributor_core.storage.errors import ErrorKind, StorageError
from distributor_core.storage.local import LocalStorage
from tests.engine.conftest import REPORT, SUMMARY, HookedStorage, new_env


class SweptDuringLockWrite(LocalStorage):
    """Another writer's recovery sweep runs while this one stages its lock file (``times`` times)."""

    def __init__(self, root: Path, times: int) -> None:
        super().__init__(root)
        self.times = times
        self.swept: list[str] = []

    def write_stream(self, path: str, chunks: Iterable[bytes], **kwargs: Any) -> Any:
        if lp.basename(path) == lp.LOCK_NAME and self.times > 0:
            self.times -= 1

            def sweep_first(original: Iterable[bytes]) -> Iterator[bytes]:
                self.swept.extend(jr.sweep_temporaries(LocalStorage(self.root), "", recursive=False))
                yield from original

            chunks = sweep_first(chunks)
        return super().write_stream(path, chunks, **kwargs)


def test_lock_attempt_whose_temporary_is_swept_tries_again(tmp_path: Path) -> None:
    storage = SweptDuringLockWrite(tmp_path, times=2)
    lock = DestinationLock(storage, "", holder="contender", wait=0, renew=False)
    lock.acquire()
    assert len(storage.swept) == 2 and all(lp.basename(p).startswith(lp.TEMP_PREFIX) for p in storage.swept)
    assert parse_record((tmp_path / lp.LOCK_NAME).read_bytes()).holder == "contender"
    lock.release()
    assert os.listdir(tmp_path) == []


def test_lock_renewal_whose_temporary_is_swept_keeps_the_lock(tmp_path: Path) -> None:
    storage = SweptDuringLockWrite(tmp_path, times=0)
    lock = DestinationLock(storage, "", holder="holder", wait=0, renew=False)
    lock.acquire()
    storage.times = 1
    lock.renew()
    assert lock.lost is None and storage.swept
    lock.check()  # still ours
    lock.release()


def test_a_persistently_missing_lock_target_still_fails(tmp_path: Path) -> None:
    """The retry is bounded: a storage that always loses the staged file reports the error."""
    storage = SweptDuringLockWrite(tmp_path, times=100)
    with pytest.raises(StorageError) as info:
        DestinationLock(storage, "", holder="contender", wait=0, renew=False).acquire()
    assert info.value.kind == ErrorKind.NOT_FOUND


def test_writer_whose_lock_was_taken_over_reports_the_takeover(tmp_path: Path) -> None:
    """Another writer takes the (expired) lock and publishes while this one is between its
    renames and its state write: the state write fails (revision changed) and the error says
    why: the lock was taken over."""
    env = new_env(tmp_path / "env")
    manifest = env.source({"report.md": REPORT, "summary.txt": SUMMARY})
    env.seed_single_owner({"report.md": b"old"})
    now = datetime(2026, 6, 4, 12, 0, tzinfo=UTC)

    def hook(op: str, path: str, **kw: Any) -> None:
        if op == "write" and path == "bundle/.distributor.json":
            # the other writer: broke the lock, then rewrote state
            thief = LeaseRecord(holder="thief", host="elsewhere", pid=1, generation=2, lease_seconds=120,
                                acquired_at=now.isoformat())
            env.put("bundle/.distributor.lock", thief.to_bytes())
            env.put("bundle/.distributor.json", env.read("bundle/.distributor.json") + b" ")

    hooked = HookedStorage(env.dst_root, hook)
    outcome = env.publish(env.request(manifest, dst=hooked))
    assert outcome.status == "failed"
    taken = f"destination {env.dst.root_display}/bundle lock was taken over by another writer ("
    assert outcome.error.startswith(taken), outcome.error
    assert "stored revision changed" in outcome.error

"""Concurrent writers on S3 (moto): the lock and the state write are conditional writes
(``If-None-Match: *``, ``If-Match``), so a losing writer gets a clear ``conflict`` instead of
overwriting the winner (spec README "concurrent writers detected", resolutions A3)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from distributor_core import paths as lp
from distributor_core.bundle import load_manifest
from distributor_core.execute.executor import execute_plan
from distributor_core.execute.facts import build_plan
from distributor_core.execute.lock import DestinationLock
from distributor_core.execute.publish import publish
from distributor_core.execute.request import PlanRequest
from distributor_core.plan.model import Action, DestinationPolicy
from distributor_core.state import parse_state_document
from distributor_core.storage.errors import ErrorKind, StorageError
from distributor_core.storage.faults import FaultInjectingStorage
from distributor_core.storage.local import LocalStorage
from tests.peers.moto import MotoServer, make_s3_storage

from .conftest import LONG, count, sha, write_source

pytestmark = [pytest.mark.s3, pytest.mark.slow]

T0 = datetime(2026, 6, 1, 8, 0, tzinfo=UTC)


def objects(storage: Any) -> dict[str, bytes]:
    return {e.path: storage.read_bytes(e.path) for e in storage.walk("", include_reserved=True, include_dirs=False)}


def check_s3_consistent(storage: Any, label: str) -> None:
    files = objects(storage)
    working = [p for p in files if lp.basename(p) in (lp.LOCK_NAME, lp.JOURNAL_NAME) or lp.is_temp_or_backup_name(
        lp.basename(p))]
    assert not working, (label, working)
    state = parse_state_document(files[lp.STATE_FILE_NAME])
    for record in state.outputs:
        assert sha(files[record.path]) == record.sha256, (label, record.path)
    assert set(files) == {lp.STATE_FILE_NAME} | {o.path for o in state.outputs}, label


class Source:
    def __init__(self, root: Path, name: str, files: dict[str, bytes], created: datetime) -> None:
        write_source(root / name, files, bundle_id=f"reports.{name}", created=created)
        self.storage = LocalStorage(root)
        self.bundle = name
        self.manifest = load_manifest(root / name)

    def request(self, destination: Any) -> PlanRequest:
        return PlanRequest(
            pipeline_id="reports",
            destination_id="bucket",
            source=self.storage,
            source_bundle_path=self.bundle,
            manifest=self.manifest,
            destination=destination,
            policy=DestinationPolicy(path_mapping="fixed"),
            distributor_version="test",
        )


@pytest.fixture
def bucket(moto_server: MotoServer) -> str:
    return moto_server.create_bucket()


def _storage(server: MotoServer, bucket: str) -> Iterator[Any]:
    return make_s3_storage(server, bucket=bucket, prefix="site")


def test_two_writers_race_for_the_lock_one_wins(moto_server: MotoServer, bucket: str) -> None:
    """Both create ``.distributor.lock`` at the same instant with ``If-None-Match: *``: exactly one
    gets it; the other (no wait) fails with ``destination site is locked by <winner> since <t>``."""
    races = 60 if LONG else 20
    stores = [_storage(moto_server, bucket), _storage(moto_server, bucket)]
    try:
        for race in range(races):
            barrier = threading.Barrier(2)

            def contend(index: int, barrier: threading.Barrier = barrier) -> DestinationLock | StorageError:
                lock = DestinationLock(stores[index], "", holder=f"writer {index}", wait=0, renew=False)
                barrier.wait()
                try:
                    lock.acquire()
                except StorageError as exc:
                    return exc
                return lock

            with ThreadPoolExecutor(2) as pool:
                results = list(pool.map(contend, range(2)))
            winners = [r for r in results if isinstance(r, DestinationLock)]
            losers = [r for r in results if isinstance(r, StorageError)]
            assert len(winners) == 1 and len(losers) == 1, (race, results)
            assert losers[0].kind == ErrorKind.CONFLICT
            assert str(losers[0]).startswith(f"destination site is locked by {winners[0].holder} since "), str(
                losers[0])
            winners[0].release()
            assert not stores[0].exists(lp.LOCK_NAME)
    finally:
        for store in stores:
            store.close()
    count("s3 lock races (one winner each)", races)


class Stall(FaultInjectingStorage):
    """Pauses right before the journal write (holding the lock) until released."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self.holding = threading.Event()
        self.release = threading.Event()

    def write_stream(self, path: str, chunks: Any, **kwargs: Any) -> Any:
        if lp.basename(path) == lp.JOURNAL_NAME and not self.holding.is_set():
            self.holding.set()
            assert self.release.wait(30)
        return super().write_stream(path, chunks, **kwargs)


def test_losing_publisher_gets_a_lock_conflict_then_succeeds(
    moto_server: MotoServer, bucket: str, tmp_path: Path
) -> None:
    first = Source(tmp_path, "first", {"report.md": b"first\n", "a.txt": b"a"}, T0)
    second = Source(tmp_path, "second", {"report.md": b"second\n", "b.txt": b"b"}, T0 + timedelta(hours=1))
    winner_store = Stall(_storage(moto_server, bucket))
    loser_store = _storage(moto_server, bucket)
    try:
        with ThreadPoolExecutor(1) as pool:
            winner = pool.submit(publish, first.request(winner_store), version="test", holder="winner", lock_wait=5)
            assert winner_store.holding.wait(30)
            lost = publish(second.request(loser_store), version="test", holder="loser", lock_wait=0.5)
            assert lost.status == "failed"
            assert lost.error.startswith("destination site is locked by winner since "), lost.error
            winner_store.release.set()
            assert winner.result().status == "completed"
        again = publish(second.request(loser_store), version="test", holder="loser", lock_wait=5)
        assert again.status == "completed" and again.plan.action == Action.REPLACE_OLDER, again.error
        check_s3_consistent(loser_store, "after the re-run")
        files = objects(loser_store)
        assert files["report.md"] == b"second\n" and "a.txt" not in files
    finally:
        winner_store.close()
        loser_store.close()


@pytest.mark.parametrize("previous", ["none", "published"])
def test_stale_planner_loses_the_conditional_state_write(
    moto_server: MotoServer, bucket: str, tmp_path: Path, previous: str
) -> None:
    """A writer that planned before another one published (as one whose lock was broken while it
    stalled would) fails its state write with a ``conflict`` (``If-Match`` on the ETag it read, or
    ``If-None-Match: *`` when there was no state) and rolls back only its own files: the other
    writer's publication stays exactly as it was."""
    store = _storage(moto_server, bucket)
    try:
        if previous == "published":
            base = Source(tmp_path, "base", {"report.md": b"base\n", "keep.txt": b"k"}, T0)
            assert publish(base.request(store), version="test").status == "completed"
        slow = Source(tmp_path, "slow", {"report.md": b"slow\n", "slow.txt": b"s"}, T0 + timedelta(hours=1))
        fast = Source(tmp_path, "fast", {"report.md": b"fast\n", "fast.txt": b"f"}, T0 + timedelta(hours=2))
        stale_plan = build_plan(slow.request(store))
        assert stale_plan.action.executable
        assert publish(fast.request(store), version="test", holder="fast").status == "completed"
        settled = objects(store)
        with pytest.raises(StorageError) as info:
            execute_plan(stale_plan, source=slow.storage, destination=store, now=T0 + timedelta(hours=3),
                         version="test", holder="slow")
        assert info.value.kind in (ErrorKind.CONFLICT, ErrorKind.ALREADY_EXISTS), info.value
        assert objects(store) == settled
        check_s3_consistent(store, "after the stale writer lost")
    finally:
        store.close()

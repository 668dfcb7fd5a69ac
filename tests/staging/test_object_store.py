"""Conformance of the shared staging store (issue 29): the same behaviour on S3 (a real moto
server on 127.0.0.1 with authentication enforced, one request at a time: moto 5.2.5's conditional
writes are not atomic under concurrent requests, S3's are) and on a local directory through the
local storage backend. Races on one record's revision run on S3 only: the local backend checks a
revision and then renames, which is atomic for one process, not for racing ones (the leases are
atomic on both: a takeover renames the record aside first, one mover wins). Each "replica" is its
own store object with its own connection to the store, as separate ``serve`` processes would have.
Time is what a replica's own monotonic clock says (an :class:`Observer` over a hand-moved clock
here); the wall clock a replica is given is skewed on purpose where it must not matter."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from distributor_core import staging as sg
from distributor_core.lease import LeaseLost, Observer, RecordState
from distributor_core.staging.objectstore import ObjectStagingStore, StoreConflict
from distributor_core.staging.ordering import marker_name
from distributor_core.staging.pending import PendingCursor
from distributor_core.storage import Storage, StorageError
from distributor_core.storage.faults import FaultInjectingStorage
from distributor_core.storage.local import LocalStorage

PIPELINE = "reports"
AT = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)


@dataclass
class StoreCase:
    name: str
    #: a new replica: its own storage connection to the same staging area
    replica: Callable[..., ObjectStagingStore]
    #: the raw objects, behind the store's back: path -> bytes (``None`` when missing)
    raw: Callable[[str], bytes | None]


def _local_case(tmp_path: Path) -> StoreCase:
    root = tmp_path / "staging"
    root.mkdir()

    def replica(**options: object) -> ObjectStagingStore:
        return ObjectStagingStore(LocalStorage(root), PIPELINE, **options)  # type: ignore[arg-type]

    def raw(path: str) -> bytes | None:
        target = root / path
        return target.read_bytes() if target.is_file() else None

    return StoreCase("local", replica, raw)


def _s3_case(request: pytest.FixtureRequest) -> StoreCase:
    from tests.peers.moto import make_s3_storage

    server = request.getfixturevalue("moto_serial_server")
    bucket = server.create_bucket()
    prefix = f"staging/{PIPELINE}"
    storages: list[Storage] = []

    def replica(**options: object) -> ObjectStagingStore:
        storage = make_s3_storage(server, bucket=bucket, prefix=prefix, conditional_writes="trusted")
        storages.append(storage)
        return ObjectStagingStore(storage, PIPELINE, **options)  # type: ignore[arg-type]

    def raw(path: str) -> bytes | None:
        client = server.client()
        try:
            return client.get_object(Bucket=bucket, Key=f"{prefix}/{path}")["Body"].read()
        except client.exceptions.NoSuchKey:
            return None
        finally:
            client.close()

    request.addfinalizer(lambda: [s.close() for s in storages])
    return StoreCase("s3", replica, raw)


@pytest.fixture(params=["local", "s3"])
def case(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreCase]:
    yield _local_case(tmp_path) if request.param == "local" else _s3_case(request)


@pytest.fixture
def s3_case(request: pytest.FixtureRequest) -> StoreCase:
    return _s3_case(request)


def _run_id(n: int) -> str:
    return f"{PIPELINE}.20261202T090000Z.{n:08x}"


def _record(store: ObjectStagingStore, n: int, *, key: str | None = None, seq: int | None = None) -> sg.UploadRecord:
    run_id = _run_id(n)
    return sg.UploadRecord(
        run_id=run_id, seq=seq if seq is not None else store.next_number(), pipeline_id=PIPELINE,
        token_id="reporter", idempotency_key=key, manifest={"id": f"bundle-{n}"},
        response={"run_id": run_id, "status": "accepted"}, status=sg.ACCEPTED, accepted_at=AT,
    )


def _admit(store: ObjectStagingStore, n: int, *, key: str | None = None) -> sg.UploadRecord:
    record = _record(store, n, key=key)
    claim = None
    if key is not None:
        taken = store.claim_key("reporter", key, record.run_id)
        assert taken.claimed
        claim = taken.lease
    return store.admit(record, claim=claim).record


class Ticks:
    """A replica's monotonic clock, moved by hand."""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def _watching(case: StoreCase, ticks: Ticks, *, skew: timedelta = timedelta(0)) -> ObjectStagingStore:
    """A replica whose monotonic clock is ``ticks`` and whose wall clock is off by ``skew``."""
    return case.replica(observer=Observer(ticks), now=lambda: datetime.now(UTC) + skew)


# ---------------------------------------------------------------------------- records


def test_an_admitted_record_reads_back_and_lists_in_admission_order(case: StoreCase) -> None:
    one, two = case.replica(), case.replica()
    first = _admit(one, 1)
    second = _admit(two, 2)
    third = _admit(one, 3)
    assert one.read(first.run_id).record == first  # type: ignore[union-attr]
    assert [r.run_id for r in two.records()] == [first.run_id, second.run_id, third.run_id]
    assert two.read(_run_id(99)) is None


def test_a_run_id_is_admitted_once(case: StoreCase) -> None:
    store = case.replica()
    record = _admit(store, 1)
    with pytest.raises(StoreConflict, match="already exists"):
        case.replica().admit(_record(store, 1))
    assert case.replica().read(record.run_id).record == record  # type: ignore[union-attr]
    assert [v.record.run_id for v in store.unfinished()] == [record.run_id]


def test_status_changes_follow_the_table_and_a_stale_copy_loses(case: StoreCase) -> None:
    store, other = case.replica(), case.replica()
    record = _admit(store, 1)
    seen = store.read(record.run_id)
    assert seen is not None
    with pytest.raises(sg.StatusTransitionError, match="cannot change from accepted to succeeded"):
        store.transition(record.run_id, status=sg.SUCCEEDED)
    queued = other.transition(record.run_id, status=sg.QUEUED)
    with pytest.raises(StoreConflict, match="changed by another replica"):
        store.transition(record.run_id, expect=seen, status=sg.RUNNING, dagster_run_id="late")
    assert store.read(record.run_id) == queued
    running = store.transition(record.run_id, expect=queued, status=sg.RUNNING)
    assert running.record.status == sg.RUNNING and other.read(record.run_id) == running


def test_exactly_one_of_several_replicas_starts_an_upload(s3_case: StoreCase) -> None:
    replicas = [s3_case.replica() for _ in range(4)]
    record = _admit(replicas[0], 1)
    seen = [r.read(record.run_id) for r in replicas]
    outcomes: list[str] = []
    barrier = threading.Barrier(len(replicas))

    def start(index: int) -> None:
        barrier.wait()
        try:
            replicas[index].transition(record.run_id, expect=seen[index], status=sg.RUNNING,
                                       dagster_run_id=f"run-{index}")
            outcomes.append(f"run-{index}")
        except StoreConflict:
            outcomes.append("lost")

    threads = [threading.Thread(target=start, args=(i,)) for i in range(len(replicas))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    winners = [o for o in outcomes if o != "lost"]
    assert len(winners) == 1 and outcomes.count("lost") == len(replicas) - 1
    assert replicas[0].read(record.run_id).record.dagster_run_id == winners[0]  # type: ignore[union-attr]


def test_concurrent_updates_of_different_fields_all_land(s3_case: StoreCase) -> None:
    replicas = [s3_case.replica() for _ in range(3)]
    record = _admit(replicas[0], 1)
    replicas[0].transition(record.run_id, status=sg.RUNNING)
    changes = [{"dagster_run_id": "run-7"}, {"error": "slow destination"}, {"report": {"files": 3}}]
    barrier = threading.Barrier(len(replicas))

    def update(index: int) -> None:
        barrier.wait()
        replicas[index].transition(record.run_id, **changes[index])

    threads = [threading.Thread(target=update, args=(i,)) for i in range(len(replicas))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # without a version, a lost compare-and-swap re-reads and re-applies: no update is lost
    final = replicas[0].read(record.run_id).record  # type: ignore[union-attr]
    assert (final.status, final.dagster_run_id, final.error, final.report) == (
        sg.RUNNING, "run-7", "slow destination", {"files": 3}
    )


# ---------------------------------------------------------------------------- idempotency keys


def test_a_key_sent_to_several_replicas_at_once_is_admitted_once(case: StoreCase) -> None:
    replicas = [case.replica() for _ in range(5)]
    barrier = threading.Barrier(len(replicas))
    claims: dict[int, object] = {}

    def claim(index: int) -> None:
        barrier.wait()
        claims[index] = replicas[index].claim_key("reporter", "nightly-1", _run_id(index + 1))

    threads = [threading.Thread(target=claim, args=(i,)) for i in range(len(replicas))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    winners = [i for i, c in claims.items() if c.claimed]  # type: ignore[attr-defined]
    assert len(winners) == 1
    holder = _run_id(winners[0] + 1)
    assert all(c.holder == holder and c.record is None for c in claims.values()  # type: ignore[attr-defined]
               if not c.claimed)  # type: ignore[attr-defined]
    # once the winner's record exists and its claim is settled, the others see it: a replay (same
    # bundle) or a conflict
    winner = replicas[winners[0]]
    record = winner.admit(_record(winner, winners[0] + 1, key="nightly-1"),
                          claim=claims[winners[0]].lease)  # type: ignore[attr-defined]
    again = replicas[(winners[0] + 1) % len(replicas)].claim_key("reporter", "nightly-1", _run_id(77))
    assert not again.claimed and again.holder == holder and again.record == record.record


@pytest.mark.parametrize("skew", [timedelta(seconds=150), timedelta(minutes=-10)], ids=["ahead-150s", "behind-10min"])
def test_an_abandoned_key_is_taken_over_once_seen_unchanged_and_never_by_the_clock(
    case: StoreCase, skew: timedelta
) -> None:
    """A dead admission's claim (and a marker without a record) are taken over and removed once
    this replica has seen them unchanged for ``abandon_after`` on its monotonic clock, however far
    its wall clock is off; and not a moment before."""
    dead = case.replica()
    ticks = Ticks()
    alive = _watching(case, ticks, skew=skew)
    assert dead.claim_key("reporter", "k", _run_id(1)).claimed
    dead.storage.write_bytes(f"pending/{marker_name(dead.next_number(), _run_id(1))}", b"", overwrite=True)
    in_flight = alive.claim_key("reporter", "k", _run_id(2))
    assert not in_flight.claimed and in_flight.holder == _run_id(1) and in_flight.record is None
    assert alive.pending().abandoned == []
    ticks.t += 119.0  # abandon_after (2 minutes) not yet reached
    assert not alive.claim_key("reporter", "k", _run_id(2)).claimed
    assert alive.pending().abandoned == []
    ticks.t += 2.0
    taken = alive.claim_key("reporter", "k", _run_id(2))
    assert taken.claimed and taken.lease is not None
    assert alive.pending().abandoned == [_run_id(1)]
    assert alive.pending().abandoned == []
    alive.admit(_record(alive, 2, key="k"), claim=taken.lease)
    assert alive.key_holder("reporter", "k") == _run_id(2)


def test_an_admission_whose_key_was_taken_over_while_it_wrote_removes_its_record(case: StoreCase) -> None:
    """The record write of a slow admission (a request held by the network) lands after another
    replica took its key claim over: its claim cannot be settled, its record is removed again,
    and the key stays the other admission's: one key, one admission, nothing left accepted."""
    slow = case.replica()
    ticks = Ticks()
    fast = _watching(case, ticks)
    mine = slow.claim_key("reporter", "k", _run_id(1))
    assert mine.claimed
    assert not fast.claim_key("reporter", "k", _run_id(2)).claimed
    ticks.t += 121.0
    theirs = fast.claim_key("reporter", "k", _run_id(2))
    assert theirs.claimed
    fast.admit(_record(fast, 2, key="k"), claim=theirs.lease)
    with pytest.raises(StoreConflict, match=r"upload \S+ idempotency key lock was taken over"):
        slow.admit(_record(slow, 1, key="k"), claim=mine.lease)
    assert slow.read(_run_id(1)) is None
    assert [r.run_id for r in fast.records()] == [_run_id(2)]
    assert [r.run_id for r in fast.pending().offered] == [_run_id(2)]
    again = slow.claim_key("reporter", "k", _run_id(3))
    assert not again.claimed and again.holder == _run_id(2) and again.record is not None


def test_an_upload_becomes_visible_only_once_its_record_and_claim_are_settled(case: StoreCase) -> None:
    store, sensor = case.replica(), case.replica()
    record = _record(store, 1, key="k")
    claim = store.claim_key("reporter", "k", record.run_id)
    assert sensor.pending().offered == [] and sensor.key_holder("reporter", "k") is None
    store.admit(record, claim=claim.lease)
    assert [r.run_id for r in sensor.pending().offered] == [record.run_id]
    assert sensor.key_holder("reporter", "k") == record.run_id


class Dies(FaultInjectingStorage):
    """The store connection of a replica that dies after ``writes`` more writes: every later
    write, rename and delete fails (its rollback too), so the store is left as a crash leaves it."""

    def __init__(self, inner: Storage, writes: int) -> None:
        super().__init__(inner)
        self.left = writes

    def _before(self, fault: Any, op: str, path: str) -> None:
        if op in ("write", "rename", "delete"):
            if self.left <= 0:
                raise StorageError(op, "test", path, "unavailable", "the replica died")
            if op == "write":
                self.left -= 1
        super()._before(fault, op, path)


@pytest.mark.parametrize("key", ["k", None], ids=["key-settled", "no-key"])
def test_an_admission_that_died_after_its_record_is_published_if_its_key_was_settled_else_removed(
    case: StoreCase, key: str | None
) -> None:
    """No 202 was sent for it. With its key settled, a retry of the key is answered with its run
    id, so it must be published: another replica takes the admission's marker over and makes it
    visible. Without (no key), the record is removed, never left ``accepted``."""
    healthy = case.replica()
    dead = ObjectStagingStore(Dies(healthy.storage, 4 if key else 2), PIPELINE)
    record = _record(dead, 1, key=key)
    claim = dead.claim_key("reporter", key, record.run_id).lease if key else None
    with pytest.raises(StorageError, match="the replica died"):
        dead.admit(record, claim=claim)
    sensor = case.replica()  # on this host, where the dead admission's process is known gone
    offered = [r.run_id for r in sensor.pending().offered]
    if key:
        assert offered == [record.run_id]
        assert sensor.key_holder("reporter", key) == record.run_id
        assert sensor.read(record.run_id) is not None
    else:
        assert offered == [] and sensor.read(record.run_id) is None and sensor.unfinished() == []


# ---------------------------------------------------------------------------- the sensor's cursor


def test_an_upload_admitted_late_by_a_slower_replica_is_not_skipped(case: StoreCase) -> None:
    slow, fast, sensor = case.replica(), case.replica(), case.replica()
    early = _record(slow, 1)  # numbered first, made visible last
    later = _admit(fast, 2)
    assert early.seq < later.seq
    tick = sensor.pending(PendingCursor())
    assert [r.run_id for r in tick.offered] == [later.run_id]
    slow.admit(early)
    cursor = PendingCursor.parse(tick.cursor.format())
    tick = sensor.pending(cursor)
    assert [r.run_id for r in tick.offered] == [early.run_id]
    assert sensor.pending(tick.cursor).offered == []


def test_pending_offers_accepted_uploads_in_order_within_a_limit_and_forgets_finished_ones(case: StoreCase) -> None:
    store = case.replica()
    records = [_admit(store, n) for n in range(1, 5)]
    tick = store.pending(limit=2)
    assert [r.run_id for r in tick.offered] == [records[0].run_id, records[1].run_id]
    tick = store.pending(tick.cursor, limit=2)
    assert [r.run_id for r in tick.offered] == [records[2].run_id, records[3].run_id]
    store.transition(records[0].run_id, status=sg.RUNNING)
    store.transition(records[0].run_id, status=sg.SUCCEEDED, finished_at=AT)
    store.transition(records[1].run_id, status=sg.FAILED, finished_at=AT, error="boom")
    tick = store.pending(tick.cursor)
    assert tick.offered == []
    assert len(tick.cursor.handed) == 2  # the finished ones left the cursor
    assert [v.record.run_id for v in store.unfinished()] == [records[2].run_id, records[3].run_id]


def test_a_cursor_that_cannot_be_read_offers_everything_again() -> None:
    assert PendingCursor.parse("garbage") == PendingCursor()
    assert PendingCursor.parse('{"v": 1, "seq": 3}') == PendingCursor()
    cursor = PendingCursor(frozenset({"a", "b"}))
    assert PendingCursor.parse(cursor.format()) == cursor


# ---------------------------------------------------------------------------- bundles and expiry


def test_a_bundle_is_streamed_checked_and_removed_when_its_upload_succeeds(case: StoreCase, tmp_path: Path) -> None:
    store = case.replica()
    bundle = tmp_path / "bundle"
    (bundle / "data").mkdir(parents=True)
    big = bytes(range(256)) * (12 * 1024 * 4)  # 12 MiB: several multipart parts on S3
    (bundle / "data" / "big.bin").write_bytes(big)
    (bundle / "manifest.json").write_bytes(b"{}")
    files = [("manifest.json", 2, None), ("data/big.bin", len(big), "sha256:" + hashlib.sha256(big).hexdigest())]
    record = _record(store, 1)
    assert store.put_bundle(record.run_id, bundle, files) == len(big) + 2
    store.admit(record)
    staged = case.raw(f"{store.bundle_prefix(record.run_id)}/data/big.bin")
    assert staged is not None and hashlib.sha256(staged).digest() == hashlib.sha256(big).digest()
    store.transition(record.run_id, status=sg.RUNNING)
    store.transition(record.run_id, status=sg.SUCCEEDED, finished_at=AT)
    assert case.raw(f"{store.bundle_prefix(record.run_id)}/data/big.bin") is None


def test_a_bundle_file_that_does_not_match_its_digest_is_refused(case: StoreCase, tmp_path: Path) -> None:
    store = case.replica()
    (tmp_path / "a.txt").write_bytes(b"hello")
    with pytest.raises(StorageError, match="integrity"):
        store.put_bundle(_run_id(1), tmp_path, [("a.txt", 5, "sha256:" + "0" * 64)])


def test_finished_records_expire_with_their_key(case: StoreCase) -> None:
    store = case.replica(now=lambda: AT + timedelta(days=2))
    kept = _admit(store, 1, key="old")
    store.transition(kept.run_id, status=sg.FAILED, finished_at=AT, error="boom")
    fresh = _admit(store, 2)
    assert store.expire(timedelta(hours=24)) == [kept.run_id]
    assert [r.run_id for r in store.records()] == [fresh.run_id]
    assert store.key_holder("reporter", "old") is None
    assert store.claim_key("reporter", "old", _run_id(3)).claimed


# ---------------------------------------------------------------------------- a burst


def test_a_burst_from_three_replicas_admits_each_key_once_and_offers_each_upload_once(case: StoreCase) -> None:
    replicas = [case.replica() for _ in range(3)]
    sensor = case.replica()
    keys = [f"key-{i}" for i in range(6)]
    admitted: list[str] = []
    answered: list[str] = []
    lock = threading.Lock()
    counter = iter(range(1, 1000))

    def send(replica: ObjectStagingStore, key: str) -> None:
        with lock:
            n = next(counter)
        record = _record(replica, n, key=key)
        claim = replica.claim_key("reporter", key, record.run_id)
        if claim.claimed:
            replica.admit(record, claim=claim.lease)
            with lock:
                admitted.append(record.run_id)
        with lock:
            answered.append(key)

    threads = [threading.Thread(target=send, args=(replicas[(i + j) % 3], key))
               for i, key in enumerate(keys) for j in range(2)]  # every key to two replicas at once
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(answered) == 2 * len(keys) and len(admitted) == len(keys)
    offered: list[str] = []
    cursor = PendingCursor()
    for _ in range(3):
        tick = sensor.pending(cursor, limit=4)
        offered += [r.run_id for r in tick.offered]
        cursor = tick.cursor
    assert sorted(offered) == sorted(admitted)
    assert {r.idempotency_key for r in sensor.records()} == set(keys)


# ---------------------------------------------------------------------------- publication leases


def test_racing_replicas_each_take_different_uploads_and_all_get_taken(s3_case: StoreCase) -> None:
    replicas = [s3_case.replica() for _ in range(3)]
    admitted = {_admit(replicas[0], n).run_id for n in range(1, 6)}
    taken: dict[str, list[str]] = {}
    lock = threading.Lock()
    barrier = threading.Barrier(len(replicas))

    def publish(index: int) -> None:
        barrier.wait()
        while True:
            claimed = replicas[index].claim_next(f"replica-{index}")
            if claimed is None:
                return
            lease, started = claimed
            assert started.record.status == sg.RUNNING
            with lock:
                taken.setdefault(started.record.run_id, []).append(lease.holder)
            replicas[index].transition(started.record.run_id, fence=lease.check, status=sg.SUCCEEDED,
                                       finished_at=AT)

    threads = [threading.Thread(target=publish, args=(i,)) for i in range(len(replicas))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert set(taken) == admitted and all(len(owners) == 1 for owners in taken.values())
    assert all(r.status == sg.SUCCEEDED for r in replicas[0].records())
    assert replicas[1].unfinished() == []


@pytest.mark.parametrize("skew", [timedelta(seconds=-150), timedelta(minutes=10)], ids=["behind-150s", "ahead-10min"])
def test_a_dead_replicas_publication_is_taken_over_once_its_lease_was_seen_unchanged(
    case: StoreCase, skew: timedelta
) -> None:
    dead = case.replica()
    ticks = Ticks()
    alive = _watching(case, ticks, skew=skew)
    record = _admit(dead, 1)
    lease, _ = dead.claim_next("dead", timedelta(seconds=60))  # type: ignore[misc]
    assert alive.claim_next("alive", timedelta(seconds=60)) is None  # the lease is live
    ticks.t += 45
    lease.renew()  # a renewal is a change: the observation starts again
    assert alive.claim_next("alive") is None
    ticks.t += 59
    assert alive.claim_next("alive") is None
    ticks.t += 2  # 61 s without a change: the dead replica stopped renewing
    taken = alive.claim_next("alive", timedelta(seconds=60))
    assert taken is not None and taken[1].record.run_id == record.run_id
    assert taken[1].record.status == sg.RUNNING
    assert taken[0].grant[1] == lease.grant[1] + 1  # the next generation
    with pytest.raises(LeaseLost, match=r"upload \S+ publication lock was taken over"):
        lease.renew()
    with pytest.raises(LeaseLost):  # a fenced record write: the dead replica's outcome is not recorded
        dead.transition(record.run_id, fence=lease.check, status=sg.FAILED, finished_at=AT, error="late")
    alive.transition(record.run_id, fence=taken[0].check, status=sg.SUCCEEDED, finished_at=AT)
    assert alive.read(record.run_id).record.status == sg.SUCCEEDED  # type: ignore[union-attr]
    assert alive.claim_next("alive") is None and dead.claim_next("dead") is None


def test_a_released_lease_is_free_and_dagster_runs_and_finished_uploads_are_left_alone(case: StoreCase) -> None:
    one, two = case.replica(), case.replica()
    first, second, third = (_admit(one, n) for n in (1, 2, 3))
    one.transition(first.run_id, status=sg.RUNNING, dagster_run_id="dagster-1")
    one.transition(second.run_id, status=sg.FAILED, finished_at=AT, error="boom")
    lease, started = one.claim_next("one")  # type: ignore[misc]
    assert started.record.run_id == third.run_id and started.record.status == sg.RUNNING
    assert two.claim_next("two") is None
    lease.settle(RecordState.FREE)
    again = two.claim_next("two")
    assert again is not None and again[1].record.run_id == third.run_id


def test_the_renew_loop_keeps_the_upload_and_says_when_it_was_lost(case: StoreCase) -> None:
    holder, other = case.replica(), case.replica()
    _admit(holder, 1)
    lease, _ = holder.claim_next("holder", timedelta(seconds=0.4))  # type: ignore[misc]
    with lease.kept():
        for _ in range(4):  # a second and a half: the lease would have expired four times over
            threading.Event().wait(0.4)
            assert other.claim_next("other") is None
    assert lease.lost is None
    assert other.claim_next("other") is None  # first sight of the last renewal
    threading.Event().wait(0.5)
    assert other.claim_next("other", timedelta(seconds=60)) is not None
    with lease.kept():
        for _ in range(50):
            if lease.lost:
                break
            threading.Event().wait(0.1)
    assert lease.lost and "publication lock was taken over" in lease.lost


def test_the_bundle_of_an_admission_killed_before_its_record_is_swept_after_the_retention(
    case: StoreCase, tmp_path: Path
) -> None:
    (tmp_path / "a.txt").write_bytes(b"hello")
    files = [("a.txt", 5, None)]
    young = case.replica(now=lambda: AT + timedelta(hours=5))
    old = case.replica(now=lambda: AT + timedelta(hours=25))
    young.put_bundle(_run_id(1), tmp_path, files)  # killed here: no key, no marker, no record
    admitted = _record(young, 2)
    young.put_bundle(admitted.run_id, tmp_path, files)
    young.admit(admitted)
    young.expire(timedelta(hours=24))  # five hours on: may still be a large bundle streaming in
    assert case.raw(f"{young.bundle_prefix(_run_id(1))}/a.txt") == b"hello"
    old.expire(timedelta(hours=24))
    assert case.raw(f"{old.bundle_prefix(_run_id(1))}/a.txt") is None
    assert case.raw(f"{old.bundle_prefix(admitted.run_id)}/a.txt") == b"hello"

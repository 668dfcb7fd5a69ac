"""Three ``distributor serve`` replicas (inline publisher) on one shared S3 staging store, a burst
of uploads with idempotency keys sent to two replicas at once, and a ``kill -9`` of one replica in
the middle of it (issue 29 item 2, the HTTP layer end to end; moto on 127.0.0.1 with
authentication enforced, serving one request at a time so its conditional writes are atomic as
on S3).

The destination is an S3 bucket with versioning on, so every write the publishers make stays
visible as an object version: that is how a user would see a double publication (two versions of
one upload's file, or a version written by a publication whose report says it skipped). Each
upload carries its own file ``uNN.txt``, its own bundle id and a later ``created`` than the
upload before it; the destination follows the newest bundle (default takeover), so a replica that
publishes an older upload after a newer one reports ``skip_destination_newer`` and writes nothing.

What must hold, as a producer and an operator see it:

- every ``202`` a client received names a run that ends ``succeeded``, readable from any replica;
- uploads sent to a surviving replica are all accepted; requests to the killed one fail at the
  client (no ``202``): nothing it may have half-admitted is answered for;
- each idempotency key sent to two replicas at once gives one run id (both answers name it, after
  a retried ``409 key in flight``) and one record;
- every upload record in the store (the killed replica's too) ends ``succeeded``; nothing is left
  pending and no staged bundle is left behind;
- every upload's file was written to the destination exactly once when its report says it was
  published, never when it says it skipped, the publication the killed replica held included:
  another replica took it over (at once: the killed replica's process is gone from this host) and
  published it once;
- a request the victim was admitting when it died left only objects of its own (no record, so
  no 202 was ever sent for it: they are removed once ``abandon_after`` has passed);
- the destination ends holding the newest upload.

The kill is made to land mid-publication: the victim starts first and takes the first upload
while the destination's lock is held elsewhere, so it holds the publication lease, waiting, when
it is killed (the lock is released right after); the other replicas admit meanwhile and, since a
pipeline publishes in admission order, take nothing until the lease has expired.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from distributor_core.lease import RecordState, parse_record
from distributor_core.staging.index import key_sha256
from distributor_core.staging.objectstore import PENDING, ObjectStagingStore
from distributor_core.staging.ordering import parse_marker
from distributor_core.storage import StorageError
from tests.peers.moto import MotoServer, make_s3_storage
from tests.server.harness import TOKEN, bundle_archive, upload
from tests.server.shared import (
    STAGING_PREFIX,
    Replica,
    SharedSetup,
    hold_destination_lock,
    start_replica,
    start_replicas,
    write_shared_setup,
)

PIPELINE = "reports"
UPLOADS = 40
DUPLICATE_KEYS = 5
#: the replica killed mid-burst; the duplicate keys go to the other two
VICTIM = 0
#: 202s the victim answers before it is killed
VICTIM_ANSWERS = 4
LEASE = "3s"
#: the destination lock's lease (``lock_lease``), in seconds
LOCK_LEASE = 4
BASE = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)
AUTH = {"Authorization": f"Bearer {TOKEN}"}
WRITES = {"publish_new", "replace_takeover", "replace_older"}
SKIPS = {"skip_destination_newer", "skip_same"}
#: bounds a hang; nothing is timed
DEADLINE = 120.0


@dataclass
class Burst:
    """What the clients saw: accepted run ids by upload name, failures, duplicate-key answers."""

    accepted: dict[str, str] = field(default_factory=dict)
    sent_to: dict[str, int] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    duplicates: dict[str, list[str]] = field(default_factory=dict)
    in_flight_answers: int = 0
    victim_answers: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


def _name(index: int) -> str:
    return f"u{index:02d}"


def _position(index: int) -> int:
    """Where upload ``index`` goes out in the burst: the unique uploads in turn, duplicate key
    ``n`` (index ``UPLOADS + n``) after unique upload ``8n + 4``."""
    return 2 * index if index < UPLOADS else 2 * (8 * (index - UPLOADS) + 4) + 1


def _archive(tmp: Path, index: int) -> bytes:
    """Upload ``index``'s bundle, created in the order the burst sends them."""
    name = _name(index)
    return bundle_archive(tmp, {f"{name}.txt": f"upload {name}\n".encode()}, bundle_id=f"{PIPELINE}.{name}",
                          created=BASE + timedelta(minutes=_position(index)))


def _send(url: str, archive: bytes, key: str, burst: Burst) -> str | None:
    """One producer: POST, retrying what the API calls retryable; the run id of its 202, or
    ``None`` when the replica could not be reached (killed)."""
    deadline = time.monotonic() + DEADLINE
    with httpx.Client(base_url=url, timeout=60) as http:
        while time.monotonic() < deadline:
            try:
                response = upload(http, PIPELINE, archive, key=key)
            except httpx.TransportError as exc:
                with burst.lock:
                    burst.failed[key] = type(exc).__name__
                return None
            if response.status_code == 202:
                run_id: str = response.json()["run_id"]
                assert response.json()["status_url"].endswith(f"/runs/{run_id}")
                return run_id
            body = response.json()
            assert response.status_code in (409, 503) and body.get("retryable") is True, (response.status_code, body)
            if response.status_code == 409:
                with burst.lock:
                    burst.in_flight_answers += 1
            time.sleep(0.05)
    raise AssertionError(f"upload {key} kept being refused as retryable")


@pytest.fixture
def cluster(tmp_path: Path, moto_serial_server: MotoServer) -> Iterator[tuple[SharedSetup, list[Replica]]]:
    """The setup, and a list the test appends its replicas to (all killed at the end)."""
    setup = write_shared_setup(tmp_path / "site", moto_serial_server, s3_destination=True, lock_lease=LOCK_LEASE,
                               http={"queue_size": 128, "max_concurrency": 1, "publication_lease": LEASE})
    started: list[Replica] = []
    try:
        yield setup, started
    finally:
        for replica in started:
            replica.stop()


@pytest.fixture
def store(cluster: tuple[SharedSetup, list[Replica]]) -> Iterator[ObjectStagingStore]:
    """The pipeline's part of the staging bucket, read behind the replicas' backs."""
    setup, _ = cluster
    storage = make_s3_storage(setup.moto_server, bucket=setup.bucket, prefix=f"{STAGING_PREFIX}/{PIPELINE}")
    try:
        yield ObjectStagingStore(storage, PIPELINE)
    finally:
        storage.close()


def _leases(store: ObjectStagingStore) -> dict[str, str]:
    """Run id -> owner of every publication lease held right now."""
    held: dict[str, str] = {}
    for entry in store.storage.walk(PENDING, recursive=False, include_reserved=True, limit=10_000):
        parsed = parse_marker(entry.path.rsplit("/", 1)[-1])
        if parsed is None:
            continue
        try:
            lease = parse_record(store.storage.read_bytes(entry.path, max_size=4096))
        except StorageError:  # finished and removed meanwhile
            continue
        if lease.state == RecordState.HELD:
            held[parsed[1]] = lease.holder
    return held


def test_kill_9_of_one_of_three_replicas_mid_burst_loses_nothing_and_publishes_each_upload_once(
    cluster: tuple[SharedSetup, list[Replica]], store: ObjectStagingStore, tmp_path: Path,
) -> None:
    setup, started = cluster
    archives = {_name(i): _archive(tmp_path, i) for i in range(UPLOADS + DUPLICATE_KEYS)}
    burst = Burst()
    killed = threading.Event()
    at_kill: dict[str, str] = {}

    # the victim starts alone and takes the first upload; its publication waits for the
    # destination's lock (held elsewhere) while the victim holds the publication lease, so the
    # kill below always interrupts a publication in flight
    release_lock = hold_destination_lock(setup, PIPELINE)
    victim = start_replica(setup, f"replica-{VICTIM}", "--publisher", "inline")
    started.append(victim)
    first = _send(victim.url, archives[_name(0)], _name(0), burst)
    assert first is not None
    burst.sent_to[_name(0)], burst.accepted[_name(0)], burst.victim_answers = VICTIM, first, 1
    deadline = time.monotonic() + DEADLINE
    while not _owned_by(_leases(store).get(first, ""), victim):
        assert time.monotonic() < deadline, f"the victim never took its upload; {_logs(started)}"
        time.sleep(0.1)
    survivors = start_replicas(setup, [f"replica-{i}" for i in range(3) if i != VICTIM], "--publisher", "inline")
    started.extend(survivors)
    replicas = {VICTIM: victim, **{i: r for i, r in zip([i for i in range(3) if i != VICTIM], survivors, strict=True)}}

    def unique(index: int) -> None:
        name = _name(index)
        target = index % 3
        if index >= UPLOADS // 2:
            killed.wait(DEADLINE)  # the second half of the burst goes out after the kill
        with burst.lock:
            burst.sent_to[name] = target
        run_id = _send(replicas[target].url, archives[name], name, burst)
        with burst.lock:
            if run_id is not None:
                burst.accepted[name] = run_id
                if target == VICTIM:
                    burst.victim_answers += 1

    def duplicate(number: int) -> None:
        """One key sent to both survivors at the same moment."""
        name = _name(UPLOADS + number)
        gate = threading.Barrier(2)
        answers: list[str | None] = [None, None]

        def one(slot: int) -> None:
            gate.wait()
            answers[slot] = _send(survivors[slot].url, archives[name], name, burst)

        pair = [threading.Thread(target=one, args=(slot,)) for slot in (0, 1)]
        for thread in pair:
            thread.start()
        for thread in pair:
            thread.join(DEADLINE)
        with burst.lock:
            burst.duplicates[name] = [a or "" for a in answers]

    def assassin() -> None:
        deadline = time.monotonic() + DEADLINE
        while burst.victim_answers < VICTIM_ANSWERS and time.monotonic() < deadline:
            time.sleep(0.01)
        at_kill.update(_leases(store))  # just before: a survivor takes a dead replica's lease over at once
        victim.kill9()
        release_lock()
        killed.set()

    killer = threading.Thread(target=assassin)
    killer.start()
    with ThreadPoolExecutor(max_workers=6) as pool:
        futures = []
        for index in range(1, UPLOADS):
            futures.append(pool.submit(unique, index))
            if index % 8 == 4:
                futures.append(pool.submit(duplicate, index // 8))  # see _position
        for future in futures:
            future.result()
    killer.join(DEADLINE)
    assert killed.is_set() and victim.process.returncode == -9

    # --- what the clients saw
    to_survivors = {name for name, target in burst.sent_to.items() if target != VICTIM}
    assert to_survivors <= set(burst.accepted), f"a surviving replica refused uploads: {burst.failed}"
    assert burst.victim_answers >= VICTIM_ANSWERS
    late = {_name(i) for i in range(UPLOADS // 2, UPLOADS) if i % 3 == VICTIM}
    assert late <= set(burst.failed) and not late & set(burst.accepted)
    for name, answers in burst.duplicates.items():
        assert answers[0] and answers[0] == answers[1], (name, answers)
        burst.accepted[name] = answers[0]
    assert len(burst.accepted) == len(set(burst.accepted.values()))

    # --- every 202 ends succeeded, read from any surviving replica
    http = [httpx.Client(base_url=r.url, timeout=30) for r in survivors]
    try:
        deadline = time.monotonic() + DEADLINE
        for name, run_id in sorted(burst.accepted.items()):
            while True:
                view = http[0].get(f"/runs/{run_id}", headers=AUTH).json()
                if view["status"] in ("succeeded", "failed"):
                    break
                assert time.monotonic() < deadline, f"{name} ({run_id}) still {view['status']}; {_logs(started)}"
                time.sleep(0.3)
        views = {name: [c.get(f"/runs/{run_id}", headers=AUTH).json() for c in http]
                 for name, run_id in burst.accepted.items()}
    finally:
        for client in http:
            client.close()
    for name, (one, other) in views.items():
        assert one == other, name
        assert one["status"] == "succeeded" and "error" not in one, (name, one)

    # --- the store: one record per key, all succeeded, nothing pending, no bundle left
    deadline = time.monotonic() + DEADLINE
    while store.unfinished():
        assert time.monotonic() < deadline, f"uploads left unfinished: {store.unfinished()}; {_logs(started)}"
        time.sleep(1.0)
    records = store.records()
    by_key = {r.idempotency_key: r for r in records}
    assert len(by_key) == len(records), "one idempotency key was admitted twice"
    assert {r.status for r in records} == {"succeeded"}, [(r.idempotency_key, r.status, r.error) for r in records]
    assert {name: by_key[name].run_id for name in burst.accepted} == burst.accepted
    # records no client heard of: admissions the victim completed but never answered
    unanswered = set(by_key) - set(burst.accepted)
    assert {burst.sent_to[name] for name in unanswered} <= {VICTIM}
    # what is left besides the records: only the objects of admissions the victim died in (no
    # record; removed once abandon_after has passed), never a bundle of an accepted upload
    recorded = {r.run_id for r in records}
    hashes = {key_sha256(name): name for name in archives}
    dead: dict[str, str] = {}
    for key in setup.staging_objects(PIPELINE):
        kind, _, rest = key.partition("/")
        if kind == "records":
            continue
        if kind == "keys":
            name = hashes[rest.rsplit("/", 1)[-1]]
            if store.key_holder("reporter", name) not in recorded:
                dead[key] = name
            continue
        assert kind in ("bundles", "pending"), key
        run_id = rest.split("/", 1)[0] if kind == "bundles" else rest.split(".", 1)[1]
        assert run_id not in recorded, key
        dead[key] = run_id
    assert {burst.sent_to[name] for name in dead.values() if name in burst.sent_to} <= {VICTIM}, dead
    assert {name for name in dead.values() if name in burst.sent_to} <= set(burst.failed), dead

    # --- the destination's write history: each upload written once, and only when published
    versions = setup.destination_versions(PIPELINE)
    taken_over = {run_id for run_id, owner in at_kill.items() if _owned_by(owner, victim)}
    assert taken_over == {first}, at_kill  # the interrupted publication, taken over
    twice = []
    for record in records:
        name = record.idempotency_key or ""
        actions = [a["action"] for a in (record.report or {}).get("actions", [])]
        assert len(actions) == 1 and actions[0] in WRITES | SKIPS, (name, actions)
        written = versions.get(f"{name}.txt", 0)
        if written != (1 if actions[0] in WRITES else 0):
            twice.append((name, actions[0], written))
    assert twice == [], f"uploads written other than once per publication: {twice}; leases at the kill: {at_kill}"
    skipped = sorted(r.idempotency_key or "" for r in records
                     if (r.report or {}).get("actions", [{}])[0].get("action") in SKIPS)
    print(f"\n{len(burst.accepted)} accepted, {len(burst.failed)} failed at the client, {len(records)} records "
          f"({len(unanswered)} unanswered), {burst.in_flight_answers} retried 409s, skipped as older: {skipped}, "
          f"the victim's leases at the kill: {sorted(taken_over)}, objects of dead admissions: {sorted(dead)}")
    assert by_key[_name(0)].report["actions"][0]["action"] == "publish_new"  # type: ignore[index]
    newest = max(records, key=lambda r: str(r.manifest["created"])).idempotency_key
    assert versions.get(f"{newest}.txt") == 1
    state = setup.destination_state(PIPELINE)
    assert [o["path"] for o in state["outputs"]] == [f"{newest}.txt"]


def _owned_by(owner: str, replica: Replica) -> bool:
    """Whether a lease owner (``<host>:<pid>:<nonce>/<worker>``) is ``replica``'s process."""
    parts = owner.split(":")
    return len(parts) > 2 and parts[1] == str(replica.process.pid)


def _logs(started: list[Replica]) -> str:
    return "\n".join(f"--- {r.name}\n{r.text()[-2000:]}" for r in started)


#: files in the bundle of the upload killed mid-write: its destination write takes a while
MANY_FILES = 150


def test_kill_9_of_a_replica_writing_a_destination_on_another_host_is_taken_over(
    cluster: tuple[SharedSetup, list[Replica]], store: ObjectStagingStore, tmp_path: Path,
) -> None:
    """Replicas on two hosts (each in a UTS namespace of its own, as two pods are): the victim is
    killed while it writes the destination, holding the destination's lock, which no process on
    the other host can tell is dead. The other replica takes the publication over once the
    publication lease has expired and must still publish it: the upload ends ``succeeded``, its
    files at the destination, the next upload published after it."""
    setup, started = cluster
    files = {f"part/{i:03d}.txt": f"part {i}\n".encode() for i in range(MANY_FILES)}
    big = bundle_archive(tmp_path, files, bundle_id=f"{PIPELINE}.big", created=BASE)
    after = _archive(tmp_path, 1)
    victim = start_replica(setup, "replica-a", "--publisher", "inline", host="replica-a")
    started.append(victim)
    burst = Burst()
    first = _send(victim.url, big, "big", burst)
    assert first is not None
    lock_key = "published/reports/.distributor.lock"
    client = setup.moto_server.client()
    try:
        deadline = time.monotonic() + DEADLINE
        while True:  # the victim holds the destination's lock: it is writing there
            try:
                body = client.get_object(Bucket=setup.destination_bucket, Key=lock_key)["Body"].read()
                if b'"replica-a"' in body:
                    break
            except client.exceptions.NoSuchKey:
                pass
            assert time.monotonic() < deadline, f"the victim never locked the destination; {_logs(started)}"
            time.sleep(0.02)
        victim.kill9()
        assert _owned_by(_leases(store).get(first, ""), victim)
        survivor = start_replica(setup, "replica-b", "--publisher", "inline", host="replica-b")
        started.append(survivor)
        second = _send(survivor.url, after, _name(1), burst)
        assert second is not None
    finally:
        client.close()

    with httpx.Client(base_url=survivor.url, timeout=30) as http:
        views = {}
        # the dead replica's destination lock is taken over once seen unchanged for its lease
        deadline = time.monotonic() + LOCK_LEASE + DEADLINE
        for run_id in (first, second):
            while (view := http.get(f"/runs/{run_id}", headers=AUTH).json())["status"] not in ("succeeded", "failed"):
                assert time.monotonic() < deadline, f"{run_id} still {view['status']}; {_logs(started)}"
                time.sleep(0.5)
            views[run_id] = view
    assert views[first]["status"] == "succeeded", (views[first].get("error"), _logs(started))
    assert views[second]["status"] == "succeeded", views[second]
    state = setup.destination_state(PIPELINE)
    assert [o["path"] for o in state["outputs"]] == [f"{_name(1)}.txt"]  # the newer upload, after it
    versions = setup.destination_versions(PIPELINE)
    assert all(versions.get(name, 0) >= 1 for name in files)  # every file of the big upload landed

"""Shared staging when clocks disagree, processes stall and requests are held (issue 34), end to
end: ``distributor serve`` replicas as processes on one S3 staging store (moto on 127.0.0.1,
authentication enforced, one request at a time so its conditional writes are atomic as on S3),
publishing to an S3 destination with versioning on, so every write stays visible as an object
version. Leases are short here (``publication_lease`` 2 s, ``admission_lease`` 3 s, the
destination's ``lock_lease`` 2-3 s) so that a stall or a skew is many leases long.

- **Skewed clocks**: one replica's wall clock 150 s ahead and another's 10 minutes behind
  (libfaketime; their monotonic clocks untouched), then the reverse, in a burst where every
  idempotency key goes to two replicas at once, one of them skewed.
- **A stall**: a replica stops itself (``SIGSTOP``) in the middle of writing the destination,
  holding the publication lease and the destination lock; another replica takes both over,
  publishes that upload and a newer one; then the first is continued (``SIGCONT``).
- **A held request**: the fault proxy holds one replica's record write past the admission lease
  while the producer retries the same key at another replica.

What must hold, as a producer and an operator see it: every ``202`` is published exactly once;
no key is admitted twice; no destination state lists a missing or foreign file; no upload is
reported ``succeeded`` by a replica whose commit was fenced off; the newest publication's bytes
are the ones served.
"""

from __future__ import annotations

import hashlib
import os
import signal
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from distributor_core.staging.objectstore import ObjectStagingStore
from tests.peers.faketime import skewed
from tests.peers.faultproxy import FaultProxy
from tests.peers.moto import MotoServer, make_s3_storage
from tests.server.harness import TOKEN, bundle_archive, upload
from tests.server.shared import (
    DESTINATION_PREFIX,
    STAGING_PREFIX,
    Replica,
    SharedSetup,
    launch_replica,
    list_keys,
    start_replica,
    wait_replica,
    write_shared_setup,
)

PIPELINE = "reports"
BASE = datetime(2026, 12, 7, 9, 0, tzinfo=UTC)
AUTH = {"Authorization": f"Bearer {TOKEN}"}
WRITES = {"publish_new", "replace_takeover", "replace_older"}
SKIPS = {"skip_destination_newer", "skip_same"}
#: bounds a hang; nothing is timed
DEADLINE = 120.0
HOOK_DIR = Path(__file__).resolve().parents[1] / "reliability" / "hook"


def _name(n: int) -> str:
    return f"u{n:02d}"


def _archive(tmp: Path, n: int, files: dict[str, bytes] | None = None) -> bytes:
    """Upload ``n``: its own bundle id, created ``n`` minutes after the first (newer each)."""
    name = _name(n)
    return bundle_archive(tmp, files or {f"{name}.txt": f"upload {name}\n".encode()},
                          bundle_id=f"{PIPELINE}.{name}", created=BASE + timedelta(minutes=n))


def _send(url: str, archive: bytes, key: str) -> str:
    """A producer: POST, retrying what the API calls retryable; the run id of its 202."""
    deadline = time.monotonic() + DEADLINE
    with httpx.Client(base_url=url, timeout=60) as http:
        while time.monotonic() < deadline:
            response = upload(http, PIPELINE, archive, key=key)
            if response.status_code == 202:
                run_id: str = response.json()["run_id"]
                return run_id
            body = response.json()
            assert response.status_code in (409, 503) and body.get("retryable") is True, (response.status_code, body)
            time.sleep(0.1)
    raise AssertionError(f"upload {key} kept being refused as retryable")


def _finished(url: str, run_ids: list[str], replicas: list[Replica]) -> dict[str, dict[str, Any]]:
    views: dict[str, dict[str, Any]] = {}
    deadline = time.monotonic() + DEADLINE
    with httpx.Client(base_url=url, timeout=30) as http:
        for run_id in run_ids:
            while (view := http.get(f"/runs/{run_id}", headers=AUTH).json())["status"] not in ("succeeded", "failed"):
                assert time.monotonic() < deadline, f"{run_id} still {view['status']}; {_logs(replicas)}"
                time.sleep(0.3)
            views[run_id] = view
    return views


def _logs(replicas: list[Replica]) -> str:
    return "\n".join(f"--- {r.name}\n{r.text()[-3000:]}" for r in replicas)


@pytest.fixture
def replicas() -> Iterator[list[Replica]]:
    started: list[Replica] = []
    try:
        yield started
    finally:
        for replica in started:
            if replica.process.poll() is None:
                os.kill(replica.process.pid, signal.SIGCONT)
            replica.stop()


def _store(setup: SharedSetup) -> ObjectStagingStore:
    storage = make_s3_storage(setup.moto_server, bucket=setup.bucket, prefix=f"{STAGING_PREFIX}/{PIPELINE}")
    return ObjectStagingStore(storage, PIPELINE)


def _destination_objects(setup: SharedSetup) -> dict[str, bytes]:
    client = setup.moto_server.client()
    prefix = f"{DESTINATION_PREFIX}/{PIPELINE}/"
    try:
        return {key: client.get_object(Bucket=setup.destination_bucket, Key=prefix + key)["Body"].read()
                for key in list_keys(setup.moto_server, setup.destination_bucket, prefix)}
    finally:
        client.close()


def _check_destination(setup: SharedSetup, newest: str) -> dict[str, Any]:
    """No state listing a missing or foreign file, nothing else left (no lock, journal, temporary,
    backup or stray output), and the newest upload's bytes served."""
    objects = _destination_objects(setup)
    state = setup.destination_state(PIPELINE)
    served = {o["path"]: o["sha256"] for o in state["outputs"]}
    assert set(objects) == {*served, ".distributor.json"}, sorted(objects)
    for path, digest in served.items():
        assert "sha256:" + hashlib.sha256(objects[path]).hexdigest() == digest, path
    assert state["source"]["manifest"]["id"] == f"{PIPELINE}.{newest}"
    return state


# ---------------------------------------------------------------------------- skewed clocks

UPLOADS = 9


@pytest.mark.parametrize("skews", [(150, -600), (-150, 600)],
                         ids=["ahead-150s-behind-10min", "behind-150s-ahead-10min"])
def test_replicas_whose_clocks_disagree_admit_each_key_once_and_publish_each_upload_once(
    tmp_path: Path, moto_serial_server: MotoServer, replicas: list[Replica], skews: tuple[int, int],
) -> None:
    setup = write_shared_setup(tmp_path / "site", moto_serial_server, s3_destination=True, lock_lease=3, http={
        "queue_size": 128, "max_concurrency": 1, "publication_lease": "2s", "admission_lease": "3s"})
    environments = [None, skewed(skews[0]), skewed(skews[1])]
    replicas.extend(launch_replica(setup, f"replica-{i}", "--publisher", "inline", env=environments[i])
                    for i in range(3))
    for replica in replicas:
        wait_replica(replica)
    pairs = [(0, 1), (1, 2), (2, 0)]  # every key to two replicas at once, at least one of them skewed
    answers: dict[str, list[str]] = {}

    def send_twice(n: int) -> None:
        archive, key = _archive(tmp_path, n), _name(n)
        with ThreadPoolExecutor(2) as pool:
            answers[key] = list(pool.map(lambda i: _send(replicas[i].url, archive, key), pairs[n % 3]))

    with ThreadPoolExecutor(3) as pool:
        list(pool.map(send_twice, range(UPLOADS)))

    # no key admitted twice: both answers name one run, and the store holds one record per key
    for key, ids in answers.items():
        assert ids[0] == ids[1], (key, ids)
    run_ids = [ids[0] for _, ids in sorted(answers.items())]
    views = _finished(replicas[0].url, run_ids, replicas)
    assert {v["status"] for v in views.values()} == {"succeeded"}, (views, _logs(replicas))
    store = _store(setup)
    try:
        records = store.records()
        assert sorted(r.run_id for r in records) == sorted(run_ids)
        assert store.unfinished() == []
    finally:
        store.storage.close()
    # every 202 published exactly once: its file written once when its report says it was written
    versions = setup.destination_versions(PIPELINE)
    for record in records:
        actions = [a["action"] for a in (record.report or {}).get("actions", [])]
        assert len(actions) == 1 and actions[0] in WRITES | SKIPS, (record.idempotency_key, actions)
        assert versions.get(f"{record.idempotency_key}.txt", 0) == (1 if actions[0] in WRITES else 0), (
            record.idempotency_key, actions, versions)
    newest = max(records, key=lambda r: str(r.manifest["created"])).idempotency_key or ""
    state = _check_destination(setup, newest)
    assert [o["path"] for o in state["outputs"]] == [f"{newest}.txt"]


# ---------------------------------------------------------------------------- a stall


def _wait_stopped(pid: int) -> None:
    deadline = time.monotonic() + DEADLINE
    while True:
        with open(f"/proc/{pid}/stat") as handle:
            if handle.read().rsplit(")", 1)[1].split()[0] == "T":
                return
        assert time.monotonic() < deadline, f"process {pid} never stopped"
        time.sleep(0.02)


def _all_versions(setup: SharedSetup) -> dict[str, list[str]]:
    """Object key -> its version ids (delete markers included), newest first."""
    client = setup.moto_server.client()
    found: dict[str, list[str]] = {}
    try:
        for page in client.get_paginator("list_object_versions").paginate(
                Bucket=setup.destination_bucket, Prefix=f"{DESTINATION_PREFIX}/{PIPELINE}/"):
            for item in page.get("Versions", []) + page.get("DeleteMarkers", []):
                found.setdefault(item["Key"], []).append(item["VersionId"])
    finally:
        client.close()
    return found


def test_a_replica_stopped_past_its_leases_mid_write_writes_nothing_over_its_successor(
    tmp_path: Path, moto_serial_server: MotoServer, replicas: list[Replica],
) -> None:
    """Replica A stops itself (``SIGSTOP``, a test hook at its 12th destination write) while it
    writes upload 1; replica B takes over the publication lease and the destination lock once it
    has seen them unchanged for their leases, publishes upload 1 and then upload 2 (both with a
    ``data.txt``: ONE, then TWO); A is continued. A must not move TWO aside or write ONE again, nor
    report anything: it fails at its next storage call with the lost lock, and its own stray
    write goes again."""
    setup = write_shared_setup(tmp_path / "site", moto_serial_server, s3_destination=True, lock_lease=2, http={
        "max_concurrency": 1, "publication_lease": "2s"})
    hook = {"PYTHONPATH": os.pathsep.join([str(HOOK_DIR), os.environ.get("PYTHONPATH", "")]),
            "DISTRIBUTOR_TEST_STOP": "write:12:before"}
    first_files = {"data.txt": b"ONE\n", **{f"part/{i:03d}.txt": f"part {i}\n".encode() for i in range(40)}}
    a = start_replica(setup, "replica-a", "--publisher", "inline", env=hook)
    replicas.append(a)
    first = _send(a.url, _archive(tmp_path, 1, first_files), _name(1))
    _wait_stopped(a.process.pid)
    b = start_replica(setup, "replica-b", "--publisher", "inline")
    replicas.append(b)
    second = _send(b.url, _archive(tmp_path, 2, {"data.txt": b"TWO\n"}), _name(2))
    views = _finished(b.url, [first, second], replicas)
    assert {v["status"] for v in views.values()} == {"succeeded"}, (views, _logs(replicas))
    store = _store(setup)
    try:
        before = (_all_versions(setup), _destination_objects(setup), store.records())
        os.kill(a.process.pid, signal.SIGCONT)
        deadline = time.monotonic() + DEADLINE
        while "was taken over" not in a.text():
            assert time.monotonic() < deadline, _logs(replicas)
            time.sleep(0.2)
        time.sleep(1.0)  # A's own clean-up, if any
        after = (_all_versions(setup), _destination_objects(setup), store.records())
    finally:
        store.storage.close()
    assert "lock was taken over by another writer" in a.text() or "lease of upload" in a.text(), a.text()
    # nothing A did after it resumed shows: every record and every object served as they were,
    # no version of anything served written or removed by A
    assert after[2] == before[2]
    assert after[1] == before[1]
    served = set(after[1])
    assert {k: v for k, v in after[0].items() if k.rsplit("/", 1)[-1] in served or k.endswith(".distributor.json")} \
        == {k: v for k, v in before[0].items() if k.rsplit("/", 1)[-1] in served or k.endswith(".distributor.json")}
    state = _check_destination(setup, _name(2))
    assert after[1]["data.txt"] == b"TWO\n" and [o["path"] for o in state["outputs"]] == ["data.txt"]


# ---------------------------------------------------------------------------- a held request


def test_a_record_write_held_past_the_admission_lease_gives_one_admission(
    tmp_path: Path, moto_serial_server: MotoServer, replicas: list[Replica],
) -> None:
    """Replica A's record write is held by the network past the admission lease (3 s) while the
    producer retries the same key at replica B: B takes the key claim over once it has seen it
    unchanged that long and admits the upload; A's record lands late, its claim cannot be settled,
    so A removes it and answers B's run as a replay. One key, one run, published once."""
    setup = write_shared_setup(tmp_path / "site", moto_serial_server, s3_destination=True, http={
        "max_concurrency": 1, "publication_lease": "2s", "admission_lease": "3s"})
    port = int(setup.moto_server.endpoint_url.rsplit(":", 1)[1])
    with FaultProxy(port) as proxy:
        doc = yaml.safe_load(setup.config_path.read_text())
        doc["server"]["http"]["staging_s3"]["endpoint"] = proxy.url
        held_config = setup.root / "replica-a.yml"
        held_config.write_text(yaml.safe_dump(doc, sort_keys=False))
        a = start_replica(replace(setup, config_path=held_config), "replica-a", "--publisher", "inline")
        b = start_replica(setup, "replica-b", "--publisher", "inline")
        replicas.extend([a, b])
        proxy.hold("PUT", rf"/{STAGING_PREFIX}/{PIPELINE}/records/", seconds=6.0)
        archive = _archive(tmp_path, 1)
        with ThreadPoolExecutor(1) as pool:
            late = pool.submit(_send, a.url, archive, _name(1))
            assert proxy.held.wait(DEADLINE), _logs(replicas)
            winner = _send(b.url, archive, _name(1))
            replay = late.result(DEADLINE)
    assert proxy.holds and replay == winner, (proxy.holds, replay, winner)
    views = _finished(b.url, [winner], replicas)
    assert views[winner]["status"] == "succeeded", (views, _logs(replicas))
    store = _store(setup)
    try:
        records = store.records()
        assert [r.run_id for r in records] == [winner]
        assert store.unfinished() == []
        assert store.key_holder("reporter", _name(1)) == winner
    finally:
        store.storage.close()
    assert setup.destination_versions(PIPELINE).get(f"{_name(1)}.txt") == 1
    _check_destination(setup, _name(1))

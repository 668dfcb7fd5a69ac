"""Three ``distributor serve --publisher dagster`` replicas on one shared S3 staging store, with a
real ``dagster-daemon`` on PostgreSQL publishing what they admit (issue 29 item 2, Dagster mode;
moto on 127.0.0.1 with authentication enforced, one request at a time so conditional writes are
atomic as on S3).

A burst of uploads spread over the replicas, one idempotency key sent to two replicas at once,
and a ``kill -9`` of one replica in the middle of it. In Dagster mode a replica only admits: the
daemon's ``uploads_reports`` sensor finds every accepted upload in the store, whichever replica
admitted it (the killed one's included), and requests the runs that publish them.

What must hold: every ``202`` ends ``succeeded``, readable from any surviving replica, with the
id of the Dagster run that published it; every record in the store (the killed replica's too)
ends ``succeeded``; the duplicate key gave one run id and one record; the Dagster publish runs
are exactly the runs the records name, all successful; and the destination (an S3 bucket with
versioning, so each write stays visible) got each upload's file written once when its report
says it was published, never when it says it skipped.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import dagster as dg
import httpx
import pytest

from distributor_core.staging.objectstore import ObjectStagingStore
from tests.peers.moto import MotoServer, make_s3_storage
from tests.production.harness import RUN_TIMEOUT, Deployment, runs_tagged, wait_finished, wait_for
from tests.server.harness import TOKEN, bundle_archive, upload
from tests.server.shared import STAGING_PREFIX, Replica, start_replicas, write_shared_setup

pytestmark = pytest.mark.dagster

PIPELINE = "reports"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
UPLOADS = 12
VICTIM = 0
#: 202s the victim answers before it is killed; the second half of the burst goes out after
VICTIM_ANSWERS = 2
#: uploads one Dagster run publishes at most
BATCH = 4
BASE = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)
WRITES = {"publish_new", "replace_takeover", "replace_older"}
SKIPS = {"skip_destination_newer", "skip_same"}


def _archive(tmp: Path, name: str, minute: int) -> bytes:
    return bundle_archive(tmp, {f"{name}.txt": f"upload {name}\n".encode()}, bundle_id=f"{PIPELINE}.{name}",
                          created=BASE + timedelta(minutes=minute))


def _send(url: str, archive: bytes, key: str) -> str | None:
    """POST, retrying what the API calls retryable; the run id of the 202, or ``None`` when the
    replica could not be reached."""
    deadline = time.monotonic() + 60
    with httpx.Client(base_url=url, timeout=60) as http:
        while time.monotonic() < deadline:
            try:
                response = upload(http, PIPELINE, archive, key=key)
            except httpx.TransportError:
                return None
            if response.status_code == 202:
                run_id: str = response.json()["run_id"]
                return run_id
            assert response.status_code in (409, 503) and response.json().get("retryable"), response.text
            time.sleep(0.05)
    raise AssertionError(f"upload {key} kept being refused as retryable")


def test_three_dagster_mode_replicas_and_a_kill_9_every_upload_published_once_by_the_daemon(
    deployment: Deployment, moto_serial_server: MotoServer, tmp_path: Path,
) -> None:
    setup = write_shared_setup(deployment.root / "site", moto_serial_server, s3_destination=True,
                               http={"queue_size": 64})
    deployment.use_config(setup.config_path, setup.environ)
    deployment.env["DISTRIBUTOR_DAGSTER_BUNDLES_PER_RUN"] = str(BATCH)  # several runs, several ticks
    storage = make_s3_storage(moto_serial_server, bucket=setup.bucket, prefix=f"{STAGING_PREFIX}/{PIPELINE}")
    store = ObjectStagingStore(storage, PIPELINE)
    names = [f"u{i:02d}" for i in range(UPLOADS)]
    archives = {name: _archive(tmp_path, name, 2 * i) for i, name in enumerate(names)}
    duplicate = "dup"
    archives[duplicate] = _archive(tmp_path, duplicate, UPLOADS - 1)  # sent after the first half
    accepted: dict[str, str] = {}
    sent_to: dict[str, int] = {}
    lock = threading.Lock()
    killed = threading.Event()
    started: list[Replica] = []
    try:
        with deployment.instance() as instance, deployment.running():
            started.extend(start_replicas(setup, [f"replica-{i}" for i in range(3)], "--publisher", "dagster",
                                          env={**deployment.env, "DAGSTER_HOME": str(deployment.home)}))
            victim = started[VICTIM]
            survivors = [r for i, r in enumerate(started) if i != VICTIM]

            def one(index: int) -> None:
                name, target = names[index], index % 3
                if index >= UPLOADS // 2:
                    killed.wait(60)
                run_id = _send(started[target].url, archives[name], name)
                with lock:
                    sent_to[name] = target
                    if run_id is not None:
                        accepted[name] = run_id

            def assassin() -> None:
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline:
                    with lock:
                        if sum(1 for n, t in sent_to.items() if t == VICTIM and n in accepted) >= VICTIM_ANSWERS:
                            break
                    time.sleep(0.01)
                victim.kill9()
                killed.set()

            killer = threading.Thread(target=assassin)
            killer.start()
            answers: list[str | None] = [None, None]
            gate = threading.Barrier(2)

            def twice(slot: int) -> None:
                killed.wait(60)
                gate.wait()
                answers[slot] = _send(survivors[slot].url, archives[duplicate], duplicate)

            pair = [threading.Thread(target=twice, args=(slot,)) for slot in (0, 1)]
            for thread in pair:
                thread.start()
            with ThreadPoolExecutor(max_workers=4) as pool:
                for future in [pool.submit(one, index) for index in range(UPLOADS)]:
                    future.result()
            for thread in pair:
                thread.join(60)
            killer.join(60)
            assert victim.process.returncode == -9

            # the clients: survivors accepted all theirs; the key sent twice is one run id
            assert {n for n, t in sent_to.items() if t != VICTIM} <= set(accepted)
            late = {names[i] for i in range(UPLOADS // 2, UPLOADS) if i % 3 == VICTIM}
            assert not late & set(accepted)
            assert answers[0] is not None and answers == [answers[0]] * 2, answers
            accepted[duplicate] = answers[0]

            # the daemon publishes everything, whichever replica admitted it
            with httpx.Client(base_url=survivors[0].url, timeout=30) as http:
                def views() -> dict[str, dict] | None:
                    found = {n: http.get(f"/runs/{r}", headers=AUTH).json() for n, r in accepted.items()}
                    return found if all(v["status"] in ("succeeded", "failed") for v in found.values()) else None

                final = wait_for(views, timeout=RUN_TIMEOUT * 2, message="every accepted upload to finish", poll=2)
            for name, view in final.items():
                assert view["status"] == "succeeded" and view.get("dagster_run_id"), (name, view)
            wait_for(lambda: not store.unfinished(), timeout=RUN_TIMEOUT, message="no upload left unfinished")
            records = store.records()
            by_key = {r.idempotency_key: r for r in records}
            assert len(by_key) == len(records) == len({r.run_id for r in records})
            assert {r.status for r in records} == {"succeeded"}, [(r.idempotency_key, r.status, r.error)
                                                                  for r in records]
            assert {n: by_key[n].run_id for n in accepted} == accepted
            assert {sent_to[n] for n in set(by_key) - set(accepted)} <= {VICTIM}  # admitted, never answered

            # the Dagster runs: exactly those the records name, each successful
            runs = runs_tagged(instance, pipeline=PIPELINE)
            finished = wait_finished(instance, [r.run_id for r in runs])
            assert {r.dagster_run_id for r in records} == {r.run_id for r in runs}
            assert {f.dagster_run.status for f in finished} == {dg.DagsterRunStatus.SUCCESS}
            assert all(r.tags["dagster/sensor_name"] == f"uploads_{PIPELINE}" for r in runs)
    finally:
        for replica in started:
            replica.stop()
        storage.close()

    # the destination's write history: each upload written once, and only when published
    versions = setup.destination_versions(PIPELINE)
    wrong = []
    for record in records:
        name = record.idempotency_key or ""
        actions = [a["action"] for a in (record.report or {}).get("actions", [])]
        assert len(actions) == 1 and actions[0] in WRITES | SKIPS, (name, actions)
        if versions.get(f"{name}.txt", 0) != (1 if actions[0] in WRITES else 0):
            wrong.append((name, actions[0], versions.get(f"{name}.txt", 0)))
    assert wrong == []
    skipped = sorted(r.idempotency_key or "" for r in records if r.report and r.report["actions"][0]["action"] in SKIPS)
    print(f"\n{len(accepted)} accepted, {len(records)} records ({len(set(by_key) - set(accepted))} unanswered), "
          f"{len(runs)} Dagster runs, skipped as older: {skipped}")
    newest = max(records, key=lambda r: str(r.manifest["created"])).idempotency_key
    assert [o["path"] for o in setup.destination_state(PIPELINE)["outputs"]] == [f"{newest}.txt"]

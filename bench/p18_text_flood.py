"""P18: a flood of manifests whose ``id`` holds a lone UTF-16 surrogate, against one ``distributor
serve`` replica on shared S3 staging (moto on 127.0.0.1, auth enforced), side by side with another
build (issue 35, item 1).

Each round starts one replica (inline publisher, one local destination) on a fresh prefix and:

1. waits ``BENCH_P18_SETTLE`` (25) seconds and counts the requests moto answers in the next 10 s:
   the idle replica before the flood;
2. sends ``BENCH_P18_BAD`` (600) requests whose ``manifest.json`` ``id`` is ``"\\ud800"``-style text
   (half with an idempotency key) from ``BENCH_P18_CLIENTS`` (8) concurrent clients, with an honest
   64 KiB upload in place of every 20th request: the answers to both (send -> status) and their
   codes, and for each honest upload the time from its ``202`` to ``succeeded`` (a watcher polls
   every accepted run every 50 ms);
3. waits for the honest uploads to be published, then ``BENCH_P18_SETTLE`` seconds, so the
   publisher's poll has backed off to its idle pace, and counts the requests moto answers in the
   next 10 s: what the idle replica costs the store after the flood (the issue measured 15 before
   the flood and 491 after it, with 600 orphan pending markers);
4. sends one more honest upload and times it to ``succeeded`` (the issue: 68.6 s instead of 1.2 s);
5. counts what the flood left in the bucket: objects under ``pending/``, ``keys/`` and ``bundles/``
   that belong to no record.

``BENCH_BEFORE`` (another build's ``distributor``, e.g. a worktree of main): every round runs for
that build too, the order alternating between rounds. ``BENCH_P18_ROUNDS`` (1).
"""

from __future__ import annotations

import io
import json
import math
import os
import secrets
import shutil
import statistics
import tarfile
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from bench import common as c
from bench.p10_upload_latency import _start_serve
from bench.p15_shared_staging import _moto_requests
from tests.peers.process import stop_process

if TYPE_CHECKING:
    from tests.peers.moto import MotoServer

BAD = int(os.environ.get("BENCH_P18_BAD", "600"))
CLIENTS = int(os.environ.get("BENCH_P18_CLIENTS", "8"))
ROUNDS = int(os.environ.get("BENCH_P18_ROUNDS", "1"))
SETTLE = float(os.environ.get("BENCH_P18_SETTLE", "25"))
WINDOW = 10.0
HONEST_EVERY = 20
SIZE = 64 * 1024
PIPELINE = "bench.flood"
TOKEN_ENV = "BENCH_UPLOAD_TOKEN"
KEY_ENV = "BENCH_STAGING_KEY_ID"
SECRET_ENV = "BENCH_STAGING_SECRET"
BEFORE = os.environ.get("BENCH_BEFORE", "")
BUILDS = ("this build",) + (("before",) if BEFORE else ())


@dataclass
class Round:
    build: str
    bad: list[float] = field(default_factory=list)
    honest: list[float] = field(default_factory=list)
    codes: dict[int, int] = field(default_factory=dict)
    #: seconds from an honest upload's 202 to succeeded, during the flood
    published: list[float] = field(default_factory=list)
    idle_before: int = 0
    idle_requests: int = 0
    published_after: float = 0.0
    leftovers: dict[str, int] = field(default_factory=dict)


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else math.nan


def _pct(values: list[float], share: float) -> float:
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


def _surrogate_archive(variant: int) -> bytes:
    from distributor_core.bundle import ManifestFile, bundle_digest, file_digest

    data = b"flood\n"
    records = [ManifestFile("data.txt", file_digest(data), len(data))]
    doc = {"schema_version": 1, "id": "@ID@", "created": "2026-01-01T00:00:00Z", "digest": bundle_digest(records),
           "files": [{"path": "data.txt", "sha256": records[0].sha256, "size": len(data)}]}
    text = json.dumps(doc).replace("@ID@", ("bench.\\ud800", "\\udfffbench", "b\\udc00\\ud800")[variant % 3])
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, body in (("manifest.json", text.encode()), ("data.txt", data)):
            info = tarfile.TarInfo(name)
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))
    return buffer.getvalue()


def _honest_archive(work: Path, index: int) -> bytes:
    from datetime import UTC, datetime, timedelta

    from distributor_core.bundle import load_manifest
    from distributor_core.upload.archive import write_archive

    root = work / "bundles" / f"h{index:04d}"
    created = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(minutes=index)
    c.make_bundle(root, [("data.bin", SIZE)], bundle_id="bench.flood", seed=index, created=created)
    buffer = io.BytesIO()
    write_archive(root, load_manifest(root), buffer)
    return buffer.getvalue()


def _config(work: Path, name: str, bucket: str, moto: MotoServer) -> Path:
    path = work / f"{name}.yml"
    path.write_text(json.dumps({
        "server": {"http": {
            "bind": "127.0.0.1:0", "queue_size": 10 * BAD, "staging_root": f"s3://{bucket}/{name}",
            "staging_s3": {"region": moto.region, "endpoint": moto.endpoint_url, "force_path_style": True,
                           "conditional_writes": "trusted",
                           "credentials": {"access_key_id_env": KEY_ENV, "secret_access_key_env": SECRET_ENV}}}},
        "upload_tokens": [{"id": "bench", "token_env": TOKEN_ENV, "allow_pipelines": [PIPELINE]}],
        "pipelines": [{
            "id": PIPELINE, "source": {"backend": "http_upload"},
            "destinations": [{"id": "www", "backend": "local", "path": str(work / f"www-{name}")}],
        }],
    }, indent=2))
    return path


def _wait_published(client, base: str, token: str, run_ids: list[str], limit: float = 600) -> float:  # type: ignore[no-untyped-def]
    started = time.perf_counter()
    for run_id in run_ids:
        while True:
            status = client.get(f"{base}/runs/{run_id}", headers={"Authorization": f"Bearer {token}"}).json()
            if status.get("status") in ("succeeded", "failed"):
                break
            if time.perf_counter() - started > limit:
                raise RuntimeError(f"upload {run_id} not published within {limit:.0f} s: {status}")
            time.sleep(0.1)
    return time.perf_counter() - started


def _round(work: Path, build: str, number: int, token: str, honest: list[bytes], bad: list[bytes],
           moto: MotoServer, bucket: str) -> Round:
    import httpx

    name = f"{'before' if build == 'before' else 'this'}-{number}"
    config = _config(work, name, bucket, moto)
    env = {**os.environ, TOKEN_ENV: token, KEY_ENV: moto.access_key_id, SECRET_ENV: moto.secret_access_key}
    binary = BEFORE if build == "before" else c.DISTRIBUTOR
    result = Round(build)
    proc, base = _start_serve(config, env, work / f"serve-{name}.log", "--publisher", "inline", binary=binary)
    lock = threading.Lock()
    local = threading.local()
    accepted: list[str] = []
    #: run id -> perf_counter of its 202, while the watcher has not seen it finished
    watching: dict[str, float] = {}
    flooding = threading.Event()
    try:
        time.sleep(SETTLE)  # started: its first listings done, the poll at its idle pace
        counted = _moto_requests(moto)
        time.sleep(WINDOW)
        result.idle_before = _moto_requests(moto) - counted

        def watch() -> None:
            with httpx.Client(timeout=60) as client:
                while flooding.is_set() or watching:
                    with lock:
                        runs = list(watching.items())
                    for run_id, since in runs:
                        view = client.get(f"{base}/runs/{run_id}", headers={"Authorization": f"Bearer {token}"})
                        if view.status_code == 200 and view.json().get("status") in ("succeeded", "failed"):
                            done = time.perf_counter()
                            with lock:
                                watching.pop(run_id, None)
                                if view.json()["status"] == "succeeded":
                                    result.published.append(done - since)
                    time.sleep(0.05)

        def one(index: int) -> None:
            client = getattr(local, "client", None)
            if client is None:
                client = local.client = httpx.Client(timeout=300)
            is_honest = index % HONEST_EVERY == HONEST_EVERY - 1
            body = honest[index // HONEST_EVERY] if is_honest else bad[index % len(bad)]
            headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/gzip"}
            if is_honest or index % 2:
                headers["Idempotency-Key"] = f"k{index}-{secrets.token_hex(4)}"
            begin = time.perf_counter()
            response = client.post(f"{base}/v1/pipelines/{PIPELINE}/upload", content=body, headers=headers)
            end = time.perf_counter()
            with lock:
                (result.honest if is_honest else result.bad).append(end - begin)
                result.codes[response.status_code] = result.codes.get(response.status_code, 0) + 1
                if is_honest and response.status_code == 202:
                    accepted.append(response.json()["run_id"])
                    watching[response.json()["run_id"]] = end

        total = BAD + BAD // (HONEST_EVERY - 1)
        flooding.set()
        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        try:
            with ThreadPoolExecutor(max_workers=CLIENTS) as pool:
                for future in [pool.submit(one, i) for i in range(total)]:
                    future.result()
        finally:
            flooding.clear()
        watcher.join(600)
        with httpx.Client(timeout=60) as client:
            _wait_published(client, base, token, accepted)
            time.sleep(SETTLE)  # the publisher's poll backs off to its idle pace
            counted = _moto_requests(moto)
            time.sleep(WINDOW)
            result.idle_requests = _moto_requests(moto) - counted
            headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/gzip"}
            begin = time.perf_counter()
            answer = client.post(f"{base}/v1/pipelines/{PIPELINE}/upload", content=honest[-1], headers=headers)
            if answer.status_code != 202:
                raise RuntimeError(f"the upload after the flood was refused: {answer.status_code} {answer.text}")
            _wait_published(client, base, token, [answer.json()["run_id"]])
            result.published_after = time.perf_counter() - begin
    finally:
        stop_process(proc)
    result.leftovers = _leftovers(moto, bucket, f"{name}/{PIPELINE}/")
    return result


def _leftovers(moto: MotoServer, bucket: str, prefix: str) -> dict[str, int]:
    """Objects under ``pending/``, ``keys/`` and ``bundles/`` of no record (the run ids the
    records name, the key claims a record's key hashes to)."""
    from distributor_core.staging import key_sha256

    client = moto.client()
    try:
        keys = [item["Key"].removeprefix(prefix) for page in client.get_paginator("list_objects_v2").paginate(
            Bucket=bucket, Prefix=prefix) for item in page.get("Contents", [])]
        runs, claims = set(), set()
        for key in keys:
            if key.startswith("records/"):
                record = json.loads(client.get_object(Bucket=bucket, Key=prefix + key)["Body"].read())
                runs.add(record["run_id"])
                if record.get("idempotency_key"):
                    claims.add(f"keys/{record['token_id']}/{key_sha256(record['idempotency_key'])}")
    finally:
        client.close()
    found = {"pending": 0, "keys": 0, "bundles": 0}
    for key in keys:
        area = key.split("/", 1)[0]
        if area == "pending" and key.split("/", 1)[1].partition(".")[2] not in runs:
            found["pending"] += 1
        elif area == "keys" and key not in claims:
            found["keys"] += 1
        elif area == "bundles" and key.split("/")[1] not in runs:
            found["bundles"] += 1
    return found


def main() -> c.Report:
    from tests.peers.moto import start_moto

    work = c.workdir("p18")
    moto_dir = Path(tempfile.mkdtemp(prefix="distributor-bench-moto-"))
    moto_proc = None
    try:
        token = secrets.token_urlsafe(24)
        honest = [_honest_archive(work, i) for i in range(BAD // (HONEST_EVERY - 1) + 2)]
        bad = [_surrogate_archive(i) for i in range(3)]
        moto, moto_proc = start_moto(moto_dir)
        bucket = moto.create_bucket(f"bench-{secrets.token_hex(4)}")
        quiet = c.wait_for_quiet()
        load_before = c.loadavg()
        rounds: dict[str, list[Round]] = {build: [] for build in BUILDS}
        for number in range(ROUNDS):
            for build in BUILDS if number % 2 == 0 else tuple(reversed(BUILDS)):
                rounds[build].append(_round(work, build, number, token, honest, bad, moto, bucket))
        mine = rounds["this build"][0]
        theirs = rounds["before"][0] if BEFORE else None
        report = c.Report("P18", f"{BAD} requests with a lone-surrogate manifest id and an honest upload every "
                                 f"{HONEST_EVERY}th, {CLIENTS} concurrent clients, one serve replica on S3 staging "
                                 "(moto)")
        peer = "before" if theirs else ""

        def add(metric: str, ours: float, before: float | None, unit: str) -> None:
            report.add(metric, ours, before, unit, "(reference)", None, peer)

        add("idle replica: S3 requests in 10 s before the flood", mine.idle_before,
            theirs.idle_before if theirs else None, "")
        add("idle replica: S3 requests in 10 s after the flood", mine.idle_requests,
            theirs.idle_requests if theirs else None, "")
        add("honest upload after the flood: seconds to succeeded", mine.published_after,
            theirs.published_after if theirs else None, "s")
        add("honest admission under the flood: p50 to 202", statistics.median(mine.honest),
            statistics.median(theirs.honest) if theirs else None, "s")
        add("honest admission under the flood: p99 to 202", _pct(mine.honest, 0.99),
            _pct(theirs.honest, 0.99) if theirs else None, "s")
        add("honest upload during the flood: p50 202 -> succeeded", _median(mine.published),
            _median(theirs.published) if theirs else None, "s")
        add("honest upload during the flood: p99 202 -> succeeded", _pct(mine.published, 0.99),
            _pct(theirs.published, 0.99) if theirs and theirs.published else None, "s")
        add("surrogate requests: p50 to the answer", statistics.median(mine.bad),
            statistics.median(theirs.bad) if theirs else None, "s")
        add("surrogate requests: p99 to the answer", _pct(mine.bad, 0.99),
            _pct(theirs.bad, 0.99) if theirs else None, "s")
        add("objects left by the flood (pending, keys, bundles of no record)", sum(mine.leftovers.values()),
            sum(theirs.leftovers.values()) if theirs else None, "")
        ok = mine.codes.get(500, 0) == 0 and sum(mine.leftovers.values()) == 0
        report.add("no 500 and nothing left behind (1 = yes)", float(ok), None, "", "1", ok)
        for build, found in rounds.items():
            report.notes.append(f"{build}: " + "; ".join(
                f"round {i}: answers {dict(sorted(r.codes.items()))}, honest p50 {statistics.median(r.honest):.3f} s "
                f"p99 {_pct(r.honest, 0.99):.3f} s, surrogate p50 {statistics.median(r.bad):.3f} s "
                f"p99 {_pct(r.bad, 0.99):.3f} s, honest published during the flood {len(r.published)} "
                f"(p50 {_median(r.published):.2f} s), idle {r.idle_before} S3 requests/10 s before the flood and "
                f"{r.idle_requests} after, next upload published "
                f"in {r.published_after:.1f} s, left {r.leftovers}" for i, r in enumerate(found)))
        report.notes.append(quiet)
        report.notes.append(f"load average before: {load_before}; at the end: {c.loadavg()}")
        c.save(report)
        return report
    finally:
        if moto_proc is not None:
            stop_process(moto_proc)
        shutil.rmtree(moto_dir, ignore_errors=True)
        c.cleanup(work)


if __name__ == "__main__":
    main()

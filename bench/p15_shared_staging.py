"""P15: uploads to ``distributor serve`` on shared S3 staging, 1 and 3 replicas, side by side with
one replica on local staging (issue 29).

Three modes in one run, each on a fresh staging area, alternating their order between rounds:

- local: one ``serve`` on a local ``staging_root`` (today's single-node server, fsync'd records);
- s3 x1: one ``serve`` on ``staging_root: s3://<bucket>/<prefix>`` (moto on 127.0.0.1, auth
  enforced);
- s3 x3: three ``serve`` replicas on the same ``s3://`` root, requests spread round robin over
  them (what a load balancer does).

Each round sends ``BENCH_P15_UPLOADS`` distinct 64 KiB uploads (each with its own idempotency key)
from ``BENCH_P15_CLIENTS`` concurrent clients and measures, per request, send -> ``202`` (the
upload received, extracted, validated, and admitted: the record fsync'd locally, or the key
entry, bundle objects, marker and record written to the bucket), and the throughput: uploads
admitted per second of wall time. The servers run ``--publisher dagster`` with no daemon, so
they only admit: nothing publishes in the background and the figures are the upload path alone.

moto is the peer's stand-in for S3 and is not S3: it answers from one Python process on this
machine (about 120-270 PUT/s, shared/notes/test-peers.md), so the S3 figures are bounded by moto
and by the same two cores the replicas share; here moto serves requests concurrently (the
benchmark races no idempotency key, so the serialised moto the tests use for atomic conditional
writes is not needed). Every request must be answered ``202``; the records found in the store
afterwards must be exactly the uploads sent.

Target: none set by the issue (reference figures). Knobs: ``BENCH_P15_UPLOADS`` (default 150),
``BENCH_P15_CLIENTS`` (default 8), ``BENCH_P15_ROUNDS`` (default 2; the best round of each mode is
the headline, every round is in the notes), ``BENCH_P15_DELAY_MS`` (default 0: a one-way delay
between the servers and moto through ``bench/latency_proxy.py``, as P8 uses, to stand for the
round trip to a real S3 region). ``BENCH_BEFORE`` (another build's ``distributor``): every mode
is measured for that build too, in the same rounds, as ``before: <mode>``.
"""

from __future__ import annotations

import io
import json
import math
import os
import secrets
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from bench import common as c
from bench.p10_upload_latency import _start_serve
from tests.peers.process import stop_process

if TYPE_CHECKING:
    from tests.peers.moto import MotoServer

UPLOADS = int(os.environ.get("BENCH_P15_UPLOADS", "150"))
CLIENTS = int(os.environ.get("BENCH_P15_CLIENTS", "8"))
ROUNDS = int(os.environ.get("BENCH_P15_ROUNDS", "2"))
#: one-way delay added between the servers and moto (bench/latency_proxy.py), 0: none
DELAY_MS = float(os.environ.get("BENCH_P15_DELAY_MS", "0"))
SIZE = 64 * 1024
PIPELINE = "bench.shared"
TOKEN_ENV = "BENCH_UPLOAD_TOKEN"
KEY_ENV = "BENCH_STAGING_KEY_ID"
SECRET_ENV = "BENCH_STAGING_SECRET"
#: another build's ``distributor``, measured in the same rounds (its modes named ``before: <mode>``)
BEFORE = os.environ.get("BENCH_BEFORE", "")
MODES = ("local", "s3 x1", "s3 x3") + (("before: local", "before: s3 x1", "before: s3 x3") if BEFORE else ())


@dataclass
class Round:
    mode: str
    latencies: list[float]
    seconds: float
    records: int
    #: requests moto answered during the burst (its access log), for the S3 modes
    requests: int = 0

    @property
    def p50(self) -> float:
        return statistics.median(self.latencies)

    @property
    def p99(self) -> float:
        ordered = sorted(self.latencies)
        return ordered[max(0, math.ceil(0.99 * len(ordered)) - 1)]

    @property
    def throughput(self) -> float:
        return len(self.latencies) / self.seconds


def _archive(work: Path, index: int) -> bytes:
    from datetime import UTC, datetime, timedelta

    from distributor_core.bundle import load_manifest
    from distributor_core.upload.archive import write_archive

    root = work / "bundles" / f"b{index:04d}"
    created = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(minutes=index)
    c.make_bundle(root, [("data.bin", SIZE)], bundle_id="bench.shared", seed=index, created=created)
    buffer = io.BytesIO()
    write_archive(root, load_manifest(root), buffer)
    return buffer.getvalue()


def _config(work: Path, name: str, staging: dict[str, object]) -> Path:
    path = work / f"{name}.yml"
    path.write_text(json.dumps({
        "server": {"http": {"bind": "127.0.0.1:0", "queue_size": 10 * UPLOADS, **staging}},
        "upload_tokens": [{"id": "bench", "token_env": TOKEN_ENV, "allow_pipelines": [PIPELINE]}],
        "pipelines": [{
            "id": PIPELINE,
            "source": {"backend": "http_upload"},
            "destinations": [{"id": "www", "backend": "local", "path": str(work / f"www-{name}")}],
        }],
    }, indent=2))
    return path


def _burst(bases: list[str], token: str, archives: list[bytes]) -> tuple[list[float], float]:
    """Every archive POSTed once, ``CLIENTS`` at a time, round robin over ``bases``: the
    latencies (send -> 202) and the wall time of the whole burst."""
    import httpx

    local = threading.local()
    latencies: list[float] = []
    lock = threading.Lock()

    def one(index: int) -> None:
        client = getattr(local, "client", None)
        if client is None:
            client = local.client = httpx.Client(timeout=120)
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/gzip",
                   "Idempotency-Key": f"k{index}-{secrets.token_hex(4)}"}
        begin = time.perf_counter()
        response = client.post(f"{bases[index % len(bases)]}/v1/pipelines/{PIPELINE}/upload",
                               content=archives[index], headers=headers)
        elapsed = time.perf_counter() - begin
        if response.status_code != 202:
            raise RuntimeError(f"upload {index} refused: {response.status_code} {response.text}")
        with lock:
            latencies.append(elapsed)

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=CLIENTS) as pool:
        for future in [pool.submit(one, i) for i in range(len(archives))]:
            future.result()
    return latencies, time.perf_counter() - started


def _round(work: Path, mode: str, number: int, token: str, archives: list[bytes], moto: MotoServer,
           bucket: str, endpoint: str) -> Round:
    from distributor_core import staging as sg
    from distributor_core.config import load_config

    name = f"{mode.replace(' ', '').replace(':', '')}-{number}"
    binary, mode = (BEFORE, mode.removeprefix("before: ")) if mode.startswith("before: ") else (c.DISTRIBUTOR, mode)
    if mode == "local":
        staging_root = work / f"staging-{name}"
        staging_root.mkdir(mode=0o700)
        staging: dict[str, object] = {"staging_root": str(staging_root)}
    else:
        staging = {"staging_root": f"s3://{bucket}/{name}", "staging_s3": {
            "region": moto.region, "endpoint": endpoint, "force_path_style": True,
            "conditional_writes": "trusted",
            "credentials": {"access_key_id_env": KEY_ENV, "secret_access_key_env": SECRET_ENV}}}
    config = _config(work, name, staging)
    env = {**os.environ, TOKEN_ENV: token, KEY_ENV: moto.access_key_id, SECRET_ENV: moto.secret_access_key}
    replicas = 3 if mode == "s3 x3" else 1
    procs: list[subprocess.Popen[bytes]] = []
    try:
        bases = []
        for index in range(replicas):
            proc, base = _start_serve(config, env, work / f"serve-{name}-{index}.log", "--publisher", "dagster",
                                      binary=binary)
            procs.append(proc)
            bases.append(base)
        logged = _moto_requests(moto)
        latencies, seconds = _burst(bases, token, archives)
        requests = _moto_requests(moto) - logged
    finally:
        for proc in procs:
            stop_process(proc)
    if mode == "local":
        records = len(sg.list_records(load_config(config).pipeline(PIPELINE).source.staging_path))  # type: ignore[union-attr]
    else:
        client = moto.client()
        try:
            paginator = client.get_paginator("list_objects_v2")
            records = sum(len(page.get("Contents", []))
                          for page in paginator.paginate(Bucket=bucket, Prefix=f"{name}/{PIPELINE}/records/"))
        finally:
            client.close()
    return Round(mode, latencies, seconds, records, requests if mode != "local" else 0)


def _moto_requests(moto: MotoServer) -> int:
    """Requests moto has answered so far (one access-log line each)."""
    return sum(1 for line in moto.log_text().splitlines() if " HTTP/1.1" in line and "/moto-api/" not in line)


def _moto_ceiling(moto: MotoServer, bucket: str, count: int = 400) -> float:
    """PUTs of 1 KiB per second that moto answers to ``CLIENTS`` threads of plain boto3: the
    ceiling of the S3 stand-in on this machine, measured in the same run."""
    client = moto.client()
    body = os.urandom(1024)
    try:
        started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=CLIENTS) as pool:
            for future in [pool.submit(client.put_object, Bucket=bucket, Key=f"ceiling/{i}", Body=body)
                           for i in range(count)]:
                future.result()
        return count / (time.perf_counter() - started)
    finally:
        client.close()


def main() -> c.Report:
    from tests.peers.moto import start_moto

    work = c.workdir("p15")
    moto_dir = Path(tempfile.mkdtemp(prefix="distributor-bench-moto-"))
    moto_proc = proxy_proc = None
    try:
        token = secrets.token_urlsafe(24)
        archives = [_archive(work, i) for i in range(UPLOADS)]
        moto, moto_proc = start_moto(moto_dir)
        bucket = moto.create_bucket(f"bench-{secrets.token_hex(4)}")
        endpoint = moto.endpoint_url
        if DELAY_MS > 0:
            from bench.p8_s3_parallel import start_proxy

            endpoint, proxy_proc = start_proxy(moto.endpoint_url, DELAY_MS)
        quiet = c.wait_for_quiet()
        load_before = c.loadavg()
        rounds: dict[str, list[Round]] = {mode: [] for mode in MODES}
        for number in range(ROUNDS):
            order = MODES if number % 2 == 0 else tuple(reversed(MODES))
            for mode in order:
                rounds[mode].append(_round(work, mode, number, token, archives, moto, bucket, endpoint))
        ceiling = _moto_ceiling(moto, bucket)
        best = {mode: min(found, key=lambda r: r.p99) for mode, found in rounds.items()}
        fastest = {mode: max(found, key=lambda r: r.throughput) for mode, found in rounds.items()}
        local = best["local"]

        link = f", {2 * DELAY_MS:g} ms round trip to moto" if DELAY_MS > 0 else ""
        report = c.Report("P15", f"{UPLOADS} uploads of {SIZE // 1024} KiB, {CLIENTS} concurrent clients: "
                                 f"serve on S3 staging (moto{link}), 1 and 3 replicas, vs 1 replica on local staging")
        for mode in ("local", "s3 x1", "s3 x3") if BEFORE else ():
            before = best[f"before: {mode}"]
            report.add(f"upload p50 to 202, {mode}, this build vs before", best[mode].p50, before.p50, "s",
                       "<= 1.2x" if mode == "local" else "(reference)",
                       best[mode].p50 <= 1.2 * before.p50 if mode == "local" else None, "before")
            report.add(f"upload p99 to 202, {mode}, this build vs before", best[mode].p99, before.p99, "s",
                       "<= 1.2x" if mode == "local" else "(reference)",
                       best[mode].p99 <= 1.2 * before.p99 if mode == "local" else None, "before")
            if mode != "local":
                mine, theirs = (min(r.requests / len(r.latencies) for r in rounds[m])
                                for m in (mode, f"before: {mode}"))
                report.add(f"S3 requests per upload, {mode}, this build vs before", mine, theirs, "", "(reference)",
                           None, "before")
        for mode in ("s3 x1", "s3 x3"):
            report.add(f"upload p99 to 202, {mode}", best[mode].p99, local.p99, "s", "(reference)", None,
                       "local staging, 1 replica")
            report.add(f"upload p50 to 202, {mode}", best[mode].p50, local.p50, "s", "(reference)", None,
                       "local staging, 1 replica")
            report.add(f"uploads admitted per second, {mode}", fastest[mode].throughput,
                       fastest["local"].throughput, "/s", "(reference)", None, "local staging, 1 replica")
        exact = all(r.records == UPLOADS for found in rounds.values() for r in found)
        report.add("every upload 202 and one record each (1 = yes)", float(exact), None, "", "1", exact)
        for mode, found in rounds.items():
            report.notes.append(f"{mode}: " + "; ".join(
                f"round {i}: p50 {r.p50 * 1000:.0f} ms, p99 {r.p99 * 1000:.0f} ms, {r.throughput:.1f}/s, "
                f"{r.records} records" + (f", {r.requests / len(r.latencies):.1f} S3 requests per upload"
                                          if r.requests else "") for i, r in enumerate(found)))
        report.notes.append(f"moto's ceiling here: {ceiling:.0f} PUT/s of 1 KiB from {CLIENTS} boto3 threads")
        report.notes.append(quiet)
        report.notes.append(f"load average before: {load_before}; at the end: {c.loadavg()}")
        c.save(report)
        return report
    finally:
        if proxy_proc is not None:
            stop_process(proxy_proc)
        if moto_proc is not None:
            stop_process(moto_proc)
        shutil.rmtree(moto_dir, ignore_errors=True)
        c.cleanup(work)


if __name__ == "__main__":
    main()

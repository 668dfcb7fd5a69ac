"""P6: 50 concurrent 1 MiB uploads to ``distributor serve`` on 127.0.0.1.

Ours: ``distributor serve`` (inline publisher, one http_upload pipeline publishing to a local
directory, ``queue_size: 64`` so that 50 uploads in flight fit the queue) receives 50 different
bundles (a 1 MiB file each, gzip tar as the producer client sends them) from 50 threads released
at once. Admission latency is the time from sending the request to the ``202 Accepted``
(archive streamed to disk, extracted, validated, recorded durably). Then every run is polled to
``succeeded``. Peer: ``rclone serve webdav`` on 127.0.0.1 receiving the same 50 archives as
plain ``PUT`` requests from 50 threads. Both servers run side by side; ``BENCH_REPEAT`` bursts
each, alternating which goes first; the figures are the medians over the bursts, each burst's
are in the notes.

Target (issue 17): all 50 accepted, p99 admission <= 3x rclone's p99 and < 2 s.
"""

from __future__ import annotations

import io
import json
import math
import os
import secrets
import signal
import subprocess
import threading
import time
from pathlib import Path

from bench import common as c
from bench.p6_serve_process import DISTRIBUTOR
from tests.peers.process import free_port

UPLOADS = 50
SIZE = 1024 * 1024
TOKEN_ENV = "BENCH_UPLOAD_TOKEN"


def _archives(work: Path) -> list[bytes]:
    from datetime import UTC, datetime, timedelta

    from distributor_core.bundle import load_manifest
    from distributor_core.upload.archive import write_archive

    archives = []
    start = datetime.now(UTC).replace(microsecond=0)
    for index in range(UPLOADS):
        root = work / "bundles" / f"u{index:02d}"
        created = start + timedelta(seconds=index)  # distinct: later uploads replace earlier ones
        c.make_bundle(
            root, [("data.bin", SIZE)], bundle_id=f"bench.upload.{index:02d}", seed=100 + index, created=created
        )
        buffer = io.BytesIO()
        write_archive(root, load_manifest(root), buffer)
        archives.append(buffer.getvalue())
    return archives


def _wait_http(url: str, proc: subprocess.Popen, timeout: float = 30.0) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args} exited {proc.returncode}")
        try:
            httpx.get(url, timeout=1.0)
            return
        except httpx.HTTPError:
            time.sleep(0.05)
    raise RuntimeError(f"{url} did not answer within {timeout} s")


def _burst(send) -> tuple[list[float], list[object]]:
    """Call ``send(i)`` from UPLOADS threads released together; latencies and results.

    Dirty pages of earlier bursts (rclone's uploads and our publications are written without
    fsync) are flushed first, so that the fsyncs of our admissions do not wait for their
    writeback depending on which server went before."""
    os.sync()
    barrier = threading.Barrier(UPLOADS)
    latencies: list[float] = [math.inf] * UPLOADS
    results: list[object] = [None] * UPLOADS

    def worker(index: int) -> None:
        barrier.wait()
        started = time.perf_counter()
        try:
            results[index] = send(index)
        except Exception as exc:  # recorded, reported as not accepted
            results[index] = exc
        latencies[index] = time.perf_counter() - started

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(UPLOADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return latencies, results


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(0.99 * len(ordered)) - 1)]


def _start_rclone(work: Path) -> tuple[subprocess.Popen, str]:
    peer_port = free_port()
    (work / "webdav").mkdir()
    peer = subprocess.Popen(
        [c.RCLONE, "--config", "/dev/null", "serve", "webdav", "--addr", f"127.0.0.1:{peer_port}",
         str(work / "webdav")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    peer_base = f"http://127.0.0.1:{peer_port}"
    _wait_http(peer_base + "/", peer)
    return peer, peer_base


def main() -> c.Report:
    import httpx

    work = c.workdir("p6")
    server = peer = None
    try:
        archives = _archives(work)
        token = secrets.token_urlsafe(24)
        port = free_port()
        config = work / "distributor.yml"
        config.write_text(
            json.dumps(
                {
                    "server": {
                        "http": {
                            "bind": f"127.0.0.1:{port}",
                            "staging_root": str(work / "staging"),
                            "queue_size": 64,
                            "max_upload_size": "4MB",
                        }
                    },
                    "upload_tokens": [{"id": "bench", "token_env": TOKEN_ENV, "allow_pipelines": ["bench.uploads"]}],
                    "pipelines": [
                        {
                            "id": "bench.uploads",
                            "source": {"backend": "http_upload"},
                            "destinations": [{"id": "local", "backend": "local", "path": str(work / "published")}],
                        }
                    ],
                },
                indent=2,
            )
        )
        (work / "staging").mkdir(mode=0o700)
        server = subprocess.Popen(
            [DISTRIBUTOR, "serve", "--config", str(config)],
            env={**os.environ, TOKEN_ENV: token},
            stdout=subprocess.DEVNULL,
            stderr=open(work / "serve.log", "wb"),  # noqa: SIM115 - closed with the process
        )
        base = f"http://127.0.0.1:{port}"
        _wait_http(f"{base}/healthz", server)
        # peer: rclone serve webdav receiving the same bytes as plain PUTs
        peer, peer_base = _start_rclone(work)
        quiet = c.wait_for_quiet()

        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/gzip"}

        def new_client() -> httpx.Client:
            # a fresh client (new connections) per burst: a connection kept alive since the last
            # burst may be closed by the server's keep-alive timeout just as it is reused
            return httpx.Client(timeout=60.0, limits=httpx.Limits(max_connections=UPLOADS + 5))

        def ours() -> tuple[list[float], list[object], dict[str, str], float]:
            client = new_client()
            started = time.perf_counter()
            latencies, responses = _burst(
                lambda i: client.post(f"{base}/v1/pipelines/bench.uploads/upload", content=archives[i], headers=headers)
            )
            accepted = [r for r in responses if isinstance(r, httpx.Response) and r.status_code == 202]
            pending = {r.json()["run_id"] for r in accepted}
            deadline = time.monotonic() + 300
            statuses: dict[str, str] = {}
            while pending and time.monotonic() < deadline:  # the next burst starts on an idle server
                for run_id in list(pending):
                    body = client.get(f"{base}/runs/{run_id}", headers={"Authorization": f"Bearer {token}"}).json()
                    statuses[run_id] = body.get("status", "?")
                    if body.get("status") in ("succeeded", "failed"):
                        pending.discard(run_id)
                time.sleep(0.2)
            client.close()
            return latencies, responses, statuses, time.perf_counter() - started

        def theirs() -> tuple[list[float], list[object]]:
            with new_client() as peer_client:
                return _burst(lambda i: peer_client.put(f"{peer_base}/u{i:02d}.tar.gz", content=archives[i]))

        # REPEAT bursts each, alternating which server goes first (the machine may be shared)
        rounds: list[dict] = []
        for round_ in range(c.REPEAT):
            result: dict = {"load": c.loadavg()}
            for side in (("ours", "peer") if round_ % 2 == 0 else ("peer", "ours")):
                if side == "ours":
                    result["ours"] = ours()
                else:
                    result["peer"] = theirs()
            rounds.append(result)
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=60)
        server = None

        p99s = [_p99(r["ours"][0]) for r in rounds]
        peer_p99s = [_p99(r["peer"][0]) for r in rounds]
        medians = [c.med(r["ours"][0]) for r in rounds]
        peer_medians = [c.med(r["peer"][0]) for r in rounds]
        accepted = min(sum(1 for x in r["ours"][1] if isinstance(x, httpx.Response) and x.status_code == 202)
                       for r in rounds)
        peer_ok = min(sum(1 for x in r["peer"][1] if isinstance(x, httpx.Response) and x.status_code in (200, 201, 204))
                      for r in rounds)
        succeeded = min(sum(1 for s in r["ours"][2].values() if s == "succeeded") for r in rounds)
        p99, peer_p99 = c.med(p99s), c.med(peer_p99s)
        report = c.Report("P6", f"{UPLOADS} concurrent 1 MiB uploads to distributor serve on 127.0.0.1")
        report.add(
            "accepted (202), fewest of a burst",
            accepted,
            peer_ok,
            "uploads",
            f"all {UPLOADS}",
            accepted == UPLOADS,
            "rclone webdav PUT",
        )
        report.add(
            "p99 admission latency (median of bursts)",
            p99,
            peer_p99,
            "s",
            "<= 3x rclone, < 2 s",
            p99 <= 3 * peer_p99 and p99 < 2.0,
            "rclone webdav PUT",
        )
        report.add(
            "median admission latency (median of bursts)",
            c.med(medians),
            c.med(peer_medians),
            "s",
            "(reference)",
            None,
            "rclone webdav PUT",
        )
        report.add("runs succeeded, fewest of a burst", succeeded, None, "runs", "(reference)", None)
        for index, r in enumerate(rounds):
            outcome = {s: sum(1 for v in r["ours"][2].values() if v == s) for s in sorted(set(r["ours"][2].values()))}
            report.notes.append(
                f"burst {index + 1} (load {r['load']}): p99 {p99s[index]:.3f} s vs {peer_p99s[index]:.3f} s "
                f"({p99s[index] / peer_p99s[index]:.2f}x), median {medians[index]:.3f} s vs "
                f"{peer_medians[index]:.3f} s; "
                f"run statuses {outcome} {r['ours'][3]:.1f} s after the burst started"
            )
        report.notes.append(
            "uploads land on one destination bundle path: an upload admitted after a newer one is skipped or "
            "conflicts, see docs/config.md"
        )
        codes = sorted({str(getattr(x, "status_code", type(x).__name__)) for r in rounds for x in r["ours"][1]})
        report.notes.append(f"response codes: {codes}")
        report.notes.append(quiet)
        c.save(report)
        return report
    finally:
        for proc in (server, peer):
            if proc is not None and proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
        c.cleanup(work)


if __name__ == "__main__":
    main()

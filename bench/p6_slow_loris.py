"""P6L: 34 honest uploads from two tokens while a third token's slow loris and 150 half-sent
request heads hold connections to ``distributor serve`` (issue 14, findings 5 and 7).

Ours: a fresh ``distributor serve`` (inline publisher, three ``http_upload`` pipelines, one token
each, ``queue_size: 16``, ``max_concurrency: 2``, every other server knob at its default) on
127.0.0.1. First 16 slow-loris uploads of the ``loris`` token (heads complete, a 1 MB
``Content-Length``, then one body byte every 2 s: the issue's shape) and 150 connections that send
half a request head and nothing more; then 34 honest uploads (256 KiB bundles, the real
``UploadClient`` with 40 attempts, 0.1-0.5 s back-off) of the ``beta`` and ``gamma`` tokens, all
released at once. Admission latency is the time from starting the upload to its ``202``. Peer: the
same 34 honest uploads against a fresh server with nobody else connected.

Figures: honest uploads admitted (target: all 34, p99 admission < 30 s, while the loris still
holds its share); half-sent heads the server still holds 15 s later (target 0: the
``header_timeout`` of 10 s); loris connections the server ended within 120 s (target 16: 8 refused
by the per-token share, 8 cut by ``body_min_rate`` once ``body_idle_timeout`` has passed); the
server's peak RSS over idle and its CPU time for the whole run.

``BENCH_DISTRIBUTOR`` runs another build's ``distributor`` (e.g. a checkout of an older commit) so
the same load can be measured before and after; the config uses only knobs that build knows.
"""

from __future__ import annotations

import math
import secrets
import socket
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench import common as c
from bench.p6_serve_process import DISTRIBUTOR, ServeProcess, proc_cpu, proc_mib, reset_peak
from tests.peers.process import free_port

HONEST = 34
LORIS = 16
HEADS = 150
SIZE = 256 * 1024
TOKENS = {"loris": "BENCH_TOKEN_LORIS", "beta": "BENCH_TOKEN_BETA", "gamma": "BENCH_TOKEN_GAMMA"}


def _server(work: Path) -> ServeProcess:
    """``serve`` (inline publisher) with three pipelines, one token each."""
    tokens = {name: secrets.token_urlsafe(24) for name in TOKENS}
    (work / "staging").mkdir(parents=True, mode=0o700)
    config = {
        "server": {"http": {"bind": f"127.0.0.1:{free_port()}", "staging_root": str(work / "staging"),
                            "queue_size": 16, "max_concurrency": 2}},
        "upload_tokens": [{"id": f"{name}-token", "token_env": env, "allow_pipelines": [name]}
                          for name, env in TOKENS.items()],
        "pipelines": [{"id": name, "source": {"backend": "http_upload"},
                       "destinations": [{"id": "local", "backend": "local", "path": str(work / "out" / name)}]}
                      for name in TOKENS],
    }
    server = ServeProcess(work, config, {TOKENS[name]: value for name, value in tokens.items()})
    server.secrets = tokens  # type: ignore[attr-defined]
    return server


class _Loris:
    """One upload whose body arrives a byte every ``every`` seconds until the server answers."""

    def __init__(self, server: ServeProcess) -> None:
        self.sock = socket.create_connection(("127.0.0.1", server.port))
        self.sock.sendall(
            f"POST /v1/pipelines/loris/upload HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {server.secrets['loris']}"
            f"\r\nContent-Type: application/gzip\r\nContent-Length: 1000000\r\n\r\n".encode())
        self.answer = b""
        self.ended_at: float | None = None

    def run(self, every: float, stop: threading.Event, begin: float) -> None:
        self.sock.settimeout(every)
        while not stop.is_set():
            try:
                data = self.sock.recv(65536)
            except TimeoutError:
                data = None
            except OSError:
                data = b""
            if data is not None:
                self.answer += data
                if not data or b"\r\n\r\n" in self.answer:
                    self.ended_at = time.monotonic() - begin
                    break
            try:
                self.sock.sendall(b"\0")
            except OSError:
                self.ended_at = time.monotonic() - begin
                break
        self.sock.close()

    @property
    def status(self) -> str:
        line = self.answer.split(b"\r\n", 1)[0].split()
        return line[1].decode() if len(line) > 1 else ("closed" if self.ended_at is not None else "held")


def _half_heads(server: ServeProcess) -> list[socket.socket]:
    heads = []
    for _ in range(HEADS):
        sock = socket.create_connection(("127.0.0.1", server.port))
        sock.sendall(b"POST /v1/pipelines/beta/upload HTTP/1.1\r\nHost: x\r\n")
        sock.setblocking(False)
        heads.append(sock)
    return heads


def _still_open(heads: list[socket.socket]) -> int:
    open_count = 0
    for sock in heads:
        try:
            data = sock.recv(65536)
        except BlockingIOError:
            open_count += 1
            continue
        except OSError:
            continue
        if data and b"\r\n\r\n" not in data:
            open_count += 1
    return open_count


def _bundles(work: Path) -> list[Path]:
    roots = []
    start = datetime.now(UTC).replace(microsecond=0)
    for index in range(HONEST):
        root = work / "bundles" / f"h{index:02d}"
        c.make_bundle(root, [("data.bin", SIZE)], bundle_id=f"bench.honest.{index:02d}", seed=500 + index,
                      created=start + timedelta(seconds=index))
        roots.append(root)
    return roots


def _honest(server: ServeProcess, roots: list[Path], begin: float) -> tuple[list[float], list[int], list[str]]:
    import httpx

    from distributor_core.upload import RetryOptions, UploadClient

    latencies = [math.inf] * HONEST
    attempts = [0] * HONEST
    outcomes = ["?"] * HONEST
    barrier = threading.Barrier(HONEST)

    def one(index: int) -> None:
        name = "beta" if index % 2 else "gamma"

        def hook(_: httpx.Request) -> None:
            attempts[index] += 1

        barrier.wait()
        started = time.monotonic()
        try:
            with httpx.Client(timeout=60, event_hooks={"request": [hook]}) as transport, \
                    UploadClient(server.base, server.secrets[name], http_client=transport,
                                 retry=RetryOptions(max_attempts=40, base_delay=0.1, max_delay=0.5)) as client:
                client.upload_bundle(pipeline_id=name, root=roots[index], idempotency_key=f"honest-{index}")
            latencies[index] = time.monotonic() - started
            outcomes[index] = "admitted"
        except Exception as exc:  # reported: not admitted
            outcomes[index] = type(exc).__name__ + ": " + str(exc)[:80]

    threads = [threading.Thread(target=one, args=(i,)) for i in range(HONEST)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    return latencies, attempts, outcomes


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(0.99 * len(ordered)) - 1)]


def main() -> c.Report:
    work = c.workdir("p6l")
    report = c.Report("P6L", f"{HONEST} honest uploads of two tokens beside a third token's slow loris "
                             f"({LORIS} connections) and {HEADS} half-sent heads")
    try:
        roots = _bundles(work)
        quiet = c.wait_for_quiet()

        # peer: the same honest uploads with nobody else connected
        alone = _server(work / "alone")
        try:
            peer_lat, peer_attempts, peer_out = _honest(alone, roots, time.monotonic())
        finally:
            alone.stop()

        server = _server(work / "loaded")
        stop = threading.Event()
        try:
            pid = server.pid
            time.sleep(0.5)
            idle = proc_mib(pid, "VmRSS")
            reset_peak(pid)
            cpu_before = proc_cpu(pid)
            begin = time.monotonic()
            loris = [_Loris(server) for _ in range(LORIS)]
            loris_threads = [threading.Thread(target=s.run, args=(2.0, stop, begin)) for s in loris]
            for thread in loris_threads:
                thread.start()
            heads = _half_heads(server)
            time.sleep(1.0)  # the loris hold their slots before the honest uploads start
            latencies, attempts, outcomes = _honest(server, roots, begin)
            honest_done = time.monotonic() - begin
            loris_holding = sum(1 for s in loris if s.ended_at is None)
            time.sleep(max(0.0, 15.0 - (time.monotonic() - begin)))
            heads_open = _still_open(heads)
            for sock in heads:
                sock.close()
            deadline = time.monotonic() + max(0.0, 120.0 - (time.monotonic() - begin))
            for thread in loris_threads:
                thread.join(max(0.0, deadline - time.monotonic()))
            stop.set()
            for thread in loris_threads:
                thread.join(10)
            cpu = proc_cpu(pid) - cpu_before
            peak = proc_mib(pid, "VmHWM")
        finally:
            stop.set()
            server.stop()

        admitted = [lat for lat, out in zip(latencies, outcomes, strict=True) if out == "admitted"]
        peer_admitted = [lat for lat, out in zip(peer_lat, peer_out, strict=True) if out == "admitted"]
        ended = [s for s in loris if s.ended_at is not None]
        report.add("honest uploads admitted", len(admitted), len(peer_admitted), "uploads", f"{HONEST}",
                   len(admitted) == HONEST, "no loris")
        report.add("honest p99 admission", _p99(latencies), _p99(peer_lat), "s", "< 30 s",
                   math.isfinite(_p99(latencies)) and _p99(latencies) < 30, "no loris")
        report.add("honest attempts (most of one upload)", max(attempts), max(peer_attempts), "requests", "<= 40",
                   max(attempts) <= 40, "no loris")
        report.add("half-sent heads still held at 15 s", heads_open, None, "connections", "0", heads_open == 0)
        report.add("loris connections ended by the server within 120 s", len(ended), None, "connections",
                   f"{LORIS}", len(ended) == LORIS)
        report.add("server peak RSS over idle", peak - idle, None, "MiB", "(reference)", None)
        report.add("server CPU, whole run", cpu, None, "s", "(reference)", None)
        statuses: dict[str, int] = {}
        for s in loris:
            statuses[s.status] = statuses.get(s.status, 0) + 1
        failures = sorted({out for out in outcomes if out != "admitted"})
        report.notes += [
            f"server: {DISTRIBUTOR}",
            f"honest uploads finished at {honest_done:.1f} s with {loris_holding} loris connections still held; "
            f"median admission {sorted(latencies)[HONEST // 2]:.2f} s (alone {sorted(peer_lat)[HONEST // 2]:.2f} s)",
            f"loris answers {dict(sorted(statuses.items()))}, last ended at "
            f"{max((s.ended_at or 0) for s in loris):.1f} s",
            f"idle RSS {idle:.1f} MiB, peak {peak:.1f} MiB",
            *(["honest failures: " + "; ".join(failures)] if failures else []),
            quiet,
        ]
        c.save(report)
        return report
    finally:
        c.cleanup(work)


if __name__ == "__main__":
    main()

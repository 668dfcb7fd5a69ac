"""One producer cannot starve the others (issue 14, fifth finding).

The 60 s idle timeout was per chunk with no overall deadline and the queue was shared by every
token: 16 connections of one token sending a byte every 2 s kept another pipeline at 503 for as
long as they liked. Now a body must also keep ``server.http.body_min_rate`` once
``body_idle_timeout`` has passed, and one token holds at most its share of the queue
(``max_queue_per_token``; by default half of it when there are several tokens).
"""

from __future__ import annotations

import socket
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx

from distributor_core import staging as sg
from distributor_core.upload import RetryOptions, UploadClient
from tests.server.harness import (
    DEFAULT_FILES,
    Running,
    bundle_archive,
    bundle_dir,
    serve_setup,
    upload,
    wait_idle,
    wait_until,
    write_setup,
)


class SlowBody:
    """A raw connection that sends an upload's head and then its body a few bytes at a time."""

    def __init__(self, server: Running, pipeline: str, token: str, *, length: int = 1_000_000) -> None:
        host, port = server.url.removeprefix("http://").split(":")
        self.sock = socket.create_connection((host, int(port)))
        self.sock.sendall(
            f"POST /v1/pipelines/{pipeline}/upload HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
            f"Content-Type: application/gzip\r\nContent-Length: {length}\r\n\r\n".encode())
        self.answer = b""
        self.ended_at: float | None = None

    def trickle(self, step: bytes, every: float, stop: threading.Event) -> None:
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
                if not data:
                    break
                if b"\r\n\r\n" in self.answer:
                    self._read_rest()
                    break
            try:
                self.sock.sendall(step)
            except OSError:
                break
        self.ended_at = time.monotonic()
        self.sock.close()

    def _read_rest(self) -> None:
        """The answer's body may come in a later segment than its head: read up to its length."""
        head, _, body = self.answer.partition(b"\r\n\r\n")
        length = next((int(value) for name, _, value in (line.partition(b":") for line in head.split(b"\r\n")[1:])
                       if name.strip().lower() == b"content-length"), None)
        self.sock.settimeout(10)
        while length is not None and len(body) < length:
            try:
                data = self.sock.recv(65536)
            except OSError:
                break
            if not data:
                break
            body += data
        self.answer = head + b"\r\n\r\n" + body

    @property
    def status(self) -> int | None:
        line = self.answer.split(b"\r\n", 1)[0].split()
        return int(line[1]) if len(line) > 1 else None


def test_a_slow_body_is_cut_at_the_minimum_rate(tmp_path: Path) -> None:
    setup = write_setup(tmp_path / "site", http={"queue_size": 1, "body_idle_timeout": "1s",
                                                 "body_min_rate": "1KB"})
    stop = threading.Event()
    with serve_setup(setup) as server, server.client() as http:
        slow = SlowBody(server, "reports", "reports-secret")
        begin = time.monotonic()
        slow.trickle(b"x" * 50, 0.25, stop)  # 200 bytes/s: never idle, far below 1 KB/s
        assert slow.status == 400
        assert slow.answer.endswith(b'{"error":"invalid upload archive: request body arrived slower than 1024 '
                                    b'bytes/s (server.http.body_min_rate)"}\n')
        assert slow.ended_at is not None and 1.0 < slow.ended_at - begin < 6.0
        wait_until(lambda: server.service.pending_count() == 0, 10, "the slot to be freed")
        assert list((setup.staging("reports") / sg.INCOMING_DIR).iterdir()) == []
        assert upload(http, "reports", bundle_archive(tmp_path)).status_code == 202
        wait_idle(server.service)


def test_a_token_holds_at_most_its_share_of_the_queue(tmp_path: Path) -> None:
    setup = write_setup(tmp_path / "site", pipelines={"a": 1, "b": 1},
                        tokens={"token-a": ("secret-a", ["a"]), "token-b": ("secret-b", ["b"])},
                        http={"queue_size": 4})
    stop = threading.Event()
    with serve_setup(setup) as server, server.client() as http:
        assert server.service.token_share == 2
        held = [SlowBody(server, "a", "secret-a") for _ in range(2)]
        wait_until(lambda: server.service.pending_count() == 2, 10, "two bodies being received")
        third = upload(http, "a", bundle_archive(tmp_path), token="secret-a")
        assert (third.status_code, third.json()) == (
            503, {"error": "upload queue share of this token is full", "retryable": True})
        for _ in range(2):  # the other token still gets the rest of the queue
            assert upload(http, "b", bundle_archive(tmp_path), token="secret-b").status_code == 202
        stop.set()
        for slow in held:
            slow.sock.close()
        wait_idle(server.service)


def test_max_queue_per_token_is_a_knob(tmp_path: Path) -> None:
    setup = write_setup(tmp_path / "site", http={"queue_size": 8, "max_queue_per_token": 1})
    with serve_setup(setup) as server, server.client() as http:
        held = SlowBody(server, "reports", "reports-secret")
        wait_until(lambda: server.service.pending_count() == 1, 10, "one body being received")
        refused = upload(http, "reports", bundle_archive(tmp_path))
        assert refused.status_code == 503 and refused.json()["error"] == "upload queue share of this token is full"
        held.sock.close()
        wait_until(lambda: server.service.pending_count() == 0, 10, "the slot to be freed")
        assert upload(http, "reports", bundle_archive(tmp_path)).status_code == 202
        wait_idle(server.service)


def test_load_fifty_uploads_from_three_tokens_with_a_slow_loris(tmp_path: Path) -> None:
    """16 slow-loris connections of one token (a byte every 0.5 s) and 34 real-client uploads of two
    other tokens, all at once: every honest upload is admitted while the loris still holds its
    share, with a bounded number of attempts each, and the loris is cut by the rate deadline."""
    setup = write_setup(
        tmp_path / "site", pipelines={"loris": 1, "beta": 1, "gamma": 1},
        tokens={"loris-token": ("loris-secret", ["loris"]), "beta-token": ("beta-secret", ["beta"]),
                "gamma-token": ("gamma-secret", ["gamma"])},
        http={"queue_size": 16, "max_concurrency": 2, "body_idle_timeout": "30s", "body_min_rate": "1KB"},
    )
    roots = {}
    for i in range(34):  # one artifact per pipeline, a newer one each time
        roots[i] = tmp_path / f"honest-{i}"
        bundle_dir(roots[i], {**DEFAULT_FILES, "n.txt": f"{i}\n".encode()}, bundle_id="honest",
                   created=datetime(2026, 6, 8, tzinfo=UTC) + timedelta(seconds=i))
    stop = threading.Event()
    attempts: dict[int, int] = {}
    admitted_at: dict[int, float] = {}
    results: dict[int, str] = {}
    lock = threading.Lock()
    with serve_setup(setup) as server:
        begin = time.monotonic()
        loris = [SlowBody(server, "loris", "loris-secret") for _ in range(16)]
        threads = [threading.Thread(target=s.trickle, args=(b"\0", 0.5, stop)) for s in loris]
        for thread in threads:
            thread.start()
        wait_until(lambda: server.service.pending_count() == 8, 10, "the loris to fill its share")

        def honest(index: int) -> None:
            pipeline, token = ("beta", "beta-secret") if index % 2 else ("gamma", "gamma-secret")
            count = 0

            def hook(_: httpx.Request) -> None:
                nonlocal count
                count += 1

            with httpx.Client(timeout=60, event_hooks={"request": [hook]}) as transport, \
                    UploadClient(server.url, token, http_client=transport,
                                 retry=RetryOptions(max_attempts=40, base_delay=0.1, max_delay=0.5)) as client:
                result = client.upload_bundle(pipeline_id=pipeline, root=roots[index], idempotency_key=f"h-{index}")
            with lock:
                attempts[index] = count
                admitted_at[index] = time.monotonic() - begin
                results[index] = result.run_id

        workers = [threading.Thread(target=honest, args=(i,)) for i in range(34)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(120)
        last_admission = max(admitted_at.values())
        loris_still_held = server.service.pending_count() >= 8 or any(
            s.ended_at is None for s in loris if s.status != 503)
        for thread in threads:
            thread.join(60)
        stop.set()
        wait_idle(server.service, timeout=120)
        records = server.service.records()
    print(f"\nload: 34 honest uploads admitted by {last_admission:.1f} s, attempts max {max(attempts.values())} "
          f"mean {sum(attempts.values()) / len(attempts):.1f}; loris ended after "
          f"{max(s.ended_at or 0 for s in loris) - begin:.1f} s")
    assert len(results) == 34 and len(set(results.values())) == 34
    assert loris_still_held and last_admission < 25.0  # admitted while the loris held its share
    assert max(attempts.values()) <= 40
    assert sorted(s.status for s in loris) == [400] * 8 + [503] * 8
    assert all(b"slower than 1024 bytes/s" in s.answer for s in loris if s.status == 400)
    assert all(b"share of this token is full" in s.answer for s in loris if s.status == 503)
    assert max(s.ended_at or 0 for s in loris) - begin < 45.0
    honest_records = [r for r in records if r.pipeline_id != "loris"]
    assert len(honest_records) == 34 and {r.status for r in honest_records} == {"succeeded"}
    assert not [r for r in records if r.pipeline_id == "loris"]

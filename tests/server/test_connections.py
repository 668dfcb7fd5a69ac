"""Connections are bounded (issue 14, seventh finding): a request head must be complete within
``server.http.header_timeout`` (200 half-sent requests used to be held indefinitely, no token
needed), and at most ``server.http.max_connections`` connections are served at once."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import httpx

from distributor_core.upload import RetryOptions, UploadClient
from tests.server.harness import (
    Running,
    bundle_dir,
    serve_setup,
    start_serve,
    upload,
    wait_idle,
    wait_until,
    write_setup,
)
from tests.server.test_fairness import SlowBody

HALF_HEAD = b"POST /v1/pipelines/reports/upload HTTP/1.1\r\nHost: x\r\nContent-Type: application/gzip\r\n"


def _connect(url: str) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=10)


def _closed_within(sock: socket.socket, seconds: float) -> tuple[bool, bytes]:
    """Read until the server closes (True) or ``seconds`` pass (False)."""
    deadline = time.monotonic() + seconds
    data = b""
    while time.monotonic() < deadline:
        sock.settimeout(max(0.05, deadline - time.monotonic()))
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            return False, data
        except ConnectionResetError:
            return True, data
        if not chunk:
            return True, data
        data += chunk
    return False, data


def test_two_hundred_half_sent_heads_are_closed_at_the_head_deadline(tmp_path: Path) -> None:
    # one address holds them all: no cap per client here (issue 26 caps them: test_connection_admission.py)
    setup = write_setup(tmp_path / "site", http={"header_timeout": "1s", "max_connections_per_client": 0,
                                                 "max_connections": 1024})
    with serve_setup(setup) as server:
        begin = time.monotonic()
        socks = [_connect(server.url) for _ in range(200)]
        for sock in socks:
            sock.sendall(HALF_HEAD)
        silent = _connect(server.url)  # never sends a byte
        results = [_closed_within(sock, 15) for sock in socks]
        silent_result = _closed_within(silent, 15)
        elapsed = time.monotonic() - begin
        for sock in [*socks, silent]:
            sock.close()
        assert all(closed for closed, _ in results)
        assert all(data.startswith(b"HTTP/1.1 408 ") and data.endswith(b'{"error":"request head timed out"}\n')
                   for _, data in results)
        assert silent_result == (True, b"")  # nothing was sent, so nothing is answered
        assert elapsed < 12
        with server.client() as http:
            assert http.get("/healthz").json() == {"status": "ok"}


def test_a_head_sent_byte_by_byte_is_cut_too(tmp_path: Path) -> None:
    setup = write_setup(tmp_path / "site", http={"header_timeout": "1s"})
    with serve_setup(setup) as server:
        sock = _connect(server.url)
        begin = time.monotonic()
        closed = False
        for byte in HALF_HEAD * 4:
            try:
                sock.sendall(bytes([byte]))
            except OSError:
                closed = True
                break
            time.sleep(0.05)
            if time.monotonic() - begin > 6:
                break
        if not closed:
            closed, _ = _closed_within(sock, 5)
        sock.close()
        assert closed and time.monotonic() - begin < 8


def test_kept_alive_connections_and_slow_bodies_are_not_heads(tmp_path: Path) -> None:
    """The head deadline covers heads only: a client idling between requests on a kept-alive
    connection and a body that takes longer than the deadline are served normally."""
    setup = write_setup(tmp_path / "site", http={"header_timeout": "1s"})
    root = tmp_path / "bundle"
    bundle_dir(root)
    with serve_setup(setup) as server, server.client() as http:
        for _ in range(3):
            assert http.get("/healthz").status_code == 200
            time.sleep(1.5)
        slow = SlowBody(server, "reports", "reports-secret", length=2_000_000)
        stop = threading.Event()
        thread = threading.Thread(target=slow.trickle, args=(b"\0" * 4096, 0.02, stop))
        thread.start()
        time.sleep(2.5)  # past the head deadline, body still arriving
        assert slow.ended_at is None
        stop.set()
        thread.join(10)
        with UploadClient(server.url, "reports-secret") as client:
            client.upload_bundle(pipeline_id="reports", root=root)
        wait_idle(server.service)


def test_connections_beyond_the_cap_are_refused(tmp_path: Path) -> None:
    setup = write_setup(tmp_path / "site", http={"max_connections": 4, "queue_size": 8})
    stop = threading.Event()
    with serve_setup(setup) as server:
        held = [SlowBody(server, "reports", "reports-secret") for _ in range(4)]
        wait_until(lambda: server.service.pending_count() == 4, 10, "four bodies being received")
        extra = _connect(server.url)
        closed, data = _closed_within(extra, 5)
        extra.close()
        assert closed
        assert data in (b"", ) or (data.startswith(b"HTTP/1.1 503 ")
                                   and data.endswith(b'{"error":"too many connections","retryable":true}\n'))
        with httpx.Client(base_url=server.url, timeout=5) as http:
            try:
                refused = http.get("/healthz")
            except httpx.TransportError:
                pass  # closed before the answer could be read: the client retries like a 503
            else:
                assert refused.status_code == 503
        assert len(_server_connections(server)) <= 4
        stop.set()
        for slow in held:
            slow.sock.close()
        wait_until(lambda: server.service.pending_count() == 0, 10, "the held bodies to end")
        root = tmp_path / "bundle"
        bundle_dir(root)
        with UploadClient(server.url, "reports-secret", retry=RetryOptions(max_attempts=5, base_delay=0.2)) as c:
            c.upload_bundle(pipeline_id="reports", root=root)
        wait_idle(server.service)


def _server_connections(server: Running) -> set[object]:
    return server.server.server_state.connections


def test_serve_applies_the_guards_from_config(tmp_path: Path) -> None:
    """Through ``distributor serve`` itself."""
    setup = write_setup(tmp_path / "site", http={"header_timeout": "1s"})
    process = start_serve(setup)
    try:
        sock = _connect(process.url)
        sock.sendall(HALF_HEAD)
        closed, data = _closed_within(sock, 10)
        sock.close()
        assert closed and data.startswith(b"HTTP/1.1 408 ")
        with httpx.Client(base_url=process.url, timeout=10) as http:
            assert upload(http, "reports", b"x", token="wrong").status_code == 401
    finally:
        code, _ = process.stop()
    assert code == 0

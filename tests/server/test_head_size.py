"""The request head is bounded (issue 26, item 5).

Nothing limited the size of a request's line and headers: 74 MB of one header, sent within the
10 s ``header_timeout``, cost the server +138 MB. A head larger than ``server.http.max_head_size``
(64 KiB) is now answered ``431`` as soon as that many bytes of it arrived, and the connection is
closed.
"""

from __future__ import annotations

import select
import socket
from pathlib import Path

import httpx

from distributor_core.upload import UploadClient
from tests.server.harness import TOKEN, bundle_dir, serve_setup, start_serve, wait_idle, write_setup

CHUNK = 16 * 1024


def _connect(url: str, source: str = "127.0.0.1") -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=10, source_address=(source, 0))


def send_head(url: str, header_bytes: int, *, path: str = "/healthz") -> tuple[int, bytes]:
    """Send ``GET <path>`` with one ``X-Padding`` header of ``header_bytes`` bytes, a chunk at a
    time, stopping as soon as the server answers. Returns (bytes sent, what the server sent back
    before closing)."""
    sock = _connect(url)
    sent = 0
    answer = b""
    try:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nX-Padding: ".encode())
        while sent < header_bytes:
            readable, _, _ = select.select([sock], [], [], 0)
            if readable:
                break
            step = min(CHUNK, header_bytes - sent)
            try:
                sock.sendall(b"p" * step)
            except OSError:
                break
            sent += step
        else:
            sock.sendall(b"\r\n\r\n")
        sock.settimeout(10)
        while True:
            try:
                data = sock.recv(65536)
            except OSError:
                break
            if not data:
                break
            answer += data
            if answer.endswith(b"\n") and b"\r\n\r\n" in answer and b"connection: close" not in answer.lower():
                break  # a kept-alive answer: complete once its body is in (small bodies here)
    finally:
        sock.close()
    return sent, answer


def test_a_huge_header_is_answered_431_after_max_head_size(setup) -> None:  # type: ignore[no-untyped-def]
    with serve_setup(setup) as server:
        _, answer = send_head(server.url, 8 * 1024 * 1024)
        assert answer.startswith(b"HTTP/1.1 431 ")
        assert answer.endswith(b'{"error":"request head too large: more than 65536 bytes '
                               b'(server.http.max_head_size)"}\n')
        # a head just under the limit is served, and the server goes on serving
        _, fine = send_head(server.url, 60 * 1024)
        assert fine.startswith(b"HTTP/1.1 200 ")
        with server.client() as http:
            assert http.get("/healthz").json() == {"status": "ok"}


def test_max_head_size_is_a_knob_and_uploads_still_work(tmp_path: Path) -> None:
    setup = write_setup(tmp_path / "site", http={"max_head_size": "2KB"})
    root = tmp_path / "bundle"
    bundle_dir(root)
    with serve_setup(setup) as server:
        _, answer = send_head(server.url, 4096, path="/v1/pipelines/reports/upload")
        assert answer.startswith(b"HTTP/1.1 431 ") and b"more than 2048 bytes (server.http.max_head_size)" in answer
        with httpx.Client(base_url=server.url, timeout=10) as http:
            refused = http.get("/healthz", headers={"X-Padding": "p" * 3000})
            assert refused.status_code == 431
        with UploadClient(server.url, TOKEN) as client:
            client.upload_bundle(pipeline_id="reports", root=root)
        wait_idle(server.service)


def _peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


def test_serve_answers_74_mb_of_one_header_431_without_holding_it(tmp_path: Path) -> None:
    """The issue's shape through ``distributor serve``: the head is refused after 64 KiB, so the
    server's peak memory does not grow by anything like the 74 MB it was sent (it grew +138 MB)."""
    setup = write_setup(tmp_path / "site")
    process = start_serve(setup)
    try:
        with httpx.Client(base_url=process.url, timeout=10) as http:
            assert http.get("/healthz").status_code == 200
        before = _peak_rss_mib(process.process.pid)
        sent, answer = send_head(process.url, 74 * 1000 * 1000)
        assert answer.startswith(b"HTTP/1.1 431 ")
        assert sent < 32 * 1000 * 1000  # what the kernel's socket buffers took in, not the 74 MB
        assert _peak_rss_mib(process.process.pid) - before < 16
    finally:
        code, rest = process.stop()
    assert code == 0 and rest.strip() == ""

"""The example nginx configuration does the part of the connection limits a reverse proxy must
take over (issue 26, item 3; docs/operations.md "Behind a reverse proxy").

Behind a proxy every connection comes from the proxy's address, so ``distributor serve`` cannot
cap one client: ``examples/nginx/distributor-upload.conf`` caps each client address (requests in
progress and request rate), bounds request heads and streams bodies. Run with Debian's nginx
(installed by ``scripts/install-test-peers.sh``) in front of the real server, listen and upstream
addresses replaced.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from distributor_core.upload import RetryOptions, UploadClient
from tests.peers.process import free_port, stop_process
from tests.server.harness import TOKEN, Running, bundle_dir, serve_setup, wait_idle, wait_until, write_setup

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "nginx" / "distributor-upload.conf"
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
HALF_HEAD = b"POST /v1/pipelines/reports/upload HTTP/1.1\r\nHost: x\r\nContent-Type: application/gzip\r\n"


def _site_config(upstream: str, port: int) -> str:
    text = EXAMPLE.read_text()
    text, listens = re.subn(r"(?m)^    listen 80;", f"    listen 127.0.0.1:{port};", text)
    text, servers = re.subn(r"(?m)^    server 127\.0\.0\.1:8080;", f"    server {upstream};", text)
    assert (listens, servers) == (1, 1), "the example's listen and upstream lines moved"
    return text


@contextmanager
def nginx_in_front(tmp_path: Path, server: Running) -> Iterator[str]:
    """nginx with the example site, proxying to ``server``; yields its base URL."""
    directory = tmp_path / "nginx"
    directory.mkdir()
    port = free_port()
    (directory / "site.conf").write_text(_site_config(server.url.removeprefix("http://"), port))
    user = "user root;\n" if os.geteuid() == 0 else ""
    (directory / "nginx.conf").write_text(
        f"{user}daemon off;\nworker_processes 1;\npid {directory}/nginx.pid;\nerror_log {directory}/error.log warn;\n"
        "events { worker_connections 1024; }\n"
        f"http {{\n  access_log off;\n  client_body_temp_path {directory}/body;\n  proxy_temp_path {directory}/proxy;\n"
        f"  include {directory}/site.conf;\n}}\n"
    )
    check = subprocess.run([NGINX, "-t", "-q", "-p", f"{directory}/", "-c", str(directory / "nginx.conf")],
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
    process = subprocess.Popen([NGINX, "-p", f"{directory}/", "-c", str(directory / "nginx.conf")],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert process.poll() is None and time.monotonic() < deadline, "nginx did not start"
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        stop_process(process)  # type: ignore[arg-type]


def _upload_client(url: str, source: str) -> tuple[httpx.Client, UploadClient]:
    transport = httpx.Client(timeout=30, transport=httpx.HTTPTransport(local_address=source))
    return transport, UploadClient(url, TOKEN, http_client=transport,
                                   retry=RetryOptions(max_attempts=3, base_delay=0.2))


@pytest.fixture
def proxied(tmp_path: Path) -> Iterator[tuple[Running, str]]:
    setup = write_setup(tmp_path / "site", http={"max_connections_per_client": 0, "max_connections": 64})
    with serve_setup(setup) as server, nginx_in_front(tmp_path, server) as url:
        yield server, url


def test_uploads_pass_through_the_example(proxied: tuple[Running, str], tmp_path: Path) -> None:
    server, url = proxied
    root = tmp_path / "bundle"
    bundle_dir(root, {"report.md": b"# report\n", "big.bin": os.urandom(3 * 1024 * 1024)})
    transport, client = _upload_client(url, "127.0.0.2")
    with transport, client:
        result = client.upload_bundle(pipeline_id="reports", root=root)
        wait_idle(server.service)
        assert client.status(result.run_id).status == "succeeded"  # the status through nginx too


def test_half_sent_heads_stay_at_nginx_and_a_request_flood_is_refused_per_address(
    proxied: tuple[Running, str], tmp_path: Path
) -> None:
    server, url = proxied
    slots = server.server.config.http_protocol_class.slots  # type: ignore[attr-defined]
    host, port = url.removeprefix("http://").split(":")
    heads = [socket.create_connection((host, int(port)), source_address=("127.0.0.10", 0)) for _ in range(100)]
    for sock in heads:
        sock.sendall(HALF_HEAD)
    refused: list[int] = []
    stop = threading.Event()

    def flood() -> None:  # a tight loop of requests without a token, from one address
        with httpx.Client(base_url=url, timeout=10, transport=httpx.HTTPTransport(local_address="127.0.0.11")) as http:
            while not stop.is_set():
                answer = http.post("/v1/pipelines/reports/upload", content=b"x",
                                   headers={"Content-Type": "application/gzip"})
                if answer.status_code == 503:
                    assert answer.json() == {"error": "too many requests from this address", "retryable": True}
                    refused.append(1)

    thread = threading.Thread(target=flood)
    thread.start()
    try:
        wait_until(lambda: len(refused) >= 20, 30, "nginx to refuse the flood")
        assert slots.unauthenticated() <= 16  # nginx's keep-alive pool at most; the 100 heads never got here
        root = tmp_path / "bundle"
        bundle_dir(root)
        transport, client = _upload_client(url, "127.0.0.2")
        with transport, client:  # another address uploads at once, without a single 503
            client.upload_bundle(pipeline_id="reports", root=root)
    finally:
        stop.set()
        thread.join(30)
        for sock in heads:
            sock.close()
    wait_idle(server.service)


def test_an_oversized_head_is_refused_by_nginx(proxied: tuple[Running, str]) -> None:
    _, url = proxied
    with httpx.Client(base_url=url, timeout=10) as http:
        answer = http.get("/healthz", headers={"X-Padding": "p" * 20_000})
        assert (answer.status_code, answer.json()) == (431, {"error": "request head too large"})
        assert http.get("/healthz").json() == {"status": "ok"}

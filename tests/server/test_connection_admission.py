"""Connection slots keep room for producers with a token (issue 26, item 3).

``max_connections`` was one pool, first come first served: a client with no token that kept
reconnecting held all of it, and another producer then got 5 of 30 uploads through (0 of 30 with
a tight reconnect loop). Now connections that carry no request with a valid token are capped per
client address (``max_connections_per_client``) and together (``max_connections -
reserved_connections``), and a new connection closes the oldest idle connection of the address
holding the most instead of being refused, so a producer's connection gets in and, once its head
with a valid token is complete, holds a slot no flood can take.
"""

from __future__ import annotations

import selectors
import socket
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from distributor_core.upload import RetryOptions, UploadClient
from tests.server.harness import (
    DEFAULT_FILES,
    TOKEN,
    bundle_dir,
    serve_setup,
    upload,
    wait_idle,
    wait_until,
    write_setup,
)

HALF_HEAD = b"POST /v1/pipelines/reports/upload HTTP/1.1\r\nHost: x\r\nContent-Type: application/gzip\r\n"


class Flood:
    """Clients without a token: ``per_address`` connections from each of ``sources``, each
    sending part of a request head and then nothing; whenever the server closes one, it is opened
    again at once (a tight reconnect loop)."""

    def __init__(self, url: str, sources: list[str], per_address: int, head: bytes = HALF_HEAD) -> None:
        host, port = url.removeprefix("http://").split(":")
        self.address = (host, int(port))
        self.sources = sources
        self.per_address = per_address
        self.head = head
        self.stop = threading.Event()
        self.connects = 0
        self.closed_by_server = 0
        self.answers: set[bytes] = set()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Flood:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        self._thread.join(30)

    def _open(self, selector: selectors.BaseSelector, source: str) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind((source, 0))
        try:
            sock.connect(self.address)
            sock.sendall(self.head)
        except OSError:
            sock.close()
            return
        self.connects += 1
        sock.setblocking(False)
        selector.register(sock, selectors.EVENT_READ, source)

    def _run(self) -> None:
        selector = selectors.DefaultSelector()
        for source in self.sources:
            for _ in range(self.per_address):
                self._open(selector, source)
        while not self.stop.is_set():
            for key, _ in selector.select(0.05):
                sock: socket.socket = key.fileobj  # type: ignore[assignment]
                try:
                    data = sock.recv(65536)
                except OSError:
                    data = b""
                if data:
                    self.answers.add(data.split(b"\r\n", 1)[0])
                    continue
                selector.unregister(sock)
                sock.close()
                self.closed_by_server += 1
                self._open(selector, key.data)  # reconnect at once
            held = len(selector.get_map())
            for source in self.sources:  # keep the flood at full strength
                if held < self.per_address * len(self.sources):
                    self._open(selector, source)
                    held += 1
        for key in list(selector.get_map().values()):
            key.fileobj.close()  # type: ignore[union-attr]
        selector.close()


def _bundles(tmp_path: Path, count: int) -> list[Path]:
    roots = []
    for index in range(count):
        root = tmp_path / f"bundle-{index}"
        bundle_dir(root, {**DEFAULT_FILES, "n.txt": f"{index}\n".encode()},
                   created=datetime(2026, 6, 8, tzinfo=UTC) + timedelta(seconds=index))
        roots.append(root)
    return roots


def _client_from(url: str, source: str) -> tuple[httpx.Client, UploadClient]:
    transport = httpx.Client(timeout=30, transport=httpx.HTTPTransport(local_address=source))
    return transport, UploadClient(url, TOKEN, http_client=transport,
                                   retry=RetryOptions(max_attempts=6, base_delay=0.1, max_delay=0.5))


@pytest.mark.parametrize("attackers", [1, 10], ids=["one-address", "ten-addresses"])
def test_uploads_get_through_a_tokenless_reconnect_flood(tmp_path: Path, attackers: int) -> None:
    """A flood with no token from one address (three times ``max_connections``), or from ten
    addresses at their cap each (more than the unreserved slots), and ten uploads of a producer
    from another address: every one is accepted and published."""
    setup = write_setup(tmp_path / "site", http={"max_connections": 16})
    roots = _bundles(tmp_path, 10)
    sources = [f"127.0.0.{10 + i}" for i in range(attackers)]
    with serve_setup(setup) as server, Flood(server.url, sources, 48 if attackers == 1 else 12) as flood:
        wait_until(lambda: flood.connects >= 48, 10, "the flood to connect")
        transport, client = _client_from(server.url, "127.0.0.2")
        with transport, client:
            results = [client.upload_bundle(pipeline_id="reports", root=root) for root in roots]
        assert flood.closed_by_server > 0  # the flood was held to its share, not let in
        slots = server.server.config.http_protocol_class.slots  # type: ignore[attr-defined]
        assert sum(slots.unauthenticated(source) for source in sources) <= 16 - 4  # the unreserved slots
        wait_idle(server.service)
        records = {r.run_id: r for r in server.service.records()}
    assert len({r.run_id for r in results}) == 10
    assert {records[r.run_id].status for r in results} == {"succeeded"}
    assert flood.answers <= {b"HTTP/1.1 503 Service Unavailable", b"HTTP/1.1 408 Request Timeout"}


def test_one_address_holds_at_most_its_cap_and_others_are_untouched(tmp_path: Path) -> None:
    setup = write_setup(tmp_path / "site", http={"max_connections_per_client": 4})
    with serve_setup(setup) as server:
        host, port = server.url.removeprefix("http://").split(":")
        greedy = [socket.create_connection((host, int(port)), source_address=("127.0.0.3", 0)) for _ in range(10)]
        for sock in greedy:
            sock.sendall(HALF_HEAD)
        other = [socket.create_connection((host, int(port)), source_address=("127.0.0.4", 0)) for _ in range(4)]
        slots = server.server.config.http_protocol_class.slots  # type: ignore[attr-defined]
        wait_until(lambda: slots.unauthenticated("127.0.0.3") == 4 and slots.unauthenticated("127.0.0.4") == 4,
                   10, "the connections to be admitted")
        closed = [_answer(sock) for sock in greedy[:6]]  # the oldest six were closed to make room
        assert closed == [b'HTTP/1.1 503 Service Unavailable'] * 6
        for sock in [*greedy[6:], *other]:  # the rest is still open: a complete request is answered
            sock.sendall(b"\r\n" if sock in greedy else b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert [_answer(sock) for sock in other] == [b"HTTP/1.1 200 OK"] * 4
        assert [_answer(sock) for sock in greedy[6:]] == [b"HTTP/1.1 401 Unauthorized"] * 4
        for sock in [*greedy, *other]:
            sock.close()
        with server.client() as http:
            assert upload(http, "reports", b"x", token="wrong").status_code == 401


def _answer(sock: socket.socket) -> bytes:
    sock.settimeout(10)
    data = b""
    while b"\r\n" not in data:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            break
        if not chunk:
            break
        data += chunk
    return data.split(b"\r\n", 1)[0]


def test_a_request_with_a_token_is_never_cut_to_make_room(tmp_path: Path) -> None:
    """Requests in progress that carry a valid token fill every slot but the unreserved ones; a
    flood then finds nothing to close and is refused, and the held requests are answered."""
    from tests.server.test_fairness import SlowBody

    setup = write_setup(tmp_path / "site", http={"max_connections": 8, "reserved_connections": 2,
                                                 "queue_size": 8})
    with serve_setup(setup) as server:
        held = [SlowBody(server, "reports", TOKEN, length=64) for _ in range(8)]
        wait_until(lambda: server.service.pending_count() == 8, 10, "eight bodies being received")
        with Flood(server.url, ["127.0.0.20"], 20) as flood:
            wait_until(lambda: flood.connects >= 20, 10, "the flood to try")
        assert flood.answers == {b"HTTP/1.1 503 Service Unavailable"}
        assert server.service.pending_count() == 8  # nothing was cut
        for slow in held:
            slow.sock.sendall(b"\0" * 64)  # the rest of each body: not an archive, so a 400
        for slow in held:
            slow.trickle(b"", 0.05, threading.Event())
        assert [slow.status for slow in held] == [400] * 8
        wait_idle(server.service)

"""A fault proxy in front of an HTTP peer (moto): it forwards every connection to the target and
holds the requests a rule matches (method and a regular expression on the path) for a while
before it sends them on, as a network that delays a request past a lease would
(``shared/notes/test-peers.md``). The held request reaches the target whole and late; its
response goes back to the client as usual. Runs in threads of the test process::

    with FaultProxy(port) as proxy:
        proxy.hold("PUT", r"/records/", seconds=5)   # the next matching request, once
        ... point the client's endpoint at proxy.url ...
        proxy.held.wait()                            # a request is being held now

An outage (``proxy.outage.set()``): every connection is cut, as a store that went away cuts
them: a new one is closed at once, a request on an open one is not sent on (the connection is
shut down), until ``proxy.outage.clear()``; ``cut`` counts the requests and connections cut.
"""

from __future__ import annotations

import re
import socket
import threading
import time
from dataclasses import dataclass, field


@dataclass
class _Rule:
    method: str
    path: re.Pattern[str]
    seconds: float
    times: int


@dataclass
class FaultProxy:
    target_port: int
    target_host: str = "127.0.0.1"
    rules: list[_Rule] = field(default_factory=list)
    #: set while a request is held
    held: threading.Event = field(default_factory=threading.Event)
    #: ``(method, path)`` of every request held, in order
    holds: list[tuple[str, str]] = field(default_factory=list)
    #: while set, the target is away: connections and requests are cut
    outage: threading.Event = field(default_factory=threading.Event)
    #: connections and requests cut by an outage
    cut: int = 0

    def __post_init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._closed = False

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def hold(self, method: str, path: str, *, seconds: float, times: int = 1) -> None:
        with self._lock:
            self.rules.append(_Rule(method, re.compile(path), seconds, times))

    def __enter__(self) -> FaultProxy:
        threading.Thread(target=self._accept, daemon=True, name="fault-proxy").start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._closed = True
        self._listener.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self.outage.is_set():
                self._cut(client)
                continue
            try:
                upstream = socket.create_connection((self.target_host, self.target_port))
            except OSError:
                client.close()
                continue
            threading.Thread(target=self._requests, args=(client, upstream), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client), daemon=True).start()

    def _delay(self, head: bytes) -> float:
        line = head.split(b"\r\n", 1)[0].decode("latin-1").split()
        if len(line) < 2:
            return 0.0
        with self._lock:
            for rule in self.rules:
                if rule.times > 0 and rule.method == line[0] and rule.path.search(line[1]):
                    rule.times -= 1
                    self.holds.append((line[0], line[1]))
                    return rule.seconds
        return 0.0

    def _requests(self, client: socket.socket, upstream: socket.socket) -> None:
        """Client to target, one whole request at a time (head, then a Content-Length or chunked
        body), each held as its rule says."""
        buffer = b""
        try:
            while True:
                while b"\r\n\r\n" not in buffer:
                    data = client.recv(65536)
                    if not data:
                        return
                    buffer += data
                head, _, buffer = buffer.partition(b"\r\n\r\n")
                head += b"\r\n\r\n"
                headers = {k.strip().lower(): v.strip() for k, _, v in
                           (line.partition(":") for line in head.decode("latin-1").split("\r\n")[1:] if line)}
                body, buffer = self._body(client, buffer, headers)
                if self.outage.is_set():
                    self._cut(client)
                    return
                seconds = self._delay(head)
                if seconds:
                    self.held.set()
                    time.sleep(seconds)
                    self.held.clear()
                upstream.sendall(head + body)
        except OSError:
            pass
        finally:
            for sock in (client, upstream):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def _cut(self, client: socket.socket) -> None:
        with self._lock:
            self.cut += 1
        client.close()

    @staticmethod
    def _body(client: socket.socket, buffer: bytes, headers: dict[str, str]) -> tuple[bytes, bytes]:
        def need(count: int) -> None:
            nonlocal buffer
            while len(buffer) < count:
                data = client.recv(65536)
                if not data:
                    raise OSError("client closed mid-request")
                buffer += data

        if headers.get("transfer-encoding", "").lower() == "chunked":
            body = b""
            while True:
                while b"\r\n" not in buffer:
                    need(len(buffer) + 1)
                size_line, _, rest = buffer.partition(b"\r\n")
                size = int(size_line.split(b";")[0], 16)
                buffer = rest
                need(size + 2)
                body += size_line + b"\r\n" + buffer[: size + 2]
                buffer = buffer[size + 2:]
                if size == 0:
                    while not body.endswith(b"\r\n\r\n"):  # trailers end with an empty line
                        need(2)
                        body += buffer[:2]
                        buffer = buffer[2:]
                    return body, buffer
        length = int(headers.get("content-length", "0") or 0)
        need(length)
        return buffer[:length], buffer[length:]

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

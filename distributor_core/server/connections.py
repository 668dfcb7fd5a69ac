"""Connection guards for uvicorn (issues 14 and 26): a deadline and a size bound for the request
head, and connection admission that keeps room for producers with a valid token; set from
``server.http.header_timeout``, ``max_head_size``, ``max_connections``,
``max_connections_per_client`` and ``reserved_connections``.

uvicorn has none of these: a connection that never completes its request line and headers is held
for ever (its keep-alive timer only runs between requests, and every byte received cancels it),
its parser buffers a head of any size (74 MB of one header cost +138 MB), and
``limit_concurrency`` answers a plain-text 503 only once a head is complete. The guard is a
subclass of uvicorn's httptools HTTP protocol class (passed as ``uvicorn.Config(http=...)``),
which uses the protocol's ``connections`` set, ``cycle`` (the request in progress once its head
is complete; its ``scope["headers"]``), ``client``, ``transport``, ``loop``, ``connection_made``,
``data_received``, ``parser.get_method``, ``url``, ``headers``, the parser callbacks
``on_message_begin``, ``on_headers_complete``, ``on_body`` and ``on_message_complete``,
``on_response_complete`` and ``connection_lost``; ``pyproject.toml`` bounds uvicorn below its next
minor release and requires httptools, and ``tests/server/test_connections.py`` fails loudly if
these change.

- A request head must be complete ``header_timeout`` seconds after the connection opened or after
  the first byte of a later request on a kept-alive connection arrived; otherwise the connection
  is closed, with a ``408`` when part of a head had arrived.
- A request head (request line and headers) larger than ``max_head_size`` is answered ``431``
  and the connection closed: as soon as that many bytes of an incomplete head arrived (at most
  one read of the socket more is buffered), or, for a head completed by the read that crossed the
  bound, before the request reaches the app (``on_body`` and ``on_message_complete`` then ignore
  the rest of that message).
- Connection slots are admitted by :class:`~.slots.ConnectionSlots`: a new connection may close
  idle connections to make room; when it cannot, it is answered ``503`` (when the client can still
  read it) and closed at once; it never reaches the app. A connection's request counts as
  authenticated once its head is complete and its ``Authorization: Bearer`` token is one of the
  configured upload tokens.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from distributor_core.jsonfmt import dumps_compact
from distributor_core.server import errors
from distributor_core.server.slots import ConnectionSlots

TOO_MANY_CONNECTIONS = "too many connections"
HEAD_TIMED_OUT = "request head timed out"

#: ``authenticated(headers)``: the request's lower-cased header pairs carry a valid upload token
Authenticator = Callable[[list[tuple[bytes, bytes]]], bool]


def _canned(status: str, message: str, *, retryable: bool = False) -> bytes:
    body = (dumps_compact(errors.error_body(message, retryable=retryable)) + "\n").encode()
    return (
        f"HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n"
        "connection: close\r\n\r\n"
    ).encode() + body


_REFUSED = _canned("503 Service Unavailable", TOO_MANY_CONNECTIONS, retryable=True)
_HEAD_TIMEOUT = _canned("408 Request Timeout", HEAD_TIMED_OUT)


def head_too_large(limit: int) -> str:
    return f"request head too large: more than {limit} bytes (server.http.max_head_size)"


def nobody_authenticated(_headers: list[tuple[bytes, bytes]]) -> bool:
    return False


class _GuardedProtocol(HttpToolsProtocol):  # type: ignore[misc]
    header_timeout: float = 10.0
    max_head_size: int = 64 * 1024
    slots: ConnectionSlots = ConnectionSlots(256)
    authenticated: Authenticator = staticmethod(nobody_authenticated)  # type: ignore[assignment]
    head_too_large_answer: bytes = b""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_timer: asyncio.TimerHandle | None = None
        self._head_bytes = False
        self._between_requests = False
        #: a request head is being parsed (message begun, headers not complete), and its bytes so far
        self._in_head = False
        self._head_size = 0
        self._head_refused = False
        #: a response was ever sent on this connection
        self._served = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        client = self.client[0] if self.client else ""
        if not self.slots.admit(self, client, self._evict):
            transport.write(_REFUSED)
            transport.close()
            return
        self._arm()

    def data_received(self, data: bytes) -> None:
        if self._between_requests:  # the first byte of the next request on a kept-alive connection
            self._between_requests = False
            self._arm()
        if self._head_timer is not None:
            self._head_bytes = True
        super().data_received(data)
        if self._in_head:  # a head still incomplete after this read: count the whole read
            self._head_size += len(data)
            if self._head_size > self.max_head_size:
                self._refuse_head()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_head = True
        self._head_size = 0

    def on_headers_complete(self) -> None:
        self._in_head = False
        if self._parsed_head_size() > self.max_head_size:  # completed within the read that crossed the bound
            self._refuse_head()
            return
        super().on_headers_complete()
        if self.cycle is not None and self.cycle.scope is self.scope:
            self.slots.request_started(self, authenticated=self.authenticated(self.scope["headers"]))

    def on_body(self, body: bytes) -> None:
        if not self._head_refused:
            super().on_body(body)

    def on_message_complete(self) -> None:
        if not self._head_refused:
            super().on_message_complete()

    def _parsed_head_size(self) -> int:
        """Bytes of the request line and headers just parsed (with ``HTTP/1.1`` and CRLFs)."""
        method = self.parser.get_method() or b""
        return len(method) + 1 + len(self.url) + 11 + sum(len(n) + len(v) + 4 for n, v in self.headers) + 2

    def _refuse_head(self) -> None:
        self._in_head = False
        self._head_refused = True
        if not self.transport.is_closing():
            self.transport.write(self.head_too_large_answer)
            self.transport.close()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._served = True
        self._disarm()
        self._between_requests = True
        if self.cycle is not None and not self.cycle.response_complete:  # a pipelined request started
            self.slots.request_started(self, authenticated=self.authenticated(self.cycle.scope["headers"]))
        else:
            self.slots.request_finished(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self.slots.release(self)
        super().connection_lost(exc)

    def _evict(self) -> None:
        """Closed to make room for a new connection (it was idle: no request in progress)."""
        self._disarm()
        if not self.transport.is_closing():
            if self._head_bytes or not self._served:
                self.transport.write(_REFUSED)
            self.transport.close()

    def _arm(self) -> None:
        self._disarm()
        self._head_bytes = False
        self._head_timer = self.loop.call_later(self.header_timeout, self._head_deadline)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_deadline(self) -> None:
        self._head_timer = None
        cycle = self.cycle
        if self.transport.is_closing() or (cycle is not None and not cycle.response_complete):
            return  # a request is in progress, so its head is complete: body and app have their own deadlines
        if self._head_bytes:
            self.transport.write(_HEAD_TIMEOUT)
        self.transport.close()


def guarded_protocol(
    header_timeout: float,
    max_connections: int,
    *,
    max_head_size: int = 64 * 1024,
    per_client: int = 0,
    reserved: int = 0,
    authenticated: Authenticator = nobody_authenticated,
) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol class with the guards set to these values, and a fresh
    :class:`~.slots.ConnectionSlots` shared by the connections of one server."""
    return type(
        "GuardedHTTPProtocol",
        (_GuardedProtocol,),
        {
            "header_timeout": header_timeout,
            "max_head_size": max_head_size,
            "slots": ConnectionSlots(max_connections, per_client, reserved),
            "authenticated": staticmethod(authenticated),
            "head_too_large_answer": _canned("431 Request Header Fields Too Large", head_too_large(max_head_size)),
        },
    )

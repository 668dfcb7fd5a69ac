"""Connection guards for uvicorn (issue 14): a deadline for the request head and a cap on
connections, set from ``server.http.header_timeout`` and ``max_connections``.

uvicorn has neither: a connection that never completes its request line and headers is held for
ever (its keep-alive timer only runs between requests, and every byte received cancels it), and
``limit_concurrency`` answers a plain-text 503 only once a head is complete. The guard is a
subclass of uvicorn's HTTP protocol class (passed as ``uvicorn.Config(http=...)``), which uses
the protocol's ``connections`` set, ``cycle`` (the request in progress once its head is complete),
``transport``, ``loop``, ``connection_made``, ``data_received``, ``on_response_complete`` and
``connection_lost``; ``pyproject.toml`` bounds uvicorn below its next minor release and
``tests/server/test_connections.py`` fails loudly if these change.

- A request head must be complete ``header_timeout`` seconds after the connection opened or after
  the first byte of a later request on a kept-alive connection arrived; otherwise the connection
  is closed, with a ``408`` when part of a head had arrived.
- A connection that would be number ``max_connections + 1`` is answered ``503`` (when the client
  can still read it) and closed at once; it never reaches the app.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.auto import AutoHTTPProtocol

from distributor_core.jsonfmt import dumps_compact
from distributor_core.server import errors

TOO_MANY_CONNECTIONS = "too many connections"
HEAD_TIMED_OUT = "request head timed out"


def _canned(status: str, message: str, *, retryable: bool = False) -> bytes:
    body = (dumps_compact(errors.error_body(message, retryable=retryable)) + "\n").encode()
    return (
        f"HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n"
        "connection: close\r\n\r\n"
    ).encode() + body


_REFUSED = _canned("503 Service Unavailable", TOO_MANY_CONNECTIONS, retryable=True)
_HEAD_TIMEOUT = _canned("408 Request Timeout", HEAD_TIMED_OUT)


class _GuardedProtocol(AutoHTTPProtocol):  # type: ignore[misc, valid-type]
    header_timeout: float = 10.0
    max_connections: int = 256

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_timer: asyncio.TimerHandle | None = None
        self._head_bytes = False
        self._between_requests = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.max_connections:
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

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._disarm()
        self._between_requests = True

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

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


def guarded_protocol(header_timeout: float, max_connections: int) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol class with the two guards set to these values."""
    return type(
        "GuardedHTTPProtocol",
        (_GuardedProtocol,),
        {"header_timeout": header_timeout, "max_connections": max_connections},
    )

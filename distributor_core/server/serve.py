"""Run the upload app under uvicorn until SIGINT/SIGTERM (interfaces §2.8).

Startup order: the app is built (tokens resolved, staging paths checked, locked and swept), then
``server.http.bind`` is bound, then ``distributor: serving HTTP upload API on <host:port>`` is
written to stderr (the actual port when the configured one is 0). Connections are guarded by
``server.http.header_timeout``, ``max_head_size``, ``max_connections``,
``max_connections_per_client`` and ``reserved_connections`` (:mod:`.connections`). On SIGINT or SIGTERM the
server stops accepting connections, lets requests in progress finish, stops starting
publications and gives running ones 30 s, releases the staging locks and returns 0.
"""

from __future__ import annotations

import logging
import signal
import socket
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

import uvicorn

from distributor_core.config import Config, ServerHTTP
from distributor_core.server.app import create_app, header_authenticator
from distributor_core.server.connections import guarded_protocol, nobody_authenticated
from distributor_core.server.errors import ServerSetupError
from distributor_core.server.runtime import SHUTDOWN_GRACE, UploadRuntime


class _Server(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, runtime: UploadRuntime) -> None:
        super().__init__(config)
        self.runtime = runtime

    def handle_exit(self, sig: int, frame: Any) -> None:
        self.runtime.request_stop()
        super().handle_exit(sig, frame)


def bind_socket(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise ServerSetupError(f"listen tcp {format_address(host, port)}: {exc.strerror or exc}") from None
    sock.set_inheritable(True)
    return sock


def format_address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


@contextmanager
def _stop_on_signals(server: _Server) -> Iterator[None]:
    """Outside uvicorn's own handling (before it starts, and when it re-raises the signals it
    captured on return), SIGINT and SIGTERM only ask the server and the runtime to stop, so
    ``serve`` ends with exit code 0."""

    def handler(_sig: int, _frame: Any) -> None:
        server.runtime.request_stop()
        server.should_exit = True

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def _configure_logging(stderr: TextIO) -> None:
    logger = logging.getLogger("distributor")
    if not any(getattr(h, "_distributor_serve", False) for h in logger.handlers):
        handler = logging.StreamHandler(stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))
        handler._distributor_serve = True  # type: ignore[attr-defined]
        logger.addHandler(handler)
    logger.setLevel(logging.WARNING)


def uvicorn_config(app: Any, config: Config | None, *, grace: float = SHUTDOWN_GRACE) -> uvicorn.Config:
    """uvicorn's options for ``app``: the connection guards of ``server.http`` (head deadline and
    size, connection admission that knows the app's upload tokens; their defaults without a
    config), no access log, no server header, lifespan on."""
    uploads = getattr(getattr(app, "state", None), "uploads", None)
    authenticated = header_authenticator(uploads.tokens) if uploads is not None else nobody_authenticated
    http = config.server.http if config is not None else ServerHTTP()  # without a config: the declared defaults
    protocol = guarded_protocol(
        http.header_timeout.total_seconds(), http.max_connections, max_head_size=http.max_head_size,
        per_client=http.max_connections_per_client, reserved=http.reserved_slots(), authenticated=authenticated,
    )
    return uvicorn.Config(
        app,
        http=protocol,
        log_level="warning",
        access_log=False,
        lifespan="on",
        server_header=False,
        timeout_graceful_shutdown=int(grace),
    )


def serve(
    config: Config,
    *,
    publisher: str = "inline",
    stderr: TextIO | None = None,
    grace: float = SHUTDOWN_GRACE,
    **app_options: Any,
) -> int:
    """Serve ``config`` until a signal; return the exit code (0).

    Raises ``SecretError`` (token resolution) or :class:`ServerSetupError` (no upload pipeline,
    staging directory unusable or in use, address unusable) before serving.
    """
    err = stderr or sys.stderr
    _configure_logging(err)
    app = create_app(config, publisher=publisher, **app_options)  # type: ignore[arg-type]
    runtime: UploadRuntime = app.state.runtime
    http = config.server.http
    try:
        sock = bind_socket(http.bind_host, http.bind_port)
    except BaseException:
        runtime.shutdown(grace)
        raise
    host, port = sock.getsockname()[:2]
    server = _Server(uvicorn_config(app, config, grace=grace), runtime)
    try:
        with _stop_on_signals(server):
            err.write(f"distributor: serving HTTP upload API on {format_address(host, port)}\n")
            err.flush()
            server.run(sockets=[sock])
    finally:
        sock.close()
        drained = runtime.shutdown(grace)
    if not drained:
        err.write("distributor: stopped with publications still running; they resume at the next start\n")
    return 0

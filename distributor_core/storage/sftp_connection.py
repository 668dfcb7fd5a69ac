"""The SSH connection of the SFTP backend: settings, host keys, connecting, channel pool.

One SSH connection per :class:`SSHConnection`, opened lazily on first use and reused until
:meth:`SSHConnection.close` (re-opened if it drops). SFTP channels on that connection are pooled
so that concurrent operations (parallel writes, a read stream open while other calls run) each
get their own channel. Host keys are checked against ``known_hosts_file``: ``strict`` refuses
unknown keys, ``accept_new`` trusts and appends them (never during a dry run, where the key is
trusted for that connection only); a mismatch always fails.

Every failure to get a channel is an :class:`SFTPUnavailable` whose message is safe to show
(never a secret); the storage adapter reports it as ``unavailable``.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any, Protocol

import paramiko
from paramiko.sftp import SFTPError
from paramiko.sftp_client import SFTPClient

from distributor_core.config.models import SSHBackend, default_of
from distributor_core.config.shape import field
from distributor_core.config.ssh_options import host_problem, option_problems, user_problem
from distributor_core.storage import sftp_wire as wire
from distributor_core.storage.errors import ErrorKind

# paramiko logs connection failures with tracebacks from its transport thread; without a handler
# they would reach stderr through logging's last resort. The failures are reported as
# StorageErrors; applications that configure logging still receive paramiko's records.
logging.getLogger("paramiko").addHandler(logging.NullHandler())

#: an ``ssh`` backend's ``host_key_policy`` values, defaults and transports, as the config declares them
HOST_KEY_POLICIES = field(SSHBackend, "host_key_policy").choices
#: ``paramiko`` (SSH in this process) or ``openssh`` (the system ``ssh`` client, :mod:`.sftp_openssh`)
TRANSPORTS = field(SSHBackend, "transport").choices
DEFAULT_KNOWN_HOSTS_FILE: str = os.fspath(default_of(SSHBackend, "known_hosts_file"))
DEFAULT_PORT: int = default_of(SSHBackend, "port")
DEFAULT_HOST_KEY_POLICY: str = default_of(SSHBackend, "host_key_policy")
DEFAULT_TRANSPORT: str = default_of(SSHBackend, "transport")

#: ciphers paramiko runs fastest (AES-GCM, then AES-CTR); the rest keep paramiko's order
_PREFERRED_CIPHERS = ("aes128-gcm@openssh.com", "aes256-gcm@openssh.com", "aes128-ctr", "aes256-ctr")
#: per-channel receive window and largest packet we accept (big reads need both)
_CHANNEL_WINDOW = 8 * 1024 * 1024
_CHANNEL_MAX_PACKET = 256 * 1024
_KEEPALIVE_SECONDS = 30


def status_text(exc: OSError) -> str:
    return exc.strerror or str(exc) or type(exc).__name__


class SFTPUnavailable(Exception):
    """No SFTP channel could be had (connect, authentication, host key, pool bound); the message
    is safe to show. ``kind`` is the storage error it becomes: ``untrusted`` for a host key that is
    unknown, changed or unverifiable, else ``unavailable``."""

    def __init__(self, message: str, kind: ErrorKind = ErrorKind.UNAVAILABLE) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True, slots=True)
class SSHEndpoint:
    """Where and how to connect. Paths are expanded (``~``) on construction."""

    host: str
    user: str
    port: int = DEFAULT_PORT
    private_key_file: str | None = None
    known_hosts_file: str = DEFAULT_KNOWN_HOSTS_FILE
    host_key_policy: str = DEFAULT_HOST_KEY_POLICY
    dry_run: bool = False
    connect_timeout: float = 15.0
    io_timeout: float = 120.0
    max_channels: int = 8
    transport: str = DEFAULT_TRANSPORT
    #: ``transport: openssh`` only: the ``-F`` file (``None``: ``/dev/null``) and extra ``-o`` options
    ssh_config_file: str | None = None
    ssh_options: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if not self.host:
            raise ValueError("ssh host is required")
        if problem := host_problem(self.host):
            raise ValueError(f"ssh host {problem}")
        if not self.user:
            raise ValueError("ssh user is required")
        if problem := user_problem(self.user):
            raise ValueError(f"ssh user {problem}")
        if not isinstance(self.port, int) or not 1 <= self.port <= 65535:
            raise ValueError("ssh port must be between 1 and 65535")
        policy = str(getattr(self.host_key_policy, "value", self.host_key_policy))
        if policy not in HOST_KEY_POLICIES:
            raise ValueError("ssh host_key_policy must be strict or accept_new")
        if self.max_channels < 1:
            raise ValueError("max_channels must be at least 1")
        if self.transport not in TRANSPORTS:
            raise ValueError("ssh transport must be paramiko or openssh")
        if self.transport != "openssh" and (self.ssh_config_file or self.ssh_options):
            raise ValueError("ssh_config_file and ssh_options are only used with transport: openssh")
        options = tuple((str(name), str(value)) for name, value in self.ssh_options)
        problems = option_problems(options)
        if problems:
            raise ValueError("; ".join(problems))
        config = os.path.expanduser(os.fspath(self.ssh_config_file)) if self.ssh_config_file else None
        object.__setattr__(self, "ssh_options", options)
        object.__setattr__(self, "ssh_config_file", config)
        key = os.path.expanduser(os.fspath(self.private_key_file)) if self.private_key_file else None
        known = os.path.expanduser(os.fspath(self.known_hosts_file or DEFAULT_KNOWN_HOSTS_FILE))
        object.__setattr__(self, "host_key_policy", policy)
        object.__setattr__(self, "private_key_file", key)
        object.__setattr__(self, "known_hosts_file", known)

    @property
    def address(self) -> str:
        return self.host if self.port == DEFAULT_PORT else f"[{self.host}]:{self.port}"


@dataclass(slots=True)
class Channel:
    """One pooled SFTP channel, the request sizes its server accepts and the connection it
    belongs to (it goes back there)."""

    sftp: SFTPClient
    generation: int
    read_size: int
    write_size: int
    connection: Connection | None = None

    @property
    def alive(self) -> bool:
        return wire.channel_alive(self.sftp)


class Connection(Protocol):
    """What the adapter and :class:`TransferPool` need of a transport: a pool of SFTP channels to
    one server. :class:`SSHConnection` (paramiko) and
    :class:`~distributor_core.storage.sftp_openssh.OpenSSHConnection` (the ``ssh`` client)."""

    endpoint: SSHEndpoint

    def __init__(self, endpoint: SSHEndpoint) -> None: ...

    @property
    def connect_count(self) -> int: ...

    @property
    def connected(self) -> bool: ...

    def lease(self) -> Channel: ...

    def release(self, channel: Channel, healthy: bool) -> None: ...

    def close(self) -> None: ...


class _ConnectError(Exception):
    """Connecting or authenticating failed; the message is safe to show (no secrets)."""

    def __init__(self, message: str, kind: ErrorKind = ErrorKind.UNAVAILABLE) -> None:
        super().__init__(message)
        self.kind = kind


def _transport_factory(sock: Any, **kwargs: Any) -> paramiko.Transport:
    transport = paramiko.Transport(sock, **kwargs)
    options = transport.get_security_options()
    available = tuple(options.ciphers)
    preferred = tuple(c for c in _PREFERRED_CIPHERS if c in available)
    options.ciphers = preferred + tuple(c for c in available if c not in preferred)
    return transport


class _HostKeyPolicy(paramiko.MissingHostKeyPolicy):
    """``strict``: unknown keys are refused. ``accept_new``: trusted and appended to the
    known_hosts file, except in dry runs (trusted for this connection only)."""

    def __init__(self, policy: str, known_hosts_file: str, dry_run: bool) -> None:
        self.policy = policy
        self.known_hosts_file = known_hosts_file
        self.dry_run = dry_run

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        offered = f"{key.get_name()} {key.fingerprint}"
        if self.policy != "accept_new":
            raise _ConnectError(
                f"host key of {hostname} is not in known_hosts file {self.known_hosts_file} "
                f"(server offered {offered}); add it (ssh-keyscan) or set host_key_policy: accept_new",
                ErrorKind.UNTRUSTED,
            )
        client.get_host_keys().add(hostname, key.get_name(), key)
        if self.dry_run:
            return
        try:
            _append_known_host(self.known_hosts_file, f"{hostname} {key.get_name()} {key.get_base64()}\n")
        except OSError as exc:
            raise _ConnectError(
                f"cannot record new host key of {hostname} in {self.known_hosts_file}: {status_text(exc)}"
            ) from exc


def _append_known_host(path: str, line: str) -> None:
    directory = os.path.dirname(path)
    if directory:
        os.makedirs(directory, mode=0o700, exist_ok=True)
    try:
        with open(path, "rb") as existing:
            if existing.seek(0, os.SEEK_END) > 0:
                existing.seek(-1, os.SEEK_END)
                if existing.read(1) != b"\n":
                    line = "\n" + line
    except FileNotFoundError:
        pass
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
    with os.fdopen(fd, "ab") as handle:
        handle.write(line.encode("utf-8"))


class ChannelPool:
    """At most ``endpoint.max_channels`` SFTP channels of one storage object: idle ones reused,
    a new one opened (by the subclass's :meth:`_open_channel`, outside the lock) when none is
    idle, a caller waiting up to ``io_timeout`` for a free one. Channels carry the generation
    they were opened in: when the subclass drops what they ran over (a reconnect, a close), it
    bumps the generation, and older channels are closed when released and stop counting."""

    def __init__(self, endpoint: SSHEndpoint) -> None:
        self.endpoint = endpoint
        self._cond = threading.Condition(threading.Lock())
        self._generation = 0
        self._idle: list[Channel] = []
        self._open_channels = 0

    def _prepare_locked(self) -> Any:
        """Called under the lock before each look at the pool; what :meth:`_open_channel` needs
        (the paramiko connection opens its SSH connection here)."""
        return None

    def _open_channel(self, prepared: Any, generation: int) -> Channel:
        raise NotImplementedError

    def lease(self) -> Channel:
        """An SFTP channel for one operation (give it back with :meth:`release`)."""
        endpoint = self.endpoint
        deadline = time.monotonic() + max(endpoint.io_timeout, 1.0)
        with self._cond:
            while True:
                prepared = self._prepare_locked()
                while self._idle:
                    channel = self._idle.pop()
                    if channel.generation == self._generation and channel.alive:
                        return channel
                    self._open_channels -= 1
                    wire.close_quietly(channel.sftp)
                if self._open_channels < endpoint.max_channels:
                    self._open_channels += 1
                    generation = self._generation
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise SFTPUnavailable(f"all {endpoint.max_channels} SFTP channels are busy")
                self._cond.wait(remaining)
        try:
            return self._open_channel(prepared, generation)
        except BaseException:
            with self._cond:
                if generation == self._generation:  # a reconnect meanwhile reset the count
                    self._open_channels -= 1
                self._cond.notify_all()
            raise

    def release(self, channel: Channel, healthy: bool) -> None:
        with self._cond:
            if healthy and channel.generation == self._generation and channel.alive:
                self._idle.append(channel)
                self._cond.notify_all()
                return
            if channel.generation == self._generation:
                self._open_channels -= 1
            self._cond.notify_all()
        wire.close_quietly(channel.sftp)


class SSHConnection(ChannelPool):
    """The lazily opened SSH connection of one storage object and its pool of SFTP channels."""

    def __init__(self, endpoint: SSHEndpoint) -> None:
        super().__init__(endpoint)
        self._client: paramiko.SSHClient | None = None
        self._connect_count = 0

    @property
    def connect_count(self) -> int:
        """How many SSH connections have been opened (1 when all went well)."""
        return self._connect_count

    @property
    def connected(self) -> bool:
        client = self._client
        transport = client.get_transport() if client is not None else None
        return transport is not None and transport.is_active()

    @property
    def transport(self) -> paramiko.Transport | None:
        """The current SSH transport, if connected (tests drop it to simulate a failure)."""
        client = self._client
        return client.get_transport() if client is not None else None

    # ------------------------------------------------------------------ connecting

    def _connect(self) -> paramiko.SSHClient:
        endpoint = self.endpoint
        client = paramiko.SSHClient()
        if os.path.exists(endpoint.known_hosts_file):
            try:
                client.get_host_keys().load(endpoint.known_hosts_file)
            except (OSError, paramiko.SSHException, ValueError) as exc:
                raise _ConnectError(f"cannot read known_hosts file {endpoint.known_hosts_file}: {exc}") from exc
        client.set_missing_host_key_policy(
            _HostKeyPolicy(endpoint.host_key_policy, endpoint.known_hosts_file, endpoint.dry_run)
        )
        if endpoint.private_key_file is not None:
            try:
                with open(endpoint.private_key_file, "rb"):
                    pass
            except OSError as exc:
                raise _ConnectError(
                    f"cannot read private key file {endpoint.private_key_file}: {status_text(exc)}"
                ) from exc
        timeout = endpoint.connect_timeout
        try:
            client.connect(
                hostname=endpoint.host,
                port=endpoint.port,
                username=endpoint.user,
                key_filename=endpoint.private_key_file,
                allow_agent=endpoint.private_key_file is None,
                look_for_keys=endpoint.private_key_file is None,
                timeout=timeout,
                banner_timeout=timeout,
                auth_timeout=timeout,
                channel_timeout=timeout,
                transport_factory=_transport_factory,
            )
        except Exception as exc:
            failure = exc if isinstance(exc, _ConnectError) else self._connect_failure(client, exc)
            client.close()
            raise failure from None
        transport = client.get_transport()
        if transport is not None:
            transport.set_keepalive(_KEEPALIVE_SECONDS)
        self._connect_count += 1
        return client

    def _connect_failure(self, client: paramiko.SSHClient, exc: Exception) -> _ConnectError:
        """A message for a failed connect that says what to look at (never secrets)."""
        endpoint = self.endpoint
        address = endpoint.address
        timeout = endpoint.connect_timeout
        transport = client.get_transport()
        if isinstance(exc, paramiko.BadHostKeyException):
            return _ConnectError(
                f"host key of {address} does not match known_hosts file {endpoint.known_hosts_file} "
                f"(server offered {exc.key.get_name()} {exc.key.fingerprint}, "
                f"expected {exc.expected_key.get_name()} {exc.expected_key.fingerprint}); refusing to connect",
                ErrorKind.UNTRUSTED,
            )
        if isinstance(exc, paramiko.PasswordRequiredException):
            return _ConnectError(
                f"private key file {endpoint.private_key_file} is encrypted; passphrases are not supported"
            )
        if isinstance(exc, paramiko.ssh_exception.NoValidConnectionsError):
            return _ConnectError(f"connection to {address} refused")
        if isinstance(exc, socket.gaierror):
            return _ConnectError(f"cannot resolve host {endpoint.host}: {exc.strerror or exc}")
        if isinstance(exc, TimeoutError) and transport is None:
            return _ConnectError(f"timed out connecting to {address} after {timeout:g}s")
        if transport is not None and not transport.remote_version:
            return _ConnectError(
                f"no SSH protocol banner from {address} within {timeout:g}s "
                "(not an SSH server, or it is refusing connections)"
            )
        if isinstance(exc, paramiko.AuthenticationException):
            return _ConnectError(f"authentication as {endpoint.user} at {address} failed: {exc}")
        detail = status_text(exc) if isinstance(exc, OSError) else (str(exc) or type(exc).__name__)
        return _ConnectError(f"cannot connect to {address}: {detail}")

    def _ensure_connected_locked(self) -> paramiko.SSHClient:
        if self._client is not None and self.connected:
            return self._client
        if self._client is not None:
            self._drop_connection_locked()
        self._client = self._connect()
        return self._client

    def _drop_connection_locked(self) -> None:
        """Forget the connection. Channels still leased belong to the old generation: they are
        closed when released and no longer count against ``max_channels``."""
        idle, self._idle = self._idle, []
        self._open_channels = 0
        client, self._client = self._client, None
        self._generation += 1
        for channel in idle:
            wire.close_quietly(channel.sftp)
        if client is not None:
            client.close()
        self._cond.notify_all()

    # ------------------------------------------------------------------ channel pool

    def _prepare_locked(self) -> paramiko.SSHClient:
        """Connect first when needed."""
        try:
            return self._ensure_connected_locked()
        except _ConnectError as exc:
            raise SFTPUnavailable(str(exc), exc.kind) from None

    def _open_channel(self, prepared: paramiko.SSHClient, generation: int) -> Channel:
        try:
            return self._open_sftp(prepared, generation)
        except SFTPUnavailable:
            raise
        except (*wire.CONNECTION_ERRORS, OSError, SFTPError) as exc:
            raise SFTPUnavailable(f"cannot open an SFTP session: {exc}") from None

    def _open_sftp(self, client: paramiko.SSHClient, generation: int) -> Channel:
        problems = wire.check_paramiko()
        if problems:
            raise SFTPUnavailable("; ".join(problems))
        transport = client.get_transport()
        if transport is None:
            raise paramiko.SSHException("not connected")
        sftp = SFTPClient.from_transport(transport, window_size=_CHANNEL_WINDOW, max_packet_size=_CHANNEL_MAX_PACKET)
        if sftp is None:
            raise paramiko.SSHException("the server refused the sftp subsystem")
        try:
            problems = wire.client_problems(sftp)
            if problems:
                raise SFTPUnavailable("; ".join(problems))
            sftp.get_channel().settimeout(self.endpoint.io_timeout)
            read_size, write_size = wire.server_limits(sftp)
        except BaseException:
            wire.close_quietly(sftp)
            raise
        return Channel(sftp, generation, read_size, write_size, self)

    def close(self) -> None:
        with self._cond:
            self._drop_connection_locked()


class TransferPool:
    """SSH connections for concurrent file transfers: the storage's own connection first, then
    up to ``limit - 1`` more, each opened only when every connection has a transfer running.

    One SSH connection is one TCP stream, one packet pipeline in paramiko's transport thread and
    one sshd process decrypting it, so transfers side by side on separate connections overlap
    where channels of one connection queue behind each other (measured in bench/p9_sftp.py). A
    server that refuses an additional connection (``MaxStartups``, per-user limits) leaves the
    transfers on the connections that exist."""

    def __init__(self, primary: Connection, limit: int) -> None:
        if limit < 1:
            raise ValueError("the transfer pool needs at least one connection")
        self.primary = primary
        self.limit = limit
        self._lock = threading.Lock()
        self._active: dict[Connection, int] = {primary: 0}

    @property
    def extra_connect_count(self) -> int:
        """SSH connections opened besides the primary one."""
        with self._lock:
            return sum(c.connect_count for c in self._active if c is not self.primary)

    def _pick(self) -> Connection:
        with self._lock:
            connection = min(self._active, key=self._active.__getitem__)  # the primary on ties
            if self._active[connection] and len(self._active) < self.limit:
                connection = type(self.primary)(self.primary.endpoint)
                self._active[connection] = 0
            self._active[connection] += 1
            return connection

    def _done(self, connection: Connection) -> None:
        with self._lock:
            if connection in self._active:
                self._active[connection] -= 1

    def lease(self) -> Channel:
        """A channel on the least busy connection (give it back with :meth:`release`)."""
        while True:
            connection = self._pick()
            try:
                return connection.lease()
            except SFTPUnavailable:
                self._done(connection)
                if connection is self.primary or connection.connect_count:
                    raise
                with self._lock:  # refused outright: stay with the connections there are
                    self._active.pop(connection, None)
                    self.limit = len(self._active)
                connection.close()

    def release(self, channel: Channel, healthy: bool) -> None:
        connection = channel.connection or self.primary
        connection.release(channel, healthy)
        self._done(connection)

    def close(self) -> None:
        """Close the additional connections (the primary one is its owner's to close)."""
        with self._lock:
            extras = [c for c in self._active if c is not self.primary]
            self._active = {self.primary: self._active.get(self.primary, 0)}
        for connection in extras:
            connection.close()

"""SSH/SFTP backend over paramiko (interfaces §1.6, §5.3; resolutions A1, A4).

The configured ``path`` is the backend root on the server. Below it every ancestor of a target
is ``lstat``-ed and a symlink is refused, so no operation can leave the root; reads require
regular files. Writes stream into a reserved temporary sibling (``.distributor-tmp-<16 hex>``,
opened exclusively), are hashed and counted while they are sent, and are moved into place only
after size and sha256 were verified: with ``posix-rename@openssh.com`` when overwriting (atomic
replace), with a plain SFTP ``rename`` otherwise, which the server refuses when the target
exists, so a racing writer is never clobbered.

Connections: one SSH connection per storage object, opened lazily on first use and reused
until :meth:`SFTPStorage.close` (re-opened if it drops). SFTP channels on that connection are
pooled so that concurrent operations (parallel writes, a read stream open while other calls
run) each get their own channel. Host keys are checked against ``known_hosts_file``: ``strict``
refuses unknown keys, ``accept_new`` trusts and appends them (never during a dry run, where the
key is trusted for that connection only); a mismatch always fails.

Transfers pipeline many requests per round trip (reads keep several large requests in flight,
sized by the server's ``limits@openssh.com`` answer when it gives one; writes keep 64 requests in
flight and check every acknowledgement), because paramiko's own prefetch buffers without bound
and its pipelined writes drop late errors.
"""

from __future__ import annotations

import errno
import io
import logging
import os
import posixpath
import socket
import stat as st
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, BinaryIO

import paramiko
from paramiko.sftp import (
    CMD_DATA,
    CMD_EXTENDED,
    CMD_EXTENDED_REPLY,
    CMD_READ,
    CMD_STATUS,
    CMD_WRITE,
    SFTPError,
)
from paramiko.sftp_attr import SFTPAttributes
from paramiko.sftp_client import SFTPClient, int64

from distributor_core import paths as lp
from distributor_core.storage.base import Entry, EntryType, HashingVerifier, Storage
from distributor_core.storage.capabilities import Capabilities, Feature
from distributor_core.storage.errors import ErrorKind, StorageError

# paramiko logs connection failures with tracebacks from its transport thread; without a handler
# they would reach stderr through logging's last resort. The failures are reported as
# StorageErrors; applications that configure logging still receive paramiko's records.
logging.getLogger("paramiko").addHandler(logging.NullHandler())

HOST_KEY_POLICIES = ("strict", "accept_new")
DEFAULT_KNOWN_HOSTS_FILE = "~/.ssh/known_hosts"
DEFAULT_PORT = 22

_DIR_MODE = 0o755
#: ciphers paramiko runs fastest (AES-GCM, then AES-CTR); the rest keep paramiko's order
_PREFERRED_CIPHERS = ("aes128-gcm@openssh.com", "aes256-gcm@openssh.com", "aes128-ctr", "aes256-ctr")
#: per-channel receive window and largest packet we accept (big reads need both)
_CHANNEL_WINDOW = 8 * 1024 * 1024
_CHANNEL_MAX_PACKET = 256 * 1024
#: request sizes every SFTP server accepts; larger reads only when the server says so
_SAFE_REQUEST = 32 * 1024
_MAX_READ_REQUEST = 256 * 1024
_READ_BYTES_IN_FLIGHT = 4 * 1024 * 1024
#: 32 KiB writes are fastest with paramiko (measured); this many are sent before waiting
_WRITE_REQUESTS_IN_FLIGHT = 64
_KEEPALIVE_SECONDS = 30

_CONNECTION_ERRORS: tuple[type[BaseException], ...] = (paramiko.SSHException, EOFError, ConnectionError, TimeoutError)


def _entry_type(mode: int | None) -> EntryType:
    if mode is None:
        return "other"
    if st.S_ISREG(mode):
        return "file"
    if st.S_ISDIR(mode):
        return "directory"
    if st.S_ISLNK(mode):
        return "symlink"
    return "other"


def _revision(attr: SFTPAttributes) -> str:
    return f"{attr.st_mtime}-{attr.st_size}"


def _entry(path: str, attr: SFTPAttributes) -> Entry:
    kind = _entry_type(attr.st_mode)
    mtime = datetime.fromtimestamp(attr.st_mtime, UTC) if attr.st_mtime is not None else None
    return Entry(
        path=path,
        type=kind,
        size=(attr.st_size or 0) if kind != "directory" else 0,
        mtime=mtime,
        revision=_revision(attr),
    )


def _is_dir(attr: SFTPAttributes) -> bool:
    return attr.st_mode is not None and st.S_ISDIR(attr.st_mode)


def _is_link(attr: SFTPAttributes) -> bool:
    return attr.st_mode is not None and st.S_ISLNK(attr.st_mode)


def _status_text(exc: OSError) -> str:
    return exc.strerror or str(exc) or type(exc).__name__


def _kind_for(exc: OSError) -> ErrorKind:
    code = exc.errno
    if code in (errno.ENOENT, errno.ENOTDIR):
        return ErrorKind.NOT_FOUND
    if code in (errno.EACCES, errno.EPERM, errno.EROFS):
        return ErrorKind.PERMISSION
    if code == errno.EEXIST:
        return ErrorKind.ALREADY_EXISTS
    if "unsupported" in _status_text(exc).lower():
        return ErrorKind.UNSUPPORTED
    return ErrorKind.OTHER


def _is_missing(exc: BaseException) -> bool:
    missing = (errno.ENOENT, errno.ENOTDIR)
    return isinstance(exc, OSError) and not isinstance(exc, _CONNECTION_ERRORS) and exc.errno in missing


def _is_status_error(exc: BaseException) -> bool:
    """An SFTP status reply (the request failed, the connection is fine)."""
    return isinstance(exc, OSError) and not isinstance(exc, _CONNECTION_ERRORS)


class _ConnectError(Exception):
    """Connecting or authenticating failed; the message is safe to show (no secrets)."""


class _SourceFailed(Exception):
    """Wraps an exception raised by a caller's chunk iterator so it passes through untouched."""


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
                f"(server offered {offered}); add it (ssh-keyscan) or set host_key_policy: accept_new"
            )
        client.get_host_keys().add(hostname, key.get_name(), key)
        if self.dry_run:
            return
        try:
            _append_known_host(self.known_hosts_file, f"{hostname} {key.get_name()} {key.get_base64()}\n")
        except OSError as exc:
            raise _ConnectError(
                f"cannot record new host key of {hostname} in {self.known_hosts_file}: {_status_text(exc)}"
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


class _Pending:
    """Asynchronous requests on one SFTP channel whose replies may arrive in any order.

    paramiko hands replies to other requests to ``_async_response`` while we wait for one."""

    __slots__ = ("__weakref__", "_replies", "_sftp")

    def __init__(self, sftp: SFTPClient) -> None:
        self._sftp = sftp
        self._replies: dict[int, tuple[int, paramiko.Message]] = {}

    def send(self, kind: int, *args: Any) -> int:
        return self._sftp._async_request(self, kind, *args)

    def _async_response(self, kind: int, msg: paramiko.Message, num: int) -> None:
        self._replies[num] = (kind, msg)

    def wait(self, num: int) -> tuple[int, paramiko.Message]:
        """The reply to request ``num``; an error status raises (IOError, EOFError at EOF)."""
        found = self._replies.pop(num, None)
        if found is None:
            kind, msg = self._sftp._read_response(num)
            return kind, msg
        kind, msg = found
        if kind == CMD_STATUS:
            self._sftp._convert_status(msg)
        return kind, msg

    def read_data(self, num: int) -> bytes:
        kind, msg = self.wait(num)
        if kind != CMD_DATA:
            raise SFTPError("expected data reply")
        return msg.get_string()

    def drain(self, nums: Iterable[int]) -> None:
        """Collect replies nobody needs any more (after a failure or an early close)."""
        for num in list(nums):
            try:
                self.wait(num)
            except (OSError, EOFError, SFTPError):
                if not _channel_alive(self._sftp):
                    return
            except Exception:
                return


def _channel_alive(sftp: SFTPClient) -> bool:
    channel = sftp.get_channel()
    if channel is None or channel.closed:
        return False
    transport = channel.get_transport()
    return transport is not None and transport.is_active()


@dataclass(slots=True)
class _Channel:
    sftp: SFTPClient
    generation: int
    read_size: int
    write_size: int

    @property
    def read_in_flight(self) -> int:
        return max(4, _READ_BYTES_IN_FLIGHT // self.read_size)


def _server_limits(sftp: SFTPClient) -> tuple[int, int]:
    """(read request size, write request size) for this server: OpenSSH answers
    ``limits@openssh.com``; anything else gets the 32 KiB every server accepts."""
    try:
        kind, msg = sftp._request(CMD_EXTENDED, "limits@openssh.com")
    except (OSError, EOFError, SFTPError):
        return _SAFE_REQUEST, _SAFE_REQUEST
    if kind != CMD_EXTENDED_REPLY:
        return _SAFE_REQUEST, _SAFE_REQUEST
    msg.get_int64()  # max packet length
    max_read = msg.get_int64()
    max_write = msg.get_int64()
    read_size = min(max_read, _MAX_READ_REQUEST) if max_read > 0 else _SAFE_REQUEST
    write_size = min(max_write, _SAFE_REQUEST) if max_write > 0 else _SAFE_REQUEST
    return max(read_size, 1024), max(write_size, 1024)


class SFTPStorage(Storage):
    """SFTP backend rooted at the absolute remote directory ``root``."""

    backend = "ssh"
    capabilities = Capabilities(
        frozenset({Feature.ATOMIC_RENAME, Feature.CONDITIONAL_WRITES, Feature.EXCLUSIVE_CREATE, Feature.REVISIONS})
    )

    def __init__(
        self,
        *,
        host: str,
        user: str,
        root: str,
        port: int = DEFAULT_PORT,
        private_key_file: str | os.PathLike[str] | None = None,
        known_hosts_file: str | os.PathLike[str] | None = None,
        host_key_policy: str = "strict",
        dry_run: bool = False,
        connect_timeout: float = 15.0,
        io_timeout: float = 120.0,
        max_channels: int = 8,
        display: str | None = None,
    ) -> None:
        if not host:
            raise ValueError("ssh host is required")
        if not user:
            raise ValueError("ssh user is required")
        if not isinstance(port, int) or not 1 <= port <= 65535:
            raise ValueError("ssh port must be between 1 and 65535")
        if not root or not root.startswith("/"):
            raise ValueError("ssh path must be an absolute remote directory")
        policy = str(getattr(host_key_policy, "value", host_key_policy))
        if policy not in HOST_KEY_POLICIES:
            raise ValueError("ssh host_key_policy must be strict or accept_new")
        if max_channels < 1:
            raise ValueError("max_channels must be at least 1")
        self.host = host
        self.port = port
        self.user = user
        self.root = posixpath.normpath(root)
        self.root_display = display if display is not None else root
        self.private_key_file = os.path.expanduser(os.fspath(private_key_file)) if private_key_file else None
        self.known_hosts_file = os.path.expanduser(os.fspath(known_hosts_file or DEFAULT_KNOWN_HOSTS_FILE))
        self.host_key_policy = policy
        self.dry_run = dry_run
        self.connect_timeout = connect_timeout
        self.io_timeout = io_timeout
        self.max_channels = max_channels

        self._cond = threading.Condition(threading.Lock())
        self._client: paramiko.SSHClient | None = None
        self._generation = 0
        self._idle: list[_Channel] = []
        self._open_channels = 0
        self._connect_count = 0
        self._root_ready = False

    @classmethod
    def from_config(cls, cfg: Any, env: Any = None, *, dry_run: bool = False) -> SFTPStorage:
        """Build from an ``ssh`` source or destination config (interfaces §1.6). ``env`` is the
        secret resolver; ssh needs no secrets today (keys are files, agents are implicit)."""
        port = getattr(cfg, "port", None) or DEFAULT_PORT
        policy = getattr(cfg, "host_key_policy", None) or "strict"
        return cls(
            host=cfg.host,
            port=int(port),
            user=cfg.user,
            root=os.fspath(cfg.path),
            private_key_file=getattr(cfg, "private_key_file", None) or None,
            known_hosts_file=getattr(cfg, "known_hosts_file", None) or None,
            host_key_policy=policy,
            dry_run=dry_run,
        )

    def __repr__(self) -> str:
        return f"SFTPStorage(ssh://{self.user}@{self.host}:{self.port}{self.root})"

    # ------------------------------------------------------------------ connection

    @property
    def address(self) -> str:
        return self.host if self.port == DEFAULT_PORT else f"[{self.host}]:{self.port}"

    @property
    def connect_count(self) -> int:
        """How many SSH connections this object has opened (1 when all went well)."""
        return self._connect_count

    @property
    def connected(self) -> bool:
        client = self._client
        transport = client.get_transport() if client is not None else None
        return transport is not None and transport.is_active()

    def _connect(self) -> paramiko.SSHClient:
        client = paramiko.SSHClient()
        if os.path.exists(self.known_hosts_file):
            try:
                client.get_host_keys().load(self.known_hosts_file)
            except (OSError, paramiko.SSHException, ValueError) as exc:
                raise _ConnectError(f"cannot read known_hosts file {self.known_hosts_file}: {exc}") from exc
        client.set_missing_host_key_policy(_HostKeyPolicy(self.host_key_policy, self.known_hosts_file, self.dry_run))
        if self.private_key_file is not None:
            try:
                with open(self.private_key_file, "rb"):
                    pass
            except OSError as exc:
                raise _ConnectError(
                    f"cannot read private key file {self.private_key_file}: {_status_text(exc)}"
                ) from exc
        timeout = self.connect_timeout
        try:
            client.connect(
                hostname=self.host,
                port=self.port,
                username=self.user,
                key_filename=self.private_key_file,
                allow_agent=self.private_key_file is None,
                look_for_keys=self.private_key_file is None,
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
        timeout = self.connect_timeout
        transport = client.get_transport()
        if isinstance(exc, paramiko.BadHostKeyException):
            return _ConnectError(
                f"host key of {self.address} does not match known_hosts file {self.known_hosts_file} "
                f"(server offered {exc.key.get_name()} {exc.key.fingerprint}, "
                f"expected {exc.expected_key.get_name()} {exc.expected_key.fingerprint}); refusing to connect"
            )
        if isinstance(exc, paramiko.PasswordRequiredException):
            return _ConnectError(
                f"private key file {self.private_key_file} is encrypted; passphrases are not supported"
            )
        if isinstance(exc, paramiko.ssh_exception.NoValidConnectionsError):
            return _ConnectError(f"connection to {self.address} refused")
        if isinstance(exc, socket.gaierror):
            return _ConnectError(f"cannot resolve host {self.host}: {exc.strerror or exc}")
        if isinstance(exc, TimeoutError) and transport is None:
            return _ConnectError(f"timed out connecting to {self.address} after {timeout:g}s")
        if transport is not None and not transport.remote_version:
            return _ConnectError(
                f"no SSH protocol banner from {self.address} within {timeout:g}s "
                "(not an SSH server, or it is refusing connections)"
            )
        if isinstance(exc, paramiko.AuthenticationException):
            return _ConnectError(f"authentication as {self.user} at {self.address} failed: {exc}")
        detail = _status_text(exc) if isinstance(exc, OSError) else (str(exc) or type(exc).__name__)
        return _ConnectError(f"cannot connect to {self.address}: {detail}")

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
            _close_quietly(channel.sftp)
        if client is not None:
            client.close()
        self._cond.notify_all()

    def _lease(self, op: str, path: str) -> _Channel:
        deadline = time.monotonic() + max(self.io_timeout, 1.0)
        with self._cond:
            while True:
                try:
                    client = self._ensure_connected_locked()
                except _ConnectError as exc:
                    raise self.error(op, path, ErrorKind.UNAVAILABLE, str(exc)) from None
                while self._idle:
                    channel = self._idle.pop()
                    if channel.generation == self._generation and _channel_alive(channel.sftp):
                        return channel
                    self._open_channels -= 1
                    _close_quietly(channel.sftp)
                if self._open_channels < self.max_channels:
                    self._open_channels += 1
                    generation = self._generation
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise self.error(op, path, ErrorKind.UNAVAILABLE, f"all {self.max_channels} SFTP channels are busy")
                self._cond.wait(remaining)
        try:
            channel = self._open_channel(client, generation)
        except BaseException as exc:
            with self._cond:
                if generation == self._generation:  # a reconnect meanwhile reset the count
                    self._open_channels -= 1
                self._cond.notify_all()
            if isinstance(exc, (*_CONNECTION_ERRORS, OSError, SFTPError)):
                raise self.error(op, path, ErrorKind.UNAVAILABLE, f"cannot open an SFTP session: {exc}") from None
            raise
        return channel

    def _open_channel(self, client: paramiko.SSHClient, generation: int) -> _Channel:
        transport = client.get_transport()
        if transport is None:
            raise paramiko.SSHException("not connected")
        sftp = SFTPClient.from_transport(transport, window_size=_CHANNEL_WINDOW, max_packet_size=_CHANNEL_MAX_PACKET)
        if sftp is None:
            raise paramiko.SSHException("the server refused the sftp subsystem")
        try:
            sftp.get_channel().settimeout(self.io_timeout)
            read_size, write_size = _server_limits(sftp)
        except BaseException:
            _close_quietly(sftp)
            raise
        return _Channel(sftp, generation, read_size, write_size)

    def _release(self, channel: _Channel, healthy: bool) -> None:
        with self._cond:
            if healthy and channel.generation == self._generation and _channel_alive(channel.sftp):
                self._idle.append(channel)
            else:
                if channel.generation == self._generation:
                    self._open_channels -= 1
                _close_quietly(channel.sftp)
            self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._drop_connection_locked()

    # ------------------------------------------------------------------ errors

    def _translate(self, op: str, path: str, exc: BaseException, channel: _Channel | None) -> StorageError:
        if isinstance(exc, StorageError):
            return exc
        alive = channel is not None and _channel_alive(channel.sftp)
        if isinstance(exc, _CONNECTION_ERRORS) or (isinstance(exc, OSError) and not alive):
            detail = _status_text(exc) if isinstance(exc, OSError) else (str(exc) or type(exc).__name__)
            return self.error(op, path, ErrorKind.UNAVAILABLE, f"connection to {self.address} failed: {detail}")
        if isinstance(exc, OSError):
            return self.error(op, path, _kind_for(exc), _status_text(exc))
        if isinstance(exc, UnicodeDecodeError):
            return self.error(op, path, ErrorKind.OTHER, "the server sent a file name that is not valid UTF-8")
        return self.error(op, path, ErrorKind.OTHER, f"SFTP protocol error: {exc}")

    @contextmanager
    def _session(self, op: str, path: str) -> Iterator[_Channel]:
        """Lease a channel for one operation; SFTP and connection errors leave as StorageError."""
        channel = self._lease(op, path)
        healthy = True
        try:
            yield channel
        except StorageError:
            raise
        except (OSError, EOFError, SFTPError, paramiko.SSHException, UnicodeDecodeError) as exc:
            healthy = _is_status_error(exc) and _channel_alive(channel.sftp)
            raise self._translate(op, path, exc, channel) from exc
        except BaseException:
            healthy = _channel_alive(channel.sftp)
            raise
        finally:
            self._release(channel, healthy)

    # ------------------------------------------------------------------ path handling

    def _remote(self, path: str) -> str:
        if path == "":
            return self.root
        if self.root == "/":
            return "/" + path
        return f"{self.root}/{path}"

    @staticmethod
    def _lstat_or_none(sftp: SFTPClient, remote: str) -> SFTPAttributes | None:
        try:
            return sftp.lstat(remote)
        except OSError as exc:
            if _is_missing(exc):
                return None
            raise

    def _stat_root(self, sftp: SFTPClient) -> SFTPAttributes | None:
        """The root may itself be reached through a symlink, so it is followed."""
        try:
            return sftp.stat(self.root)
        except OSError as exc:
            if _is_missing(exc):
                return None
            raise

    def _check_ancestors(self, sftp: SFTPClient, op: str, path: str, *, include_self: bool) -> None:
        """Refuse a symlink on any segment below the root (the final one too if asked)."""
        segments = path.split("/") if path else []
        if not include_self:
            segments = segments[:-1]
        current = self.root
        for index, segment in enumerate(segments):
            current = posixpath.join(current, segment)
            attr = self._lstat_or_none(sftp, current)
            if attr is None:
                return
            if _is_link(attr):
                shown = "/".join(segments[: index + 1])
                raise self.error(op, path, ErrorKind.INVALID_PATH, f"symlinked path component {shown}")
            if index < len(segments) - 1 and not _is_dir(attr):
                return

    def _ensure_root(self, sftp: SFTPClient, op: str, path: str) -> None:
        if self._root_ready:
            return
        attr = self._stat_root(sftp)
        if attr is None:
            missing: list[str] = []
            current = self.root
            while current not in ("/", "") and self._lstat_or_none(sftp, current) is None:
                missing.append(current)
                current = posixpath.dirname(current)
            for directory in reversed(missing):
                self._mkdir(sftp, op, path, directory)
        elif not _is_dir(attr):
            raise self.error(op, path, ErrorKind.UNSUPPORTED, f"backend root {self.root_display} is not a directory")
        self._root_ready = True

    def _mkdir(self, sftp: SFTPClient, op: str, path: str, remote: str) -> None:
        try:
            sftp.mkdir(remote, _DIR_MODE)
        except OSError as exc:
            if not _is_status_error(exc):
                raise
            attr = self._lstat_or_none(sftp, remote)  # a racing writer may have created it
            if attr is None:
                raise
            if _is_link(attr):
                raise self.error(op, path, ErrorKind.INVALID_PATH, "symlinked path component") from None
            if not _is_dir(attr):
                raise self.error(op, path, ErrorKind.ALREADY_EXISTS, "a parent path is not a directory") from None

    def _ensure_parent(self, sftp: SFTPClient, op: str, path: str) -> None:
        """Create the parent directories of ``path`` (0755), refusing symlinked ancestors."""
        self._ensure_root(sftp, op, path)
        directory = lp.parent(path)
        if directory == "":
            return
        segments = directory.split("/")
        current = self.root
        creating = False
        for index, segment in enumerate(segments):
            current = posixpath.join(current, segment)
            if not creating:
                attr = self._lstat_or_none(sftp, current)
                if attr is not None:
                    if _is_link(attr):
                        shown = "/".join(segments[: index + 1])
                        raise self.error(op, path, ErrorKind.INVALID_PATH, f"symlinked path component {shown}")
                    if not _is_dir(attr):
                        raise self.error(op, path, ErrorKind.ALREADY_EXISTS, "a parent path is not a directory")
                    continue
                creating = True
            self._mkdir(sftp, op, path, current)

    # ------------------------------------------------------------------ primitives

    def stat(self, path: str) -> Entry:
        op = "stat"
        if path != "":
            self._check_path(op, path)
        with self._session(op, path) as channel:
            sftp = channel.sftp
            if path == "":
                attr = self._stat_root(sftp)
                if attr is None:
                    raise self.error(op, path, ErrorKind.NOT_FOUND, "backend root does not exist")
                return _entry(path, attr)
            self._check_ancestors(sftp, op, path, include_self=False)
            return _entry(path, sftp.lstat(self._remote(path)))

    def open_read(self, path: str) -> BinaryIO:
        op = "read"
        self._check_path(op, path)
        channel = self._lease(op, path)
        try:
            sftp = channel.sftp
            try:
                self._check_ancestors(sftp, op, path, include_self=False)
                remote = self._remote(path)
                attr = sftp.lstat(remote)
                kind = _entry_type(attr.st_mode)
                if kind == "symlink":
                    raise self.error(op, path, ErrorKind.UNSUPPORTED, "not a regular file (symlink)")
                if kind != "file":
                    raise self.error(op, path, ErrorKind.UNSUPPORTED, "not a regular file")
                handle = sftp.open(remote, "rb")
            except StorageError:
                raise
            except (OSError, EOFError, SFTPError, paramiko.SSHException) as exc:
                raise self._translate(op, path, exc, channel) from exc
        except BaseException:
            self._release(channel, _channel_alive(channel.sftp))
            raise
        return _RemoteReader(self, channel, handle, path)  # type: ignore[return-value]

    def write_stream(
        self,
        path: str,
        chunks: Iterable[bytes],
        *,
        overwrite: bool,
        expected_size: int | None = None,
        expected_sha256: str | None = None,
        content_type: str | None = None,
        if_revision: str | None = None,
        in_place: bool = False,
    ) -> Entry:
        op = "write"
        self._check_in_place(op, path, in_place=in_place, overwrite=overwrite, if_revision=if_revision)
        self._check_path(op, path)
        verifier = HashingVerifier(expected_size, expected_sha256)
        try:
            with self._session(op, path) as channel:
                sftp = channel.sftp
                self._ensure_parent(sftp, op, path)
                final = self._remote(path)
                existing = self._lstat_or_none(sftp, final)
                if existing is not None:
                    if not overwrite:
                        raise self.error(op, path, ErrorKind.ALREADY_EXISTS)
                    if _is_dir(existing):
                        raise self.error(op, path, ErrorKind.UNSUPPORTED, "target is a directory")
                temp = self._remote(lp.sibling_temp_path(path))
                handle = sftp.open(temp, "wbx")  # exclusive create: never reuses anything
                try:
                    try:
                        self._upload(channel, handle, chunks, verifier)
                    except BaseException:
                        _close_file_quietly(handle)
                        raise
                    handle.close()
                    problem = verifier.problem()
                    if problem:
                        raise self.error(op, path, ErrorKind.INTEGRITY, problem)
                    self._publish(sftp, op, temp, final, path, overwrite=overwrite, if_revision=if_revision)
                except BaseException:
                    self._remove_quietly(sftp, temp)
                    raise
        except _SourceFailed as failed:
            original = failed.__cause__
            assert original is not None
            raise original from None
        return Entry(path=path, type="file", size=verifier.size)

    def _upload(
        self, channel: _Channel, handle: paramiko.SFTPFile, chunks: Iterable[bytes], verifier: HashingVerifier
    ) -> None:
        """Send ``chunks`` with many write requests in flight; every reply is checked."""
        pending = _Pending(channel.sftp)
        in_flight: deque[int] = deque()
        request = channel.write_size
        offset = 0
        iterator = iter(chunks)
        try:
            while True:
                try:
                    chunk = next(iterator)
                except StopIteration:
                    break
                except BaseException as exc:
                    raise _SourceFailed() from exc
                if not chunk:
                    continue
                verifier.update(chunk)
                if verifier.exceeded():
                    break
                data = chunk if isinstance(chunk, bytes) else bytes(chunk)
                for start in range(0, len(data), request):
                    piece = data[start : start + request]
                    in_flight.append(pending.send(CMD_WRITE, handle.handle, int64(offset), piece))
                    offset += len(piece)
                    if len(in_flight) >= _WRITE_REQUESTS_IN_FLIGHT:
                        pending.wait(in_flight.popleft())
            while in_flight:
                pending.wait(in_flight.popleft())
        except BaseException:
            pending.drain(in_flight)
            raise

    def _publish(
        self,
        sftp: SFTPClient,
        op: str,
        src: str,
        dst: str,
        path: str,
        *,
        overwrite: bool,
        if_revision: str | None,
    ) -> None:
        """Move ``src`` onto ``dst``: atomic replace when allowed, else a rename the server
        refuses when ``dst`` exists."""
        if if_revision is not None:
            current = self._lstat_or_none(sftp, dst)
            if (_revision(current) if current is not None else "") != if_revision:
                raise self.error(op, path, ErrorKind.CONFLICT, "stored revision changed")
        if overwrite:
            try:
                sftp.posix_rename(src, dst)
            except OSError as exc:
                if _is_status_error(exc) and _kind_for(exc) == ErrorKind.UNSUPPORTED:
                    raise self.error(
                        op,
                        path,
                        ErrorKind.UNSUPPORTED,
                        "the server does not support posix-rename@openssh.com (atomic replace)",
                    ) from exc
                raise
            return
        try:
            sftp.rename(src, dst)
        except OSError as exc:
            if _is_status_error(exc) and self._lstat_or_none(sftp, dst) is not None:
                raise self.error(op, path, ErrorKind.ALREADY_EXISTS) from exc
            raise

    def _remove_quietly(self, sftp: SFTPClient, remote: str) -> None:
        if not _channel_alive(sftp):
            return
        try:
            sftp.remove(remote)
        except Exception:
            pass

    def rename(self, src: str, dst: str, *, overwrite: bool) -> None:
        op = "rename"
        self._check_path(op, src)
        self._check_path(op, dst)
        with self._session(op, src) as channel:
            sftp = channel.sftp
            self._check_ancestors(sftp, op, src, include_self=False)
            source = self._remote(src)
            attr = sftp.lstat(source)
            if _is_dir(attr):
                raise self.error(op, src, ErrorKind.UNSUPPORTED, "source is a directory")
            self._ensure_parent(sftp, op, dst)
            target = self._remote(dst)
            if overwrite:
                existing = self._lstat_or_none(sftp, target)
                if existing is not None and _is_dir(existing):
                    raise self.error(op, dst, ErrorKind.UNSUPPORTED, "target is a directory")
            self._publish(sftp, op, source, target, dst, overwrite=overwrite, if_revision=None)

    def delete_file(self, path: str) -> None:
        op = "delete"
        self._check_path(op, path)
        with self._session(op, path) as channel:
            sftp = channel.sftp
            self._check_ancestors(sftp, op, path, include_self=False)
            target = self._remote(path)
            if _is_dir(sftp.lstat(target)):
                raise self.error(op, path, ErrorKind.UNSUPPORTED, "target is a directory")
            sftp.remove(target)

    def _iter_entries(self, prefix: str, recursive: bool) -> Iterator[Entry]:
        op = "walk"
        with self._session(op, prefix) as channel:
            sftp = channel.sftp
            self._check_ancestors(sftp, op, prefix, include_self=True)
            start = self._remote(prefix)
            attr = self._stat_root(sftp) if prefix == "" else self._lstat_or_none(sftp, start)
        if attr is None or not _is_dir(attr):
            return
        stack = [(start, prefix)]
        while stack:
            directory, logical = stack.pop()
            with self._session(op, logical) as channel:
                try:
                    items = channel.sftp.listdir_attr(directory)
                except OSError as exc:
                    if not _is_missing(exc):
                        raise
                    items = []
            for item in items:
                child = item.filename if logical == "" else f"{logical}/{item.filename}"
                entry = _entry(child, item)
                yield entry
                if recursive and entry.is_dir:
                    stack.append((posixpath.join(directory, item.filename), child))

    def _remove_dir_if_empty(self, path: str) -> bool:
        if path == "":
            return False
        with self._session("remove directory", path) as channel:
            try:
                channel.sftp.rmdir(self._remote(path))
            except OSError as exc:
                if _is_status_error(exc):
                    return False
                raise
        return True


def _close_quietly(sftp: SFTPClient) -> None:
    try:
        sftp.close()
    except Exception:
        pass


def _close_file_quietly(handle: paramiko.SFTPFile) -> None:
    try:
        handle.close()
    except Exception:
        pass


class _RemoteReader(io.RawIOBase):
    """A streaming read of one remote file that keeps several read requests in flight
    (bounded read-ahead). Holds its SFTP channel until closed."""

    def __init__(self, storage: SFTPStorage, channel: _Channel, handle: paramiko.SFTPFile, path: str) -> None:
        super().__init__()
        self._storage = storage
        self._channel = channel
        self._handle = handle
        self._path = path
        self._pending = _Pending(channel.sftp)
        self._in_flight: deque[tuple[int, int, int]] = deque()
        self._next_offset = 0
        self._ready: deque[bytes] = deque()
        self._ready_len = 0
        self._eof = False
        self._released = False

    def readable(self) -> bool:
        return True

    @property
    def name(self) -> str:
        return self._path

    def _request(self, offset: int, length: int) -> int:
        return self._pending.send(CMD_READ, self._handle.handle, int64(offset), length)

    def _append(self, data: bytes) -> None:
        if data:
            self._ready.append(data)
            self._ready_len += len(data)

    def _reached_eof(self) -> None:
        self._eof = True
        nums = [num for num, _offset, _length in self._in_flight]
        self._in_flight.clear()
        self._pending.drain(nums)

    def _pump(self) -> None:
        """Keep the read-ahead window full, then take the oldest reply."""
        size = self._channel.read_size
        while not self._eof and len(self._in_flight) < self._channel.read_in_flight:
            self._in_flight.append((self._request(self._next_offset, size), self._next_offset, size))
            self._next_offset += size
        if not self._in_flight:
            return
        num, offset, length = self._in_flight.popleft()
        try:
            data = self._pending.read_data(num)
        except EOFError:
            self._reached_eof()
            return
        self._append(data)
        got = len(data)
        # a short reply before EOF: fetch the rest of this range before the later ones
        while got < length:
            try:
                data = self._pending.read_data(self._request(offset + got, length - got))
            except EOFError:
                self._reached_eof()
                return
            if not data:
                self._reached_eof()
                return
            self._append(data)
            got += len(data)

    def _fill(self, size: int | None) -> None:
        try:
            while (size is None or self._ready_len < size) and (self._in_flight or not self._eof):
                self._pump()
        except (OSError, EOFError, SFTPError, paramiko.SSHException) as exc:
            raise self._storage._translate("read", self._path, exc, self._channel) from exc

    def _take(self, size: int) -> bytes:
        parts: list[bytes] = []
        taken = 0
        while self._ready and taken < size:
            piece = self._ready.popleft()
            room = size - taken
            if len(piece) > room:
                self._ready.appendleft(piece[room:])
                piece = piece[:room]
            parts.append(piece)
            taken += len(piece)
        self._ready_len -= taken
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def read(self, size: int | None = -1) -> bytes:
        if self.closed:
            raise ValueError("I/O operation on closed file")
        if size is None or size < 0:
            return self.readall()
        if size == 0:
            return b""
        self._fill(size)
        return self._take(size)

    def readall(self) -> bytes:
        if self.closed:
            raise ValueError("I/O operation on closed file")
        self._fill(None)
        return self._take(self._ready_len)

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        data = self.read(len(view))
        view[: len(data)] = data
        return len(data)

    def close(self) -> None:
        if not self._released:
            self._released = True
            healthy = _channel_alive(self._channel.sftp)
            try:
                if healthy:
                    self._pending.drain([num for num, _o, _l in self._in_flight])
                    self._in_flight.clear()
                    self._handle.close()
            except Exception:
                healthy = False
            finally:
                self._ready.clear()
                self._storage._release(self._channel, healthy and _channel_alive(self._channel.sftp))
        super().close()

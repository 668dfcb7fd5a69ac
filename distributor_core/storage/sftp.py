"""SSH/SFTP backend over paramiko or the system ssh client (interfaces §1.6, §5.3; resolutions A1, A4).

The configured ``path`` is the backend root on the server. Below it every ancestor of a target
is ``lstat``-ed and a symlink is refused, so no operation can leave the root; reads require
regular files. Writes stream into a reserved temporary sibling (``.distributor-tmp-<16 hex>``,
opened exclusively), are hashed and counted while they are sent, and are moved into place only
after size and sha256 were verified: with ``posix-rename@openssh.com`` when overwriting (atomic
replace), with a plain SFTP ``rename`` otherwise, which the server refuses when the target
exists, so a racing writer is never clobbered. An ``in_place`` write (the executor's own staging
temporary) is created exclusively under its own name and removed again on any failure.

The backend is four modules: :mod:`.sftp_connection` (settings, host keys, the lazily opened SSH
connection of the ``paramiko`` transport and its pool of SFTP channels), :mod:`.sftp_openssh` (the
``openssh`` transport: each channel an ``ssh -s sftp`` child whose pipes carry the protocol),
:mod:`.sftp_wire` (the pipelined read and write protocol, the only user of paramiko's private
request layer, over either transport) and this adapter (paths, the storage primitives, error
mapping), which is the same for both transports.
"""

from __future__ import annotations

import errno
import os
import posixpath
import stat as st
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, BinaryIO

import paramiko
from paramiko.sftp import SFTPError
from paramiko.sftp_attr import SFTPAttributes
from paramiko.sftp_client import SFTPClient

from distributor_core import paths as lp
from distributor_core.config.models import SSHBackend
from distributor_core.storage import sftp_wire as wire
from distributor_core.storage.base import Entry, EntryType, HashingVerifier, Storage, WriteRequest
from distributor_core.storage.capabilities import Capabilities, Feature
from distributor_core.storage.errors import ErrorKind, StorageError
from distributor_core.storage.sftp_connection import (
    DEFAULT_HOST_KEY_POLICY,
    DEFAULT_KNOWN_HOSTS_FILE,
    DEFAULT_PORT,
    DEFAULT_TRANSPORT,
    HOST_KEY_POLICIES,
    Channel,
    Connection,
    SFTPUnavailable,
    SSHConnection,
    SSHEndpoint,
    TransferPool,
    status_text,
)
from distributor_core.storage.sftp_openssh import OpenSSHConnection

__all__ = ["DEFAULT_KNOWN_HOSTS_FILE", "DEFAULT_PORT", "HOST_KEY_POLICIES", "SFTPStorage"]

_DIR_MODE = 0o755
#: SSH connections one storage object uses for file transfers at most (its own included)
TRANSFER_CONNECTIONS = 4
#: writes at least this large (or of unknown size) may run on a connection of their own;
#: smaller ones share the storage's connection (a new connection costs more than they take)
TRANSFER_MIN_SIZE = 1024 * 1024


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


def _kind_for(exc: OSError) -> ErrorKind:
    code = exc.errno
    if code in (errno.ENOENT, errno.ENOTDIR):
        return ErrorKind.NOT_FOUND
    if code in (errno.EACCES, errno.EPERM, errno.EROFS):
        return ErrorKind.PERMISSION
    if code == errno.EEXIST:
        return ErrorKind.ALREADY_EXISTS
    if "unsupported" in status_text(exc).lower():
        return ErrorKind.UNSUPPORTED
    return ErrorKind.OTHER


def _is_missing(exc: BaseException) -> bool:
    return wire.is_status_error(exc) and isinstance(exc, OSError) and exc.errno in (errno.ENOENT, errno.ENOTDIR)


class SFTPStorage(Storage):
    """SFTP backend rooted at the absolute remote directory ``root``."""

    backend = "ssh"
    #: Four outputs written at once when files are large enough (1 MiB on average), each on its
    #: own SSH connection (:class:`TransferPool`, ``transfer_connections``): like rclone's
    #: ``--transfers 4``. Reads stay sequential (no caller needs them in parallel yet).
    capabilities = Capabilities(
        frozenset(
            {
                Feature.ATOMIC_RENAME,
                Feature.IN_PLACE_WRITES,
                Feature.CONDITIONAL_WRITES,
                Feature.EXCLUSIVE_CREATE,
                Feature.REVISIONS,
            }
        ),
        parallel_writes=TRANSFER_CONNECTIONS,
        parallel_min_file_size=1024 * 1024,
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
        host_key_policy: str = DEFAULT_HOST_KEY_POLICY,
        dry_run: bool = False,
        connect_timeout: float = 15.0,
        io_timeout: float = 120.0,
        max_channels: int = 8,
        transfer_connections: int = TRANSFER_CONNECTIONS,
        display: str | None = None,
        transport: str = DEFAULT_TRANSPORT,
        ssh_config_file: str | os.PathLike[str] | None = None,
        ssh_options: Iterable[tuple[str, str]] = (),
    ) -> None:
        endpoint = SSHEndpoint(
            host=host,
            user=user,
            port=port,
            private_key_file=os.fspath(private_key_file) if private_key_file else None,
            known_hosts_file=os.fspath(known_hosts_file or DEFAULT_KNOWN_HOSTS_FILE),
            host_key_policy=host_key_policy,
            dry_run=dry_run,
            connect_timeout=connect_timeout,
            io_timeout=io_timeout,
            max_channels=max_channels,
            transport=transport,
            ssh_config_file=os.fspath(ssh_config_file) if ssh_config_file else None,
            ssh_options=tuple(ssh_options),
        )
        if not root or not root.startswith("/"):
            raise ValueError("ssh path must be an absolute remote directory")
        self.endpoint = endpoint
        self.host = endpoint.host
        self.port = endpoint.port
        self.user = endpoint.user
        self.private_key_file = endpoint.private_key_file
        self.known_hosts_file = endpoint.known_hosts_file
        self.host_key_policy = endpoint.host_key_policy
        self.dry_run = endpoint.dry_run
        self.connect_timeout = endpoint.connect_timeout
        self.io_timeout = endpoint.io_timeout
        self.max_channels = endpoint.max_channels
        self.root = posixpath.normpath(root)
        self.root_display = display if display is not None else root
        self.transport = endpoint.transport
        self.connection: Connection = (
            OpenSSHConnection(endpoint) if endpoint.transport == "openssh" else SSHConnection(endpoint)
        )
        #: writes of file contents run on up to ``transfer_connections`` SSH connections
        self.transfers = TransferPool(self.connection, transfer_connections)
        self._root_ready = False

    @classmethod
    def from_config(cls, cfg: SSHBackend, env: Any = None, *, dry_run: bool = False) -> SFTPStorage:
        """Build from an ``ssh`` source or destination config (interfaces §1.6): its fields carry
        the declaration's defaults. ``env`` is the secret resolver; ssh needs no secrets today
        (keys are files, agents are implicit)."""
        return cls(
            host=cfg.host,
            port=cfg.port,
            user=cfg.user,
            root=cfg.path,
            private_key_file=cfg.private_key_file,
            known_hosts_file=cfg.known_hosts_file,
            host_key_policy=cfg.host_key_policy,
            dry_run=dry_run,
            transport=cfg.transport,
            ssh_config_file=cfg.ssh_config_file,
            ssh_options=cfg.ssh_options,
        )

    def __repr__(self) -> str:
        return f"SFTPStorage(ssh://{self.user}@{self.host}:{self.port}{self.root})"

    # ------------------------------------------------------------------ connection

    @property
    def address(self) -> str:
        return self.endpoint.address

    @property
    def connect_count(self) -> int:
        """How many SSH connections this object has opened (1 when all went well)."""
        return self.connection.connect_count

    @property
    def connected(self) -> bool:
        return self.connection.connected

    def _lease(self, op: str, path: str, *, transfer: bool = False) -> Channel:
        try:
            return self.transfers.lease() if transfer else self.connection.lease()
        except SFTPUnavailable as exc:
            raise self.error(op, path, exc.kind, str(exc)) from None

    def _release(self, channel: Channel, healthy: bool, *, transfer: bool = False) -> None:
        if transfer:
            self.transfers.release(channel, healthy)
        else:
            (channel.connection or self.connection).release(channel, healthy)

    def close(self) -> None:
        self.transfers.close()
        self.connection.close()

    # ------------------------------------------------------------------ errors

    def _translate(self, op: str, path: str, exc: BaseException, channel: Channel | None) -> StorageError:
        if isinstance(exc, StorageError):
            return exc
        alive = channel is not None and channel.alive
        if isinstance(exc, wire.CONNECTION_ERRORS) or (isinstance(exc, OSError) and not alive):
            detail = status_text(exc) if isinstance(exc, OSError) else (str(exc) or type(exc).__name__)
            return self.error(op, path, ErrorKind.UNAVAILABLE, f"connection to {self.address} failed: {detail}")
        if isinstance(exc, OSError):
            return self.error(op, path, _kind_for(exc), status_text(exc))
        if isinstance(exc, UnicodeDecodeError):
            return self.error(op, path, ErrorKind.OTHER, "the server sent a file name that is not valid UTF-8")
        return self.error(op, path, ErrorKind.OTHER, f"SFTP protocol error: {exc}")

    @contextmanager
    def _session(self, op: str, path: str, *, transfer: bool = False) -> Iterator[Channel]:
        """Lease a channel for one operation (``transfer``: from the transfer pool); SFTP and
        connection errors leave as StorageError."""
        channel = self._lease(op, path, transfer=transfer)
        healthy = True
        try:
            yield channel
        except StorageError:
            raise
        except (OSError, EOFError, SFTPError, paramiko.SSHException, UnicodeDecodeError) as exc:
            healthy = wire.is_status_error(exc) and channel.alive
            raise self._translate(op, path, exc, channel) from exc
        except BaseException:
            healthy = channel.alive
            raise
        finally:
            self._release(channel, healthy, transfer=transfer)

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
            if not wire.is_status_error(exc):
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
            self._release(channel, channel.alive)
            raise
        reader = wire.RemoteReader(
            sftp,
            handle,
            path,
            channel.read_size,
            translate=lambda exc: self._translate(op, path, exc, channel),
            release=lambda healthy: self._release(channel, healthy),
        )
        return reader  # type: ignore[return-value]

    def _write_stream(self, path: str, chunks: Iterable[bytes], request: WriteRequest) -> Entry:
        op = "write"
        verifier = HashingVerifier(request.expected_size, request.expected_sha256)
        try:
            transfer = request.expected_size is None or request.expected_size >= TRANSFER_MIN_SIZE
            with self._session(op, path, transfer=transfer) as channel:
                sftp = channel.sftp
                self._ensure_parent(sftp, op, path)
                final = self._remote(path)
                if request.in_place:
                    self._write_in_place(channel, op, path, final, chunks, verifier)
                    return Entry(path=path, type="file", size=verifier.size)
                existing = self._lstat_or_none(sftp, final)
                if existing is not None:
                    if not request.overwrite:
                        raise self.error(op, path, ErrorKind.ALREADY_EXISTS)
                    if _is_dir(existing):
                        raise self.error(op, path, ErrorKind.UNSUPPORTED, "target is a directory")
                temp = self._remote(lp.sibling_temp_path(path))
                handle = sftp.open(temp, "wbx")  # exclusive create: never reuses anything
                try:
                    self._send(channel, handle, chunks, verifier)
                    problem = verifier.problem()
                    if problem:
                        raise self.error(op, path, ErrorKind.INTEGRITY, problem)
                    self._publish(
                        sftp, op, temp, final, path, overwrite=request.overwrite, if_revision=request.if_revision
                    )
                except BaseException:
                    self._remove_quietly(sftp, temp)
                    raise
        except wire.SourceFailed as failed:
            original = failed.__cause__
            assert original is not None
            raise original from None
        return Entry(path=path, type="file", size=verifier.size)

    def _write_in_place(
        self,
        channel: Channel,
        op: str,
        path: str,
        final: str,
        chunks: Iterable[bytes],
        verifier: HashingVerifier,
    ) -> None:
        """Create ``final`` exclusively and stream into it; on any failure the file this call
        created is removed, leaving nothing under ``path``."""
        sftp = channel.sftp
        try:
            handle = sftp.open(final, "wbx")
        except OSError as exc:
            if wire.is_status_error(exc) and self._lstat_or_none(sftp, final) is not None:
                raise self.error(op, path, ErrorKind.ALREADY_EXISTS) from exc
            raise
        try:
            self._send(channel, handle, chunks, verifier)
            problem = verifier.problem()
            if problem:
                raise self.error(op, path, ErrorKind.INTEGRITY, problem)
        except BaseException:
            self._remove_quietly(sftp, final)
            raise

    @staticmethod
    def _send(channel: Channel, handle: paramiko.SFTPFile, chunks: Iterable[bytes], verifier: HashingVerifier) -> None:
        """Upload ``chunks`` to the open ``handle`` and close it (quietly after a failure)."""
        try:
            wire.upload(channel.sftp, handle, chunks, verifier, channel.write_size)
        except BaseException:
            wire.close_file_quietly(handle)
            raise
        handle.close()

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
                if wire.is_status_error(exc) and _kind_for(exc) == ErrorKind.UNSUPPORTED:
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
            if wire.is_status_error(exc) and self._lstat_or_none(sftp, dst) is not None:
                raise self.error(op, path, ErrorKind.ALREADY_EXISTS) from exc
            raise

    def _remove_quietly(self, sftp: SFTPClient, remote: str) -> None:
        if not wire.channel_alive(sftp):
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
                if wire.is_status_error(exc):
                    return False
                raise
        return True

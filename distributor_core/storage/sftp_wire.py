"""The pipelined SFTP wire protocol on top of paramiko's ``SFTPClient``.

Transfers keep many requests in flight per round trip: reads keep several large requests
outstanding (sized by the server's ``limits@openssh.com`` answer when it gives one) and buffer
only what is in flight; writes keep up to 4 MiB of requests outstanding and check every
acknowledgement. paramiko's public API cannot do either: ``SFTPFile.prefetch``/``readv`` buffer
whatever arrives without bound, ``set_pipelined`` writes drop late errors, and there is no call for
an extended request such as ``limits@openssh.com``.

Write requests are framed here rather than by ``SFTPClient._async_request``: each is sized to fill
whole SSH packets of the channel (paramiko sends at most ``out_max_packet_size - 64`` bytes of
channel data per packet, 32,704 with OpenSSH's 32 KiB packets) and handed to the channel as one
buffer, sent through memoryview slices. paramiko's own path copies a request four times more and
re-slices it once per packet, and a 32 KiB request costs two SSH packets, the second of 93 bytes.

So this module, and only this one, uses paramiko's private request layer
(:data:`PARAMIKO_PRIVATE_API`). pyproject.toml bounds paramiko to :data:`PARAMIKO_SUPPORTED`;
``tests/storage/test_sftp_paramiko.py`` fails, naming the API, when the installed paramiko lacks
one of them or is outside that range, and :func:`check_paramiko` refuses the first SFTP channel
with the same message at run time.
"""

from __future__ import annotations

import inspect
import itertools
import struct
from collections import deque
from collections.abc import Callable, Iterable
from functools import cache
from typing import Any

import paramiko
from paramiko.sftp import (
    CMD_DATA,
    CMD_EXTENDED,
    CMD_EXTENDED_REPLY,
    CMD_READ,
    CMD_STATUS,
    CMD_WRITE,
    SFTPError,
    int64,
)
from paramiko.sftp_client import SFTPClient

from distributor_core.storage.base import HashingVerifier, ReadStream

#: the paramiko releases this module is written and tested against: at least
#: ``PARAMIKO_MINIMUM``, below major ``PARAMIKO_NEXT_MAJOR`` (pyproject.toml states the same range)
PARAMIKO_MINIMUM = (3, 4)
PARAMIKO_NEXT_MAJOR = 6
PARAMIKO_SUPPORTED = f">={PARAMIKO_MINIMUM[0]}.{PARAMIKO_MINIMUM[1]},<{PARAMIKO_NEXT_MAJOR}"
#: paramiko internals used here: ``(owner, name, parameters)``; ``parameters`` is the signature
#: relied on (``None`` for attributes), checked by :func:`check_paramiko`
PARAMIKO_PRIVATE_API: tuple[tuple[type, str, tuple[str, ...] | None], ...] = (
    (SFTPClient, "_async_request", ("self", "fileobj", "t", "args")),
    (SFTPClient, "_read_response", ("self", "waitfor")),
    (SFTPClient, "_convert_status", ("self", "msg")),
    (SFTPClient, "_request", ("self", "t", "args")),
)
#: the state ``SFTPClient._async_request`` keeps on every client and :func:`_send_write` updates
#: the same way (lock, next request number, request owners); checked on each new client
PARAMIKO_CLIENT_STATE = ("_lock", "request_number", "_expecting")
#: and the reply callback paramiko's ``_read_response`` calls on the owner a reply was
#: requested for: ``owner._async_response(kind, msg, num)`` (see :class:`Pending`)
PARAMIKO_CALLBACK = "_async_response"

#: request sizes every SFTP server accepts; larger reads and writes only when the server says so
SAFE_REQUEST = 32 * 1024
MAX_READ_REQUEST = 256 * 1024
READ_BYTES_IN_FLIGHT = 4 * 1024 * 1024
#: the largest write request: four SSH packets of channel data; larger requests cost more CPU
#: in paramiko (buffers of 128 KiB and more are mmap-ed by the allocator on every request)
MAX_WRITE_REQUEST = 4 * 32_704
#: bytes of write requests sent before waiting for the oldest acknowledgement (at least 4)
WRITE_BYTES_IN_FLIGHT = 4 * 1024 * 1024
#: paramiko sends at most ``out_max_packet_size - PACKET_SLACK`` bytes per channel packet
PACKET_SLACK = 64
#: length, type, request id, handle length, offset, data length of an SSH_FXP_WRITE
_WRITE_HEADER = struct.Struct(">IBII")
_WRITE_TAIL = struct.Struct(">QI")

#: failures of the connection itself (as opposed to an SFTP status reply)
CONNECTION_ERRORS: tuple[type[BaseException], ...] = (paramiko.SSHException, EOFError, ConnectionError, TimeoutError)


def check_paramiko() -> list[str]:
    """Problems with the installed paramiko for this module (empty when all is well)."""
    return list(_paramiko_problems())


@cache
def _paramiko_problems() -> tuple[str, ...]:
    problems: list[str] = []
    version = paramiko.__version__
    if not PARAMIKO_MINIMUM <= _release(version) < (PARAMIKO_NEXT_MAJOR,):
        problems.append(
            f"paramiko {version} is outside the supported range {PARAMIKO_SUPPORTED}: check the private "
            f"API of distributor_core/storage/sftp_wire.py against it before widening the bound"
        )
    for owner, name, parameters in PARAMIKO_PRIVATE_API:
        member = getattr(owner, name, None)
        label = f"paramiko {owner.__name__}.{name}"
        if not callable(member):
            problems.append(f"{label} is missing (paramiko {version}); the pipelined SFTP transfer needs it")
            continue
        if parameters is not None:
            found = tuple(inspect.signature(member).parameters)
            if found != parameters:
                problems.append(f"{label} takes ({', '.join(found)}), expected ({', '.join(parameters)})")
    return tuple(problems)


def client_problems(sftp: SFTPClient) -> list[str]:
    """Problems with the private state of a new ``SFTPClient`` (empty when all is well)."""
    missing = [name for name in PARAMIKO_CLIENT_STATE if not hasattr(sftp, name)]
    if not missing:
        return []
    names = ", ".join(f"SFTPClient.{name}" for name in missing)
    return [f"paramiko {paramiko.__version__} has no {names}; the pipelined SFTP transfer needs it"]


def _release(version: str) -> tuple[int, ...]:
    """``(major, minor, ...)`` of a version string (pre-release suffixes ignored)."""
    numbers: list[int] = []
    for part in version.split("."):
        digits = "".join(itertools.takewhile(str.isdigit, part))
        if not digits:
            break
        numbers.append(int(digits))
        if len(digits) < len(part):
            break
    return tuple(numbers)


def channel_alive(sftp: SFTPClient) -> bool:
    """The channel (a paramiko ``Channel``, or the pipes of an ``ssh`` child) can carry requests."""
    channel = sftp.get_channel()
    if channel is None or channel.closed:
        return False
    if not isinstance(channel, paramiko.Channel):
        return True  # a byte channel of its own (sftp_openssh.PipeChannel): ``closed`` says it all
    transport = channel.get_transport()
    return transport is not None and transport.is_active()


def is_status_error(exc: BaseException) -> bool:
    """An SFTP status reply (the request failed, the connection is fine)."""
    return isinstance(exc, OSError) and not isinstance(exc, CONNECTION_ERRORS)


def close_quietly(sftp: SFTPClient) -> None:
    try:
        sftp.close()
    except Exception:
        pass


def close_file_quietly(handle: paramiko.SFTPFile) -> None:
    try:
        handle.close()
    except Exception:
        pass


class SourceFailed(Exception):
    """Wraps an exception raised by a caller's chunk iterator so it passes through untouched."""


class Pending:
    """Asynchronous requests on one SFTP channel whose replies may arrive in any order.

    paramiko hands replies to other requests to ``_async_response`` while we wait for one (it
    keeps the owner of each request in a weak dictionary, hence ``__weakref__``)."""

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
                if not channel_alive(self._sftp):
                    return
            except Exception:
                return


def server_limits(sftp: SFTPClient, max_write_request: int = MAX_WRITE_REQUEST) -> tuple[int, int]:
    """(read request size, write request size) for this server: OpenSSH answers
    ``limits@openssh.com``; anything else gets the 32 KiB every server accepts. Write requests
    are at most ``max_write_request`` bytes."""
    try:
        kind, msg = sftp._request(CMD_EXTENDED, "limits@openssh.com")
    except (OSError, EOFError, SFTPError):
        return SAFE_REQUEST, SAFE_REQUEST
    if kind != CMD_EXTENDED_REPLY:
        return SAFE_REQUEST, SAFE_REQUEST
    msg.get_int64()  # max packet length
    max_read = msg.get_int64()
    max_write = msg.get_int64()
    read_size = min(max_read, MAX_READ_REQUEST) if max_read > 0 else SAFE_REQUEST
    write_size = min(max_write, max_write_request) if max_write > 0 else SAFE_REQUEST
    return max(read_size, 1024), max(write_size, 1024)


def read_requests_in_flight(read_size: int) -> int:
    """How many read requests of ``read_size`` bytes a reader keeps outstanding."""
    return max(4, READ_BYTES_IN_FLIGHT // read_size)


def write_request_size(sftp: SFTPClient, handle: bytes, limit: int) -> int:
    """Data bytes per write request: at most ``limit``, and where possible exactly enough for the
    request to fill whole SSH packets of the channel."""
    channel = sftp.get_channel()
    per_packet = getattr(channel, "out_max_packet_size", 0) - PACKET_SLACK
    header = _WRITE_HEADER.size + len(handle) + _WRITE_TAIL.size
    if per_packet <= header:
        return limit
    packets = (limit + header) // per_packet
    return packets * per_packet - header if packets else limit


def _send_write(sftp: SFTPClient, owner: Pending, handle: bytes, offset: int, data: memoryview) -> int:
    """Send one SSH_FXP_WRITE of ``data`` at ``offset``; the request number, whose reply goes to
    ``owner``. The same bookkeeping as ``SFTPClient._async_request``, one buffer to the channel."""
    with sftp._lock:
        num = sftp.request_number
        sftp._expecting[num] = owner
        sftp.request_number += 1
    size = len(data)
    header = _WRITE_HEADER.pack(
        _WRITE_HEADER.size - 4 + len(handle) + _WRITE_TAIL.size + size, CMD_WRITE, num, len(handle)
    )
    channel = sftp.sock
    send_all = getattr(channel, "send_all", None)
    if send_all is not None:  # a byte channel that gathers the parts itself (sftp_openssh.PipeChannel)
        send_all((header, handle, _WRITE_TAIL.pack(offset, size), data))
        return num
    view = memoryview(b"".join((header, handle, _WRITE_TAIL.pack(offset, size), data)))
    while view:
        sent = channel.send(view)
        if sent <= 0:
            raise EOFError()
        view = view[sent:]
    return num


def upload(
    sftp: SFTPClient,
    handle: paramiko.SFTPFile,
    chunks: Iterable[bytes],
    verifier: HashingVerifier,
    request_size: int,
) -> None:
    """Send ``chunks`` to the open ``handle`` with many write requests in flight; every reply is
    checked. Stops once ``verifier`` counted more than the expected size (the caller checks
    ``verifier.problem()``); an exception of ``chunks`` leaves as :class:`SourceFailed`."""
    pending = Pending(sftp)
    in_flight: deque[int] = deque()
    remote = handle.handle
    size = write_request_size(sftp, remote, request_size)
    window = max(4, WRITE_BYTES_IN_FLIGHT // size)
    offset = 0
    iterator = iter(chunks)
    try:
        while True:
            try:
                chunk = next(iterator)
            except StopIteration:
                break
            except BaseException as exc:
                raise SourceFailed() from exc
            if not chunk:
                continue
            verifier.update(chunk)
            if verifier.exceeded():
                break
            data = memoryview(chunk)
            for start in range(0, len(data), size):
                piece = data[start : start + size]
                in_flight.append(_send_write(sftp, pending, remote, offset, piece))
                offset += len(piece)
                if len(in_flight) >= window:
                    pending.wait(in_flight.popleft())
        while in_flight:
            pending.wait(in_flight.popleft())
    except BaseException:
        pending.drain(in_flight)
        raise


class RemoteReader(ReadStream):
    """A binary stream of one open remote file that keeps several read requests in flight
    (bounded read-ahead: only the requests in flight are buffered). ``translate`` turns a
    transfer failure into the exception to raise; ``release(healthy)`` is called once, when the
    stream is closed, to give the channel back."""

    def __init__(
        self,
        sftp: SFTPClient,
        handle: paramiko.SFTPFile,
        name: str,
        read_size: int,
        translate: Callable[[BaseException], Exception],
        release: Callable[[bool], None],
    ) -> None:
        super().__init__()
        self._sftp = sftp
        self._handle = handle
        self._name = name
        self._read_size = read_size
        self._window = read_requests_in_flight(read_size)
        self._translate = translate
        self._release = release
        self._pending = Pending(sftp)
        self._in_flight: deque[tuple[int, int, int]] = deque()
        self._next_offset = 0
        self._ready: deque[bytes] = deque()
        self._ready_len = 0
        self._eof = False
        self._released = False

    @property
    def name(self) -> str:
        return self._name

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
        size = self._read_size
        while not self._eof and len(self._in_flight) < self._window:
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
            raise self._translate(exc) from exc

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

    def close(self) -> None:
        if not self._released:
            self._released = True
            healthy = channel_alive(self._sftp)
            try:
                if healthy:
                    self._pending.drain([num for num, _o, _l in self._in_flight])
                    self._in_flight.clear()
                    self._handle.close()
            except Exception:
                healthy = False
            finally:
                self._ready.clear()
                self._release(healthy and channel_alive(self._sftp))
        super().close()

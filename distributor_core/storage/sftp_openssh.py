"""The ``openssh`` transport of the SFTP backend: the system ``ssh`` client carries the bytes.

Each SFTP channel is one ``ssh -s <host> sftp`` child; paramiko's ``SFTPClient`` and
:mod:`.sftp_wire` speak the SFTP protocol over its stdin and stdout (:class:`PipeChannel`), so the
adapter's file operations are the same for both transports. ``ssh`` does the cryptography in
its own process, and whatever the user's OpenSSH setup offers (``ProxyJump``, certificates,
agents, hardware keys, ``ControlMaster``) comes from the ``ssh_config_file`` they name.

What is fixed (``ssh_options`` may not set it, see :mod:`distributor_core.config.ssh_options`):

- ``ssh -F <generated file>``: a private config (``0600`` in a ``0700`` directory, removed once
  the SFTP session is up: every hop has read it by then) that sets the safety options below for every
  host (``Host *`` first: the first value obtained wins in OpenSSH, and a ``ProxyJump`` hop reads
  the same file but none of the command line), then includes ``ssh_config_file`` if one is
  named. The account's ``~/.ssh/config`` and ``/etc/ssh/ssh_config`` never apply;
- ``BatchMode yes`` (no password or passphrase prompts), no TTY, no forwardings, no local command;
- ``StrictHostKeyChecking yes`` (``accept-new`` for ``host_key_policy: accept_new``) against
  ``UserKnownHostsFile <known_hosts_file>`` only (``GlobalKnownHostsFile /dev/null``), for the
  target and every jump host; a dry run with ``accept_new`` records new keys in a scratch file
  next to the generated config, never in ``known_hosts_file``;
- on the command line for the target: ``-p <port>``, ``-l <user>``, and ``IdentityFile
  <private_key_file>`` with ``IdentitiesOnly yes`` when a key file is set.

Defaults that ``ssh_options`` may change: ``ConnectTimeout``, ``ServerAliveInterval`` and the
cipher order (:data:`CIPHER_PREFERENCE`).

A child never outlives its run: :meth:`PipeChannel.close` closes its stdin (``ssh`` ends the
session and exits), then signals its process group (``ssh`` runs in a session of its own, with
any ``ProxyJump``/``ProxyCommand`` helpers). If this process dies without closing (``kill -9``,
a crash), the kernel kills ``ssh`` too: it is started through ``setpriv --pdeathsig KILL``
(util-linux), by one long-lived thread of this process (:class:`_Spawner`), because the parent
death signal follows the *thread* that forked the child and worker threads end before the run
does. (Closing ``ssh``'s input is not enough: until its session is up ``ssh`` does not read it,
and against a server that sends its banner and then stalls it waited for ``ServerAliveInterval``
× ``ServerAliveCountMax``, two minutes.) Every stage of a connection is bounded too, for every hop:
the TCP connect and the banner by ``ConnectTimeout``, key exchange and authentication (and an idle
session) by ``ServerAliveInterval`` × ``ServerAliveCountMax``, which OpenSSH applies to every packet
it waits for, and, from this side, the whole handshake up to the SFTP session by a watchdog of
twice ``ConnectTimeout`` plus 5 s that stops the child. Only a ``ControlPersist`` master, which
detaches itself on purpose, stays (its own timeout ends it).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import queue
import re
import select
import shutil
import signal
import subprocess
import tempfile
import threading
from collections.abc import Callable
from typing import IO, Any, NoReturn

from paramiko.sftp import SFTPError
from paramiko.sftp_client import SFTPClient
from paramiko.ssh_exception import SSHException

from distributor_core.storage import sftp_wire as wire
from distributor_core.storage.errors import ErrorKind
from distributor_core.storage.sftp_connection import Channel, ChannelPool, SFTPUnavailable, SSHEndpoint, status_text

SSH_PROGRAM = "ssh"
#: moved to the head of OpenSSH's cipher list: with AES-NI the ssh client spent 1.2-1.6 s of CPU
#: per GiB written with AES-GCM on the bench machine, 1.7-1.9 s with chacha20-poly1305 (OpenSSH's
#: first choice), 2.0 s with aes128-ctr (bench/README.md, P9); the rest of OpenSSH's default
#: list follows, so a server without AES-GCM still connects
CIPHER_PREFERENCE = "^aes128-gcm@openssh.com,aes256-gcm@openssh.com"
#: ``ServerAliveInterval``: a dead peer is noticed after ``KEEPALIVE_COUNT`` unanswered probes
KEEPALIVE_SECONDS = 30
KEEPALIVE_COUNT = 4
#: write requests up to this size (``ssh`` packs them into SSH packets itself, so a larger request
#: only saves per-request work here)
MAX_WRITE_REQUEST = 256 * 1024
#: kernel buffer asked for each pipe (the default 64 KiB holds half a write request)
PIPE_BUFFER = 1024 * 1024
_READ_CHUNK = 256 * 1024
#: how long a closing ``ssh`` gets to end its session before its process group is signalled
_STOP_SECONDS = 2.0
_STDERR_TAIL = 16 * 1024


class _Spawner:
    """Starts children from one thread that lives as long as this process, so that a child's
    parent death signal (``setpriv --pdeathsig``) fires when the process dies, not when the
    thread that asked for the child ends. A forked copy of this process gets its own."""

    _lock = threading.Lock()
    _current: _Spawner | None = None

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.requests: queue.SimpleQueue[tuple[Callable[[], Any], queue.SimpleQueue[Any]]] = queue.SimpleQueue()
        threading.Thread(target=self._serve, name="distributor-ssh-spawner", daemon=True).start()

    @classmethod
    def get(cls) -> _Spawner:
        with cls._lock:
            if cls._current is None or cls._current.pid != os.getpid():
                cls._current = cls()
            return cls._current

    def _serve(self) -> None:
        while True:
            action, answer = self.requests.get()
            try:
                answer.put((True, action()))
            except BaseException as exc:  # handed to the caller; this thread must never end
                answer.put((False, exc))

    def run(self, action: Callable[[], Any]) -> Any:
        answer: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.requests.put((action, answer))
        ok, value = answer.get()
        if not ok:
            raise value
        return value


def _death_signal_prefix() -> list[str]:
    """``setpriv --pdeathsig KILL --`` when util-linux's ``setpriv`` is installed (Debian: always),
    else nothing (then a child of a killed run lives until its timeouts end it)."""
    program = shutil.which("setpriv")
    return [program, "--pdeathsig", "KILL", "--"] if program else []


def spawn(command: list[str], **options: Any) -> subprocess.Popen[bytes]:
    """``subprocess.Popen(command, **options)`` started so that the kernel kills the child when
    this process dies (:class:`_Spawner`, :func:`_death_signal_prefix`)."""
    full = [*_death_signal_prefix(), *command]
    process: subprocess.Popen[bytes] = _Spawner.get().run(lambda: subprocess.Popen(full, **options))
    return process


def handshake_seconds(endpoint: SSHEndpoint) -> float:
    """The watchdog of a session's start (connect, banner, key exchange, authentication, SFTP
    version): twice the ``ConnectTimeout`` ``ssh`` uses plus 5 s."""
    chosen = {name.lower(): value for name, value in endpoint.ssh_options}
    connect = float(chosen.get("connecttimeout", endpoint.connect_timeout))
    return 2 * connect + 5


def _quote(path: str, tokens: bool = True) -> str:
    """``path`` as one word of an ssh_config value (``tokens``: the option expands ``%`` tokens, so
    ``%`` is doubled; ``"`` cannot be quoted at all)."""
    if '"' in path:
        raise SFTPUnavailable(f'the path {path} contains a double quote, which ssh cannot take in an option')
    return '"' + (path.replace("%", "%%") if tokens else path) + '"'


def _safety_options(endpoint: SSHEndpoint, known_hosts_files: list[str]) -> list[str]:
    """``Option=value`` pairs every hop of the session gets (target, and any ``ProxyJump`` host)."""
    checking = "accept-new" if endpoint.host_key_policy == "accept_new" else "yes"
    return [
        "BatchMode=yes",
        f"StrictHostKeyChecking={checking}",
        "UserKnownHostsFile=" + " ".join(_quote(path) for path in known_hosts_files),
        f"GlobalKnownHostsFile={os.devnull}",
        "KnownHostsCommand=none",
        "NoHostAuthenticationForLocalhost=no",
        "CheckHostIP=no",
        "UpdateHostKeys=no",
        "VerifyHostKeyDNS=no",
        "ForwardAgent=no",
        "ForwardX11=no",
        "ClearAllForwardings=yes",
        "PermitLocalCommand=no",
        "RequestTTY=no",
    ]


#: what every hop's algorithm lists lose: OpenSSH's own defaults hold none of these, and no
#: ``ssh_config_file`` (nor ``Host`` block in it) adds them back (``ssh_options`` may name strong
#: ones only, :data:`~distributor_core.config.ssh_options.WEAK`)
WEAK_REMOVED = (
    "Ciphers=-*-cbc,3des*,arcfour*,blowfish*,cast128*",
    "MACs=-*md5*,*-96*,umac-64*,hmac-ripemd160*",
    "KexAlgorithms=-*sha1,*-sha1-*,*group1-*",
    "HostKeyAlgorithms=-ssh-rsa,ssh-rsa-cert-v01@openssh.com,ssh-dss*",
    "PubkeyAcceptedAlgorithms=-ssh-rsa,ssh-rsa-cert-v01@openssh.com,ssh-dss*",
    "CASignatureAlgorithms=-ssh-rsa,ssh-dss*",
)


def _timeouts(endpoint: SSHEndpoint) -> list[str]:
    """``ConnectTimeout`` and the keep-alive of every hop (``ssh_options``' own values, else the
    defaults): the connect and banner are bounded by ``ConnectTimeout``, the key exchange,
    authentication and an idle session by ``ServerAliveInterval`` × ``ServerAliveCountMax``, which
    OpenSSH applies to every packet it waits for (none of them may be switched off)."""
    chosen = {name.lower(): value for name, value in endpoint.ssh_options}
    return [
        f"ConnectTimeout={chosen.get('connecttimeout', max(1, round(endpoint.connect_timeout)))}",
        f"ServerAliveInterval={chosen.get('serveraliveinterval', KEEPALIVE_SECONDS)}",
        f"ServerAliveCountMax={chosen.get('serveralivecountmax', KEEPALIVE_COUNT)}",
    ]


def session_config(endpoint: SSHEndpoint, known_hosts_files: list[str]) -> str:
    """The config file ``ssh -F`` reads: the safety options for every host first (the first value
    obtained for an option wins in OpenSSH, and a ``ProxyJump`` hop reads this same file but none
    of the command line), then the user's ``ssh_config_file``, if any, through ``Include``.

    The safety options pin every host-key option (checking, the files, ``KnownHostsCommand``,
    ``NoHostAuthenticationForLocalhost``, ``CheckHostIP``, DNS, updates), strip weak algorithms from
    every list and bound every stage of the connection, for every hop."""
    lines = ["# written by distributor for one ssh session; removed once the SFTP session is up", "Host *"]
    options = [*_safety_options(endpoint, known_hosts_files), *WEAK_REMOVED, *_timeouts(endpoint)]
    lines += ["    " + option.replace("=", " ", 1) for option in options]
    if endpoint.ssh_config_file:
        # Include takes ~ and globs, no % tokens
        lines += ["Match all", f"Include {_quote(os.path.abspath(endpoint.ssh_config_file), tokens=False)}"]
    return "\n".join(lines) + "\n"


def ssh_command(
    endpoint: SSHEndpoint, config_file: str, known_hosts_files: list[str], program: str = SSH_PROGRAM
) -> list[str]:
    """The ``ssh`` command line of one SFTP session to ``endpoint`` (``config_file``: the file
    :func:`session_config` wrote)."""
    fixed = _safety_options(endpoint, known_hosts_files)
    if endpoint.private_key_file is not None:
        fixed += [f"IdentityFile={_quote(endpoint.private_key_file)}", "IdentitiesOnly=yes"]
    chosen = [f"{name}={value}" for name, value in endpoint.ssh_options]
    defaults = [*_timeouts(endpoint), f"Ciphers={CIPHER_PREFERENCE}"]
    args = [program, "-F", config_file]
    for option in fixed + chosen + defaults:  # the first value given for an option wins
        args += ["-o", option]
    args += ["-p", str(endpoint.port), "-l", endpoint.user, "-T", "-x", "-a", "-s", "--", endpoint.host, "sftp"]
    return args


class PipeChannel:
    """The stdin and stdout of one ``ssh -s sftp`` child as the byte channel paramiko's
    ``SFTPClient`` speaks over (``send``/``recv``/``close`` as on a paramiko ``Channel``).

    Non-blocking pipes with ``poll``: a peer that stops answering raises ``TimeoutError`` after
    the timeout instead of hanging. ``ssh`` ending the session raises ``ConnectionResetError``
    with its exit status and last message. After either, :attr:`closed` is true."""

    def __init__(self, process: subprocess.Popen[bytes], stderr: IO[bytes], timeout: float) -> None:
        assert process.stdin is not None and process.stdout is not None
        self.process = process
        self._stdin = process.stdin
        self._stdout = process.stdout
        self._stderr = stderr
        self._out = self._stdin.fileno()
        self._in = self._stdout.fileno()
        for fd in (self._out, self._in):
            os.set_blocking(fd, False)
            with contextlib.suppress(OSError, AttributeError):
                fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_BUFFER)
        self._readable = select.poll()
        self._readable.register(self._in, select.POLLIN)
        self._writable = select.poll()
        self._writable.register(self._out, select.POLLOUT)
        self._timeout = timeout
        self._buffer = b""
        self._position = 0
        self._lock = threading.Lock()
        self._stopped = False
        self._broken = False
        self._final_stderr: str | None = None

    @property
    def closed(self) -> bool:
        """No more requests can go through: closed, broken, or the ``ssh`` child has exited."""
        return self._broken or self.process.poll() is not None

    # the parts of paramiko's Channel that SFTPClient and SFTPFile use
    def get_name(self) -> str:
        return f"ssh[{self.process.pid}]"

    def settimeout(self, timeout: float | None) -> None:
        self._timeout = timeout if timeout is not None else 0.0

    def gettimeout(self) -> float:
        return self._timeout

    def send(self, data: bytes | memoryview) -> int:
        while True:
            try:
                return os.write(self._out, data)
            except BlockingIOError:
                self._wait(self._writable, "take more data")
            except (BrokenPipeError, ValueError):
                self._ended()

    def send_all(self, parts: tuple[bytes | memoryview, ...]) -> None:
        """Send every byte of ``parts`` in order, gathered by ``writev`` (no joined copy)."""
        views = [memoryview(part) for part in parts if len(part)]
        while views:
            try:
                sent = os.writev(self._out, views)
            except BlockingIOError:
                self._wait(self._writable, "take more data")
                continue
            except (BrokenPipeError, ValueError):
                self._ended()
            while sent:
                first = views[0]
                if sent >= len(first):
                    sent -= len(first)
                    views.pop(0)
                else:
                    views[0] = first[sent:]
                    sent = 0

    def recv(self, size: int) -> bytes:
        buffer, position = self._buffer, self._position
        if position < len(buffer):
            end = position + size
            self._position = min(end, len(buffer))
            return buffer[position:end]
        while True:
            try:
                data = os.read(self._in, max(size, _READ_CHUNK))
            except BlockingIOError:
                self._wait(self._readable, "answer")
                continue
            except ValueError:
                self._ended()
            if not data:
                self._ended()
            if len(data) <= size:
                self._buffer, self._position = b"", 0
                return data
            self._buffer, self._position = data, size
            return data[:size]

    def _wait(self, poll: select.poll, what: str) -> None:
        ready = poll.poll(self._timeout * 1000) if self._timeout > 0 else poll.poll()
        if not ready:
            self._broken = True
            raise TimeoutError(f"ssh did not {what} within {self._timeout:g}s")

    def _ended(self) -> NoReturn:
        self._broken = True
        raise ConnectionResetError(self.exit_detail())

    def exit_detail(self) -> str:
        """How the ``ssh`` child ended: its exit status and last message (waits briefly)."""
        try:
            code = self.process.wait(_STOP_SECONDS)
        except subprocess.TimeoutExpired:
            return "ssh closed its output"
        lines = error_lines(self.stderr_text())
        detail = f"ssh exited with status {code}"
        return f"{detail}: {lines[-1]}" if lines else detail

    def stderr_text(self) -> str:
        """What ``ssh`` wrote to its standard error (the last 16 KiB)."""
        if self._final_stderr is not None:
            return self._final_stderr
        try:
            self._stderr.flush()
            end = self._stderr.seek(0, os.SEEK_END)
            self._stderr.seek(max(0, end - _STDERR_TAIL))
            return self._stderr.read().decode("utf-8", "replace")
        except (OSError, ValueError):
            return ""

    def close(self) -> None:
        """End the session: close ``ssh``'s input, give it :data:`_STOP_SECONDS` to exit, then
        signal its process group (TERM, then KILL)."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        self._broken = True
        with contextlib.suppress(OSError, ValueError):
            self._stdin.close()
        process = self.process
        try:
            process.wait(_STOP_SECONDS)
        except subprocess.TimeoutExpired:
            for sig in (signal.SIGTERM, signal.SIGKILL):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(process.pid, sig)
                try:
                    process.wait(_STOP_SECONDS)
                    break
                except subprocess.TimeoutExpired:
                    continue
        with contextlib.suppress(OSError, ValueError):
            self._stdout.close()
        self._final_stderr = self.stderr_text()
        with contextlib.suppress(OSError, ValueError):
            self._stderr.close()


def error_lines(text: str) -> list[str]:
    """The meaningful lines of ``ssh``'s standard error (warnings about added keys dropped)."""
    return [
        line.strip()
        for line in text.splitlines()
        if line.strip() and not line.startswith("Warning: Permanently added") and not line.startswith("@")
    ]


_MISMATCH = re.compile(r"REMOTE HOST IDENTIFICATION HAS CHANGED|Host key for \S+ has changed")
_OFFERED = re.compile(r"fingerprint for the (\S+) key sent by the remote host is\s+(\S+?)\.?\s*$", re.MULTILINE)
_UNKNOWN = re.compile(r"No (\S+) host key is known for (\S+)")


def failure_kind(text: str) -> ErrorKind:
    """``untrusted`` when ``ssh`` refused the server's host key (unknown, changed, unverifiable),
    else ``unavailable``: the kind :func:`failure_message`'s failure is."""
    if _MISMATCH.search(text) or _UNKNOWN.search(text) or "Host key verification failed" in text:
        return ErrorKind.UNTRUSTED
    return ErrorKind.UNAVAILABLE


def failure_message(endpoint: SSHEndpoint, text: str, exit_code: int | None) -> str:
    """The message for an ``ssh`` child that ended before the SFTP session started, worded as the
    paramiko transport words the same failure (never secrets: ``ssh`` prints none)."""
    address = endpoint.address
    known = endpoint.known_hosts_file
    timeout = endpoint.connect_timeout
    lines = error_lines(text)
    last = lines[-1] if lines else f"ssh exited with status {exit_code}"
    if _MISMATCH.search(text):
        offered = _OFFERED.search(text)
        shown = f" (server offered {offered[1]} {offered[2]})" if offered else ""
        return f"host key of {address} does not match known_hosts file {known}{shown}; refusing to connect"
    unknown = _UNKNOWN.search(text)
    if unknown:
        return (
            f"host key of {unknown[2]} is not in known_hosts file {known} (server offered a {unknown[1]} key); "
            "add it (ssh-keyscan) or set host_key_policy: accept_new"
        )
    if "Host key verification failed" in text:
        return f"host key of {address} could not be verified against known_hosts file {known}: {last}"
    denied = next((line for line in lines if "Permission denied (" in line), None)
    if denied is not None:
        return f"authentication as {endpoint.user} at {address} failed: {denied}"
    if "Connection refused" in text:
        return f"connection to {address} refused"
    resolve = next((line for line in lines if "Could not resolve hostname" in line), None)
    if resolve is not None:
        return f"cannot resolve host {endpoint.host}: {resolve.rsplit(': ', 1)[-1]}"
    if "banner exchange" in text:
        return (
            f"no SSH protocol banner from {address} within {timeout:g}s "
            "(not an SSH server, or it is refusing connections)"
        )
    if "timed out" in text.lower():
        return f"timed out connecting to {address} after {timeout:g}s"
    if "subsystem request failed" in text:
        return f"the server at {address} refused the sftp subsystem"
    if endpoint.ssh_config_file and any(
        marker in text for marker in ("config file", "Bad configuration option", "configuration options")
    ):
        return f"ssh rejected ssh_config_file {endpoint.ssh_config_file}: {last}"
    return f"cannot connect to {address}: {last}"


class OpenSSHConnection(ChannelPool):
    """The SFTP channels of one storage object, each an ``ssh`` child of its own: opened when no
    idle one is left (at most ``max_channels``), reused until :meth:`close`. Same interface as
    :class:`~distributor_core.storage.sftp_connection.SSHConnection`."""

    def __init__(self, endpoint: SSHEndpoint) -> None:
        if endpoint.transport != "openssh":
            raise ValueError("OpenSSHConnection needs an endpoint with transport: openssh")
        super().__init__(endpoint)
        self._connect_count = 0

    @property
    def connect_count(self) -> int:
        """How many ``ssh`` sessions have been started (1 when all went one after another)."""
        return self._connect_count

    @property
    def connected(self) -> bool:
        with self._cond:
            return self._open_channels > 0

    @property
    def transport(self) -> None:
        """No paramiko transport: the ``ssh`` children carry the bytes."""
        return None

    def sessions(self) -> list[subprocess.Popen[bytes]]:
        """The ``ssh`` children of the idle channels (tests end one to simulate a failure)."""
        with self._cond:
            return [channel.sftp.get_channel().process for channel in self._idle]  # type: ignore[union-attr]

    def _session_files(self, workdir: str) -> tuple[str, list[str]]:
        """(config file for ``ssh -F``, known_hosts files), written into ``workdir``."""
        endpoint = self.endpoint
        known = endpoint.known_hosts_file
        files = [known]
        if endpoint.host_key_policy == "accept_new":
            if endpoint.dry_run:
                # ssh records new keys in the first file: a scratch file, never known_hosts_file
                files = [os.path.join(workdir, "known_hosts.dry-run"), known]
            else:
                directory = os.path.dirname(known)
                try:
                    if directory:
                        os.makedirs(directory, mode=0o700, exist_ok=True)
                except OSError as exc:
                    problem = f"cannot create the directory of known_hosts file {known}: {status_text(exc)}"
                    raise SFTPUnavailable(problem) from None
        config = os.path.join(workdir, "ssh_config")
        fd = os.open(config, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(session_config(endpoint, files))
        return config, files

    def _check_files(self) -> str:
        """The ``ssh`` program; refuses clearly what ``ssh`` would only half explain."""
        endpoint = self.endpoint
        problems = wire.check_paramiko()
        if problems:
            raise SFTPUnavailable("; ".join(problems))
        program = shutil.which(SSH_PROGRAM)
        if program is None:
            raise SFTPUnavailable(
                "transport: openssh needs the OpenSSH client, and there is no ssh program on PATH "
                "(install openssh-client, or use transport: paramiko)"
            )
        files = (("private key file", endpoint.private_key_file), ("ssh_config_file", endpoint.ssh_config_file))
        for label, path in files:
            if path is None:
                continue
            try:
                with open(path, "rb"):
                    pass
            except OSError as exc:
                raise SFTPUnavailable(f"cannot read {label} {path}: {status_text(exc)}") from None
        return program

    def _open_channel(self, prepared: object, generation: int) -> Channel:
        """Start an ``ssh`` child for a new channel (nothing is prepared: each channel is its own session)."""
        program = self._check_files()
        # the generated config lives only until the SFTP session is up: every hop has read it by
        # then (a killed run leaves nothing behind but an interrupted handshake's directory)
        workdir = tempfile.mkdtemp(prefix="distributor-ssh-")
        try:
            return self._start(program, workdir, generation)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)

    def _start(self, program: str, workdir: str, generation: int) -> Channel:
        endpoint = self.endpoint
        config, known_hosts = self._session_files(workdir)
        command = ssh_command(endpoint, config, known_hosts, program)
        stderr = tempfile.TemporaryFile()  # noqa: SIM115 - owned by the PipeChannel
        try:
            process = spawn(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                bufsize=0,
                close_fds=True,
                start_new_session=True,  # its own process group, no controlling terminal
            )
        except OSError as exc:
            stderr.close()
            raise SFTPUnavailable(f"cannot start {program}: {status_text(exc)}") from None
        # ConnectTimeout bounds the TCP connect and the banner (per hop), the keep-alive the key
        # exchange and authentication; the whole handshake is bounded here too
        watchdog = handshake_seconds(endpoint)
        pipe = PipeChannel(process, stderr, timeout=watchdog)
        try:
            sftp = SFTPClient(pipe)
        except (ConnectionError, TimeoutError, EOFError, SSHException, SFTPError) as exc:
            timed_out = isinstance(exc, TimeoutError)
            pipe.close()
            if timed_out:
                raise SFTPUnavailable(
                    f"timed out connecting to {endpoint.address}: no SFTP session within {watchdog:g}s"
                ) from None
            text = pipe.stderr_text()
            raise SFTPUnavailable(failure_message(endpoint, text, process.returncode), failure_kind(text)) from None
        except BaseException:
            pipe.close()
            raise
        try:
            problems = wire.client_problems(sftp)
            if problems:
                raise SFTPUnavailable("; ".join(problems))
            pipe.settimeout(endpoint.io_timeout)
            read_size, write_size = wire.server_limits(sftp, MAX_WRITE_REQUEST)
        except BaseException as exc:
            wire.close_quietly(sftp)
            if isinstance(exc, (ConnectionError, TimeoutError, EOFError, SSHException, SFTPError)):
                raise SFTPUnavailable(f"cannot open an SFTP session: {exc}") from None
            raise
        with self._cond:
            self._connect_count += 1
        return Channel(sftp, generation, read_size, write_size, self)

    def close(self) -> None:
        """Stop every idle ``ssh`` child (channels still leased are stopped when released)."""
        with self._cond:
            idle, self._idle = self._idle, []
            self._open_channels = 0
            self._generation += 1
            self._cond.notify_all()
        for channel in idle:
            wire.close_quietly(channel.sftp)

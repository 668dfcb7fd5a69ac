"""OpenSSH sshd test peer (session fixture).

Starts a real ``/usr/sbin/sshd`` on 127.0.0.1 with its own configuration, ed25519 host key,
client key and ``known_hosts`` file (strict host-key checking, no auto-accept), as described in
``shared/notes/test-peers.md``. As root it logs the client in as a dedicated unprivileged user
(created when missing); otherwise as the current user. sshd missing is a hard failure, never a
skip: CI installs it with ``scripts/install-test-peers.sh``.

Use the ``sshd_server`` fixture, then ``server.make_sftp_root()`` for a fresh remote root owned by
the test user and ``make_sftp_storage(server, root)`` for an :class:`SFTPStorage` on it. The
``sftp_root`` / ``sftp_storage`` fixtures do both for one test.
"""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.peers.process import free_port, stop_process

SSHD = "/usr/sbin/sshd"
SSH_KEYGEN = "ssh-keygen"
#: dedicated unprivileged account the SFTP sessions run as when the tests run as root
TEST_USER = "distributor-sftp"
_START_TIMEOUT = 10.0


@dataclass(frozen=True)
class SSHDServer:
    """A running sshd and everything a client needs to reach it."""

    host: str
    port: int
    user: str
    uid: int
    gid: int
    client_key_path: Path
    known_hosts_path: Path
    #: ``ssh-ed25519 AAAA...`` of the server's host key
    host_public_key: str
    #: directory holding the keys, config and log (removed at the end of the session)
    workdir: Path
    #: parent of the per-test remote roots
    roots_dir: Path
    pid: int

    @property
    def known_hosts_name(self) -> str:
        """The host name as it appears in known_hosts (``[host]:port`` for a non-22 port)."""
        return self.host if self.port == 22 else f"[{self.host}]:{self.port}"

    def known_hosts_line(self, public_key: str | None = None) -> str:
        return f"{self.known_hosts_name} {public_key or self.host_public_key}\n"

    def make_sftp_root(self, name: str | None = None) -> Path:
        """A fresh empty directory owned by the test user, usable as an SFTP root."""
        root = self.roots_dir / (name or f"root-{secrets.token_hex(6)}")
        root.mkdir(mode=0o755)
        self.chown_to_user(root)
        return root

    def chown_to_user(self, path: str | os.PathLike[str]) -> None:
        """Give ``path`` (recursively, without following symlinks) to the test user, so files a
        test created directly on disk can be changed over SFTP."""
        if os.geteuid() != 0:
            return
        top = Path(path)
        os.lchown(top, self.uid, self.gid)
        if top.is_dir() and not top.is_symlink():
            for dirpath, dirnames, filenames in os.walk(top):
                for name in dirnames + filenames:
                    os.lchown(os.path.join(dirpath, name), self.uid, self.gid)

    def log_text(self) -> str:
        try:
            return (self.workdir / "sshd.log").read_text(errors="replace")
        except OSError:
            return ""


def make_sftp_storage(server: SSHDServer, root_dir: str | os.PathLike[str], **overrides: Any):
    """An :class:`SFTPStorage` on ``root_dir`` (a path on this machine the test user owns), with
    strict host-key checking against the server's known_hosts file. ``overrides`` replace any
    constructor argument."""
    from distributor_core.storage.sftp import SFTPStorage

    kwargs: dict[str, Any] = {
        "host": server.host,
        "port": server.port,
        "user": server.user,
        "root": os.fspath(root_dir),
        "private_key_file": os.fspath(server.client_key_path),
        "known_hosts_file": os.fspath(server.known_hosts_path),
        "host_key_policy": "strict",
        "connect_timeout": 10.0,
    }
    kwargs.update(overrides)
    return SFTPStorage(**kwargs)


# ---------------------------------------------------------------------------- setup helpers


def _run(args: list[str]) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(args, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({result.returncode}): {result.stderr.strip()}")
    return result


def _require_binaries() -> None:
    if not os.access(SSHD, os.X_OK):
        pytest.fail(
            f"{SSHD} is missing: the SFTP tests need OpenSSH's server. "
            "Install it with `bash scripts/install-test-peers.sh` (or `make peers`).",
            pytrace=False,
        )
    if shutil.which(SSH_KEYGEN) is None:
        pytest.fail("ssh-keygen is missing: install openssh-client (scripts/install-test-peers.sh)", pytrace=False)


def ensure_test_user() -> pwd.struct_passwd:
    """The account SFTP sessions run as: a dedicated user as root (created when missing and
    given a usable-but-passwordless state so ``UsePAM no`` accepts key logins), else ourselves."""
    if os.geteuid() != 0:
        return pwd.getpwuid(os.geteuid())
    try:
        account = pwd.getpwnam(TEST_USER)
    except KeyError:
        _run(["useradd", "--create-home", "--shell", "/usr/sbin/nologin", TEST_USER])
        account = pwd.getpwnam(TEST_USER)
    # a locked account ("!" in shadow) is refused by sshd without PAM; "*" only disables passwords
    _run(["usermod", "-p", "*", TEST_USER])
    return account


def _keygen(path: Path) -> str:
    _run([SSH_KEYGEN, "-q", "-t", "ed25519", "-N", "", "-C", "distributor-test", "-f", str(path)])
    public = path.with_name(path.name + ".pub").read_text().split()
    return f"{public[0]} {public[1]}"


#: OpenSSH >= 9.8 blocks sources that fail authentication; the tests fail it on purpose
_OPTIONAL_LINES = ("PerSourcePenalties no",)


def _write_config(
    workdir: Path,
    port: int,
    user: str,
    optional: tuple[str, ...] = _OPTIONAL_LINES,
    log_level: str = "INFO",
    extra: tuple[str, ...] = (),
) -> Path:
    lines = [
        *extra,  # first: sshd keeps the first value of a keyword
        "ListenAddress 127.0.0.1",
        f"Port {port}",
        f"HostKey {workdir / 'ssh_host_ed25519_key'}",
        f"PidFile {workdir / 'sshd.pid'}",
        f"AuthorizedKeysFile {workdir / 'authorized_keys'}",
        f"AllowUsers {user}",
        "StrictModes no",
        "PubkeyAuthentication yes",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "PermitRootLogin prohibit-password",
        "UsePAM no",
        "X11Forwarding no",
        "AllowTcpForwarding no",
        "PrintMotd no",
        f"LogLevel {log_level}",
        "Subsystem sftp internal-sftp",
        *optional,
    ]
    config = workdir / "sshd_config"
    config.write_text("\n".join(lines) + "\n")
    return config


def _check_config(
    workdir: Path, port: int, user: str, log_level: str = "INFO", extra: tuple[str, ...] = ()
) -> Path:
    """Write the config, leaving out optional lines this sshd does not know."""
    optional = _OPTIONAL_LINES
    while True:
        config = _write_config(workdir, port, user, optional, log_level, extra)
        check = subprocess.run([SSHD, "-t", "-f", str(config)], capture_output=True, text=True, check=False)
        if check.returncode == 0:
            return config
        unknown = tuple(line for line in optional if line.split()[0] in check.stderr)
        if not unknown:
            pytest.fail(f"sshd rejected its test configuration: {check.stderr.strip()}", pytrace=False)
        optional = tuple(line for line in optional if line not in unknown)


def _wait_for_banner(port: int, proc: subprocess.Popen[bytes], deadline: float) -> bool:
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1.0) as sock:
                if sock.recv(64).startswith(b"SSH-2.0-"):
                    return True
        except OSError:
            time.sleep(0.02)
    return False


def start_sshd(
    workdir: Path, *, log_level: str = "INFO", extra: tuple[str, ...] = ()
) -> tuple[SSHDServer, subprocess.Popen[bytes]]:
    """Generate keys and config in ``workdir`` and start sshd in the foreground (``log_level``:
    sshd's ``LogLevel``; the benchmarks read the negotiated cipher from a ``DEBUG1`` log;
    ``extra``: sshd_config lines that take precedence, e.g. ``AllowTcpForwarding yes`` for a
    bastion or ``TrustedUserCAKeys`` for certificates)."""
    _require_binaries()
    account = ensure_test_user()
    workdir.chmod(0o755)  # sshd reads authorized_keys as the target user
    host_public = _keygen(workdir / "ssh_host_ed25519_key")
    client_public = _keygen(workdir / "client_key")
    authorized = workdir / "authorized_keys"
    authorized.write_text(client_public + "\n")
    authorized.chmod(0o644)
    roots = workdir / "roots"
    roots.mkdir(mode=0o755)
    if os.geteuid() == 0:
        Path("/run/sshd").mkdir(mode=0o755, parents=True, exist_ok=True)

    last_log = ""
    for _attempt in range(3):
        port = free_port()
        config = _check_config(workdir, port, account.pw_name, log_level, extra)
        log = open(workdir / "sshd.log", "ab")  # noqa: SIM115 - kept open for the child
        try:
            proc = subprocess.Popen(
                [SSHD, "-D", "-e", "-f", str(config)], stdin=subprocess.DEVNULL, stdout=log, stderr=log
            )
        finally:
            log.close()
        if _wait_for_banner(port, proc, time.monotonic() + _START_TIMEOUT):
            known_hosts = workdir / "known_hosts"
            server = SSHDServer(
                host="127.0.0.1",
                port=port,
                user=account.pw_name,
                uid=account.pw_uid,
                gid=account.pw_gid,
                client_key_path=workdir / "client_key",
                known_hosts_path=known_hosts,
                host_public_key=host_public,
                workdir=workdir,
                roots_dir=roots,
                pid=proc.pid,
            )
            known_hosts.write_text(server.known_hosts_line())
            return server, proc
        stop_process(proc)
        last_log = (workdir / "sshd.log").read_text(errors="replace")
    pytest.fail(f"sshd did not start on 127.0.0.1; its log:\n{last_log}", pytrace=False)



# ---------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="session")
def sshd_server() -> Iterator[SSHDServer]:
    """A running OpenSSH sshd on 127.0.0.1 for the whole session."""
    workdir = Path(tempfile.mkdtemp(prefix="distributor-sshd-"))
    proc: subprocess.Popen[bytes] | None = None
    try:
        server, proc = start_sshd(workdir)
        yield server
    finally:
        if proc is not None:
            stop_process(proc)
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture
def sftp_root(sshd_server: SSHDServer) -> Path:
    """A fresh remote root directory (a local path the test user owns)."""
    return sshd_server.make_sftp_root()


@pytest.fixture
def sftp_storage(sshd_server: SSHDServer, sftp_root: Path) -> Iterator[Any]:
    """An :class:`SFTPStorage` on :func:`sftp_root`, closed after the test."""
    storage = make_sftp_storage(sshd_server, sftp_root)
    try:
        yield storage
    finally:
        storage.close()

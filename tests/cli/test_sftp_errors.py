"""``distributor run`` to an SFTP destination that fails, through the real console script, over
both SSH transports: refused authentication, a changed host key, an unreachable host, a
permission the server refuses and a full remote disk each give the same message and the same
exit code with ``transport: paramiko`` and ``transport: openssh`` (issue 30)."""

from __future__ import annotations

import os
import re
import socket
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.bundle.conftest import make_bundle
from tests.cli.conftest import run_script
from tests.peers.sshd import SSHDServer

pytestmark = pytest.mark.sftp

TRANSPORTS = ("paramiko", "openssh")


def _keygen(path: Path) -> str:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    kind, blob = path.with_name(path.name + ".pub").read_text().split()[:2]
    return f"{kind} {blob}"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _publish(tmp_path: Path, server: SSHDServer, root: Path, transport: str, **fields: object) -> tuple[int, str]:
    """Run ``distributor run`` publishing one bundle to ``root``; (exit code, stdout + stderr)."""
    source = tmp_path / "spool"
    if not source.exists():
        make_bundle(source / "daily-1", {"report.md": b"# report\n", "big.bin": b"\0" * (2 * 1024 * 1024)})
    destination = {
        "host": server.host,
        "port": server.port,
        "user": server.user,
        "path": str(root),
        "private_key_file": str(server.client_key_path),
        "known_hosts_file": str(server.known_hosts_path),
        "transport": transport,
        **fields,
    }
    lines = "".join(f"        {key}: {value}\n" for key, value in destination.items())
    config = tmp_path / f"distributor-{transport}.yml"
    config.write_text(
        "pipelines:\n"
        "  - id: reports\n"
        f"    source: {{backend: local, path: {source}}}\n"
        "    destinations:\n"
        "      - id: sftp\n"
        "        backend: ssh\n"
        f"{lines}"
    )
    result = run_script("run", "--config", str(config))
    return result.returncode, result.stdout + result.stderr


def _both(case: Callable[[str], tuple[int, str]]) -> dict[str, tuple[int, str]]:
    return {transport: case(transport) for transport in TRANSPORTS}


def _same(outcomes: dict[str, tuple[int, str]], message: str) -> None:
    codes = {transport: code for transport, (code, _text) in outcomes.items()}
    assert len(set(codes.values())) == 1 and codes["paramiko"] != 0, codes
    for transport, (_code, text) in outcomes.items():
        assert re.search(message, text), f"{transport}: {text}"


def test_a_refused_key(sshd_server: SSHDServer, tmp_path: Path) -> None:
    stranger = tmp_path / "stranger"
    _keygen(stranger)
    root = sshd_server.make_sftp_root()
    outcomes = _both(lambda t: _publish(tmp_path, sshd_server, root, t, private_key_file=stranger))
    _same(outcomes, rf"unavailable: authentication as {sshd_server.user} at \[127\.0\.0\.1\]:{sshd_server.port} failed")


def test_a_changed_host_key(sshd_server: SSHDServer, tmp_path: Path) -> None:
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text(sshd_server.known_hosts_line(_keygen(tmp_path / "impostor")))
    root = sshd_server.make_sftp_root()
    outcomes = _both(lambda t: _publish(tmp_path, sshd_server, root, t, known_hosts_file=known_hosts))
    _same(outcomes, rf"host key of \[127\.0\.0\.1\]:{sshd_server.port} does not match known_hosts file {known_hosts}")
    for _code, text in outcomes.values():
        assert "refusing to connect" in text
        # the server's identity, not the network: its own class, a remedy about keys, never "check that ... accepts"
        assert "untrusted: host key" in text and "class=untrusted_host_key" in text
        assert f"ssh-keygen -R '[127.0.0.1]:{sshd_server.port}' -f {known_hosts}" in text
        assert "accepts SSH connections" not in text and "unreachable_root" not in text
        assert text.rstrip().endswith("; more: distributor explain untrusted_host_key)")


def test_an_unknown_host_key_is_untrusted_not_unreachable(sshd_server: SSHDServer, tmp_path: Path) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    root = sshd_server.make_sftp_root()
    outcomes = _both(lambda t: _publish(tmp_path, sshd_server, root, t, known_hosts_file=empty))
    _same(outcomes, rf"untrusted: host key of \[127\.0\.0\.1\]:{sshd_server.port} is not in known_hosts file {empty}")
    for _code, text in outcomes.values():
        assert "class=untrusted_host_key" in text and "unreachable_root" not in text
        assert f"`ssh-keyscan -p {sshd_server.port} 127.0.0.1`" in text and "host_key_policy: accept_new" in text
        assert text.rstrip().endswith("; more: distributor explain untrusted_host_key)")
    assert empty.read_text() == ""


def test_an_unreachable_host(sshd_server: SSHDServer, tmp_path: Path) -> None:
    port = _free_port()
    root = sshd_server.make_sftp_root()
    outcomes = _both(lambda t: _publish(tmp_path, sshd_server, root, t, port=port))
    _same(outcomes, rf"unavailable: connection to \[127\.0\.0\.1\]:{port} refused")


def test_permission_denied(sshd_server: SSHDServer, tmp_path: Path) -> None:
    root = sshd_server.make_sftp_root()
    locked = root / "locked"
    locked.mkdir(mode=0o555)  # owned by us (root), not by the SFTP user: no writing in it
    assert os.geteuid() == 0, "the sshd peer logs in as another user only when the tests run as root"
    outcomes = _both(lambda t: _publish(tmp_path, sshd_server, locked, t))
    _same(outcomes, r"permission: Permission denied")


@pytest.fixture
def small_disk(sshd_server: SSHDServer) -> Iterator[Path]:
    """A 1 MiB tmpfs the SFTP user owns, as a remote root that fills up."""
    mount = sshd_server.make_sftp_root()
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], capture_output=True)
    assert result.returncode == 0, f"cannot mount a tmpfs (root needed): {result.stderr.decode()}"
    try:
        sshd_server.chown_to_user(mount)
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_full_remote_disk(sshd_server: SSHDServer, tmp_path: Path, small_disk: Path) -> None:
    outcomes: dict[str, tuple[int, str]] = {}
    for transport in TRANSPORTS:
        outcomes[transport] = _publish(tmp_path, sshd_server, small_disk, transport)
        leftovers = [p.name for p in small_disk.rglob("*") if p.is_file()]
        assert not [name for name in leftovers if name.startswith(".distributor-tmp-")], leftovers
    # OpenSSH's sftp-server reports ENOSPC as the generic SSH_FX_FAILURE ("Failure")
    _same(outcomes, r"write ssh \S+: other: Failure")


def test_an_unreadable_ssh_config_file_fails_before_planning(sshd_server: SSHDServer, tmp_path: Path) -> None:
    missing = tmp_path / "no_ssh_config"
    root = sshd_server.make_sftp_root()
    code, text = _publish(tmp_path, sshd_server, root, "openssh", ssh_config_file=missing)
    assert code == 1
    assert f"distributor: pipeline reports destination sftp: cannot read ssh_config_file {missing}" in text
    assert list(root.iterdir()) == []


def test_a_refused_ssh_option_is_a_config_error(sshd_server: SSHDServer, tmp_path: Path) -> None:
    root = sshd_server.make_sftp_root()
    code, text = _publish(tmp_path, sshd_server, root, "openssh", ssh_options="{StrictHostKeyChecking: 'no'}")
    assert code != 0
    assert "pipelines[0].destinations[0].ssh_options.StrictHostKeyChecking is refused" in text
    assert list(root.iterdir()) == []

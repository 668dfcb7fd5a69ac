"""``transport: openssh``: the SFTP backend through the system ``ssh`` client, against real sshd
peers: publishing, failures worded as with paramiko, what the account's or the user's ssh config
may and may not change, a bastion through ``ProxyJump``, an OpenSSH user certificate, and ``ssh``
children that never outlive their run."""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from distributor_core.config.models import SSHBackend
from distributor_core.storage.base import iter_chunks
from distributor_core.storage.errors import ErrorKind, StorageError
from distributor_core.storage.sftp import SFTPStorage
from distributor_core.storage.sftp_openssh import OpenSSHConnection
from tests.peers.process import stop_process
from tests.peers.sshd import SSHDServer, make_sftp_storage, start_sshd

pytestmark = pytest.mark.sftp

TRANSPORTS = ("paramiko", "openssh")


def keygen(path: Path) -> str:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    kind, blob = path.with_name(path.name + ".pub").read_text().split()[:2]
    return f"{kind} {blob}"


def unavailable(storage: SFTPStorage, kind: ErrorKind = ErrorKind.UNAVAILABLE) -> StorageError:
    try:
        with pytest.raises(StorageError) as info:
            storage.stat("")
    finally:
        storage.close()
    assert info.value.kind == kind, str(info.value)
    return info.value


def untrusted(storage: SFTPStorage) -> StorageError:
    """A host key refused: not the network (``unavailable``), the server's identity."""
    return unavailable(storage, ErrorKind.UNTRUSTED)


def alive(pid: int) -> bool:
    """The process exists and is not a zombie waiting to be reaped."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def wait_gone(pid: int, seconds: float = 15.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return False


def ssh_children(storage: SFTPStorage) -> list[int]:
    connection = storage.connection
    assert isinstance(connection, OpenSSHConnection)
    return [process.pid for process in connection.sessions()]


@pytest.fixture
def storage(sshd_server: SSHDServer, sftp_root: Path) -> Iterator[SFTPStorage]:
    storage = make_sftp_storage(sshd_server, sftp_root, transport="openssh")
    try:
        yield storage
    finally:
        storage.close()


# ---------------------------------------------------------------------------- publishing


def test_publishes_and_reads_through_the_ssh_client(storage: SFTPStorage, sftp_root: Path) -> None:
    data = os.urandom(3 * 1024 * 1024 + 17)
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    storage.write_stream("a/big.bin", iter_chunks(io.BytesIO(data), 1 << 20), overwrite=False,
                         expected_size=len(data), expected_sha256=digest)
    assert (sftp_root / "a" / "big.bin").read_bytes() == data
    assert storage.read_bytes("a/big.bin") == data
    assert [entry.path for entry in storage.list("a")] == ["a/big.bin"]
    storage.rename("a/big.bin", "b/moved.bin", overwrite=False)
    assert storage.stat("b/moved.bin").size == len(data)
    assert storage.connect_count == 1  # one ssh session served every call
    children = ssh_children(storage)
    assert len(children) == 1 and alive(children[0])
    storage.close()
    assert not alive(children[0])


def test_a_dead_ssh_child_is_unavailable_then_replaced(storage: SFTPStorage) -> None:
    storage.write_bytes("x.txt", b"x", overwrite=False)
    (process,) = storage.connection.sessions()  # type: ignore[attr-defined]
    process.kill()
    process.wait()
    assert storage.read_bytes("x.txt") == b"x"  # the dead channel is dropped, a new ssh started
    assert storage.connect_count == 2


def test_from_config_reads_the_openssh_fields(sshd_server: SSHDServer, sftp_root: Path, tmp_path: Path) -> None:
    config = tmp_path / "ssh_config"
    config.write_text("Host *\n    ServerAliveCountMax 2\n")
    cfg = SSHBackend(
        host=sshd_server.host, port=sshd_server.port, user=sshd_server.user, path=str(sftp_root),
        private_key_file=sshd_server.client_key_path, known_hosts_file=sshd_server.known_hosts_path,
        transport="openssh", ssh_config_file=config, ssh_options=(("Compression", "no"),),
    )
    storage = SFTPStorage.from_config(cfg)
    try:
        storage.write_bytes("c.txt", b"c", overwrite=False)
        assert storage.transport == "openssh"
        assert (sftp_root / "c.txt").read_bytes() == b"c"
    finally:
        storage.close()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"StrictHostKeyChecking": "no"}, "ssh_options.StrictHostKeyChecking is refused: host keys are checked"),
        ({"userknownhostsfile": "/dev/null"}, "ssh_options.userknownhostsfile is refused"),
        ({"BatchMode": "no"}, "ssh_options.BatchMode is refused"),
        ({"ForwardAgent": "yes"}, "ssh_options.ForwardAgent is refused"),
        ({"LocalCommand": "touch /tmp/x"}, "ssh_options.LocalCommand is refused"),
        ({"Port": "2222"}, "ssh_options.Port is refused: set the port field"),
        ({"Ciphers x": "y"}, "is not an OpenSSH option name"),
    ],
)
def test_weakening_options_are_refused_naming_the_key(
    sshd_server: SSHDServer, sftp_root: Path, options: dict[str, str], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        make_sftp_storage(sshd_server, sftp_root, transport="openssh", ssh_options=tuple(options.items()))


def test_openssh_fields_need_the_openssh_transport(sshd_server: SSHDServer, sftp_root: Path) -> None:
    with pytest.raises(ValueError, match="only used with transport: openssh"):
        make_sftp_storage(sshd_server, sftp_root, ssh_options=(("Compression", "no"),))
    with pytest.raises(ValueError, match="transport must be paramiko or openssh"):
        make_sftp_storage(sshd_server, sftp_root, transport="putty")


def test_options_may_choose_the_cipher(sshd_server: SSHDServer, sftp_root: Path) -> None:
    storage = make_sftp_storage(
        sshd_server, sftp_root, transport="openssh", ssh_options=(("Ciphers", "aes256-ctr"),)
    )
    try:
        storage.write_bytes("c.txt", b"cipher", overwrite=False)
    finally:
        storage.close()
    assert (sftp_root / "c.txt").read_bytes() == b"cipher"


# ---------------------------------------------------------------------------- host keys stay strict


def test_a_config_file_cannot_switch_off_host_key_checking(
    sshd_server: SSHDServer, sftp_root: Path, tmp_path: Path
) -> None:
    lax = tmp_path / "lax_config"
    lax.write_text("Host *\n    StrictHostKeyChecking no\n    UserKnownHostsFile /dev/null\n    BatchMode no\n")
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    error = untrusted(make_sftp_storage(
        sshd_server, sftp_root, transport="openssh", ssh_config_file=str(lax), known_hosts_file=str(empty)
    ))
    assert f"host key of {sshd_server.known_hosts_name} is not in known_hosts file {empty}" in str(error)
    assert "accept_new" in str(error)
    assert empty.read_text() == ""


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("policy", ["strict", "accept_new"])
def test_a_changed_host_key_fails_the_same_on_both_transports(
    sshd_server: SSHDServer, sftp_root: Path, tmp_path: Path, transport: str, policy: str
) -> None:
    impostor = keygen(tmp_path / "impostor")
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text(sshd_server.known_hosts_line(impostor))
    error = untrusted(make_sftp_storage(
        sshd_server, sftp_root, transport=transport, known_hosts_file=str(known_hosts), host_key_policy=policy
    ))
    assert f"host key of {sshd_server.known_hosts_name} does not match known_hosts file {known_hosts}" in str(error)
    assert "refusing to connect" in str(error) and "SHA256:" in str(error)
    assert known_hosts.read_text() == sshd_server.known_hosts_line(impostor)


def test_accept_new_records_the_key_and_a_dry_run_never_does(
    sshd_server: SSHDServer, sftp_root: Path, tmp_path: Path
) -> None:
    dry = tmp_path / "dry" / "known_hosts"
    storage = make_sftp_storage(sshd_server, sftp_root, transport="openssh", known_hosts_file=str(dry),
                                host_key_policy="accept_new", dry_run=True)
    try:
        assert storage.stat("").type == "directory"
    finally:
        storage.close()
    assert not dry.exists()
    known = tmp_path / "ssh" / "known_hosts"
    storage = make_sftp_storage(sshd_server, sftp_root, transport="openssh", known_hosts_file=str(known),
                                host_key_policy="accept_new")
    try:
        assert storage.stat("").type == "directory"
    finally:
        storage.close()
    assert sshd_server.host_public_key in known.read_text()
    strict = make_sftp_storage(sshd_server, sftp_root, transport="openssh", known_hosts_file=str(known))
    try:
        assert strict.stat("").type == "directory"
    finally:
        strict.close()


# ---------------------------------------------------------------------------- failures, same words


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_refused_key_is_an_authentication_failure(
    sshd_server: SSHDServer, sftp_root: Path, tmp_path: Path, transport: str
) -> None:
    stranger = tmp_path / "stranger_key"
    keygen(stranger)
    error = unavailable(make_sftp_storage(sshd_server, sftp_root, transport=transport, private_key_file=str(stranger)))
    assert f"authentication as {sshd_server.user} at {sshd_server.known_hosts_name} failed" in str(error)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_connection_refused(sshd_server: SSHDServer, sftp_root: Path, transport: str) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    error = unavailable(make_sftp_storage(sshd_server, sftp_root, transport=transport, port=port))
    assert f"connection to [127.0.0.1]:{port} refused" in str(error)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_unknown_host_name(sshd_server: SSHDServer, sftp_root: Path, transport: str) -> None:
    error = unavailable(
        make_sftp_storage(sshd_server, sftp_root, transport=transport, host="no-such-host.invalid", port=22)
    )
    assert "cannot resolve host no-such-host.invalid" in str(error)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_silent_server(sshd_server: SSHDServer, sftp_root: Path, transport: str) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    try:
        error = unavailable(
            make_sftp_storage(sshd_server, sftp_root, transport=transport, port=port, connect_timeout=1)
        )
        assert f"no SSH protocol banner from [127.0.0.1]:{port} within 1s" in str(error)
    finally:
        listener.close()


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_unreadable_key_file(sshd_server: SSHDServer, sftp_root: Path, tmp_path: Path, transport: str) -> None:
    missing = tmp_path / "no_key"
    error = unavailable(make_sftp_storage(sshd_server, sftp_root, transport=transport, private_key_file=str(missing)))
    assert f"cannot read private key file {missing}" in str(error)


def test_unreadable_ssh_config_file(sshd_server: SSHDServer, sftp_root: Path, tmp_path: Path) -> None:
    missing = tmp_path / "no_config"
    error = unavailable(
        make_sftp_storage(sshd_server, sftp_root, transport="openssh", ssh_config_file=str(missing))
    )
    assert f"cannot read ssh_config_file {missing}" in str(error)


def test_no_ssh_program_is_a_clear_error(
    sshd_server: SSHDServer, sftp_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    error = unavailable(make_sftp_storage(sshd_server, sftp_root, transport="openssh"))
    assert "no ssh program on PATH" in str(error) and "transport: paramiko" in str(error)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_permission_denied_maps_the_same(
    sshd_server: SSHDServer, sftp_root: Path, transport: str
) -> None:
    if os.geteuid() == 0:
        locked = sftp_root / "locked"
        locked.mkdir(mode=0o555)  # owned by root: the test user may not write in it
    else:
        pytest.fail("the sshd peer runs as root in these tests (its user differs from ours)")
    storage = make_sftp_storage(sshd_server, sftp_root, transport=transport)
    try:
        with pytest.raises(StorageError) as info:
            storage.write_bytes("locked/x.txt", b"x", overwrite=False)
    finally:
        storage.close()
    assert info.value.kind == ErrorKind.PERMISSION, str(info.value)


# ---------------------------------------------------------------------------- reach: bastion and certificates


@pytest.fixture
def extra_sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """Start further sshd peers for one test: ``extra_sshd(*config_lines)``."""
    started: list[tuple[subprocess.Popen[bytes], Path]] = []

    def start(*lines: str) -> SSHDServer:
        workdir = Path(tempfile.mkdtemp(prefix="distributor-sshd-extra-"))
        server, proc = start_sshd(workdir, extra=lines)
        started.append((proc, workdir))
        return server

    try:
        yield start
    finally:
        for proc, workdir in started:
            stop_process(proc)
            shutil.rmtree(workdir, ignore_errors=True)


def test_publishes_through_a_bastion_named_in_the_ssh_config(
    sshd_server: SSHDServer, sftp_root: Path, tmp_path: Path, extra_sshd
) -> None:
    bastion: SSHDServer = extra_sshd("AllowTcpForwarding yes")
    known_hosts = tmp_path / "known_hosts"  # the keys of both hops (the target under its HostName)
    known_hosts.write_text(sshd_server.known_hosts_line() + bastion.known_hosts_line())
    config = tmp_path / "ssh_config"
    config.write_text(textwrap.dedent(f"""\
        Host target
            HostName {sshd_server.host}
            ProxyJump bastion
        Host bastion
            HostName {bastion.host}
            Port {bastion.port}
            User {bastion.user}
            IdentityFile {bastion.client_key_path}
            IdentitiesOnly yes
        """))
    storage = make_sftp_storage(sshd_server, sftp_root, transport="openssh", host="target",
                                ssh_config_file=str(config), known_hosts_file=str(known_hosts))
    try:
        storage.write_bytes("via-bastion.txt", b"jumped", overwrite=False)
    finally:
        storage.close()
    assert (sftp_root / "via-bastion.txt").read_bytes() == b"jumped"
    assert "Accepted publickey" in bastion.log_text()

    # the jump host's key is checked as strictly, against the same known_hosts file
    known_hosts.write_text(sshd_server.known_hosts_line())
    error = untrusted(make_sftp_storage(sshd_server, sftp_root, transport="openssh", host="target",
                                        ssh_config_file=str(config), known_hosts_file=str(known_hosts)))
    assert "host key" in str(error) and "known_hosts file" in str(error)


def test_publishes_with_a_user_certificate_signed_by_a_trusted_ca(
    sshd_server: SSHDServer, tmp_path: Path, extra_sshd
) -> None:
    ca = tmp_path / "user_ca"
    keygen(ca)
    target: SSHDServer = extra_sshd(f"TrustedUserCAKeys {ca}.pub", "AuthorizedKeysFile none")
    key = tmp_path / "deploy_key"
    keygen(key)
    subprocess.run(
        ["ssh-keygen", "-q", "-s", str(ca), "-I", "distributor-test", "-n", target.user, "-V", "-5m:+1h",
         str(key) + ".pub"],
        check=True,
    )
    certificate = tmp_path / "deploy_key-cert.pub"
    moved = tmp_path / "certs" / "deploy.cert"
    moved.parent.mkdir()
    certificate.rename(moved)  # named in the ssh config, not found next to the key
    config = tmp_path / "ssh_config"
    config.write_text(f"Host *\n    CertificateFile {moved}\n")
    root = target.make_sftp_root()

    # the plain key alone is refused (no authorized_keys at all)
    error = unavailable(make_sftp_storage(target, root, private_key_file=str(key)))
    assert "authentication as" in str(error)

    storage = make_sftp_storage(target, root, transport="openssh", private_key_file=str(key),
                                ssh_config_file=str(config))
    try:
        storage.write_bytes("certified.txt", b"signed", overwrite=False)
    finally:
        storage.close()
    assert (root / "certified.txt").read_bytes() == b"signed"
    assert "Accepted publickey" in target.log_text() and "CA" in target.log_text()


# ---------------------------------------------------------------------------- ssh never outlives its run


def test_an_ssh_child_ends_with_a_killed_process(sshd_server: SSHDServer, sftp_root: Path, tmp_path: Path) -> None:
    script = textwrap.dedent(f"""\
        import sys, time
        from tests.peers.sshd import SSHDServer
        from distributor_core.storage.sftp import SFTPStorage
        storage = SFTPStorage(host={sshd_server.host!r}, port={sshd_server.port}, user={sshd_server.user!r},
                              root={str(sftp_root)!r}, private_key_file={str(sshd_server.client_key_path)!r},
                              known_hosts_file={str(sshd_server.known_hosts_path)!r}, transport="openssh")
        storage.write_bytes("alive.txt", b"1", overwrite=False)
        print(*[p.pid for p in storage.connection.sessions()], flush=True)
        time.sleep(600)
        """)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "TMPDIR": str(scratch)})
    try:
        assert child.stdout is not None
        pids = [int(pid) for pid in child.stdout.readline().split()]
        assert pids and all(alive(pid) for pid in pids)
        child.send_signal(signal.SIGKILL)
        child.wait()
        assert all(wait_gone(pid) for pid in pids), "an ssh child outlived the process that started it"
        assert list(scratch.iterdir()) == []  # the generated ssh config went once the session was up
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_file_paths_with_spaces_and_percent_signs(sshd_server: SSHDServer, sftp_root: Path, tmp_path: Path) -> None:
    odd = tmp_path / "ops 100% ready"
    odd.mkdir()
    config = odd / "ssh config"
    config.write_text("Host *\n    ServerAliveCountMax 2\n")
    known_hosts = odd / "known hosts"
    known_hosts.write_text(sshd_server.known_hosts_line())
    key = odd / "client key"
    key.write_bytes(sshd_server.client_key_path.read_bytes())
    key.chmod(0o600)
    storage = make_sftp_storage(sshd_server, sftp_root, transport="openssh", ssh_config_file=str(config),
                                known_hosts_file=str(known_hosts), private_key_file=str(key))
    try:
        storage.write_bytes("odd.txt", b"odd", overwrite=False)
    finally:
        storage.close()
    assert (sftp_root / "odd.txt").read_bytes() == b"odd"

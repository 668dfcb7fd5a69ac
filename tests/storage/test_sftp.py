"""SFTP backend specifics against a real OpenSSH sshd (interfaces §1.6, §5.3): configuration,
host-key policy, authentication and transport failures, connection reuse, channel pooling,
permission mapping."""

from __future__ import annotations

import hashlib
import os
import socket
import stat
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from distributor_core.config.models import SSHBackend
from distributor_core.storage.base import iter_chunks
from distributor_core.storage.errors import ErrorKind, StorageError
from distributor_core.storage.sftp import SFTPStorage
from tests.peers.sshd import SSHDServer, make_sftp_storage

pytestmark = pytest.mark.sftp


def keygen(path: Path) -> str:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    kind, blob = path.with_name(path.name + ".pub").read_text().split()[:2]
    return f"{kind} {blob}"


def unavailable(storage: SFTPStorage, kind: ErrorKind = ErrorKind.UNAVAILABLE) -> StorageError:
    with pytest.raises(StorageError) as info:
        storage.stat("")
    assert info.value.kind == kind, str(info.value)
    assert (info.value.op, info.value.backend) == ("stat", "ssh")
    return info.value


def untrusted(storage: SFTPStorage) -> StorageError:
    """A host key refused: not the network (``unavailable``), the server's identity."""
    return unavailable(storage, ErrorKind.UNTRUSTED)


@pytest.fixture
def storage(sshd_server: SSHDServer, sftp_root: Path) -> Iterator[SFTPStorage]:
    storage = make_sftp_storage(sshd_server, sftp_root)
    try:
        yield storage
    finally:
        storage.close()


# ---------------------------------------------------------------------------- configuration


def test_from_config_reads_the_ssh_fields(sshd_server: SSHDServer, sftp_root: Path) -> None:
    cfg = SSHBackend(
        host=sshd_server.host,
        port=sshd_server.port,
        user=sshd_server.user,
        path=str(sftp_root),
        private_key_file=sshd_server.client_key_path,
        known_hosts_file=sshd_server.known_hosts_path,
        host_key_policy="strict",
    )
    storage = SFTPStorage.from_config(cfg, None, dry_run=True)
    try:
        assert (storage.backend, storage.host, storage.port, storage.user) == (
            "ssh",
            sshd_server.host,
            sshd_server.port,
            sshd_server.user,
        )
        assert (storage.root, storage.root_display) == (str(sftp_root), str(sftp_root))
        assert storage.private_key_file == str(sshd_server.client_key_path)
        assert storage.known_hosts_file == str(sshd_server.known_hosts_path)
        assert (storage.host_key_policy, storage.dry_run) == ("strict", True)
        storage.write_bytes("hello.txt", b"hi", overwrite=False)
        assert (sftp_root / "hello.txt").read_bytes() == b"hi"
    finally:
        storage.close()


def test_from_config_defaults() -> None:
    """A config that names only host, user and path connects with the declaration's defaults."""
    storage = SFTPStorage.from_config(SSHBackend(host="sftp.example.com", user="dist", path="/srv/out"), None)
    assert (storage.port, storage.host_key_policy, storage.private_key_file) == (22, "strict", None)
    assert storage.known_hosts_file == os.path.expanduser("~/.ssh/known_hosts")
    assert storage.address == "sftp.example.com"
    assert repr(storage) == "SFTPStorage(ssh://dist@sftp.example.com:22/srv/out)"
    assert not storage.connected and storage.connect_count == 0  # lazy: nothing was contacted


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"root": "relative/path"}, "absolute"),
        ({"root": ""}, "absolute"),
        ({"host_key_policy": "yes"}, "strict or accept_new"),
        ({"port": 0}, "port"),
        ({"host": ""}, "host"),
        ({"user": ""}, "user"),
    ],
)
def test_constructor_rejects_bad_settings(overrides: dict[str, object], message: str) -> None:
    kwargs: dict[str, object] = {"host": "h", "user": "u", "root": "/r"} | overrides
    with pytest.raises(ValueError, match=message):
        SFTPStorage(**kwargs)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------- host keys


def test_strict_refuses_an_unknown_host_key(sshd_server: SSHDServer, sftp_root: Path, tmp_path: Path) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    error = untrusted(make_sftp_storage(sshd_server, sftp_root, known_hosts_file=str(empty)))
    assert f"host key of {sshd_server.known_hosts_name} is not in known_hosts file {empty}" in str(error)
    assert "SHA256:" in str(error) and "accept_new" in str(error)
    assert empty.read_text() == ""
    missing = tmp_path / "nowhere" / "known_hosts"
    error = untrusted(make_sftp_storage(sshd_server, sftp_root, known_hosts_file=str(missing)))
    assert "is not in known_hosts file" in str(error)
    assert not missing.parent.exists()


@pytest.mark.parametrize("policy", ["strict", "accept_new"])
def test_a_changed_host_key_always_fails(sshd_server: SSHDServer, sftp_root: Path, tmp_path: Path, policy: str) -> None:
    impostor = keygen(tmp_path / "impostor")
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text(sshd_server.known_hosts_line(impostor))
    storage = make_sftp_storage(sshd_server, sftp_root, known_hosts_file=str(known_hosts), host_key_policy=policy)
    error = untrusted(storage)
    assert "does not match known_hosts file" in str(error)
    assert known_hosts.read_text() == sshd_server.known_hosts_line(impostor)
    assert not storage.connected


def test_accept_new_records_the_key_then_strict_accepts_it(
    sshd_server: SSHDServer, sftp_root: Path, tmp_path: Path
) -> None:
    known_hosts = tmp_path / "ssh" / "known_hosts"
    learner = make_sftp_storage(sshd_server, sftp_root, known_hosts_file=str(known_hosts), host_key_policy="accept_new")
    try:
        learner.write_bytes("a.txt", b"a", overwrite=False)
    finally:
        learner.close()
    assert known_hosts.read_text() == sshd_server.known_hosts_line()
    assert stat.S_IMODE(known_hosts.stat().st_mode) == 0o600
    strict = make_sftp_storage(sshd_server, sftp_root, known_hosts_file=str(known_hosts))
    try:
        assert strict.read_bytes("a.txt") == b"a"
    finally:
        strict.close()
    assert known_hosts.read_text() == sshd_server.known_hosts_line()


def test_accept_new_appends_after_other_hosts(sshd_server: SSHDServer, sftp_root: Path, tmp_path: Path) -> None:
    other = keygen(tmp_path / "other")
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text(f"other.example.com {other}")  # no trailing newline
    storage = make_sftp_storage(sshd_server, sftp_root, known_hosts_file=str(known_hosts), host_key_policy="accept_new")
    try:
        assert storage.stat("").type == "directory"
    finally:
        storage.close()
    assert known_hosts.read_text() == f"other.example.com {other}\n" + sshd_server.known_hosts_line()


def test_accept_new_in_a_dry_run_never_writes_known_hosts(
    sshd_server: SSHDServer, sftp_root: Path, tmp_path: Path
) -> None:
    known_hosts = tmp_path / "known_hosts"
    storage = make_sftp_storage(
        sshd_server, sftp_root, known_hosts_file=str(known_hosts), host_key_policy="accept_new", dry_run=True
    )
    try:
        assert storage.stat("").type == "directory"
    finally:
        storage.close()
    assert not known_hosts.exists()


# ---------------------------------------------------------------------------- auth and transport failures


def test_wrong_client_key_is_an_authentication_failure(
    sshd_server: SSHDServer, sftp_root: Path, tmp_path: Path
) -> None:
    stranger = tmp_path / "stranger_key"
    keygen(stranger)
    error = unavailable(make_sftp_storage(sshd_server, sftp_root, private_key_file=str(stranger)))
    assert f"authentication as {sshd_server.user} at {sshd_server.known_hosts_name} failed" in str(error)
    secret_lines = [line for line in stranger.read_text().splitlines() if line and "PRIVATE KEY" not in line]
    assert not any(line in str(error) for line in secret_lines)


def test_unreadable_private_key_file(sshd_server: SSHDServer, sftp_root: Path, tmp_path: Path) -> None:
    error = unavailable(make_sftp_storage(sshd_server, sftp_root, private_key_file=str(tmp_path / "no_key")))
    assert f"cannot read private key file {tmp_path / 'no_key'}" in str(error)


def test_encrypted_private_key_is_refused_clearly(sshd_server: SSHDServer, sftp_root: Path, tmp_path: Path) -> None:
    key = tmp_path / "encrypted_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "a passphrase", "-f", str(key)], check=True)
    error = unavailable(make_sftp_storage(sshd_server, sftp_root, private_key_file=str(key)))
    assert f"private key file {key} is encrypted; passphrases are not supported" in str(error)


def test_connection_refused(sshd_server: SSHDServer, sftp_root: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    error = unavailable(make_sftp_storage(sshd_server, sftp_root, port=port))
    assert f"connection to [127.0.0.1]:{port} refused" in str(error)


def test_silent_server_times_out(sshd_server: SSHDServer, sftp_root: Path) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    try:
        storage = make_sftp_storage(sshd_server, sftp_root, port=port, connect_timeout=0.5)
        started = time.monotonic()
        error = unavailable(storage)
        assert time.monotonic() - started < 5
        assert f"no SSH protocol banner from [127.0.0.1]:{port} within 0.5s" in str(error)
    finally:
        listener.close()


def test_unknown_host_name(sshd_server: SSHDServer, sftp_root: Path) -> None:
    error = unavailable(make_sftp_storage(sshd_server, sftp_root, host="no-such-host.invalid", port=22))
    assert "no-such-host.invalid" in str(error)


# ---------------------------------------------------------------------------- connection reuse


def test_one_connection_serves_every_operation(storage: SFTPStorage) -> None:
    assert storage.connect_count == 0 and not storage.connected
    storage.write_bytes("a/one.txt", b"1", overwrite=False)
    storage.rename("a/one.txt", "a/two.txt", overwrite=False)
    assert storage.read_bytes("a/two.txt") == b"1"
    assert [e.path for e in storage.walk("")] == ["a", "a/two.txt"]
    storage.delete_managed_bundle("a", ["two.txt"])
    assert storage.connect_count == 1 and storage.connected
    storage.close()
    assert not storage.connected
    assert storage.walk("") == []
    assert storage.connect_count == 2


def test_reconnects_after_the_connection_drops(storage: SFTPStorage) -> None:
    storage.write_bytes("x.txt", b"x", overwrite=False)
    storage.connection.transport.close()  # type: ignore[union-attr]  # the server went away
    assert storage.read_bytes("x.txt") == b"x"
    assert storage.connect_count == 2


def test_a_drop_during_a_read_is_unavailable(storage: SFTPStorage) -> None:
    storage.write_stream("big.bin", (os.urandom(1 << 20) for _ in range(16)), overwrite=False)
    stream = storage.open_read("big.bin")
    assert len(stream.read(1 << 20)) == 1 << 20
    storage.connection.transport.close()  # type: ignore[union-attr]
    with pytest.raises(StorageError) as info:
        while stream.read(1 << 20):
            pass
    assert (info.value.kind, info.value.op, info.value.path) == (ErrorKind.UNAVAILABLE, "read", "big.bin")
    stream.close()
    assert storage.stat("big.bin").size == 16 << 20


def test_a_reconnect_does_not_count_channels_of_the_dead_connection(sshd_server: SSHDServer, sftp_root: Path) -> None:
    storage = make_sftp_storage(sshd_server, sftp_root, max_channels=1, io_timeout=2)
    try:
        storage.write_bytes("a.txt", b"a", overwrite=False)
        stale = storage.open_read("a.txt")  # holds the only channel
        storage.connection.transport.close()  # type: ignore[union-attr]
        assert storage.stat("a.txt").size == 1  # reconnected while the stale stream is still open
        stale.close()
        with storage.open_read("a.txt") as stream:
            assert stream.read() == b"a"
        assert storage.read_bytes("a.txt") == b"a"
        assert storage.connect_count == 2
    finally:
        storage.close()


def test_streams_and_calls_interleave_on_pooled_channels(storage: SFTPStorage) -> None:
    contents = {f"f{n}.bin": os.urandom(300_000 + n) for n in range(3)}
    for path, data in contents.items():
        storage.write_bytes(path, data, overwrite=False)
    streams = {path: storage.open_read(path) for path in contents}
    received = {path: b"" for path in contents}
    while any(streams.values()):
        for path, stream in list(streams.items()):
            if stream is None:
                continue
            chunk = stream.read(65_536)
            assert storage.stat(path).size == len(contents[path])
            if not chunk:
                stream.close()
                streams[path] = None  # type: ignore[assignment]
            received[path] += chunk
    assert received == contents
    assert storage.connect_count == 1


def test_channel_bound_fails_clearly_instead_of_hanging(sshd_server: SSHDServer, sftp_root: Path) -> None:
    storage = make_sftp_storage(sshd_server, sftp_root, max_channels=1, io_timeout=0.5)
    try:
        storage.write_bytes("a.txt", b"a", overwrite=False)
        with storage.open_read("a.txt") as held:
            with pytest.raises(StorageError) as info:
                storage.stat("a.txt")
            assert info.value.kind == ErrorKind.UNAVAILABLE
            assert "all 1 SFTP channels are busy" in str(info.value)
            assert held.read() == b"a"
        assert storage.stat("a.txt").size == 1
    finally:
        storage.close()


def test_threads_share_one_connection(storage: SFTPStorage) -> None:
    errors: list[BaseException] = []

    def work(worker: int) -> None:
        try:
            for n in range(10):
                path = f"t{worker}/{n}.txt"
                storage.write_bytes(path, f"{worker}-{n}".encode(), overwrite=False)
                assert storage.read_bytes(path) == f"{worker}-{n}".encode()
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(storage.walk("", include_dirs=False)) == 60
    assert storage.connect_count == 1


def _parallel_writes(storage: SFTPStorage, count: int, size: int) -> dict[str, bytes]:
    """``count`` writes of ``size`` bytes, all inside ``write_stream`` at the same time."""
    barrier = threading.Barrier(count, timeout=30)
    contents = {f"par/{n}.bin": os.urandom(size) for n in range(count)}
    errors: list[BaseException] = []

    def chunks(data: bytes) -> Iterator[bytes]:
        barrier.wait()
        yield data

    def work(path: str) -> None:
        try:
            data = contents[path]
            storage.write_stream(path, chunks(data), overwrite=False, expected_size=len(data))
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(path,)) for path in contents]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    return contents


def test_concurrent_large_writes_run_on_connections_of_their_own(
    sshd_server: SSHDServer, sftp_root: Path
) -> None:
    storage = make_sftp_storage(sshd_server, sftp_root, transfer_connections=3)
    try:
        contents = _parallel_writes(storage, 4, 1 << 20)
        assert storage.connect_count == 1  # the storage's own connection
        assert storage.transfers.extra_connect_count == 2  # at most 3 in all; the 4th write shared one
        assert {path: storage.read_bytes(path) for path in contents} == contents
        storage.write_stream("after.bin", [b"z" * (1 << 20)], overwrite=False, expected_size=1 << 20)
        assert (storage.connect_count, storage.transfers.extra_connect_count) == (1, 2)  # reused, none new
    finally:
        storage.close()
    assert not storage.connected
    assert all(not c.connected for c in storage.transfers._active)


def test_small_concurrent_writes_share_the_storage_connection(storage: SFTPStorage) -> None:
    contents = _parallel_writes(storage, 4, 1000)
    assert {path: storage.read_bytes(path) for path in contents} == contents
    assert (storage.connect_count, storage.transfers.extra_connect_count) == (1, 0)


def test_a_refused_extra_connection_leaves_the_writes_on_the_storage_connection(
    sshd_server: SSHDServer, sftp_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from distributor_core.storage import sftp_connection

    storage = make_sftp_storage(sshd_server, sftp_root)
    original = sftp_connection.SSHConnection._connect

    def only_the_first(self: sftp_connection.SSHConnection):  # type: ignore[no-untyped-def]
        if self is not storage.connection:  # a server limiting connections per user
            raise sftp_connection._ConnectError("connection to 127.0.0.1 refused")
        return original(self)

    monkeypatch.setattr(sftp_connection.SSHConnection, "_connect", only_the_first)
    try:
        contents = _parallel_writes(storage, 3, 1 << 20)
        assert {path: storage.read_bytes(path) for path in contents} == contents
        assert (storage.connect_count, storage.transfers.extra_connect_count) == (1, 0)
        assert storage.transfers.limit == 1  # no further attempts
    finally:
        storage.close()


# ---------------------------------------------------------------------------- root and permissions


def test_a_missing_root_is_created_by_the_first_write(sshd_server: SSHDServer, sftp_root: Path) -> None:
    root = sftp_root / "not" / "yet"
    storage = make_sftp_storage(sshd_server, root)
    try:
        assert storage.walk("") == []
        with pytest.raises(StorageError) as info:
            storage.stat("")
        assert info.value.kind == ErrorKind.NOT_FOUND
        storage.write_bytes("f.txt", b"f", overwrite=False)
        assert (root / "f.txt").read_bytes() == b"f"
    finally:
        storage.close()


def test_the_root_may_be_reached_through_a_symlink(sshd_server: SSHDServer, sftp_root: Path) -> None:
    (sftp_root / "real").mkdir()
    sshd_server.chown_to_user(sftp_root / "real")
    (sftp_root / "alias").symlink_to("real")
    storage = make_sftp_storage(sshd_server, sftp_root / "alias")
    try:
        storage.write_bytes("in/file.txt", b"ok", overwrite=False)
        assert storage.stat("").type == "directory"
        assert [e.path for e in storage.walk("")] == ["in", "in/file.txt"]
        assert (sftp_root / "real" / "in" / "file.txt").read_bytes() == b"ok"
    finally:
        storage.close()


def test_permission_errors_are_mapped(storage: SFTPStorage, sftp_root: Path) -> None:
    storage.write_bytes("locked/existing.txt", b"e", overwrite=False)
    storage.write_bytes("secret.txt", b"s", overwrite=False)
    (sftp_root / "locked").chmod(0o555)
    (sftp_root / "secret.txt").chmod(0o000)
    try:
        for call in (
            lambda: storage.write_bytes("locked/new.txt", b"n", overwrite=False),
            lambda: storage.write_bytes("locked/sub/new.txt", b"n", overwrite=False),
            lambda: storage.delete_file("locked/existing.txt"),
            lambda: storage.read_bytes("secret.txt"),
        ):
            with pytest.raises(StorageError) as info:
                call()
            assert info.value.kind == ErrorKind.PERMISSION, str(info.value)
        # a managed delete reports the permission failure with its own operation name
        with pytest.raises(StorageError) as info:
            storage.delete_managed_outputs("locked", ["existing.txt"])
        assert (info.value.kind, info.value.op) == (ErrorKind.PERMISSION, "delete")
    finally:
        (sftp_root / "locked").chmod(0o755)
        (sftp_root / "secret.txt").chmod(0o644)
    assert sorted(p.name for p in (sftp_root / "locked").iterdir()) == ["existing.txt"]


def test_large_file_round_trip(storage: SFTPStorage, sftp_root: Path) -> None:
    block = os.urandom(4 << 20)
    blocks = 16
    digest = hashlib.sha256()
    for _ in range(blocks):
        digest.update(block)
    storage.write_stream(
        "large.bin",
        (block for _ in range(blocks)),
        overwrite=False,
        expected_size=blocks * len(block),
        expected_sha256="sha256:" + digest.hexdigest(),
    )
    assert (sftp_root / "large.bin").stat().st_size == blocks * len(block)
    check = hashlib.sha256()
    with storage.open_read("large.bin") as stream:
        for chunk in iter_chunks(stream):
            check.update(chunk)
    assert check.hexdigest() == digest.hexdigest()

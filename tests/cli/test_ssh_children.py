"""An ``ssh`` child never outlives ``distributor run`` (issue 35, item 8), against a server that
sends its SSH banner and then stalls: ``ssh`` reads nothing of its input before its session is up,
so when the run was killed it lived on for ``ServerAliveInterval`` × ``ServerAliveCountMax`` (two
minutes). Now the kernel kills it with its run (a parent death signal), and a run left alone gives
up after its handshake watchdog (twice ``ConnectTimeout`` plus 5 s), naming it."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.bundle.conftest import make_bundle

pytestmark = pytest.mark.sftp
BIN = Path(sys.executable).parent


@pytest.fixture
def stalling_server() -> Iterator[int]:
    """A TCP server on 127.0.0.1 that sends an SSH banner to every connection and nothing else."""
    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            conn.sendall(b"SSH-2.0-OpenSSH_9.2\r\n")
            held.append(conn)

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield listener.getsockname()[1]
    finally:
        listener.close()
        for conn in held:
            conn.close()


def _config(tmp_path: Path, port: int, connect_timeout: int) -> Path:
    make_bundle(tmp_path / "spool" / "daily-1", {"report.md": b"# report\n"})
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text("")
    config = tmp_path / "distributor.yml"
    config.write_text(
        "pipelines:\n  - id: reports\n"
        f"    source: {{backend: local, path: {tmp_path / 'spool'}}}\n"
        "    destinations:\n      - id: stalled\n        backend: ssh\n        transport: openssh\n"
        f"        host: 127.0.0.1\n        port: {port}\n        user: nobody\n        path: /srv\n"
        f"        known_hosts_file: {known_hosts}\n"
        f"        ssh_options: {{ConnectTimeout: '{connect_timeout}'}}\n"
    )
    return config


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as handle:
                    fields = handle.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid and fields[0] != "Z":
                found.append(int(entry))
    return found


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _ssh_child(run: subprocess.Popen[str], deadline: float = 30.0) -> int:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        for pid in _children(run.pid):
            try:
                with open(f"/proc/{pid}/comm") as handle:
                    if handle.read().strip() == "ssh":
                        return pid
            except OSError:
                continue
        assert run.poll() is None, run.communicate()
        time.sleep(0.05)
    raise AssertionError("the run started no ssh child")


def test_an_ssh_child_stuck_after_the_banner_dies_with_its_killed_run(tmp_path: Path, stalling_server: int) -> None:
    config = _config(tmp_path, stalling_server, connect_timeout=30)  # ssh itself would wait 120 s
    run = subprocess.Popen([str(BIN / "distributor"), "run", "--config", str(config)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ssh = _ssh_child(run)
        time.sleep(0.5)  # it has the banner and waits for the key exchange
        assert _alive(ssh)
        run.send_signal(signal.SIGKILL)
        run.wait(30)
        end = time.monotonic() + 10
        while _alive(ssh) and time.monotonic() < end:
            time.sleep(0.05)
        assert not _alive(ssh), "the ssh child outlived its killed run"
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()


def test_a_run_gives_up_on_a_stalled_handshake_after_its_watchdog(tmp_path: Path, stalling_server: int) -> None:
    config = _config(tmp_path, stalling_server, connect_timeout=1)
    run = subprocess.Popen([str(BIN / "distributor"), "run", "--config", str(config)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ssh = _ssh_child(run)
    _, stderr = run.communicate(timeout=60)
    assert run.returncode == 1, stderr
    assert f"timed out connecting to [127.0.0.1]:{stalling_server}: no SFTP session within 7s" in stderr, stderr
    assert not _alive(ssh)

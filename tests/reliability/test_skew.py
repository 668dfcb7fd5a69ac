"""Two ``distributor run`` processes writing one destination while their wall clocks disagree
(issue 34): local disk, SFTP (the sshd peer) and S3 (the moto peer). One writer's clock is
shifted with libfaketime (150 s or 10 minutes, ahead or behind; its monotonic clock untouched).

The first writer takes the destination lock and is slow (a test hook makes it sleep 5 s before
its journal; its lease of 2 s is renewed all along: every half second, so only a stall of 2 s on
a loaded machine would let the second take it over, rightly); the second starts while the first holds the
lock. A writer that compared the times written in the lock with its own clock would take a live
lock over (a clock ahead, or a holder's clock behind); the lease is judged by what a writer sees
change on its own monotonic clock, so the second waits for the first, then re-plans and publishes
its newer bundle.

What must hold: both runs succeed, the second one replacing the first's publication (it planned
against the first's state, so it never ran beside it); the destination's state lists exactly
the files that are there, with their bytes, nothing else is left (no lock, journal, temporary or
backup), and the newest publication's bytes are served."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.peers.faketime import skewed
from tests.peers.moto import MotoServer

from .conftest import DISTRIBUTOR, check_consistent, hook_env, tree, write_source

pytestmark = pytest.mark.slow

T0 = datetime(2026, 6, 1, 8, 0, tzinfo=UTC)
#: the first writer's sleep while it holds the lock, and the lock's lease (many leases long)
SLOW = "5"
LEASE = "2s"


@dataclass
class Destination:
    yaml: str
    files: Callable[[], dict[str, bytes]]
    env: dict[str, str]


def _local(tmp_path: Path, request: pytest.FixtureRequest) -> Destination:
    root = tmp_path / "site"
    root.mkdir()
    return Destination(f"        backend: local\n        path: {root}\n", lambda: tree(root), {})


def _sftp(tmp_path: Path, request: pytest.FixtureRequest) -> Destination:
    server = request.getfixturevalue("sshd_server")
    root = server.make_sftp_root()
    return Destination(
        "        backend: ssh\n"
        f"        host: {server.host}\n        port: {server.port}\n        user: {server.user}\n"
        f"        path: {root}\n        private_key_file: {server.client_key_path}\n"
        f"        known_hosts_file: {server.known_hosts_path}\n",
        lambda: tree(root), {},
    )


def _s3(tmp_path: Path, request: pytest.FixtureRequest) -> Destination:
    server: MotoServer = request.getfixturevalue("moto_server")
    bucket = server.create_bucket()

    def files() -> dict[str, bytes]:
        client = server.client()
        try:
            keys = [item["Key"] for item in client.list_objects_v2(Bucket=bucket, Prefix="site/").get("Contents", [])]
            return {key.removeprefix("site/"): client.get_object(Bucket=bucket, Key=key)["Body"].read() for key in keys}
        finally:
            client.close()

    return Destination(
        f"        backend: s3\n        bucket: {bucket}\n        prefix: site\n        region: {server.region}\n"
        f"        endpoint: {server.endpoint_url}\n        force_path_style: true\n"
        "        conditional_writes: trusted\n        credentials:\n"
        "          access_key_id_env: SKEW_KEY_ID\n          secret_access_key_env: SKEW_SECRET\n",
        files, {"SKEW_KEY_ID": server.access_key_id, "SKEW_SECRET": server.secret_access_key},
    )


BACKENDS = {"local": _local, "sftp": _sftp, "s3": _s3}


def _config(tmp_path: Path, name: str, destination: Destination, created: datetime, files: dict[str, bytes]) -> Path:
    write_source(tmp_path / f"src-{name}", files, bundle_id="reports.daily", created=created)
    config = tmp_path / f"{name}.yml"
    config.write_text(
        "pipelines:\n  - id: reports\n    source:\n      backend: local\n"
        f"      path: src-{name}\n    destinations:\n      - id: site\n"
        + destination.yaml + f"        lock_lease: {LEASE}\n"
    )
    return config


@pytest.mark.parametrize(
    ("backend", "skewed_writer", "skew"),
    [
        pytest.param("local", "second", 150, id="local-second-ahead-150s"),
        pytest.param("local", "first", -600, id="local-first-behind-10min"),
        pytest.param("sftp", "second", -150, id="sftp-second-behind-150s", marks=pytest.mark.sftp),
        pytest.param("sftp", "first", 600, id="sftp-first-ahead-10min", marks=pytest.mark.sftp),
        pytest.param("s3", "second", 600, id="s3-second-ahead-10min", marks=pytest.mark.s3),
        pytest.param("s3", "first", -150, id="s3-first-behind-150s", marks=pytest.mark.s3),
    ],
)
def test_a_writer_whose_clock_is_off_never_takes_a_live_lock(
    tmp_path: Path, request: pytest.FixtureRequest, backend: str, skewed_writer: str, skew: int
) -> None:
    destination = BACKENDS[backend](tmp_path, request)
    first = _config(tmp_path, "first", destination, T0, {"report.md": b"first\n", "only-first.txt": b"1"})
    second = _config(tmp_path, "second", destination, T0 + timedelta(hours=1),
                     {"report.md": b"second\n", "only-second.txt": b"2"})
    clocks = {skewed_writer: skewed(skew)}

    def start(name: str, config: Path, **hook: str) -> subprocess.Popen[str]:
        env = {**hook_env(**hook), **destination.env, **clocks.get(name, {})}
        return subprocess.Popen([str(DISTRIBUTOR), "run", "--config", str(config)], env=env, cwd=tmp_path,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    slow = start("first", first, DISTRIBUTOR_TEST_DELAY=f"write:1:{SLOW}")  # after the lock, before the journal
    deadline = time.monotonic() + 60
    while ".distributor.lock" not in destination.files():
        assert slow.poll() is None and time.monotonic() < deadline, slow.communicate()
        time.sleep(0.02)
    waiting = start("second", second)
    out1, err1 = slow.communicate(timeout=120)
    out2, err2 = waiting.communicate(timeout=120)
    assert slow.returncode == 0, err1
    assert waiting.returncode == 0, err2
    assert "action=publish_new status=completed" in out1, out1
    assert "action=replace_older status=completed" in out2, out2  # planned against the first's state
    files = destination.files()
    check_consistent(files, unmanaged={}, label=f"{backend}, {skewed_writer} writer {skew:+d} s")
    assert {p: d for p, d in files.items() if p != ".distributor.json"} == {
        "report.md": b"second\n", "only-second.txt": b"2"}


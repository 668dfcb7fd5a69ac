"""Concurrent writers on one destination (issue 9; spec README "concurrent writers detected",
resolutions A3).

- Shared root: 8 processes, one owner each, publish 100 rounds each into one local root (SFTP:
  4 × 10). Every writer checks after each round that its own record and bytes are its latest and
  that no other owner went back (``writer.py``); this test reads the state file all the while and
  checks that it always parses and that no owner ever goes back to an older round. At the end all
  owners are at their last round and the destination is consistent.
- Single owner: two ``distributor run`` processes with different sources race on one destination,
  many times; the loser waits for the lock, re-plans and both exit 0 with the newer publication
  in place. With a short lock wait the loser fails with the clear conflict and succeeds when run
  again.
- S3 (moto): two writers race for the lock (``If-None-Match: *``): exactly one wins, the other
  gets ``destination ... is locked by ...``; a writer that planned before another one published
  fails its conditional state write (``If-Match``) with a ``conflict`` and leaves the other's
  publication intact.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from distributor_core.state import SharedRootState, parse_state_document

from .conftest import (
    DISTRIBUTOR,
    LONG,
    check_consistent,
    count,
    hook_env,
    is_working_file,
    run_cli,
    run_inprocess,
    semantic,
    tree,
    write_source,
)

pytestmark = pytest.mark.slow

WRITER = Path(__file__).with_name("writer.py")
T0 = datetime(2026, 6, 1, 8, 0, tzinfo=UTC)


def _destination_yaml_local(root: Path) -> str:
    return f"        backend: local\n        path: {root}\n"


def _destination_yaml_sftp(server, root: Path) -> str:  # type: ignore[no-untyped-def]
    return (
        "        backend: ssh\n"
        f"        host: {server.host}\n"
        f"        port: {server.port}\n"
        f"        user: {server.user}\n"
        f"        path: {root}\n"
        f"        private_key_file: {server.client_key_path}\n"
        f"        known_hosts_file: {server.known_hosts_path}\n"
    )


def _owner_config(work: Path, owner: str, destination_yaml: str) -> Path:
    config = work / f"{owner}.yml"
    config.write_text(
        "pipelines:\n"
        f"  - id: {owner}\n"
        "    source:\n"
        "      backend: local\n"
        f"      path: src-{owner}\n"
        "    destinations:\n"
        "      - id: site\n" + destination_yaml + "        state:\n          mode: shared_root\n"
        + (MAINTAINER_POLICY if owner.startswith("maint") else "")
    )
    return config


MAINTAINER_POLICY = (
    "        reconciliation:\n          mode: merge\n"
    "        retention:\n          prune:\n            enabled: true\n            keep_latest: 1\n"
)


@dataclass
class Watch:
    """Reads the state file in a loop while the writers run."""

    path: Path
    reads: int = 0
    problems: list[str] | None = None

    def run(self, stop: threading.Event) -> None:
        self.problems = []
        latest: dict[str, datetime] = {}
        while not stop.is_set():
            try:
                data = self.path.read_bytes()
            except FileNotFoundError:
                continue
            try:
                state = parse_state_document(data)
            except Exception as exc:  # a torn or invalid state file
                self.problems.append(f"unparsable state: {exc}")
                continue
            self.reads += 1
            assert isinstance(state, SharedRootState)
            current = {o.pipeline_id: o.manifest.created for o in state.owners}
            for owner, stamp in latest.items():
                if owner not in current:
                    self.problems.append(f"owner {owner} disappeared")
                elif current[owner] < stamp:
                    self.problems.append(f"owner {owner} went back from {stamp} to {current[owner]}")
            latest = current
            time.sleep(0.001)


def race_shared_root(
    work: Path, root: Path, destination_yaml: str, *, writers: int, rounds: int, maintainers: int = 0
) -> dict:
    owners = [f"owner{i}" for i in range(writers)] + [f"maint{i}" for i in range(maintainers)]
    gate = work / "go"
    procs = []
    for owner in owners:
        config = _owner_config(work, owner, destination_yaml)
        procs.append(subprocess.Popen(
            [sys.executable, str(WRITER), str(config), str(work / f"src-{owner}"), owner, str(rounds), str(gate),
             str(work / f"{owner}.json")],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        ))
    watch = Watch(root / ".distributor.json")
    stop = threading.Event()
    watcher = threading.Thread(target=watch.run, args=(stop,))
    watcher.start()
    gate.write_text("go")
    try:
        outputs = [proc.communicate(timeout=600)[0] for proc in procs]
    finally:
        stop.set()
        watcher.join()
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    results = [json.loads((work / f"{owner}.json").read_text()) for owner in owners]
    for proc, result, output in zip(procs, results, outputs, strict=True):
        assert proc.returncode == 0 and result["error"] == "", (result, output.decode(errors="replace")[-2000:])
        assert result["rounds"] == rounds
    assert watch.problems == [], watch.problems[:5]
    assert watch.reads > 0
    final = tree(root)
    check_consistent(final, unmanaged={}, label="shared root after the race")
    state = parse_state_document(final[".distributor.json"])
    assert isinstance(state, SharedRootState)
    assert sorted(o.pipeline_id for o in state.owners) == sorted(owners)
    assert {o.pipeline_id: o.manifest.created for o in state.owners} == {
        owner: T0 + timedelta(seconds=rounds) for owner in owners
    }
    # three outputs per publisher; each maintainer's prune kept only its newest file
    assert len(state.outputs) == 3 * writers + maintainers
    return {"conflicts": sum(r["conflicts"] for r in results), "reads": watch.reads}


def test_eight_writers_share_a_local_root_for_100_rounds(tmp_path: Path) -> None:
    root = tmp_path / "site"
    root.mkdir()
    rounds = 300 if LONG else 100
    outcome = race_shared_root(tmp_path, root, _destination_yaml_local(root), writers=8, rounds=rounds)
    count("concurrency rounds (local shared root, 8 writers)", 8 * rounds)
    count("concurrency lock conflicts retried (local)", outcome["conflicts"])


def test_publications_race_prune_and_reconcile_state_on_a_shared_root(tmp_path: Path) -> None:
    """Four publishers and one owner that, each round, publishes in merge mode and then runs
    ``prune --apply`` and ``reconcile-state`` on its records: maintenance under the same lock
    never loses or damages another owner's records or files."""
    root = tmp_path / "site"
    root.mkdir()
    rounds = 100 if LONG else 30
    outcome = race_shared_root(tmp_path, root, _destination_yaml_local(root), writers=4, rounds=rounds,
                               maintainers=1)
    count("concurrency rounds (local shared root, 4 publishers + prune/reconcile-state)", 5 * rounds)
    count("concurrency lock conflicts retried (local, with maintenance)", outcome["conflicts"])


@pytest.mark.sftp
def test_four_writers_share_an_sftp_root(tmp_path: Path, sshd_server) -> None:  # type: ignore[no-untyped-def]
    root = sshd_server.make_sftp_root()
    writers, rounds = (8, 40) if LONG else (4, 10)
    outcome = race_shared_root(tmp_path, root, _destination_yaml_sftp(sshd_server, root), writers=writers,
                               rounds=rounds)
    count("concurrency rounds (sftp shared root)", writers * rounds)
    count("concurrency lock conflicts retried (sftp)", outcome["conflicts"])


# --------------------------------------------------------------------------- single owner


def _single_owner(work: Path, name: str, root: Path, created: datetime, files: dict[str, bytes]) -> Path:
    source = work / f"src-{name}"
    write_source(source, files, bundle_id=f"reports.{name}", created=created)
    config = work / f"{name}.yml"
    config.write_text(
        "pipelines:\n  - id: reports\n    source:\n      backend: local\n"
        f"      path: {source}\n"
        "    destinations:\n      - id: site\n" + _destination_yaml_local(root)
    )
    return config


def test_two_runs_race_on_one_single_owner_destination(tmp_path: Path) -> None:
    """Both start at once; whichever gets the lock first, the other waits, re-plans under the
    lock and ends with the newer publication (replace_older, or skip when it is the older)."""
    races = 30 if LONG else 10
    for race in range(races):
        work = tmp_path / f"race{race}"
        work.mkdir()
        root = work / "site"
        root.mkdir()
        older = _single_owner(work, "older", root, T0, {"report.md": b"older\n", "only-older.txt": b"o"})
        newer = _single_owner(work, "newer", root, T0 + timedelta(hours=1), {"report.md": b"newer\n", "n.txt": b"n"})
        procs = [subprocess.Popen([str(DISTRIBUTOR), "run", "--config", str(config)], env=hook_env(),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for config in (older, newer)]
        results = [proc.communicate(timeout=120) for proc in procs]
        for proc, (_out, err) in zip(procs, results, strict=True):
            assert proc.returncode == 0, (race, err)
        files = tree(root)
        check_consistent(files, unmanaged={}, label=f"race {race}")
        assert {p: d for p, d in files.items() if p != ".distributor.json"} == {
            "report.md": b"newer\n", "n.txt": b"n"}, race
    count("single-owner races (two distributor run processes)", races)


def test_losing_writer_fails_with_a_clear_conflict_and_succeeds_when_rerun(tmp_path: Path) -> None:
    """The first writer is slow (it sleeps 6 s after taking the lock, its lease of 1 s renewed all
    along); the second, with a 1 s lock wait, sees the lock change, fails with the lock conflict
    and writes nothing; once the first finished, it succeeds."""
    root = tmp_path / "site"
    root.mkdir()
    first = _single_owner(tmp_path, "first", root, T0, {"report.md": b"first\n"})
    second = _single_owner(tmp_path, "second", root, T0 + timedelta(hours=1), {"report.md": b"second\n"})
    slow = subprocess.Popen(
        [str(DISTRIBUTOR), "run", "--config", str(first)],
        env=hook_env(DISTRIBUTOR_TEST_DELAY="write:1:6", DISTRIBUTOR_TEST_LOCK_LEASE="1"),  # before the journal
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        _wait_for(root / ".distributor.lock")
        before = {p: d for p, d in tree(root).items() if not is_working_file(p)}  # the holder renews meanwhile
        loser = run_cli("run", "--config", str(second), env=hook_env(DISTRIBUTOR_TEST_LOCK_WAIT="1"))
        assert loser.code == 1
        lines = loser.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in loser.stderr
        assert lines[0].startswith("distributor: 1 destination(s) failed: reports/site [.]: destination ")
        assert "is locked by distributor run (pid " in lines[0] and " since " in lines[0]
        assert {p: d for p, d in tree(root).items() if not is_working_file(p)} == before
    finally:
        _out, err = slow.communicate(timeout=60)
    stalled = slow
    assert stalled.returncode == 0, err
    rerun = run_cli("run", "--config", str(second))
    assert rerun.code == 0, rerun.stderr
    files = tree(root)
    check_consistent(files, unmanaged={}, label="after the re-run")
    assert files["report.md"] == b"second\n"


def _wait_for(path: Path, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.01)


def _wait_stopped(pid: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with open(f"/proc/{pid}/stat") as handle:
            if handle.read().rsplit(")", 1)[1].split()[0] == "T":
                return
        time.sleep(0.01)
    raise AssertionError(f"process {pid} did not stop")


# --------------------------------------------------------------------------- a stale lock broken


STOP_POINTS = {
    "before the journal write": "write:2:before",
    "before the first staged output": "write:3:before",
    "before the first backup": "rename:1:before",
    "before the state write": "write:6:before",
}


@pytest.mark.parametrize("where", list(STOP_POINTS))
def test_writer_stalled_past_its_lease_loses_to_the_writer_that_broke_its_lock(tmp_path: Path, where: str) -> None:
    """Writer A (lease 1 s) is stopped with SIGSTOP at ``where``; its lock expires, writer B breaks
    it, settles A's journal and publishes; A is continued. A must fail with a conflict (its state
    write is conditional on the revision it planned against, or its lock is gone) and undo only its
    own work: B's publication stays complete and consistent."""
    root = tmp_path / "site"
    root.mkdir()
    base = _single_owner(tmp_path, "base", root, T0, {"report.md": b"v1\n", "old.txt": b"o", "keep.txt": b"k"})
    assert run_inprocess("run", "--config", str(base)).code == 0
    slow = _single_owner(tmp_path, "slow", root, T0 + timedelta(hours=1),
                         {"report.md": b"slow\n", "keep.txt": b"k", "slow.txt": b"s"})
    fast = _single_owner(tmp_path, "fast", root, T0 + timedelta(hours=2),
                         {"report.md": b"fast\n", "keep.txt": b"k2", "fast.txt": b"f"})
    stalled = subprocess.Popen(
        [str(DISTRIBUTOR), "run", "--config", str(slow)],
        env=hook_env(DISTRIBUTOR_TEST_STOP=STOP_POINTS[where], DISTRIBUTOR_TEST_LOCK_LEASE="1"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        _wait_stopped(stalled.pid)
        time.sleep(1.2)  # past A's lease
        winner = run_inprocess("run", "--config", str(fast))
        assert winner.code == 0, winner.stderr
        published = tree(root)
        check_consistent(published, unmanaged={}, label=f"{where}: B's publication")
    finally:
        stalled.send_signal(signal.SIGCONT)
    _out, err = stalled.communicate(timeout=60)
    final = tree(root)
    check_consistent(final, unmanaged={}, label=where)
    assert semantic(final) == semantic(published), (where, sorted(set(final) ^ set(published)))
    assert stalled.returncode == 1, (where, err)
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, (where, err)
    assert "lock was taken over by another writer" in err, (where, err)

"""Crash consistency of the real ``distributor run`` console script (issue 9, resolutions A1–A3).

Each scenario has a previous publication (v1, published by a clean run) and a source that asks for
a new one (v2). A probe run of ``distributor run`` with the kill hook's trace (``hook/``) lists
every destination storage call; then, for every mutating call (write, rename, delete), a fresh
copy of the prepared destination is published by ``distributor run`` in a subprocess that
``SIGKILL``s itself right before the call, right after it took effect, and, for writes of more
than a few bytes, half way through streaming it. After each kill:

- the destination obeys :func:`check_never_lies` (state parses, records each owner's previous or
  new publication, every record is there or restorable, no stray file under a final name);
- a re-run (``main(["run", ...])``, which breaks the dead writer's lock: same host, pid gone)
  exits 0 and the destination then equals a clean v2 publication exactly (files and bytes; state
  records, owners and digests), with no journal, lock, temporary or backup left, and every
  unmanaged file untouched.

Scenarios: single-owner publish into an empty root (with generated HTML), single-owner replace,
single-owner merge next to an unmanaged file, and a shared root of three pipelines written by one
run. Backends: local and SFTP (OpenSSH). A few kills from outside during a 48 MiB write (at
seeded byte offsets, the process stopped there first) complete the picture.
"""

from __future__ import annotations

import itertools
import os
import random
import shutil
import signal
import subprocess
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from .conftest import (
    DISTRIBUTOR,
    LONG,
    check_consistent,
    check_never_lies,
    count,
    hook_env,
    records,
    run_cli,
    run_inprocess,
    semantic,
    tree,
    write_source,
)

pytestmark = pytest.mark.slow

T0 = datetime(2026, 6, 1, 8, 0, tzinfo=UTC)
#: how many kill points run at once (each is its own subprocess and destination)
PARALLEL = 2


@dataclass
class Scenario:
    name: str
    #: pipeline id → (v1 files or None for no previous publication, v2 files)
    sources: dict[str, tuple[dict[str, bytes] | None, dict[str, bytes]]]
    state_mode: str = "single_owner"
    reconciliation: str = "replace"
    html: bool = False
    #: files put into the destination by hand after v1 (never touched)
    unmanaged: dict[str, bytes] = field(default_factory=dict)


SCENARIOS = {
    "publish_new": Scenario(
        "publish_new",
        {"reports": (None, {"report.md": b"# Report\n\nv2\n", "data/table.csv": b"a,b\n1,2\n", "notes.txt": b"n"})},
        html=True,
    ),
    "replace": Scenario(
        "replace",
        {
            "reports": (
                {"report.md": b"# v1\n", "same.txt": b"unchanged", "gone/old.txt": b"dropped in v2", "x.bin": b"1"},
                {"report.md": b"# v2\n", "same.txt": b"unchanged", "new/added.txt": b"added in v2", "x.bin": b"22"},
            )
        },
    ),
    "merge": Scenario(
        "merge",
        {
            "reports": (
                {"report.md": b"# v1\n", "kept-from-v1.txt": b"stays"},
                {"report.md": b"# v2\n", "fresh.txt": b"new in v2", "deep/er/file.txt": b"deep"},
            )
        },
        reconciliation="merge",
        unmanaged={"hand-made.txt": b"put here by a person"},
    ),
    "shared_root": Scenario(
        "shared_root",
        {
            "alpha": ({"alpha/a.txt": b"a1", "alpha/old.txt": b"o"}, {"alpha/a.txt": b"a2", "alpha/b.txt": b"b2"}),
            "beta": ({"beta/b.txt": b"beta v1"}, {"beta/b.txt": b"beta v1"}),
            "gamma": ({"gamma/g.txt": b"g1"}, {"gamma/g.txt": b"g2", "gamma/h/i.txt": b"i2"}),
        },
        state_mode="shared_root",
        unmanaged={"README.unmanaged": b"left alone"},
    ),
}


# --------------------------------------------------------------------------- backends


@dataclass
class Backend:
    name: str
    #: a fresh, empty destination root directory on this machine
    new_root: Callable[[str], Path]
    #: YAML lines of the destination (backend fields) for a root
    yaml: Callable[[Path], str]
    #: make files copied into a root usable by the backend
    adopt: Callable[[Path], None]


def _local_backend(base: Path) -> Backend:
    def new_root(name: str) -> Path:
        root = base / "roots" / name
        root.mkdir(parents=True)
        return root

    return Backend(
        "local", new_root, lambda root: f"        backend: local\n        path: {root}\n", lambda root: None
    )


def _sftp_backend(server, transport: str = "paramiko") -> Backend:  # type: ignore[no-untyped-def]
    def yaml(root: Path) -> str:
        return (
            "        backend: ssh\n"
            f"        transport: {transport}\n"
            f"        host: {server.host}\n"
            f"        port: {server.port}\n"
            f"        user: {server.user}\n"
            f"        path: {root}\n"
            f"        private_key_file: {server.client_key_path}\n"
            f"        known_hosts_file: {server.known_hosts_path}\n"
        )

    label = "sftp" if transport == "paramiko" else f"sftp-{transport}"
    return Backend(label, lambda name: server.make_sftp_root(name), yaml, server.chown_to_user)


def _backend(request: pytest.FixtureRequest, name: str, tmp_path: Path) -> Backend:
    if name == "local":
        return _local_backend(tmp_path)
    transport = "openssh" if name == "sftp-openssh" else "paramiko"
    return _sftp_backend(request.getfixturevalue("sshd_server"), transport)


CASES = [pytest.param("local", name, id=f"local-{name}") for name in SCENARIOS] + [
    pytest.param(backend, name, id=f"{backend}-{name}", marks=pytest.mark.sftp)
    for backend in ("sftp", "sftp-openssh")
    for name in SCENARIOS
]


# --------------------------------------------------------------------------- workspaces


def config_text(scenario: Scenario, backend: Backend, root: Path) -> str:
    lines = ["pipelines:"]
    for pipeline in scenario.sources:
        lines.append(f"  - id: {pipeline}")
        lines.append("    source:\n      backend: local")
        lines.append(f"      path: src-{pipeline}")
        lines.append("    destinations:\n      - id: site")
        lines.append(backend.yaml(root).rstrip("\n"))
        lines.append(f"        state:\n          mode: {scenario.state_mode}")
        lines.append(f"        reconciliation:\n          mode: {scenario.reconciliation}")
        if scenario.html:
            lines.append("        publish:\n          source: true\n          html: true")
            lines.append("        transform:\n          markdown_to_html:\n            enabled: true")
    return "\n".join(lines) + "\n"


@dataclass
class Workspace:
    work: Path
    root: Path
    config: Path


class Prepared:
    """A scenario's prepared state: the v1 destination and the v2 sources, copied per kill point."""

    def __init__(self, scenario: Scenario, backend: Backend, base: Path) -> None:
        self.scenario = scenario
        self.backend = backend
        self.base = base
        self.template = base / "template"
        self.template.mkdir(parents=True)
        self._count = itertools.count(1)  # copies are made from several threads
        root = backend.new_root(f"{scenario.name}-template-{os.getpid()}-{id(self)}")
        backend.adopt(root)
        config = self.template / "distributor.yml"
        config.write_text(config_text(scenario, backend, root))
        if any(v1 is not None for v1, _ in scenario.sources.values()):
            for index, (pipeline, (v1, _)) in enumerate(scenario.sources.items()):
                if v1 is not None:
                    write_source(self.template / f"src-{pipeline}", v1, bundle_id=f"{pipeline}.bundle",
                                 created=T0 + timedelta(minutes=index))
                else:
                    write_source(self.template / f"src-{pipeline}", {"placeholder.txt": b"-"},
                                 bundle_id=f"{pipeline}.bundle", created=T0)
            result = run_inprocess("run", "--config", str(config))
            assert result.code == 0, result.stderr
        for rel, data in scenario.unmanaged.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_bytes(data)
        backend.adopt(root)
        for index, (pipeline, (_, v2)) in enumerate(scenario.sources.items()):
            write_source(self.template / f"src-{pipeline}", v2, bundle_id=f"{pipeline}.bundle",
                         created=T0 + timedelta(hours=1, minutes=index))
        self.template_root = root
        self.previous = tree(root)
        reference = self.copy("reference")
        result = run_inprocess("run", "--config", str(reference.config))
        assert result.code == 0, result.stderr
        self.new = tree(reference.root)
        check_consistent(self.new, unmanaged=scenario.unmanaged, label=f"{scenario.name} reference")

    def copy(self, label: str) -> Workspace:
        number = next(self._count)
        work = self.base / f"w{number}"
        shutil.copytree(self.template, work, symlinks=True)
        root = self.backend.new_root(f"{self.scenario.name}-{label}-{os.getpid()}-{id(self)}-{number}")
        shutil.copytree(self.template_root, root, symlinks=True, dirs_exist_ok=True)
        self.backend.adopt(root)
        config = work / "distributor.yml"
        config.write_text(config_text(self.scenario, self.backend, root))
        return Workspace(work, root, config)


@dataclass(frozen=True)
class KillPoint:
    kind: str
    nth: int
    when: str  # before | after | during
    after_bytes: int = 0
    path: str = ""

    @property
    def spec(self) -> str:
        base = f"{self.kind}:{self.nth}:{self.when}"
        return f"{base}:{self.after_bytes}" if self.when == "during" else base

    def __str__(self) -> str:
        return f"kill {self.when} {self.kind} #{self.nth} ({self.path})"


@dataclass(frozen=True)
class Call:
    kind: str
    path: str
    size: int | None
    ok: bool


def probe(prepared: Prepared) -> list[Call]:
    """The mutating destination calls of a clean run, in order (from the hook's trace)."""
    space = prepared.copy("probe")
    trace = space.work / "trace.txt"
    result = run_cli("run", "--config", str(space.config), env=hook_env(DISTRIBUTOR_TEST_TRACE=str(trace)))
    assert result.code == 0, result.stderr
    assert semantic(tree(space.root)) == semantic(prepared.new)
    calls = []
    for line in trace.read_text().splitlines():
        kind, path, size, status = line.split("\t")
        calls.append(Call(kind, path, None if size == "-" else int(size), status == "ok"))
    return calls


def kill_points(calls: list[Call]) -> list[KillPoint]:
    """Every distinct moment a kill can leave the destination in.

    Before each mutating call that takes effect; during each write of more than one byte (its
    first byte streamed); after each write and rename. "After" a delete is the same destination as
    "before" the next call, so only the last call gets an "after" (``DISTRIBUTOR_LONG`` runs them
    all). Calls that failed in the probe (deleting a temporary already renamed into place) change
    nothing and are counted but not killed at.
    """
    points: list[KillPoint] = []
    counts: dict[str, int] = {}
    for index, call in enumerate(calls):
        counts[call.kind] = counts.get(call.kind, 0) + 1
        nth = counts[call.kind]
        if not call.ok:
            continue
        points.append(KillPoint(call.kind, nth, "before", path=call.path))
        if call.kind == "write" and call.size is not None and call.size > 1:
            # one byte streamed: robust when outputs are written in parallel and the n-th write
            # of a kill run is another (possibly smaller) file than the probe's
            points.append(KillPoint(call.kind, nth, "during", after_bytes=1, path=call.path))
        if call.kind in ("write", "rename") or LONG or index == len(calls) - 1:
            points.append(KillPoint(call.kind, nth, "after", path=call.path))
    return points


def run_point(prepared: Prepared, point: KillPoint) -> tuple[KillPoint, str | None]:
    label = f"{prepared.scenario.name}/{prepared.backend.name}: {point}"
    space = prepared.copy(f"{point.kind}{point.nth}{point.when}")
    result = run_cli("run", "--config", str(space.config), env=hook_env(DISTRIBUTOR_TEST_KILL=point.spec))
    killed = result.code == -signal.SIGKILL
    if not killed:
        # a call that only a path the process did not take would reach: a normal success
        assert result.code == 0, (label, result.stderr)
    after_kill = tree(space.root)
    check_never_lies(after_kill, previous=prepared.previous, new=prepared.new, label=label)
    rerun = run_inprocess("run", "--config", str(space.config))
    assert rerun.code == 0, (label, rerun.stderr)
    final = tree(space.root)
    check_consistent(final, unmanaged=prepared.scenario.unmanaged, label=label)
    assert semantic(final) == semantic(prepared.new), (label, sorted(set(final) ^ set(prepared.new)))
    return point, "killed" if killed else None


def sweep(prepared: Prepared, points: list[KillPoint]) -> int:
    survived = []
    with ThreadPoolExecutor(PARALLEL) as pool:
        for point, outcome in pool.map(lambda p: run_point(prepared, p), points):
            if outcome != "killed":
                survived.append(str(point))
    return survived


# --------------------------------------------------------------------------- tests


@pytest.mark.parametrize(("backend_name", "name"), CASES)
def test_sigkill_at_every_mutating_call_then_rerun_converges(
    request: pytest.FixtureRequest, backend_name: str, name: str, tmp_path: Path
) -> None:
    backend = _backend(request, backend_name, tmp_path)
    prepared = Prepared(SCENARIOS[name], backend, tmp_path / "prep")
    calls = probe(prepared)
    points = kill_points(calls)
    kinds = {p.kind for p in points}
    assert {"write", "rename", "delete"} <= kinds, kinds
    # the state write and the lock and journal writes are among the kill points
    written = {p.path.rsplit("/", 1)[-1] for p in points if p.kind == "write"}
    assert {".distributor.json", ".distributor.lock", ".distributor.pending.json"} <= written, written
    survived = sweep(prepared, points)
    # every point is a call the probe made and that took effect, so every run died there
    assert survived == [], survived
    count(f"crash kill points ({backend.name}, {name})", len(points))


def test_kill_point_counts_are_recorded(tmp_path: Path) -> None:
    """The kill points of the local replace scenario: lock, journal, each staged output, backups,
    renames, the state write and the clean-up deletes are all reached (docs/operations.md quotes
    these counts)."""
    prepared = Prepared(SCENARIOS["replace"], _local_backend(tmp_path), tmp_path / "prep")
    mutating = [(c.kind, c.path) for c in probe(prepared)]
    names = [p.rsplit("/", 1)[-1] for _, p in mutating]
    assert names[0] == ".distributor.lock" and names[-1] == ".distributor.lock"
    assert names.index(".distributor.pending.json") < names.index(".distributor.json")
    state_write = names.index(".distributor.json")
    # outputs are renamed into place before the state write; omitted outputs deleted after it
    assert all(k != "delete" for k, _ in mutating[:state_write])
    assert ("delete", "gone/old.txt") in mutating[state_write:]


# --------------------------------------------------------------------------- kills from outside

BIG = 48 * 1024 * 1024


def _big_source(work: Path, created: datetime, fill: bytes) -> None:
    write_source(work / "src-reports", {"big.bin": fill * (BIG // len(fill)), "small.txt": fill},
                 bundle_id="reports.big", created=created)


def test_kills_from_outside_at_seeded_points_of_a_large_write(tmp_path: Path) -> None:
    """SIGKILL from outside while a 48 MiB output is being written, at seeded random byte offsets
    (the seed is in every assertion message): the hook stops the whole process (``SIGSTOP``, every
    thread wherever it is) once that many bytes were streamed to the backend, the test sees it
    stopped and kills it; every re-run converges."""
    seed = 20260609
    rng = random.Random(seed)
    backend = _local_backend(tmp_path)
    scenario = Scenario("big", {"reports": ({"old.txt": b"v1"}, {})})
    for attempt in range(4):
        work = tmp_path / f"big{attempt}"
        work.mkdir()
        root = backend.new_root(f"big{attempt}")
        config = work / "distributor.yml"
        config.write_text(config_text(scenario, backend, root))
        _big_source(work, T0, b"v1")
        assert run_inprocess("run", "--config", str(config)).code == 0
        previous = tree(root)
        _big_source(work, T0 + timedelta(hours=1), b"version two\n")
        new = _clean_result(work, root)
        offset = rng.randrange(1024 * 1024, BIG)  # more than any other write of the run streams
        label = f"kill #{attempt} after {offset} bytes of the large write (seed {seed})"
        proc = subprocess.Popen([str(DISTRIBUTOR), "run", "--config", str(config)],
                                env=hook_env(DISTRIBUTOR_TEST_STOP=f"write:*:during:{offset}"),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _, status = os.waitpid(proc.pid, os.WUNTRACED)  # returns once the process has stopped
        assert os.WIFSTOPPED(status), (label, status)
        assert any(p.name.startswith(".distributor-tmp-") for p in root.iterdir()), label
        proc.send_signal(signal.SIGKILL)
        assert proc.wait() == -signal.SIGKILL, label
        check_never_lies(tree(root), previous=previous, new=new, label=label)
        rerun = run_inprocess("run", "--config", str(config))
        assert rerun.code == 0, (label, rerun.stderr)
        final = tree(root)
        check_consistent(final, unmanaged={}, label=label)
        assert semantic(final) == semantic(new), label


def _clean_result(work: Path, root: Path) -> dict[str, bytes]:
    """The destination a clean publication of the current source leaves (on a scratch copy)."""
    scratch = work / "scratch-root"
    shutil.copytree(root, scratch)
    text = (work / "distributor.yml").read_text().replace(f"path: {root}\n", f"path: {scratch}\n")
    config = work / "scratch.yml"
    config.write_text(text)
    assert run_inprocess("run", "--config", str(config)).code == 0
    result = tree(scratch)
    shutil.rmtree(scratch)
    return result


# --------------------------------------------------------------------------- a second crash during recovery


def _first_kill(calls: list[Call], first: str) -> KillPoint:
    counts: dict[str, int] = {}
    renames = 0
    for call in calls:
        counts[call.kind] = counts.get(call.kind, 0) + 1
        nth = counts[call.kind]
        if first == "before the last rename" and call.kind == "rename":
            renames += 1
            if renames == sum(1 for c in calls if c.kind == "rename"):
                return KillPoint("rename", nth, "before", path=call.path)
        if first == "during the state write" and call.kind == "write" and call.path.endswith(".distributor.json"):
            return KillPoint("write", nth, "during", after_bytes=1, path=call.path)
        if first == "after the first clean-up delete" and call.kind == "delete" and call.ok:
            return KillPoint("delete", nth, "after", path=call.path)
    raise AssertionError(first)


@pytest.mark.parametrize(
    "first", ["before the last rename", "during the state write", "after the first clean-up delete"]
)
def test_second_sigkill_during_the_recovering_run_then_converges(tmp_path: Path, first: str) -> None:
    """The first run dies mid-publication (before its last rename: backups and other renames done;
    during the state write; after the state write, in the clean-up). The next run,
    which recovers its journal and then publishes, is itself killed at each of its mutating calls.
    A third run converges, and in between the destination never lies."""
    prepared = Prepared(SCENARIOS["replace"], _local_backend(tmp_path), tmp_path / "prep")
    first_kill = _first_kill(probe(prepared), first)
    probe_space = prepared.copy("first")
    assert run_cli("run", "--config", str(probe_space.config),
                   env=hook_env(DISTRIBUTOR_TEST_KILL=first_kill.spec)).code == -signal.SIGKILL
    crashed = tree(probe_space.root)
    trace = probe_space.work / "second-trace.txt"
    result = run_cli("run", "--config", str(probe_space.config), env=hook_env(DISTRIBUTOR_TEST_TRACE=str(trace)))
    assert result.code == 0, result.stderr
    assert semantic(tree(probe_space.root)) == semantic(prepared.new)
    calls = [Call(k, p, None if s == "-" else int(s), st == "ok")
             for k, p, s, st in (line.split("\t") for line in trace.read_text().splitlines())]
    points = kill_points(calls)
    assert len(points) >= 5

    def second(point: KillPoint) -> None:
        label = f"after {first_kill}: second {point}"
        space = prepared.copy("second")
        shutil.rmtree(space.root)
        space.root.mkdir()
        for rel, data in crashed.items():
            target = space.root / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        killed = run_cli("run", "--config", str(space.config), env=hook_env(DISTRIBUTOR_TEST_KILL=point.spec))
        assert killed.code == -signal.SIGKILL, (label, killed.stderr)
        check_never_lies(tree(space.root), previous=prepared.previous, new=prepared.new, label=label)
        rerun = run_inprocess("run", "--config", str(space.config))
        assert rerun.code == 0, (label, rerun.stderr)
        final = tree(space.root)
        check_consistent(final, unmanaged={}, label=label)
        assert semantic(final) == semantic(prepared.new), label

    with ThreadPoolExecutor(PARALLEL) as pool:
        list(pool.map(second, points))
    count("crash kill points (local, second kill while recovering)", len(points))


# --------------------------------------------------------------------------- maintenance commands


def _maintenance_root(root: Path) -> None:
    from tests.repair.conftest import ARCHIVE, HTML, Dest, ago, shared_root_state

    dest = Dest(root)
    dest.put_state(shared_root_state([
        ("reports/a.txt", ARCHIVE, ago(96)),
        ("reports/b.txt", ARCHIVE, ago(72)),
        ("html/keep.html", HTML, ago(500)),
        ("reports/deep/c.txt", ARCHIVE, ago(48)),
        ("reports/gone.txt", ARCHIVE, ago(30)),
        ("reports/d.txt", ARCHIVE, ago(24)),
    ]))
    dest.path("reports/gone.txt").unlink()
    dest.write("html/keep.html", b"<p>other owner</p>")
    dest.write("unmanaged.txt", b"keep")


@pytest.mark.parametrize("command", ["prune", "reconcile-state"])
def test_sigkill_maintenance_commands_at_every_mutating_call(tmp_path: Path, command: str) -> None:
    """``prune --apply`` and ``reconcile-state`` killed at every mutating call: state never
    records a file that is gone (prune writes state before deleting), the other owner's file and
    the unmanaged file stay, and running the command again ends where a clean run ends."""
    from tests.repair.conftest import config_file

    argv = [command, "--pipeline", "reports", "--destination", "archive"]
    if command == "prune":
        argv.append("--apply")

    def space(name: str) -> tuple[Path, Path]:
        work = tmp_path / name
        work.mkdir()
        root = work / "dest"
        root.mkdir()
        _maintenance_root(root)
        config = config_file(work, root, prune={"enabled": True, "keep_latest": 1}, shared_root=True)
        return root, config

    ref_root, ref_config = space("reference")
    previous = tree(ref_root)
    assert run_inprocess(*argv, "--config", str(ref_config)).code in (0, 1)
    expected = tree(ref_root)
    assert expected != previous

    probe_root, probe_config = space("probe")
    trace = tmp_path / f"{command}-trace.txt"
    probe_run = run_cli(*argv, "--config", str(probe_config), env=hook_env(DISTRIBUTOR_TEST_TRACE=str(trace)))
    assert probe_run.code in (0, 1), probe_run.stderr
    assert semantic(tree(probe_root)) == semantic(expected)
    calls = [Call(k, p, None if s == "-" else int(s), st == "ok")
             for k, p, s, st in (line.split("\t") for line in trace.read_text().splitlines())]
    points = kill_points(calls)
    assert len(points) >= 6

    def one(index_point: tuple[int, KillPoint]) -> None:
        index, point = index_point
        label = f"{command}: {point}"
        root, config = space(f"p{index}")
        killed = run_cli(*argv, "--config", str(config), env=hook_env(DISTRIBUTOR_TEST_KILL=point.spec))
        assert killed.code == -signal.SIGKILL, (label, killed.stderr)
        files = tree(root)
        assert files["html/keep.html"] == b"<p>other owner</p>" and files["unmanaged.txt"] == b"keep", label
        state = files[".distributor.json"]
        unchanged = state == previous[".distributor.json"]
        if not unchanged and records(state) != records(expected[".distributor.json"]):
            raise AssertionError(f"{label}: state is neither the previous nor the new one")
        for path, _digest, _size, _owner in records(state):
            # before the new state is written the old one stands (reconcile-state's input records
            # a missing file); from then on no record names a file that is gone
            assert path in files or unchanged, f"{label}: records {path}, which is gone"
        again = run_inprocess(*argv, "--config", str(config))
        assert again.code in (0, 1), (label, again.stderr)
        final = tree(root)
        assert semantic(final) == semantic(expected), (label, sorted(set(final) ^ set(expected)))

    with ThreadPoolExecutor(PARALLEL) as pool:
        list(pool.map(one, enumerate(points)))
    count(f"crash kill points (local, {command})", len(points))


def test_sigkill_a_prune_by_bundle_at_every_mutating_call(tmp_path: Path) -> None:
    """``prune --apply`` with ``retention.prune.bundles`` (issue 37) killed at every mutating call
    while it removes two of three dated bundle paths: no state file ever records a file that is
    gone, the kept bundle and an unmanaged file are untouched, and running the command again ends
    exactly where a clean prune ends: no state, journal or lock of the removed bundles left (a lock
    a removal died holding, with no state beside it, is cleared by the next prune), nor their
    folders, but for a kill right after the lock's release, which leaves an empty one."""
    from distributor_core.app.run import RunOptions, run_config
    from distributor_core.config import load_config
    from tests.repair.test_prune_bundles import write_day

    argv = ["prune", "--pipeline", "reports", "--destination", "archive", "--apply"]
    days = ["2026-06-01", "2026-06-02", "2026-06-03"]

    def config_text(work: Path, keep: int) -> str:
        return (f"pipelines:\n  - id: reports\n    source: {{backend: local, path: {work / 'source'}}}\n"
                f"    destinations:\n      - id: archive\n        backend: local\n        path: {work / 'dest'}\n"
                f"        retention: {{prune: {{enabled: true, bundles: {{keep_latest: {keep}}}}}}}\n")

    def space(name: str) -> tuple[Path, Path]:
        work = tmp_path / name
        for day in days:
            write_day(work / "source", day)
        config = work / "distributor.yml"
        config.write_text(config_text(work, 10))
        assert run_config(load_config(config), RunOptions(clock=lambda: T0)).ok  # the same bytes in every space
        (work / "dest" / days[0] / "stray.txt").write_bytes(b"keep")
        config.write_text(config_text(work, 1))
        return work / "dest", config

    ref_root, ref_config = space("reference")
    previous = tree(ref_root)
    assert run_inprocess(*argv, "--config", str(ref_config)).code == 0
    expected = tree(ref_root)
    assert set(expected) == {f"{days[0]}/stray.txt"} | {p for p in previous if p.startswith(days[2])}

    probe_root, probe_config = space("probe")
    trace = tmp_path / "trace.txt"
    probe_run = run_cli(*argv, "--config", str(probe_config), env=hook_env(DISTRIBUTOR_TEST_TRACE=str(trace)))
    assert probe_run.code == 0, probe_run.stderr
    assert tree(probe_root) == expected
    calls = [Call(k, p, None if s == "-" else int(s), st == "ok")
             for k, p, s, st in (line.split("\t") for line in trace.read_text().splitlines())]
    points = kill_points(calls)
    assert len(points) >= 10

    def one(index_point: tuple[int, KillPoint]) -> None:
        index, point = index_point
        label = f"prune by bundle: {point}"
        root, config = space(f"p{index}")
        killed = run_cli(*argv, "--config", str(config), env=hook_env(DISTRIBUTOR_TEST_KILL=point.spec))
        assert killed.code == -signal.SIGKILL, (label, killed.stderr)
        files = tree(root)
        assert files[f"{days[0]}/stray.txt"] == b"keep", label
        assert {p: v for p, v in files.items() if p.startswith(days[2])} == \
            {p: v for p, v in previous.items() if p.startswith(days[2])}, label
        for path, data in files.items():
            if path.endswith("/.distributor.json"):
                bundle = path.rsplit("/", 1)[0]
                for recorded, _digest, _size, _owner in records(data):
                    assert f"{bundle}/{recorded}" in files, f"{label}: {path} records {recorded}, which is gone"
        again = run_inprocess(*argv, "--config", str(config))
        assert again.code == 0, (label, again.stderr)
        assert tree(root) == expected, (label, sorted(set(tree(root)) ^ set(expected)))
        # a kill between the lock's release and the folders' removal leaves an empty folder
        released = point.kind == "delete" and point.path.endswith(".distributor.lock") and point.when == "after"
        assert not (root / days[1]).exists() or (released and not any((root / days[1]).iterdir())), label

    with ThreadPoolExecutor(PARALLEL) as pool:
        list(pool.map(one, enumerate(points)))
    count("crash kill points (local, prune by bundle)", len(points))

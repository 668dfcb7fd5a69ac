"""Crash safety of ``prune --apply`` and ``reconcile-state`` (resolutions A1, README "state never lies").

A crash is simulated by raising a ``BaseException`` from the fault-injecting storage at every
storage call of a clean run, before the call or after it took effect. After each crash:

- state never records a file that is not there;
- running the operation again (the retry recovers the journal first) ends exactly where a clean
  run ends: the same state bytes, the same files, and no journal, lock or temporary left.

A crashed process's lock names a dead pid, as a real crash leaves it; the retry breaks it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from distributor_core import jsonfmt
from distributor_core import paths as lp
from distributor_core.app.prune import PruneError, prune
from distributor_core.app.reconcile import reconcile_state
from distributor_core.app.repair_report import PruneReport
from distributor_core.config import Config
from distributor_core.storage.faults import OP_KINDS, FaultInjectingStorage
from tests.repair.conftest import (
    ADOPT_FILES,
    ARCHIVE,
    HTML,
    NOW,
    Crash,
    Dest,
    adopt_config,
    ago,
    bury_lock,
    load,
    published_state,
    seed_damaged,
    seed_restored_copy,
    seed_stateless_copy,
    shared_root_state,
    single_owner_state,
)

KEEP_ONE = {"enabled": True, "keep_latest": 1}


def _seed(dest: Dest) -> None:
    dest.put_state(
        shared_root_state(
            [
                ("reports/a.txt", ARCHIVE, ago(96)),
                ("reports/b.txt", ARCHIVE, ago(72)),
                ("html/keep.html", HTML, ago(500)),
                ("reports/c.txt", ARCHIVE, ago(24)),
            ]
        )
    )
    dest.write("html/keep.html", b"<p>other owner</p>")
    dest.write("unmanaged.txt", b"keep")


def _recorded_files_exist(dest: Dest) -> None:
    for path in dest.paths():
        assert dest.path(path).is_file(), f"state records {path} but it is gone"


def _snapshot(dest: Dest) -> tuple[bytes, list[str], bytes, bytes]:
    return dest.state_bytes(), dest.files(), dest.read("html/keep.html"), dest.read("unmanaged.txt")


def _crash_points(run: Callable[[FaultInjectingStorage], object], make: Callable[[], Dest]) -> list[tuple[str, int]]:
    probe = FaultInjectingStorage(make().storage())
    run(probe)
    return [(op, n) for op in OP_KINDS for n in range(1, probe.count(op) + 1)]


@pytest.fixture
def fresh(tmp_path: Path) -> Callable[[], Dest]:
    counter = iter(range(10_000))

    def make() -> Dest:
        root = tmp_path / f"dest-{next(counter)}"
        root.mkdir()
        dest = Dest(root)
        _seed(dest)
        return dest

    return make


def _prune_run(config: Config) -> Callable[[FaultInjectingStorage], PruneReport]:
    def run(storage: FaultInjectingStorage) -> PruneReport:
        report = prune(config, pipeline_id="reports", destination_id="archive", dry_run=False, now=NOW, storage=storage)
        assert isinstance(report, PruneReport)
        return report

    return run


def test_prune_crash_at_every_step_then_retry(tmp_path: Path, fresh: Callable[[], Dest]) -> None:
    expected_dest = fresh()
    config = load(tmp_path, expected_dest, prune=KEEP_ONE)
    run = _prune_run(config)
    clean = run(FaultInjectingStorage(expected_dest.storage()))
    assert [c.path for c in clean.deleted_outputs] == ["reports/a.txt", "reports/b.txt"]
    expected = _snapshot(expected_dest)
    points = _crash_points(run, fresh)
    assert len(points) >= 15
    recovered = 0
    for op, n in points:
        for when in ("before", "after"):
            dest = fresh()
            storage = FaultInjectingStorage(dest.storage())
            storage.fail(op, nth=n, error=Crash(), when=when)  # type: ignore[arg-type]
            try:
                run(storage)
            except Crash:
                pass
            else:  # the call was not reached on this path (e.g. a stat of a file already gone)
                assert _snapshot(dest) == expected
                continue
            _recorded_files_exist(dest)
            bury_lock(dest)
            retry = run(FaultInjectingStorage(dest.storage()))
            recovered += retry.recovery is not None
            assert _snapshot(dest) == expected, (op, n, when)
    assert recovered > 0  # some crashes left a journal that the retry settled


def test_prune_journal_left_before_the_state_write_rolls_back(tmp_path: Path, fresh: Callable[[], Dest]) -> None:
    dest = fresh()
    before = dest.state_bytes()
    config = load(tmp_path, dest, prune=KEEP_ONE)
    storage = FaultInjectingStorage(dest.storage())
    storage.fail("write", path=".distributor.json", error=Crash())
    with pytest.raises(Crash):
        _prune_run(config)(storage)
    journal = jsonfmt.loads_object(dest.read(lp.JOURNAL_NAME))
    assert journal["deletes"] == ["reports/a.txt", "reports/b.txt"]
    assert journal["writes"] == []
    assert dest.state_bytes() == before  # nothing recorded changed, nothing deleted
    _recorded_files_exist(dest)
    bury_lock(dest)
    retry = _prune_run(config)(FaultInjectingStorage(dest.storage()))
    assert retry.recovery is not None and retry.recovery.direction == "back"
    assert [c.path for c in retry.deleted_outputs] == ["reports/a.txt", "reports/b.txt"]
    assert retry.to_dict()["recovery"]["direction"] == "back"


def test_prune_crash_after_the_state_write_rolls_forward(tmp_path: Path, fresh: Callable[[], Dest]) -> None:
    dest = fresh()
    config = load(tmp_path, dest, prune=KEEP_ONE)
    storage = FaultInjectingStorage(dest.storage())
    storage.fail("delete", path="reports/b.txt", error=Crash())
    with pytest.raises(Crash):
        _prune_run(config)(storage)
    assert dest.paths() == ["html/keep.html", "reports/c.txt"]  # records already gone ...
    assert dest.exists("reports/b.txt") and not dest.exists("reports/a.txt")  # ... one file still there
    assert dest.exists(lp.JOURNAL_NAME)
    bury_lock(dest)
    retry = _prune_run(config)(FaultInjectingStorage(dest.storage()))
    assert retry.recovery is not None and retry.recovery.direction == "forward"
    assert "reports/b.txt" in retry.recovery.removed
    assert retry.planned_outputs == [] and not retry.state_changed
    assert not dest.exists("reports/b.txt") and not dest.exists(lp.JOURNAL_NAME)
    assert retry.text_lines()[1] == (
        "Recovery: pipeline=reports destination=archive path=. direction=forward"
    )


def test_prune_delete_failing_half_way_then_retry_finishes(tmp_path: Path, fresh: Callable[[], Dest]) -> None:
    expected_dest = fresh()
    config = load(tmp_path, expected_dest, prune=KEEP_ONE)
    _prune_run(config)(FaultInjectingStorage(expected_dest.storage()))
    expected = _snapshot(expected_dest)

    dest = fresh()
    storage = FaultInjectingStorage(dest.storage())
    storage.fail("delete", path="reports/b.txt", kind="unavailable")
    with pytest.raises(PruneError) as info:
        _prune_run(config)(storage)
    partial = info.value.report
    assert [c.path for c in partial.deleted_outputs] == ["reports/a.txt"]
    assert partial.failed_output.path == "reports/b.txt"
    assert dest.paths() == ["reports/b.txt", "html/keep.html", "reports/c.txt"]
    assert not dest.exists(lp.JOURNAL_NAME) and not dest.exists(lp.LOCK_NAME)
    _recorded_files_exist(dest)
    retry = _prune_run(config)(FaultInjectingStorage(dest.storage()))
    assert [c.path for c in retry.deleted_outputs] == ["reports/b.txt"]
    assert retry.recovery is None
    assert _snapshot(dest) == expected


def test_prune_state_restore_failing_leaves_the_journal_for_the_retry(
    tmp_path: Path, fresh: Callable[[], Dest]
) -> None:
    expected_dest = fresh()
    config = load(tmp_path, expected_dest, prune=KEEP_ONE)
    _prune_run(config)(FaultInjectingStorage(expected_dest.storage()))
    expected = _snapshot(expected_dest)

    dest = fresh()
    storage = FaultInjectingStorage(dest.storage())
    storage.fail("delete", path="reports/b.txt")
    storage.fail("write", path=".distributor.json", nth=2, kind="unavailable")  # the restoring write
    with pytest.raises(PruneError) as info:
        _prune_run(config)(storage)
    assert "unavailable" in str(info.value)
    report = info.value.report
    assert report.failed_output.path == "reports/b.txt" and report.state_changed
    assert any(lp.JOURNAL_NAME in warning for warning in report.warnings)
    assert dest.exists(lp.JOURNAL_NAME)
    _recorded_files_exist(dest)
    retry = _prune_run(config)(FaultInjectingStorage(dest.storage()))
    assert retry.recovery is not None and retry.recovery.direction == "forward"
    assert _snapshot(dest) == expected


def test_prune_lost_lock_stops_every_write(tmp_path: Path, fresh: Callable[[], Dest], monkeypatch) -> None:
    """Another writer takes the lock over right after prune acquired it (as if prune had stalled
    past its lease) and prune's renewal finds out: prune writes nothing at all."""
    from distributor_core.execute.lock import DestinationLock
    from distributor_core.lease import LeaseRecord
    from distributor_core.storage.errors import StorageError

    dest = fresh()
    before = dest.state_bytes()
    config = load(tmp_path, dest, prune=KEEP_ONE)
    original = DestinationLock.acquire
    thief = LeaseRecord(holder="thief", host="elsewhere", pid=1, generation=9, lease_seconds=60).to_bytes()

    def acquire_then_lose(self: DestinationLock) -> None:
        original(self)
        dest.write(self.path, thief)
        with contextlib.suppress(StorageError):
            self.renew()

    monkeypatch.setattr(DestinationLock, "acquire", acquire_then_lose)
    with pytest.raises(Exception, match="taken over"):
        _prune_run(config)(FaultInjectingStorage(dest.storage()))
    assert dest.state_bytes() == before
    assert dest.exists("reports/a.txt") and dest.exists("reports/b.txt")
    assert not dest.exists(lp.JOURNAL_NAME)


def test_reconcile_crash_at_every_step_then_retry(tmp_path: Path) -> None:
    def make(index: int) -> Dest:
        root = tmp_path / f"r-{index}"
        root.mkdir()
        dest = Dest(root)
        dest.put_state(single_owner_state({"report.md": ago(1), "summary.txt": ago(1)}))
        dest.path("summary.txt").unlink()
        dest.write("extra.txt", b"unmanaged")
        return dest

    first = make(0)
    config = load(tmp_path, first)

    def run(storage: FaultInjectingStorage) -> None:
        reconcile_state(config, pipeline_id="reports", destination_id="archive", now=NOW, storage=storage)

    run(FaultInjectingStorage(first.storage()))
    expected = (first.state_bytes(), first.files())
    probe = FaultInjectingStorage(make(1).storage())
    run(probe)
    index = 2
    for op in OP_KINDS:
        for n in range(1, probe.count(op) + 1):
            for when in ("before", "after"):
                dest = make(index)
                index += 1
                storage = FaultInjectingStorage(dest.storage())
                storage.fail(op, nth=n, error=Crash(), when=when)  # type: ignore[arg-type]
                try:
                    run(storage)
                except Crash:
                    pass
                else:  # the call failed by itself (a stat of a missing file), so "after" never came
                    assert (dest.state_bytes(), dest.files()) == expected
                    continue
                assert dest.paths() in (["report.md", "summary.txt"], ["report.md"])
                bury_lock(dest)
                run(FaultInjectingStorage(dest.storage()))
                assert (dest.state_bytes(), dest.files()) == expected, (op, n, when)


# --------------------------------------------------------------------------- issue 18: --audit, --adopt


def _contents(dest: Dest) -> dict[str, bytes]:
    return {path: dest.read(path) for path in dest.files()}


def _sweep_crashes(tmp_path: Path, label: str, seed: Callable[[Dest], None], run: Callable[[Any], Any]) -> int:
    """Crash ``run`` at every storage call (before and after it takes effect); after each crash
    state is the one before or the one a clean run writes (a repair writes it in one atomic
    step, and no output is touched), and a retry ends where a clean run ends."""
    counter = iter(range(100_000))

    def make() -> Dest:
        root = tmp_path / f"{label}-{next(counter)}"
        root.mkdir()
        dest = Dest(root)
        seed(dest)
        return dest

    clean = make()
    before = _contents(clean)
    run(FaultInjectingStorage(clean.storage()))
    expected = _contents(clean)
    cases = 0
    for op, n in _crash_points(run, make):
        for when in ("before", "after"):
            dest = make()
            storage = FaultInjectingStorage(dest.storage())
            storage.fail(op, nth=n, error=Crash(), when=when)  # type: ignore[arg-type]
            try:
                run(storage)
            except Crash:
                pass
            else:  # the call failed by itself (a stat of a missing file), so "after" never came
                assert _contents(dest) == expected, (label, op, n, when)
                continue
            cases += 1
            after = _contents(dest)
            assert after.get(lp.STATE_FILE_NAME) in (before.get(lp.STATE_FILE_NAME), expected[lp.STATE_FILE_NAME])
            assert {p: b for p, b in after.items() if not lp.is_reserved_path(p)} == {
                p: b for p, b in before.items() if not lp.is_reserved_path(p)
            }, (label, op, n, when)
            bury_lock(dest)
            run(FaultInjectingStorage(dest.storage()))
            assert _contents(dest) == expected, (label, op, n, when)
    return cases


def _reconcile(config: Config, **kwargs: Any) -> Callable[[Any], Any]:
    def run(storage: Any) -> Any:
        return reconcile_state(config, pipeline_id="reports", destination_id="archive", now=NOW, storage=storage,
                               **kwargs)

    return run


def test_reconcile_audit_crash_at_every_step_then_retry(tmp_path: Path) -> None:
    published = published_state(tmp_path)
    config = adopt_config(tmp_path, tmp_path / "unused")
    cases = _sweep_crashes(tmp_path, "audit", lambda d: seed_damaged(d, published), _reconcile(config, audit=True))
    assert cases >= 10


@pytest.mark.parametrize("seed_name", ["restored", "stateless"])
def test_reconcile_adopt_crash_at_every_step_then_retry(tmp_path: Path, seed_name: str) -> None:
    published = published_state(tmp_path)
    config = adopt_config(tmp_path, tmp_path / "unused")
    seed = (lambda d: seed_restored_copy(d, published)) if seed_name == "restored" else seed_stateless_copy
    clean_root = tmp_path / "clean"
    clean_root.mkdir()
    clean = Dest(clean_root)
    seed(clean)
    report = _reconcile(config, adopt=True)(FaultInjectingStorage(clean.storage()))
    assert report.changed and [o.path for o in report.adopted_outputs] == (
        ["summary.txt"] if seed_name == "restored" else list(ADOPT_FILES)
    )
    if seed_name == "stateless":
        assert clean.state_bytes() == published  # exactly the state run writes
    cases = _sweep_crashes(tmp_path, f"adopt-{seed_name}", seed, _reconcile(config, adopt=True))
    assert cases >= 10

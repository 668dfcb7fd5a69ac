"""Lock and recovery around repair and prune (resolutions A1, A3).

A crashed publication's journal is settled before state is read; a held lock makes a write wait
and then fail with a clear conflict; dry runs take no lock, recover nothing and say when a journal
is waiting.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager as ContextManager
from datetime import UTC, datetime
from pathlib import Path

import pytest

from distributor_core import jsonfmt
from distributor_core import paths as lp
from distributor_core.app.prune import prune
from distributor_core.app.reconcile import reconcile_state
from distributor_core.bundle import Manifest, build_manifest, write_manifest
from distributor_core.execute.lock import DestinationLock
from distributor_core.execute.publish import publish
from distributor_core.execute.request import PlanRequest
from distributor_core.lease import LeaseRecord
from distributor_core.plan.model import DestinationPolicy
from distributor_core.storage.errors import ErrorKind, StorageError
from distributor_core.storage.faults import FaultInjectingStorage
from distributor_core.storage.local import LocalStorage
from tests.lockholder import held_lock
from tests.repair.conftest import NOW, PAST, Crash, Dest, bury_lock, load, single_owner_state

V1 = datetime(2026, 6, 1, 8, 0, tzinfo=UTC)
V2 = datetime(2026, 6, 2, 8, 0, tzinfo=UTC)


class Publisher:
    """Publishes source bundles to the destination root with the real engine (fixed mapping)."""

    def __init__(self, tmp_path: Path, dest: Dest) -> None:
        self.tmp_path = tmp_path
        self.dest = dest
        self.count = 0

    def source(self, files: dict[str, bytes], created: datetime) -> tuple[LocalStorage, Manifest]:
        self.count += 1
        root = self.tmp_path / f"src-{self.count}"
        root.mkdir()
        for name, data in files.items():
            (root / name).write_bytes(data)
        manifest = build_manifest(root, id="reports.daily", files=list(files), created=created)
        write_manifest(root, manifest)
        return LocalStorage(root), manifest

    def publish(self, files: dict[str, bytes], created: datetime, destination=None) -> None:
        source, manifest = self.source(files, created)
        request = PlanRequest(
            pipeline_id="reports",
            destination_id="archive",
            source=source,
            source_bundle_path="",
            manifest=manifest,
            destination=destination or self.dest.storage(),
            policy=DestinationPolicy(path_mapping="fixed"),
            distributor_version="test",
        )
        outcome = publish(request, clock=lambda: NOW, lock_wait=1.0)
        assert outcome.status == "completed", outcome.error


@pytest.fixture
def publisher(tmp_path: Path, dest: Dest) -> Publisher:
    pub = Publisher(tmp_path, dest)
    pub.publish({"report.md": b"v1\n", "summary.txt": b"S\n"}, V1)
    return pub


def test_repair_rolls_a_committed_publication_forward_first(tmp_path: Path, dest: Dest, publisher: Publisher) -> None:
    crashing = FaultInjectingStorage(dest.storage())
    crashing.fail("delete", path="summary.txt", error=Crash())  # after the new state was written
    with pytest.raises(Crash):
        publisher.publish({"report.md": b"v2\n"}, V2, destination=crashing)
    assert dest.exists(lp.JOURNAL_NAME) and dest.exists("summary.txt")
    assert dest.paths() == ["report.md"]
    bury_lock(dest)

    dry = reconcile_state(load(tmp_path, dest), pipeline_id="reports", destination_id="archive", dry_run=True)
    assert [e.path for e in dry.unmanaged_entries] == ["summary.txt"]  # not settled yet ...
    assert dry.recovery is None
    assert dry.warnings == [
        "an interrupted write left .distributor.pending.json; the next run, prune or reconcile-state "
        "that is not a dry run recovers it first"
    ]
    assert dest.exists(lp.JOURNAL_NAME)

    report = reconcile_state(load(tmp_path, dest), pipeline_id="reports", destination_id="archive", now=NOW)
    assert report.recovery is not None and report.recovery.direction == "forward"
    assert "summary.txt" in report.recovery.removed
    assert report.unmanaged_entries == [] and report.missing_managed_outputs == []
    assert not report.changed
    assert dest.files() == [".distributor.json", "report.md"]
    assert dest.read("report.md") == b"v2\n"
    recovery = report.to_dict()["recovery"]
    assert recovery["direction"] == "forward" and recovery["bundle_path"] == ""
    assert list(report.to_dict())[-1] == "recovery"


def test_repair_rolls_an_uncommitted_publication_back_first(tmp_path: Path, dest: Dest, publisher: Publisher) -> None:
    before = dest.state_bytes()
    crashing = FaultInjectingStorage(dest.storage())
    crashing.fail("write", path=".distributor.json", error=Crash())
    crashing.fail("delete", path=lp.JOURNAL_NAME, error=Crash())  # dies again while undoing it
    with pytest.raises(Crash):
        publisher.publish({"report.md": b"v2\n"}, V2, destination=crashing)
    assert dest.exists(lp.JOURNAL_NAME)
    bury_lock(dest)

    report = reconcile_state(load(tmp_path, dest), pipeline_id="reports", destination_id="archive", now=NOW)
    assert report.recovery is not None and report.recovery.direction == "back"
    assert not report.changed and report.unmanaged_entries == []
    assert dest.state_bytes() == before
    assert dest.files() == [".distributor.json", "report.md", "summary.txt"]
    assert dest.read("report.md") == b"v1\n"
    assert report.text_lines() == [
        report.text_line(),
        "Recovery: pipeline=reports destination=archive path=. direction=back",
    ]


def test_prune_recovers_a_publication_journal_before_planning(tmp_path: Path, dest: Dest, publisher: Publisher) -> None:
    crashing = FaultInjectingStorage(dest.storage())
    crashing.fail("delete", path="summary.txt", error=Crash())
    with pytest.raises(Crash):
        publisher.publish({"report.md": b"v2\n"}, V2, destination=crashing)
    bury_lock(dest)
    config = load(tmp_path, dest, prune={"enabled": True, "keep_latest": 5})
    report = prune(config, pipeline_id="reports", destination_id="archive", dry_run=False, now=NOW)
    assert report.recovery is not None and report.recovery.direction == "forward"
    assert dest.files() == [".distributor.json", "report.md"]


def test_recovery_sweeps_temporaries_of_a_writer_that_died_before_its_journal(tmp_path: Path, dest: Dest) -> None:
    dest.put_state(single_owner_state({"report.md": PAST}))
    dest.write(".distributor-tmp-0123456789abcdef", b"half")
    report = reconcile_state(load(tmp_path, dest), pipeline_id="reports", destination_id="archive", now=NOW)
    assert report.recovery is None  # no journal: nothing to report ...
    assert dest.files() == [".distributor.json", "report.md"]  # ... but the temporary is gone


def _hold_lock(dest: Dest) -> ContextManager[DestinationLock]:
    """A writer on another host holding the lock (and renewing it) while the test runs."""
    return held_lock(dest.storage(), holder="distributor run (pid 1 on elsewhere)",
                     clock=lambda: datetime(2026, 6, 8, 11, 59, tzinfo=UTC))


Operation = Callable[..., object]


@pytest.mark.parametrize(
    "operation",
    [
        lambda config, **kw: reconcile_state(config, pipeline_id="reports", destination_id="archive", **kw),
        lambda config, **kw: prune(config, pipeline_id="reports", destination_id="archive", dry_run=False, **kw),
    ],
    ids=["reconcile-state", "prune"],
)
def test_held_lock_is_a_clear_conflict_after_a_short_wait(
    tmp_path: Path, dest: Dest, operation: Operation
) -> None:
    data = dest.put_state(single_owner_state({"report.md": PAST, "summary.txt": PAST}))
    dest.path("summary.txt").unlink()
    config = load(tmp_path, dest, prune={"enabled": True, "keep_latest": 0})
    with _hold_lock(dest) as held, pytest.raises(StorageError) as info:
        operation(config, storage=dest.storage(), now=NOW, lock_wait=0.3)
    assert info.value.kind == ErrorKind.CONFLICT
    assert str(info.value) == (
        f"destination {dest.root} is locked by distributor run (pid 1 on elsewhere) since 2026-06-08T11:59:00Z"
    )
    assert dest.state_bytes() == data
    assert held.lost is None  # its holder kept it all along
    assert dest.exists("report.md")


def test_dry_runs_ignore_a_held_lock_and_leave_it(tmp_path: Path, dest: Dest) -> None:
    dest.put_state(single_owner_state({"report.md": PAST}))
    lock = LeaseRecord(holder="distributor run (pid 1 on elsewhere)", host="elsewhere", pid=1, generation=1,
                       lease_seconds=0.1).to_bytes()
    dest.write(lp.LOCK_NAME, lock)
    config = load(tmp_path, dest, prune={"enabled": True, "keep_latest": 0})
    repaired = reconcile_state(config, pipeline_id="reports", destination_id="archive", dry_run=True, lock_wait=0)
    pruned = prune(config, pipeline_id="reports", destination_id="archive", dry_run=True, now=NOW, lock_wait=0)
    assert repaired.dry_run and pruned.would_change
    assert dest.read(lp.LOCK_NAME) == lock


def test_the_lock_is_held_while_state_is_rewritten(tmp_path: Path, dest: Dest) -> None:
    dest.put_state(single_owner_state({"report.md": PAST, "summary.txt": PAST}))
    dest.path("summary.txt").unlink()
    seen: list[dict] = []

    class Watching(LocalStorage):
        def write_stream(self, path, chunks, **kwargs):  # type: ignore[override]
            if path == lp.STATE_FILE_NAME:
                seen.append(jsonfmt.loads_object(dest.read(lp.LOCK_NAME)))
            return super().write_stream(path, chunks, **kwargs)

    report = reconcile_state(
        load(tmp_path, dest), pipeline_id="reports", destination_id="archive", storage=Watching(dest.root)
    )
    assert report.changed
    assert len(seen) == 1 and seen[0]["holder"].startswith("distributor reconcile-state (pid ")
    assert not dest.exists(lp.LOCK_NAME)


class _Meddling(LocalStorage):
    """Rewrites ``.distributor.json`` behind the operation's back just before ``trigger`` is written."""

    def __init__(self, root: Path, trigger: str) -> None:
        super().__init__(root)
        self.trigger = trigger

    def write_stream(self, path, chunks, **kwargs):  # type: ignore[override]
        if path == self.trigger:
            state = self.root / lp.STATE_FILE_NAME
            old, new = b'"distributor_version": "test"', b'"distributor_version": "x"'
            state.write_bytes(state.read_bytes().replace(old, new))
        return super().write_stream(path, chunks, **kwargs)


def test_prune_refuses_to_overwrite_state_changed_behind_its_back(tmp_path: Path, dest: Dest) -> None:
    dest.put_state(single_owner_state({"old.txt": PAST, "fresh.txt": NOW}))
    config = load(tmp_path, dest, prune={"enabled": True, "keep_latest": 1})
    with pytest.raises(StorageError) as info:
        prune(config, pipeline_id="reports", destination_id="archive", dry_run=False, now=NOW,
              storage=_Meddling(dest.root, lp.JOURNAL_NAME))
    assert info.value.kind == ErrorKind.CONFLICT
    assert b'"distributor_version": "x"' in dest.state_bytes()  # the other writer's state stands
    assert dest.files() == [".distributor.json", "fresh.txt", "old.txt"]  # nothing deleted, no journal


def test_reconcile_refuses_to_overwrite_state_changed_behind_its_back(tmp_path: Path, dest: Dest) -> None:
    dest.put_state(single_owner_state({"report.md": PAST, "summary.txt": PAST}))
    dest.path("summary.txt").unlink()
    with pytest.raises(StorageError) as info:
        reconcile_state(load(tmp_path, dest), pipeline_id="reports", destination_id="archive", now=NOW,
                        storage=_Meddling(dest.root, lp.STATE_FILE_NAME))
    assert info.value.kind == ErrorKind.CONFLICT
    assert dest.paths() == ["report.md", "summary.txt"]

"""The write protocol of resolutions A1–A3: staging under temporary names, the intent journal,
backups, state written last, recovery of a crashed writer, temp sweeping, the destination lock,
and reserved names."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import threading
import time
from datetime import timedelta
from typing import ClassVar

import pytest

from distributor_core import jsonfmt
from distributor_core import paths as lp
from distributor_core.bundle import BundleFile, BundlePathError, ManifestError, validate_manifest, write_bundle
from distributor_core.execute import journal as jr
from distributor_core.execute.lock import DestinationLock
from distributor_core.execute.statebuild import build_state
from distributor_core.lease import LeaseRecord
from distributor_core.plan.model import Action
from distributor_core.source import validate_source_bundle
from distributor_core.state import marshal_state
from distributor_core.storage.errors import ErrorKind, StorageError
from distributor_core.timefmt import format_seconds

from ..lockholder import held_lock
from .conftest import CREATED, HOUR, LATER, NOW, REPORT, SUMMARY, Env, digest, manifest_for

TEMP_RE = re.compile(r"\.distributor-tmp-[0-9a-f]{16}")
BAK_RE = re.compile(r"\.distributor-bak-[0-9a-f]{16}")


# --------------------------------------------------------------------------- idempotent re-run


def test_rerun_of_unchanged_source_writes_nothing(env: Env, hooked):
    manifest = env.source({"report.md": REPORT, "summary.txt": SUMMARY})
    env.publish_ok(manifest, publish_html=True, markdown_enabled=True)
    before = env.stats()
    outcome = env.publish(env.request(manifest, dst=hooked, publish_html=True, markdown_enabled=True), now=LATER)
    assert (outcome.status, outcome.plan.action) == ("skipped", Action.SKIP_SAME)
    assert env.stats() == before
    written = [path for op, path in hooked.calls if op in ("write", "rename", "delete")]
    assert all(lp.basename(p) == lp.LOCK_NAME for p in written), written
    assert env.leftovers() == []


@pytest.mark.parametrize(
    "setup",
    ["publish_new", "replace", "merge", "force", "shared_replace", "takeover"],
)
def test_no_working_files_survive_a_successful_write(env: Env, setup):
    manifest = env.source({"report.md": REPORT, "sub/summary.txt": SUMMARY})
    kwargs = {}
    if setup == "replace":
        env.seed_single_owner({"report.md": b"old", "sub/gone.txt": b"g"})
    elif setup == "merge":
        env.seed_single_owner({"report.md": b"old", "sub/kept.txt": b"k"})
        kwargs["reconciliation_mode"] = "merge"
    elif setup == "force":
        env.put("bundle/report.md", b"unmanaged")
        kwargs["force"] = True
    elif setup == "shared_replace":
        env.seed_single_owner({"report.md": b"old", "sub/gone.txt": b"g"})
        kwargs["state_mode"] = "shared_root"
    elif setup == "takeover":
        env.seed_single_owner({"report.md": b"old"}, destination="old-destination",
                              manifest=manifest_for({"report.md": b"old"}, id="x", created=CREATED - HOUR))
    env.publish_ok(manifest, **kwargs)
    assert env.leftovers() == []
    env.assert_consistent(unmanaged=())


# --------------------------------------------------------------------------- protocol order


def test_protocol_order_and_journal_contents(env: Env, hooked):
    """A1 steps 1–5 in order, observed on the storage calls of a replace that overwrites one
    recorded output, adds one and deletes one."""
    manifest = env.source({"report.md": REPORT, "new.md": b"new"})
    env.seed_single_owner({"report.md": b"old", "gone.txt": b"g"})
    events: list[tuple[str, str, str]] = []
    seen_journal: list[dict] = []

    def hook(op, path, **kw):
        if op in ("write", "rename", "delete"):
            events.append((op, path, kw.get("dst", "")))
        if op == "write" and path == "bundle/.distributor.json":
            seen_journal.append(jsonfmt.loads_object(env.read("bundle/.distributor.pending.json")))
            lock = jsonfmt.loads_object(env.read("bundle/.distributor.lock"))
            assert lock["holder"] == "tester" and lock["pid"] == os.getpid() and lock["lease_seconds"] == 60
            assert (lock["epoch"], lock["generation"]) == (seen_journal[-1]["lease_epoch"], 1)
            assert seen_journal[-1]["lease_generation"] == 1

    hooked.hook = hook
    outcome = env.publish(env.request(manifest, dst=hooked), holder="tester")
    assert outcome.status == "completed"

    kinds = [(op, lp.basename(path), lp.basename(dst)) for op, path, dst in events]
    # lock first, journal next
    assert kinds[0][:2] == ("write", ".distributor.lock")
    assert kinds[1][:2] == ("write", ".distributor.pending.json")
    journal = seen_journal[0]
    assert journal["bundle_path"] == "bundle"
    assert journal["holder"] == "tester"
    assert journal["state_sha256"] == digest(env.state_bytes())
    assert journal["deletes"] == ["bundle/gone.txt"]
    writes = {w["path"]: w for w in journal["writes"]}
    assert list(writes) == ["bundle/report.md", "bundle/new.md"]
    for w in writes.values():
        assert lp.parent(w["temp"]) == "bundle" and TEMP_RE.fullmatch(lp.basename(w["temp"]))
    assert BAK_RE.fullmatch(lp.basename(writes["bundle/report.md"]["backup"]))
    assert "backup" not in writes["bundle/new.md"]

    index = {e: i for i, e in enumerate(events)}
    temp_writes = [index[("write", w["temp"], "")] for w in writes.values()]
    backup = index[("rename", "bundle/report.md", writes["bundle/report.md"]["backup"])]
    renames = [index[("rename", w["temp"], w["path"])] for w in writes.values()]
    state_write = index[("write", "bundle/.distributor.json", "")]
    delete_gone = index[("delete", "bundle/gone.txt", "")]
    delete_backup = index[("delete", writes["bundle/report.md"]["backup"], "")]
    delete_journal = index[("delete", "bundle/.distributor.pending.json", "")]
    assert index[("write", "bundle/.distributor.pending.json", "")] < min(temp_writes)
    assert max(temp_writes) < backup < min(renames)
    assert max(renames) < state_write < delete_gone
    assert state_write < delete_backup < delete_journal
    assert delete_gone < delete_journal
    assert events[-1] == ("delete", "bundle/.distributor.lock", "")
    assert outcome.recovery is None


# --------------------------------------------------------------------------- crash recovery


class Crash:
    """A replace of ``report.md`` (recorded, overwritten), ``new.md`` (new) and ``gone.txt``
    (recorded, omitted → deleted), with a journal written by hand. Each method leaves the
    destination as a writer that died at that step would have."""

    OLD_FILES: ClassVar[dict[str, bytes]] = {"report.md": b"old", "gone.txt": b"g"}
    NEW_FILES: ClassVar[dict[str, bytes]] = {"report.md": REPORT, "new.md": b"new"}

    def __init__(self, env: Env) -> None:
        self.env = env
        self.manifest = env.source(self.NEW_FILES)
        env.seed_single_owner(self.OLD_FILES)
        self.before = env.files()
        plan = env.plan(self.manifest)
        assert plan.action == Action.REPLACE_OLDER
        self.state_bytes = marshal_state(build_state(plan, now=NOW, version="test"))
        digests = {o.path: o.sha256 for o in plan.outputs}
        self.report = jr.JournalWrite("bundle/report.md", "bundle/.distributor-tmp-00000000000000a1",
                                      "bundle/.distributor-bak-00000000000000b1", digests["report.md"])
        self.new = jr.JournalWrite("bundle/new.md", "bundle/.distributor-tmp-00000000000000a2", None,
                                   digests["new.md"])
        journal = jr.new_journal("bundle", state_bytes=self.state_bytes, writes=[self.report, self.new],
                                 deletes=["bundle/gone.txt"], holder="crashed writer", now=NOW)
        env.put("bundle/.distributor.pending.json", journal.to_bytes())

    def temps(self, count: int = 2) -> Crash:
        for write in [self.report, self.new][:count]:
            self.env.put(write.temp, self.NEW_FILES[lp.basename(write.path)])
        return self

    def backups(self) -> Crash:
        os.rename(self.env.dst_root / self.report.path, self.env.dst_root / self.report.backup)
        return self

    def renames(self, count: int = 2) -> Crash:
        for write in [self.report, self.new][:count]:
            os.rename(self.env.dst_root / write.temp, self.env.dst_root / write.path)
        return self

    def state(self) -> Crash:
        self.env.put("bundle/.distributor.json", self.state_bytes)
        return self

    def delete(self, *paths: str) -> Crash:
        for path in paths:
            os.unlink(self.env.dst_root / path)
        return self


def _new_publication(env: Env) -> dict[str, bytes]:
    return {"bundle/report.md": REPORT, "bundle/new.md": b"new", "bundle/.distributor.json": env.state_bytes()}


ROLL_BACK = {
    "journal only": lambda c: c,
    "some temps written": lambda c: c.temps(1),
    "all temps written": lambda c: c.temps(),
    "after backups": lambda c: c.temps().backups(),
    "after one rename": lambda c: c.temps().backups().renames(1),
    "after all renames": lambda c: c.temps().backups().renames(),
}
ROLL_FORWARD = {
    "after state write": lambda c: c.temps().backups().renames().state(),
    "after the omitted delete": lambda c: c.temps().backups().renames().state().delete("bundle/gone.txt"),
    "after all deletes": lambda c: c.temps().backups().renames().state().delete(
        "bundle/gone.txt", "bundle/.distributor-bak-00000000000000b1"),
}


@pytest.mark.parametrize("step", list(ROLL_BACK))
def test_recovery_rolls_back_before_the_state_write(env: Env, step):
    crash = ROLL_BACK[step](Crash(env))
    recovery = jr.recover(env.dst, "bundle")
    assert recovery is not None and recovery.direction == "back"
    assert (recovery.holder, recovery.created_at) == ("crashed writer", "2026-06-04T12:00:00Z")
    assert recovery.describe() == "recovered an interrupted write left by crashed writer in bundle: rolled back"
    assert env.files() == crash.before
    env.assert_consistent()


@pytest.mark.parametrize("step", list(ROLL_FORWARD))
def test_recovery_rolls_forward_after_the_state_write(env: Env, step):
    ROLL_FORWARD[step](Crash(env))
    recovery = jr.recover(env.dst, "bundle")
    assert recovery is not None and recovery.direction == "forward"
    assert recovery.describe() == "recovered an interrupted write left by crashed writer in bundle: rolled forward"
    assert env.files() == _new_publication(env)
    env.assert_consistent()


@pytest.mark.parametrize("step", [*ROLL_BACK, *ROLL_FORWARD])
def test_next_publish_recovers_then_completes(env: Env, step):
    crash = (ROLL_BACK | ROLL_FORWARD)[step](Crash(env))
    outcome = env.publish(env.request(crash.manifest))
    assert outcome.recovery is not None
    if step in ROLL_BACK:
        assert outcome.recovery.direction == "back"
        assert (outcome.status, outcome.plan.action) == ("completed", Action.REPLACE_OLDER)
    else:
        assert outcome.recovery.direction == "forward"
        assert (outcome.status, outcome.plan.action) == ("skipped", Action.SKIP_SAME)
    assert env.files() == _new_publication(env)
    env.assert_consistent()


def test_dry_run_does_not_recover(env: Env):
    crash = Crash(env).temps().backups()
    snapshot = env.files()
    outcome = env.publish(env.request(crash.manifest), dry_run=True)
    assert outcome.status == "planned"
    assert env.files() == snapshot


def test_rollback_recovery_reports_what_it_did(env: Env):
    Crash(env).temps().backups().renames(1)
    recovery = jr.recover(env.dst, "bundle")
    assert recovery.restored == ["bundle/report.md"]
    assert sorted(recovery.removed) == ["bundle/.distributor-tmp-00000000000000a2"]
    assert recovery.to_dict()["direction"] == "back"


def test_unusable_journal_stops_the_run(env: Env):
    manifest = env.source()
    env.seed_single_owner({"report.md": b"old"})
    env.put("bundle/.distributor.pending.json", b"{not json")
    before = env.files()
    outcome = env.publish(env.request(manifest))
    assert outcome.status == "failed"
    assert outcome.error.startswith(
        "destination bundle path bundle has an unusable intent journal (.distributor.pending.json): "
        "journal is not valid JSON: "
    )
    assert outcome.error.endswith("; inspect the destination and remove the journal by hand")
    assert env.files() == before


def test_journal_naming_another_bundle_is_refused(env: Env):
    manifest = env.source()
    journal = jr.new_journal("elsewhere", state_bytes=b"{}", writes=[], deletes=[], holder="h", now=NOW)
    env.put("bundle/.distributor.pending.json", journal.to_bytes())
    outcome = env.publish(env.request(manifest))
    assert outcome.status == "failed"
    assert outcome.error == (
        "intent journal in bundle names bundle path elsewhere; inspect the destination and remove it by hand"
    )


# --------------------------------------------------------------------------- stray temporaries


def test_stray_temporaries_in_the_bundle_directory_are_swept(env: Env):
    manifest = env.source()
    env.publish_ok(manifest)
    env.put("bundle/.distributor-tmp-0123456789abcdef", b"half a state file")
    outcome = env.publish(env.request(manifest))
    assert outcome.status == "skipped"
    assert not env.exists("bundle/.distributor-tmp-0123456789abcdef")


def test_recovery_sweeps_nested_temporaries_but_not_nested_bundles(env: Env):
    crash = Crash(env).temps()
    env.put("bundle/deep/.distributor-tmp-00000000000000c3", b"unlisted")
    env.put("bundle/nested/.distributor.json", b"{}")
    env.put("bundle/nested/.distributor-tmp-00000000000000c4", b"another bundle's")
    jr.recover(env.dst, "bundle")
    assert not env.exists("bundle/deep/.distributor-tmp-00000000000000c3")
    assert env.exists("bundle/nested/.distributor-tmp-00000000000000c4")
    assert not env.exists(crash.report.temp)


# --------------------------------------------------------------------------- the lock


def _lock_bytes(holder: str, *, host: str, pid: int, acquired, expires) -> bytes:
    """A lock as an earlier release wrote it (wall-clock ``expires_at``, no lease length)."""
    return jsonfmt.dumps_indented_bytes({
        "holder": holder, "host": host, "pid": pid,
        "acquired_at": format_seconds(acquired), "expires_at": format_seconds(expires), "token": "f" * 16,
    })


def _record(holder: str, *, host: str, lease: float, generation: int = 4) -> bytes:
    """A lock as this release writes it, by a writer that then stopped renewing it."""
    return LeaseRecord(holder=holder, host=host, pid=1, epoch="0badcafe", generation=generation,
                       lease_seconds=lease, acquired_at="2026-06-04T11:59:00Z").to_bytes()


def test_held_lock_makes_a_publish_wait_then_fail(env: Env):
    manifest = env.source()
    with held_lock(env.dst, "bundle", holder="other writer", clock=lambda: NOW - timedelta(minutes=1)):
        started = time.monotonic()
        outcome = env.publish(env.request(manifest), lock_wait=0.4)
        waited = time.monotonic() - started
    assert outcome.status == "failed"
    assert outcome.error == (
        f"destination {env.dst.root_display}/bundle is locked by other writer since 2026-06-04T11:59:00Z"
    )
    assert waited >= 0.4
    assert env.files() == {}


def test_lock_conflict_is_a_storage_conflict(env: Env):
    with held_lock(env.dst, "bundle", holder="first", clock=lambda: NOW):
        second = DestinationLock(env.dst, "bundle", holder="second", wait=0.2, clock=lambda: NOW)
        with pytest.raises(StorageError) as info:
            second.acquire()
    assert info.value.kind == ErrorKind.CONFLICT
    assert str(info.value) == f"destination {env.dst.root_display}/bundle is locked by first since 2026-06-04T12:00:00Z"
    assert not env.exists("bundle/.distributor.lock")


def test_lock_of_another_live_host_is_respected_whatever_its_clock_says(env: Env):
    """The holder's wall clock is ten minutes behind: the times it writes say nothing to others."""
    manifest = env.source()
    with held_lock(env.dst, "bundle", holder="remote", host="some-other-host",
                   clock=lambda: NOW - timedelta(minutes=10)):
        outcome = env.publish(env.request(manifest), lock_wait=0.2)
    assert outcome.error.endswith("is locked by remote since 2026-06-04T11:50:00Z")


def test_publish_waits_for_a_lock_to_be_released(env: Env):
    manifest = env.source()
    holder = DestinationLock(env.dst, "bundle", holder="first", clock=lambda: NOW, renew=False)
    holder.acquire()
    timer = threading.Timer(0.3, holder.release)
    timer.start()
    try:
        outcome = env.publish(env.request(manifest), lock_wait=10)
    finally:
        timer.join()
    assert outcome.status == "completed"
    env.assert_consistent()


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_lock_of_a_dead_process_on_this_host_is_broken_at_once(env: Env):
    manifest = env.source()
    env.put("bundle/.distributor.lock", _lock_bytes("crashed", host=socket.gethostname(), pid=_dead_pid(),
                                                   acquired=NOW, expires=NOW + timedelta(minutes=2)))
    env.put("bundle/deep/.distributor-tmp-00000000000000d1", b"left by the dead writer")
    outcome = env.publish(env.request(manifest), lock_wait=0.5, lock_lease=600)
    assert outcome.status == "completed"
    assert not env.exists("bundle/deep/.distributor-tmp-00000000000000d1")
    env.assert_consistent()


def test_a_lock_that_stopped_changing_is_taken_over_after_its_lease_seen_here(env: Env):
    """Its holder on another host stopped renewing: the lock is taken over once this writer has
    seen it unchanged for the lease the lock states, past the lock wait, and the next generation
    of the lock is this writer's."""
    manifest = env.source()
    env.put("bundle/.distributor.lock", _record("slow", host="some-other-host", lease=0.6))
    started = time.monotonic()
    outcome = env.publish(env.request(manifest), lock_wait=0.1)
    assert time.monotonic() - started >= 0.6
    assert outcome.status == "completed"
    assert not env.exists("bundle/.distributor.lock")
    env.assert_consistent()


def test_a_lock_whose_wall_clock_expiry_passed_is_not_taken_over_before_its_lease(env: Env):
    """An earlier release's lock says it expired (its ``expires_at`` is an hour ago by this host's
    clock): that is a comparison of two hosts' clocks, so it counts for nothing; the lock is taken
    over only once it has stayed unchanged for this writer's lease."""
    manifest = env.source()
    env.put("bundle/.distributor.lock", _lock_bytes("skewed", host="some-other-host", pid=1,
                                                   acquired=NOW - timedelta(hours=2), expires=NOW - timedelta(hours=1)))
    started = time.monotonic()
    outcome = env.publish(env.request(manifest), lock_wait=0.1, lock_lease=0.8)
    assert time.monotonic() - started >= 0.8
    assert outcome.status == "completed"
    env.assert_consistent()


def test_dry_run_ignores_the_lock(env: Env):
    manifest = env.source()
    lock = _lock_bytes("busy", host="elsewhere", pid=1, acquired=NOW, expires=NOW + timedelta(minutes=2))
    env.put("bundle/.distributor.lock", lock)
    outcome = env.publish(env.request(manifest), dry_run=True, lock_wait=0.1)
    assert (outcome.status, outcome.plan.action) == ("planned", Action.PUBLISH_NEW)
    assert env.files() == {"bundle/.distributor.lock": lock}


def test_lost_lock_aborts_before_the_state_write(env: Env, hooked):
    """A writer whose lock was taken over must not write state; its attempt is rolled back."""
    manifest = env.source({"report.md": REPORT, "summary.txt": SUMMARY})
    env.seed_single_owner({"report.md": b"old"})
    before = env.files()
    stolen = _record("thief", host="elsewhere", lease=60, generation=2)

    def hook(op, path, **kw):
        if op == "rename" and kw["dst"] == "bundle/summary.txt":
            env.put("bundle/.distributor.lock", stolen)
            time.sleep(0.3)  # let the renewal notice

    hooked.hook = hook
    outcome = env.publish(env.request(manifest, dst=hooked), lock_lease=0.2)
    assert outcome.status == "failed"
    assert outcome.error == f"destination {env.dst.root_display}/bundle lock was taken over by another writer (thief)"
    assert env.files() == {**before, "bundle/.distributor.lock": stolen}


def test_a_renewal_that_lands_after_the_lease_stops_the_writer(env: Env, hooked):
    """The lock's renewal hangs in the store longer than the lease (a request stalled in the
    network): when it lands at last, another writer may have seen the old record expire, taken
    the lock over and let it go meanwhile, so the writer stops before its state write, says why,
    rolls back and leaves no lock behind."""
    manifest = env.source({"report.md": REPORT, "summary.txt": SUMMARY})
    env.seed_single_owner({"report.md": b"old"})
    before = env.files()
    lock_writes = 0

    def hook(op, path, **kw):
        nonlocal lock_writes
        if op == "write" and path == "bundle/.distributor.lock":
            lock_writes += 1
            if lock_writes == 2:  # the first renewal
                time.sleep(0.6)
        if op == "rename" and kw["dst"] == "bundle/summary.txt":
            time.sleep(0.9)  # still working when the renewal lands

    hooked.hook = hook
    outcome = env.publish(env.request(manifest, dst=hooked), lock_lease=0.2)
    assert outcome.status == "failed"
    assert outcome.error.startswith(
        f"destination {env.dst.root_display}/bundle lock's lease ran out while this writer stalled (one renewal took ")
    assert "another writer may have taken it over meanwhile" in outcome.error
    assert env.files() == before


def test_recovery_never_settles_the_journal_of_a_newer_lock_holder(env: Env):
    """A writer that lost its lock finds its successor's journal (same lock, later generation):
    it stops with the lost lock and leaves the journal and every file to that successor."""
    crash = Crash(env).temps()
    newer = jr.new_journal("bundle", state_bytes=crash.state_bytes, writes=[crash.report, crash.new],
                           deletes=[], holder="successor", now=NOW, grant=("0badcafe", 9))
    env.put("bundle/.distributor.pending.json", newer.to_bytes())
    env.put("bundle/.distributor.lock", _record("writer", host=socket.gethostname(), lease=60, generation=8))
    before = env.files()
    lock = DestinationLock(env.dst, "bundle", holder="writer", wait=0)
    lock.record = LeaseRecord(epoch="0badcafe", generation=8)  # the grant this writer held
    with pytest.raises(StorageError, match="intent journal of a newer lock holder"):
        jr.recover(lock.fenced(), "bundle", grant=lock.grant)
    assert env.files() == before


# --------------------------------------------------------------------------- reserved names


@pytest.mark.parametrize(
    "name",
    [".distributor.json", ".distributor.pending.json", ".distributor.lock", ".distributor-tmp-0123456789abcdef",
     ".distributor-bak-0123456789abcdef"],
)
def test_reserved_names_are_refused_in_source_bundles(env: Env, tmp_path, name):
    (tmp_path / "f").write_bytes(b"x")
    with pytest.raises(BundlePathError) as info:
        write_bundle(tmp_path / "out", id="reports.example", files=[BundleFile(tmp_path / "f", f"sub/{name}")])
    assert str(info.value) == f'files[0].path: path "sub/{name}" must not use reserved name "{name}"'
    bad = manifest_for({"report.md": REPORT, f"sub/{name}": b"x"})
    with pytest.raises(ManifestError) as info:
        validate_manifest(bad)
    assert str(info.value) == f'manifest files[1].path: path "sub/{name}" must not use reserved name "{name}"'
    with pytest.raises(ManifestError):
        validate_source_bundle(env.src, "bundle", bad)


def test_engine_refuses_a_manifest_with_a_reserved_path_before_writing(env: Env):
    env.source({"report.md": REPORT})
    (env.src_root / "bundle" / "sub").mkdir()
    (env.src_root / "bundle" / "sub" / ".distributor.json").write_bytes(b"x")
    bad = manifest_for({"report.md": REPORT, "sub/.distributor.json": b"x"})
    outcome = env.publish(env.request(bad))
    assert outcome.status == "failed"
    assert 'must not use reserved name ".distributor.json"' in outcome.error
    assert env.files() == {}


def test_reserved_files_are_invisible_to_unmanaged_checks(env: Env):
    manifest = env.source()
    env.put("bundle/.distributor-bak-0123456789abcdef", b"b")
    env.put("bundle/.distributor.pending.json.unrelated", b"not reserved")
    plan = env.plan(manifest)
    assert plan.action == Action.FAIL_UNMANAGED  # the non-reserved file counts
    os.unlink(env.dst_root / "bundle" / ".distributor.pending.json.unrelated")
    assert env.plan(manifest).action == Action.PUBLISH_NEW


def test_crash_rollback_keeps_a_file_at_a_path_whose_temporary_was_never_renamed(env: Env):
    """The staged temporary is still there, so the writer never placed the final path: whatever
    is there now is someone else's and stays."""
    crash = Crash(env).temps()
    env.put(crash.new.path, b"raced in by someone else")
    jr.recover(env.dst, "bundle")
    assert env.read(crash.new.path) == b"raced in by someone else"
    assert not env.exists(crash.new.temp)


def test_crash_rollback_never_deletes_bytes_it_did_not_write(env: Env):
    crash = Crash(env)  # died right after writing its journal
    env.put(crash.new.path, b"raced in by someone else")
    jr.recover(env.dst, "bundle")
    assert env.read(crash.new.path) == b"raced in by someone else"

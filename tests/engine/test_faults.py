"""Fault injection over the whole publish path (resolutions A1–A3; README "state never lies").

For each kind of write action a clean run through ``FaultInjectingStorage`` counts the storage
calls of every kind; then, for every n, a fresh destination is published with the n-th call of
one kind failing. Afterwards the destination must hold either exactly the previous publication
(rolled back) or the new one (rolled forward; if the fault hit cleanup after the state commit,
the leftovers are exactly what the next run settles), ``.distributor.json`` must describe exactly
the files present, nothing unmanaged may have appeared, and a retry without faults completes.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from distributor_core import jsonfmt
from distributor_core import paths as lp
from distributor_core.execute.publish import PublishOutcome
from distributor_core.plan.model import Action
from distributor_core.state import parse_state_document
from distributor_core.storage.capabilities import Feature
from distributor_core.storage.faults import OP_KINDS, Fault, FaultInjectingStorage
from distributor_core.storage.local import LocalStorage

from .conftest import CREATED, HOUR, LATER, REPORT, SUMMARY, Env, SharedOwner, digest, manifest_for, new_env

BUNDLE = "bundle"
STATE = lp.state_path(BUNDLE)
LOCK = lp.lock_path(BUNDLE)
JOURNAL = lp.journal_path(BUNDLE)
HOLDER = "fault test"


def _older(files: dict[str, bytes], **kwargs):
    return manifest_for(files, created=CREATED - HOUR, **kwargs)


# --------------------------------------------------------------------------- scenarios


def publish_new(env: Env) -> dict[str, Any]:
    env.source({"report.md": REPORT, "sub/summary.txt": SUMMARY})
    return {"publish_html": True, "markdown_enabled": True}


def replace(env: Env) -> dict[str, Any]:
    env.seed_single_owner({"report.md": b"old", "gone/old.txt": b"g", "summary.txt": b"old summary"})
    env.source({"report.md": REPORT, "summary.txt": SUMMARY, "new/new.md": b"# New\n"})
    return {}


def merge(env: Env) -> dict[str, Any]:
    env.seed_single_owner({"report.md": b"old", "kept.txt": b"k"}, mode="merge")
    env.put("bundle/hand-made.txt", b"unmanaged, never touched")
    env.source({"report.md": REPORT, "new.md": b"# New\n"})
    return {"reconciliation_mode": "merge"}


def _shared(env: Env, mode: str) -> dict[str, Any]:
    env.seed_shared_root([
        SharedOwner("other", "archive", _older({"other.md": b"o"}, id="other.id"), {"other.md": b"o"}),
        SharedOwner("reports", "archive", _older({"report.md": b"old", "old.md": b"x"}),
                    {"report.md": b"old", "old.md": b"x"}, mode=mode),
    ])
    env.source({"report.md": REPORT, "new.md": b"# New\n"})
    return {"state_mode": "shared_root", "reconciliation_mode": mode}


def shared_replace(env: Env) -> dict[str, Any]:
    return _shared(env, "replace")


def shared_merge(env: Env) -> dict[str, Any]:
    return _shared(env, "merge")


def takeover_single(env: Env) -> dict[str, Any]:
    outputs = {"report.md": b"old a", "old.md": b"o"}
    env.seed_single_owner(outputs, manifest=_older(outputs, id="a"), destination="latest-old")
    env.source({"report.md": REPORT, "new.md": b"# New\n"}, id="b")
    return {"destination": "latest"}


def takeover_shared(env: Env) -> dict[str, Any]:
    env.seed_shared_root([
        SharedOwner("reports", "html", _older({"report.html": b"<p>old</p>", "keep.html": b"k"}, id="reports.html"),
                    {"report.html": b"<p>old</p>", "keep.html": b"k"}),
        SharedOwner("reports", "archive", _older({"report.md": b"old"}), {"report.md": b"old"}),
    ])
    env.source({"report.md": REPORT})
    return {"state_mode": "shared_root", "publish_html": True, "markdown_enabled": True}


def force(env: Env) -> dict[str, Any]:
    env.put("bundle/report.md", b"hand-made report")
    env.put("bundle/junk/x.txt", b"junk")
    env.source({"report.md": REPORT, "summary.txt": SUMMARY})
    return {"force": True}


def migrate_merge(env: Env) -> dict[str, Any]:
    env.seed_single_owner({"report.md": b"old", "kept.txt": b"k"})
    env.source({"report.md": REPORT})
    return {"state_mode": "shared_root", "reconciliation_mode": "merge"}


SCENARIOS: dict[str, tuple[Callable[[Env], dict[str, Any]], str]] = {
    "publish_new": (publish_new, Action.PUBLISH_NEW),
    "replace": (replace, Action.REPLACE_OLDER),
    "merge": (merge, Action.REPLACE_OLDER),
    "shared_replace": (shared_replace, Action.REPLACE_OLDER),
    "shared_merge": (shared_merge, Action.REPLACE_OLDER),
    "takeover_single": (takeover_single, Action.REPLACE_TAKEOVER),
    "takeover_shared": (takeover_shared, Action.REPLACE_TAKEOVER),
    "force": (force, Action.FORCE_REPLACE),
    "migrate_merge": (migrate_merge, Action.REPLACE_OLDER),
}


@dataclass
class Run:
    env: Env
    storage: FaultInjectingStorage
    request_kwargs: dict[str, Any]
    previous: dict[str, bytes]

    def publish(self, *, now=None, storage=None, lock_wait: float = 0.3) -> PublishOutcome:
        request = self.env.request(self.env.src_manifest, dst=storage or self.storage, **self.request_kwargs)
        kwargs: dict[str, Any] = {"holder": HOLDER, "lock_wait": lock_wait}
        if now is not None:
            kwargs["now"] = now
        return self.env.publish(request, **kwargs)


_counter = itertools.count()


class ObjectStoreLocal(LocalStorage):
    """Local storage driven through the executor's object-store branch (no ``atomic_rename``:
    outputs are written straight to their final names, as on S3)."""

    capabilities = LocalStorage.capabilities.without(Feature.ATOMIC_RENAME, Feature.IN_PLACE_WRITES)


def _prepare(tmp_path: Path, scenario: str, faults=(), *, object_store: bool = False) -> Run:
    env = new_env(tmp_path / f"run{next(_counter)}")
    setup, _ = SCENARIOS[scenario]
    kwargs = setup(env)
    from distributor_core.bundle import load_manifest

    env.src_manifest = load_manifest(env.src_root / BUNDLE)  # type: ignore[attr-defined]
    inner = ObjectStoreLocal(env.dst_root) if object_store else env.dst
    return Run(env, FaultInjectingStorage(inner, faults), kwargs, env.files())


@dataclass
class Expected:
    counts: dict[str, int]
    new: dict[str, bytes]
    calls: list[tuple[str, str]]


_probes: dict[tuple[str, bool], Expected] = {}


def _probe(tmp_path: Path, scenario: str, *, object_store: bool = False) -> Expected:
    key = (scenario, object_store)
    if key not in _probes:
        run = _prepare(tmp_path, scenario, object_store=object_store)
        outcome = run.publish()
        assert outcome.status == "completed", outcome.error
        assert outcome.plan.action == SCENARIOS[scenario][1]
        assert run.storage.injected == []
        run.env.assert_consistent(unmanaged=_unmanaged(run.previous, run.env.files()))
        _probes[key] = Expected(run.storage.counts, run.env.files(), list(run.storage.calls))
    return _probes[key]


def _unmanaged(previous: dict[str, bytes], files: dict[str, bytes]) -> set[str]:
    """Paths (bundle-relative) present that the state does not record: only pre-existing
    unmanaged files may be among them."""
    doc = parse_state_document(files[STATE])
    recorded = {lp.join(BUNDLE, o.path) for o in doc.outputs}
    return {
        lp.relative_to(p, BUNDLE)
        for p in files
        if p not in recorded and not lp.is_reserved_path(lp.relative_to(p, BUNDLE)) and p in previous
        and previous[p] == files[p]
    }


def _working(files: dict[str, bytes]) -> set[str]:
    return {p for p in files if lp.basename(p) == lp.JOURNAL_NAME or lp.is_temp_or_backup_name(lp.basename(p))}


def _outputs(state_bytes: bytes) -> list[tuple[str, str, int]]:
    return [(o.path, o.sha256, o.size) for o in parse_state_document(state_bytes).outputs]


def check_after_fault(run: Run, outcome: PublishOutcome, expected: Expected, label: str) -> str:
    """The invariants after one faulted run; returns ``back`` or ``forward``."""
    env = run.env
    after = env.files()
    lock = after.pop(LOCK, None)
    if lock is not None:
        # only a failed lock release can leave the lock behind, and it is ours
        assert jsonfmt.loads_object(lock)["holder"] == HOLDER, label
    # the state parses and every recorded output holds its recorded bytes
    doc = parse_state_document(after[STATE]) if STATE in after else None
    if doc is not None:
        for record in doc.outputs:
            path = lp.join(BUNDLE, record.path)
            assert path in after, f"{label}: state records missing {path}"
            assert digest(after[path]) == record.sha256, f"{label}: {path} does not hold its recorded bytes"
    if after.get(STATE) == run.previous.get(STATE):
        assert outcome.status == "failed", label
        assert after == run.previous, f"{label}: not rolled back: {sorted(set(after) ^ set(run.previous))}"
        return "back"
    assert after[STATE] == expected.new[STATE], f"{label}: state is neither the previous nor the new one"
    assert outcome.status == "completed", (label, outcome.error)
    working = _working(after)
    settled = {p: d for p, d in after.items() if p not in working}
    if not working:
        assert after == expected.new, label
        return "forward"
    # cleanup after the commit was interrupted: the journal is still there to finish it, and the
    # only extra files are backups and outputs the journal still has to delete
    assert JOURNAL in after, f"{label}: working files without a journal: {sorted(working)}"
    journal = jsonfmt.loads_object(after[JOURNAL])
    pending = set(journal["deletes"]) | {w["backup"] for w in journal["writes"] if "backup" in w}
    assert working - {JOURNAL} <= pending, label
    extra = set(settled) - set(expected.new)
    assert extra <= pending, f"{label}: unexpected files {sorted(extra)}"
    assert {p: d for p, d in settled.items() if p not in extra} == expected.new, label
    assert outcome.warnings, label
    return "forward"


def check_retry(run: Run, expected: Expected, direction: str, label: str) -> None:
    env = run.env
    retry = run.publish(now=LATER, storage=env.dst, lock_wait=1.0)
    assert retry.status in ("completed", "skipped"), (label, retry.error)
    if direction == "forward":
        assert (retry.status, retry.plan.action) == ("skipped", Action.SKIP_SAME), label
    files = env.files()
    assert files.keys() == expected.new.keys(), (label, sorted(set(files) ^ set(expected.new)))
    assert {p: d for p, d in files.items() if p != STATE} == {p: d for p, d in expected.new.items() if p != STATE}
    assert _outputs(files[STATE]) == _outputs(expected.new[STATE]), label
    env.assert_consistent(unmanaged=_unmanaged(run.previous, files))


# --------------------------------------------------------------------------- the sweep


@pytest.mark.parametrize("kind", [k for k in OP_KINDS])
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_every_nth_call_failing(tmp_path: Path, scenario: str, kind: str):
    expected = _probe(tmp_path, scenario)
    total = expected.counts[kind]
    if kind in ("write", "rename", "stat", "read", "list"):
        assert total > 0
    directions = set()
    for n in range(1, total + 1):
        label = f"{scenario}: {kind} #{n}"
        run = _prepare(tmp_path, scenario, [Fault(kind, nth=n)])
        outcome = run.publish()
        assert len(run.storage.injected) == 1, label
        direction = check_after_fault(run, outcome, expected, label)
        directions.add(direction)
        check_retry(run, expected, direction, label)
    if kind in ("write", "rename"):
        assert "back" in directions  # faults before the commit were exercised


@pytest.mark.parametrize("kind", ["write", "rename", "delete", "stat"])
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_every_nth_call_failing_on_an_object_store(tmp_path: Path, scenario: str, kind: str):
    expected = _probe(tmp_path, scenario, object_store=True)
    assert not any(lp.basename(p).startswith(lp.TEMP_PREFIX) for k, p in expected.calls if k == "write")
    for n in range(1, expected.counts[kind] + 1):
        label = f"{scenario} (object store): {kind} #{n}"
        run = _prepare(tmp_path, scenario, [Fault(kind, nth=n)], object_store=True)
        outcome = run.publish()
        direction = check_after_fault(run, outcome, expected, label)
        check_retry(run, expected, direction, label)


def test_failed_merge_on_an_object_store_leaves_no_new_output(tmp_path: Path):
    env = new_env(tmp_path / "merge")
    env.seed_single_owner({"report.md": b"old"})
    manifest = env.source({"new.md": b"new", "report.md": REPORT})
    before = env.files()
    storage = FaultInjectingStorage(ObjectStoreLocal(env.dst_root), [Fault("write", path="bundle/report.md")])
    outcome = env.publish(env.request(manifest, dst=storage, reconciliation_mode="merge"))
    assert outcome.status == "failed"
    assert env.files() == before


def _not_journal(path: str) -> bool:
    return lp.basename(path) != lp.JOURNAL_NAME


@pytest.mark.parametrize("kind", ["write", "rename", "delete"])
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_every_nth_call_taking_effect_then_failing(tmp_path: Path, scenario: str, kind: str):
    """A lost acknowledgement: the call happens, then reports an error (SFTP and S3 can do this).
    The journal write is covered separately (test_lost_journal_write_ack_leaves_no_journal)."""
    expected = _probe(tmp_path, scenario)
    total = sum(1 for k, path in expected.calls if k == kind and _not_journal(path))
    for n in range(1, total + 1):
        label = f"{scenario}: {kind} #{n} (after)"
        run = _prepare(tmp_path, scenario, [Fault(kind, nth=n, when="after", path=_not_journal)])
        outcome = run.publish()
        # a call that fails by itself (deleting a temporary that was already renamed) never
        # reaches the "after" injection
        assert len(run.storage.injected) <= 1, label
        direction = check_after_fault(run, outcome, expected, label)
        check_retry(run, expected, direction, label)


def test_lost_journal_write_ack_leaves_no_journal(tmp_path: Path):
    expected = _probe(tmp_path, "replace")
    run = _prepare(tmp_path, "replace", [Fault("write", path=JOURNAL, when="after")])
    outcome = run.publish()
    assert run.storage.injected == [("write", JOURNAL)]
    assert outcome.status == "failed"
    check_after_fault(run, outcome, expected, "journal write (after)")


def test_lost_rename_ack_leaves_no_unrecorded_file_minimal(tmp_path: Path):
    """The smallest case of a lost acknowledgement: publish_new of one file whose rename into
    place lands but reports an error. The file must not stay behind unrecorded (it would make
    the destination unmanaged and block every later run)."""
    env = new_env(tmp_path / "minimal")
    manifest = env.source({"report.md": REPORT})
    storage = FaultInjectingStorage(env.dst, [Fault("rename", path="bundle/report.md", when="after")])
    outcome = env.publish(env.request(manifest, dst=storage))
    assert outcome.status == "failed"
    assert storage.injected == [("rename", "bundle/report.md")]
    assert env.files() == {}
    retry = env.publish(env.request(manifest))
    assert (retry.status, retry.plan.action) == ("completed", Action.PUBLISH_NEW)


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_every_write_failing_half_way(tmp_path: Path, scenario: str):
    expected = _probe(tmp_path, scenario)
    for n in range(1, expected.counts["write"] + 1):
        label = f"{scenario}: write #{n} after 3 bytes"
        run = _prepare(tmp_path, scenario, [Fault("write", nth=n, after_bytes=3)])
        outcome = run.publish()
        direction = check_after_fault(run, outcome, expected, label)
        check_retry(run, expected, direction, label)


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_every_source_read_failing(tmp_path: Path, scenario: str):
    """Failures reading the source (planning reads Markdown, execution streams copies)."""
    expected = _probe(tmp_path, scenario)
    clean = _prepare(tmp_path, scenario)
    source = FaultInjectingStorage(clean.env.src)
    request = clean.env.request(clean.env.src_manifest, source=source, dst=clean.storage, **clean.request_kwargs)
    assert clean.env.publish(request).status == "completed"
    reads = source.count("read")
    assert reads > 0
    for n in range(1, reads + 1):
        for after_bytes in (None, 2):
            label = f"{scenario}: source read #{n} after {after_bytes}"
            run = _prepare(tmp_path, scenario)
            faulty = FaultInjectingStorage(run.env.src, [Fault("read", nth=n, after_bytes=after_bytes)])
            request = run.env.request(run.env.src_manifest, source=faulty, dst=run.storage, **run.request_kwargs)
            outcome = run.env.publish(request, holder=HOLDER, lock_wait=0.3)
            if faulty.injected:
                assert check_after_fault(run, outcome, expected, label) == "back", label
            check_retry(run, expected, "back", label)


# --------------------------------------------------------------------------- interrupted recovery


def _recovery_cases():
    from .test_write_protocol import ROLL_BACK, ROLL_FORWARD

    for step in [*ROLL_BACK, *ROLL_FORWARD]:
        for kind in ("write", "rename", "delete", "stat", "list", "read"):
            yield pytest.param(step, kind, id=f"{step}-{kind}")


@pytest.mark.parametrize(("step", "kind"), list(_recovery_cases()))
def test_interrupted_recovery_is_finished_by_the_next_one(tmp_path: Path, step: str, kind: str):
    """Recovery itself may fail at any call; running it again still reaches the same end."""
    from distributor_core.execute import journal as jr

    from .test_write_protocol import ROLL_BACK, ROLL_FORWARD, Crash

    steps = ROLL_BACK | ROLL_FORWARD
    probe_env = new_env(tmp_path / "probe")
    steps[step](Crash(probe_env))
    probe = FaultInjectingStorage(probe_env.dst)
    jr.recover(probe, BUNDLE)
    expected = probe_env.files()
    for n in range(1, probe.count(kind) + 1):
        label = f"{step}: {kind} #{n}"
        env = new_env(tmp_path / f"rec{next(_counter)}")
        steps[step](Crash(env))
        crashed_state = env.read(STATE)
        storage = FaultInjectingStorage(env.dst, [Fault(kind, nth=n)])
        try:
            jr.recover(storage, BUNDLE)
        except Exception:
            pass
        assert storage.injected, label
        # recovery never writes state: it is still the crashed writer's old or committed one ...
        assert env.read(STATE) == crashed_state, label
        # ... and the next recovery finishes the job
        jr.recover(env.dst, BUNDLE)
        assert env.files() == expected, label
        env.assert_consistent()


def test_object_store_rollback_never_deletes_a_foreign_object(tmp_path: Path):
    env = new_env(tmp_path / "foreign")
    env.seed_single_owner({"report.md": b"old"})
    manifest = env.source({"report.md": REPORT, "new.md": b"new"})
    storage = FaultInjectingStorage(ObjectStoreLocal(env.dst_root))
    plan = env.plan(manifest, dst=storage, reconciliation_mode="merge")
    assert plan.action == Action.REPLACE_OLDER
    env.put("bundle/new.md", b"foreign")
    storage.fail("write", path="bundle/new.md", kind="unavailable")
    from distributor_core.execute.executor import execute_plan
    from distributor_core.storage.errors import StorageError

    with pytest.raises(StorageError):
        execute_plan(plan, source=env.src, destination=storage, now=CREATED, version="test")
    assert env.read("bundle/new.md") == b"foreign"

"""Real crashes: a forked writer process dies (``os._exit``) right before or right after its n-th
mutating storage call, leaving its lock, journal, temporaries and backups exactly as a killed
process would. The next run must break the dead writer's lock, recover from its journal and end
with the new publication; in between, the state never describes a file that is not there or
about to be restored (resolutions A1–A3)."""

from __future__ import annotations

import multiprocessing
import os
from pathlib import Path

import pytest

from distributor_core import jsonfmt
from distributor_core import paths as lp
from distributor_core.execute import journal as jr
from distributor_core.state import parse_state_document
from distributor_core.storage.faults import Fault, FaultInjectingStorage

from .conftest import Env, digest, new_env
from .test_faults import BUNDLE, JOURNAL, LOCK, SCENARIOS, STATE

CRASH_CODE = 17
MUTATING = ("write", "rename", "delete")
CRASH_SCENARIOS = ["publish_new", "replace", "merge", "shared_replace", "takeover_shared", "force"]


def _crash(op: str, path: str) -> BaseException:
    os._exit(CRASH_CODE)


def _setup(base: Path, scenario: str) -> tuple[Env, dict]:
    env = new_env(base)
    kwargs = SCENARIOS[scenario][0](env)
    from distributor_core.bundle import load_manifest

    env.src_manifest = load_manifest(env.src_root / BUNDLE)  # type: ignore[attr-defined]
    return env, kwargs


def _run_child(env: Env, kwargs: dict, faults: list[Fault]) -> int:
    """Publish in a forked process through a fault wrapper; return its exit code."""

    def child() -> None:
        try:
            storage = FaultInjectingStorage(env.dst, faults)
            outcome = env.publish(env.request(env.src_manifest, dst=storage, **kwargs), holder="doomed writer")
            os._exit(0 if outcome.status == "completed" else 1)
        except BaseException:
            os._exit(2)

    process = multiprocessing.get_context("fork").Process(target=child)
    process.start()
    process.join(30)
    assert process.exitcode is not None
    return process.exitcode


def _calls(tmp_path: Path, scenario: str) -> tuple[list[tuple[str, str]], dict[str, bytes]]:
    env, kwargs = _setup(tmp_path / "probe", scenario)
    storage = FaultInjectingStorage(env.dst)
    outcome = env.publish(env.request(env.src_manifest, dst=storage, **kwargs))
    assert outcome.status == "completed", outcome.error
    return [(k, p) for k, p in storage.calls if k in MUTATING], env.files()


def _check_crashed(env: Env, previous: dict[str, bytes], new: dict[str, bytes], label: str) -> None:
    files = env.files()
    state = files.get(STATE)
    assert state in (previous.get(STATE), new[STATE]), f"{label}: state is neither the previous nor the new one"
    if state is None:
        return
    journal = jsonfmt.loads_object(files[JOURNAL]) if JOURNAL in files else None
    restorable = {w["path"]: w.get("backup") for w in journal["writes"]} if journal else {}
    for record in parse_state_document(state).outputs:
        path = lp.join(BUNDLE, record.path)
        if path in files and digest(files[path]) == record.sha256:
            continue
        # the only acceptable gap: an overwritten file moved to its backup, which recovery restores
        backup = restorable.get(path)
        assert backup and digest(files.get(backup, b"")) == record.sha256, (
            f"{label}: state records {path} but it is neither there nor restorable"
        )


@pytest.mark.parametrize("when", ["before", "after"])
@pytest.mark.parametrize("scenario", CRASH_SCENARIOS)
def test_crash_at_every_mutating_call(tmp_path: Path, scenario: str, when: str):
    calls, new = _calls(tmp_path, scenario)
    counts: dict[str, int] = {}
    for index, (kind, path) in enumerate(calls):
        counts[kind] = counts.get(kind, 0) + 1
        label = f"{scenario}: crash {when} {kind} #{counts[kind]} ({path})"
        env, kwargs = _setup(tmp_path / f"crash{index}", scenario)
        previous = env.files()
        code = _run_child(env, kwargs, [Fault(kind, nth=counts[kind], when=when, error=_crash)])
        if code != CRASH_CODE:
            # the call was reached only by a path the child never took (no crash): it must have
            # completed normally
            assert code == 0, label
        _check_crashed(env, previous, new, label)
        outcome = env.publish(env.request(env.src_manifest, **kwargs), lock_wait=2.0)
        assert outcome.status in ("completed", "skipped"), (label, outcome.error)
        assert env.files() == new, (label, sorted(set(env.files()) ^ set(new)))
        assert not env.exists(LOCK)


def test_dead_writers_lock_is_broken_and_its_journal_recovered(tmp_path: Path):
    env, kwargs = _setup(tmp_path / "one", "replace")
    previous = env.files()
    code = _run_child(env, kwargs, [Fault("rename", nth=2, error=_crash)])
    assert code == CRASH_CODE
    lock = jsonfmt.loads_object(env.read(LOCK))
    assert lock["holder"] == "doomed writer" and lock["pid"] != os.getpid()
    assert env.exists(JOURNAL)
    outcome = env.publish(env.request(env.src_manifest, **kwargs), lock_wait=2.0)
    assert outcome.status == "completed"
    assert outcome.recovery is not None and outcome.recovery.direction == "back"
    assert outcome.recovery.holder == "doomed writer"
    assert env.read("bundle/report.md") != previous["bundle/report.md"]
    env.assert_consistent()


def test_crash_recovery_never_deletes_bytes_the_dead_writer_did_not_write(tmp_path: Path):
    env, kwargs = _setup(tmp_path / "raced", "merge")
    # die right after the journal is written, before any output is staged
    code = _run_child(env, kwargs, [Fault("write", path=JOURNAL, when="after", error=_crash)])
    assert code == CRASH_CODE
    env.put("bundle/new.md", b"put there by someone else")
    jr.recover(env.dst, BUNDLE)
    assert env.read("bundle/new.md") == b"put there by someone else"

"""Storage faults at every call of ``reconcile-state`` (apply) and ``prune --apply`` (issue 9;
resolutions A1, C3; operations "State repair", "Pruning").

``tests/repair`` crashes these operations (a ``BaseException`` at every step); here the n-th call
of each kind (write, rename, delete, stat, list) *fails* with a storage error, before it takes
effect or, for write/rename/delete, after it did (a lost acknowledgement), on a local root and on
an SFTP root (``FaultInjectingStorage`` around ``SFTPStorage``). After each failure:

- the operation fails with its documented error type (``StorageError``, ``PruneError``) and a
  one-line message, or completes when the fault hit only clean-up;
- state parses and is the state before, the state a clean run writes, or (prune, after a failed
  delete) one that records no file that is gone; the other owner's file and the unmanaged file
  are untouched; a pruned output is gone only if state no longer records it;
- nothing is left but what the cleanup rules allow: our own lock when its release failed, the
  journal when the state write after a failed delete failed too (the next writer finishes it),
  a temporary whose removal failed;
- a retry without faults (a later process: the dead writer's lock is broken) ends exactly where a
  clean run ends.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from distributor_core import paths as lp
from distributor_core.app.prune import PruneError, prune
from distributor_core.app.reconcile import reconcile_state
from distributor_core.storage.errors import StorageError
from distributor_core.storage.faults import Fault, FaultInjectingStorage
from distributor_core.storage.local import LocalStorage
from tests.repair.conftest import ARCHIVE, HTML, NOW, Dest, ago, bury_lock, load, shared_root_state

from .conftest import count, is_working_file

pytestmark = pytest.mark.slow

KINDS = ("write", "rename", "delete", "stat", "list")
OTHER = "html/keep.html"
UNMANAGED = "unmanaged.txt"


def _seed_prune(dest: Dest) -> None:
    dest.put_state(shared_root_state([
        ("reports/a.txt", ARCHIVE, ago(96)),
        ("reports/b.txt", ARCHIVE, ago(72)),
        (OTHER, HTML, ago(500)),
        ("reports/deep/c.txt", ARCHIVE, ago(48)),
        ("reports/d.txt", ARCHIVE, ago(24)),
    ]))
    dest.write(OTHER, b"<p>other owner</p>")
    dest.write(UNMANAGED, b"keep")


def _seed_reconcile(dest: Dest) -> None:
    dest.put_state(shared_root_state([
        ("reports/a.txt", ARCHIVE, ago(9)),
        ("reports/gone.txt", ARCHIVE, ago(8)),
        ("reports/sub/also-gone.txt", ARCHIVE, ago(7)),
        (OTHER, HTML, ago(6)),
    ]))
    dest.path("reports/gone.txt").unlink()
    dest.path("reports/sub/also-gone.txt").unlink()
    dest.write(OTHER, b"<p>other owner</p>")
    dest.write(UNMANAGED, b"keep")


@dataclass
class Backend:
    name: str
    #: a destination root on this machine, empty
    root: Path
    storage: Callable[[], Any]
    adopt: Callable[[Path], None]


@pytest.fixture(
    params=["local", pytest.param("sftp", marks=pytest.mark.sftp), pytest.param("sftp-openssh", marks=pytest.mark.sftp)]
)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    if request.param == "local":
        root = tmp_path / "root"
        root.mkdir()
        yield Backend("local", root, lambda: LocalStorage(root), lambda path: None)
        return
    from tests.peers.sshd import make_sftp_storage

    server = request.getfixturevalue("sshd_server")
    root = server.make_sftp_root()
    transport = "openssh" if request.param == "sftp-openssh" else "paramiko"
    connection = make_sftp_storage(server, root, transport=transport)  # one connection for every case
    try:
        yield Backend(request.param, root, lambda: connection, server.chown_to_user)
    finally:
        connection.close()


def _reset(backend: Backend, seed: Callable[[Dest], None]) -> Dest:
    for child in backend.root.iterdir():
        if child.is_dir():
            shutil.rmtree(child)
        else:
            child.unlink()
    dest = Dest(backend.root)
    seed(dest)
    backend.adopt(backend.root)
    return dest


def _snapshot(dest: Dest) -> dict[str, bytes]:
    return {path: dest.read(path) for path in dest.files()}


def _check_after_failure(dest: Dest, before: dict[str, bytes], expected_state: bytes, label: str) -> None:
    files = _snapshot(dest)
    assert files[OTHER] == before[OTHER] and files[UNMANAGED] == before[UNMANAGED], label
    recorded = set(dest.paths())  # parses
    if dest.state_bytes() not in (before[lp.STATE_FILE_NAME], expected_state):
        # an intermediate state (prune restoring the records of what it did not delete) never
        # records a file that is gone
        for path in recorded:
            assert path in files, f"{label}: state records {path}, which is gone"
    for path in before:
        if path not in files and not is_working_file(path) and lp.basename(path) != lp.STATE_FILE_NAME:
            assert path not in recorded, f"{label}: {path} was deleted but is still recorded"
    for path in files:
        if not is_working_file(path):
            continue
        name = lp.basename(path)
        if name == lp.LOCK_NAME:
            continue  # only a failed release leaves it; the retry breaks it (checked there)
        # a journal stays only when the state write after a failed delete failed too; a
        # temporary only when removing it failed
        assert name == lp.JOURNAL_NAME or name.startswith(lp.TEMP_PREFIX), f"{label}: {path} left behind"


def _sweep(
    backend: Backend, seed: Callable[[Dest], None], run: Callable[[Any], Any], errors: tuple[type, ...], label: str
) -> int:
    dest = _reset(backend, seed)
    probe = FaultInjectingStorage(backend.storage())
    run(probe)
    expected = _snapshot(dest)
    expected_state = dest.state_bytes()
    cases = 0
    for kind in KINDS:
        total = probe.count(kind)  # type: ignore[arg-type]
        if kind in ("write", "stat", "list"):
            assert total > 0, (label, kind)
        for n in range(1, total + 1):
            for when in ("before", "after") if kind in ("write", "rename", "delete") else ("before",):
                case = f"{label} [{backend.name}]: {kind} #{n} {when}"
                dest = _reset(backend, seed)
                before = _snapshot(dest)
                storage = FaultInjectingStorage(backend.storage(), [Fault(kind, nth=n, when=when)])  # type: ignore[arg-type]
                try:
                    run(storage)
                except errors as exc:
                    message = str(exc)
                    assert message and "\n" not in message and "Traceback" not in message, (case, message)
                cases += 1
                _check_after_failure(dest, before, expected_state, case)
                bury_lock(dest)  # the failed process is gone; a later one retries
                run(FaultInjectingStorage(backend.storage()))
                assert _snapshot(dest) == expected, (case, sorted(set(_snapshot(dest)) ^ set(expected)))
                assert dest.state_bytes() == expected_state, case
    return cases


def test_every_fault_in_a_prune_apply(backend: Backend, tmp_path: Path) -> None:
    config = load(tmp_path, Dest(backend.root), prune={"enabled": True, "keep_latest": 1}, shared_root=True)

    def run(storage: Any) -> Any:
        return prune(config, pipeline_id="reports", destination_id="archive", dry_run=False, now=NOW,
                     storage=storage, lock_wait=0.2)

    cases = _sweep(backend, _seed_prune, run, (StorageError, PruneError), "prune")
    count(f"fault indexes, prune apply ({backend.name})", cases)


def test_every_fault_in_a_reconcile_state_apply(backend: Backend, tmp_path: Path) -> None:
    config = load(tmp_path, Dest(backend.root), shared_root=True)

    def run(storage: Any) -> Any:
        return reconcile_state(config, pipeline_id="reports", destination_id="archive", now=NOW, storage=storage,
                               lock_wait=0.2)

    cases = _sweep(backend, _seed_reconcile, run, (StorageError,), "reconcile-state")
    count(f"fault indexes, reconcile-state apply ({backend.name})", cases)

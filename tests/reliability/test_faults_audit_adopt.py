"""Storage faults at every call of ``reconcile-state --audit`` and ``--adopt`` (apply), and of
``audit`` (issue 18 item 4; the sweep of ``test_faults_repair.py``), on a local root and on an
SFTP root served by OpenSSH.

The n-th call of each kind (write, rename, delete, stat, list, read) fails with a storage error,
before it takes effect or (write, rename, delete) after it did. After each failure:

- the operation fails with a one-line ``StorageError`` message, or completes when the fault hit
  only clean-up;
- no file but distributor's own working files changed (a repair or adoption writes nothing but
  state), and state is the state before or the state a clean run writes;
- only our lock (a failed release) or a temporary whose removal failed is left;
- a retry without faults ends exactly where a clean run ends.

An audit never writes: every fault leaves the destination as it was.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from distributor_core import paths as lp
from distributor_core.app.audit import audit_destination
from distributor_core.app.reconcile import reconcile_state
from distributor_core.storage.errors import StorageError
from distributor_core.storage.faults import Fault, FaultInjectingStorage
from tests.reliability.test_faults_repair import KINDS, Backend, _reset, _snapshot, backend  # noqa: F401
from tests.repair.conftest import (
    NOW,
    Dest,
    adopt_config,
    bury_lock,
    published_state,
    seed_damaged,
    seed_restored_copy,
    seed_stateless_copy,
)

from .conftest import count, is_working_file

pytestmark = pytest.mark.slow

UNMANAGED = "unmanaged.txt"
#: reads matter here: these repairs read every output they check
SWEEP_KINDS = (*KINDS, "read")


def _plain(files: dict[str, bytes]) -> dict[str, bytes]:
    return {path: data for path, data in files.items() if not is_working_file(path) and path != lp.STATE_FILE_NAME}


def _sweep(target: Backend, seed: Callable[[Dest], None], run: Callable[[Any], Any], label: str) -> int:
    def seeded(dest: Dest) -> None:
        seed(dest)
        dest.write(UNMANAGED, b"keep")

    dest = _reset(target, seeded)
    before = _snapshot(dest)
    probe = FaultInjectingStorage(target.storage())
    run(probe)
    expected = _snapshot(dest)
    cases = 0
    for kind in SWEEP_KINDS:
        total = probe.count(kind)  # type: ignore[arg-type]
        for n in range(1, total + 1):
            for when in ("before", "after") if kind in ("write", "rename", "delete") else ("before",):
                case = f"{label} [{target.name}]: {kind} #{n} {when}"
                dest = _reset(target, seeded)
                storage = FaultInjectingStorage(target.storage(), [Fault(kind, nth=n, when=when)])  # type: ignore[arg-type]
                try:
                    run(storage)
                except StorageError as exc:
                    message = str(exc)
                    assert message and "\n" not in message and "Traceback" not in message, (case, message)
                cases += 1
                after = _snapshot(dest)
                assert _plain(after) == _plain(before), case  # outputs and unmanaged files untouched
                assert after.get(lp.STATE_FILE_NAME) in (before.get(lp.STATE_FILE_NAME), expected.get(
                    lp.STATE_FILE_NAME)), case
                for path in after:
                    name = lp.basename(path)
                    if is_working_file(path):
                        assert name == lp.LOCK_NAME or name.startswith(lp.TEMP_PREFIX), f"{case}: {path} left"
                bury_lock(dest)
                run(FaultInjectingStorage(target.storage()))
                assert _snapshot(dest) == expected, (case, sorted(set(_snapshot(dest)) ^ set(expected)))
    return cases


def _reconcile(tmp_path: Path, **kwargs: Any) -> Callable[[Any], Any]:
    config = adopt_config(tmp_path, tmp_path / "unused")

    def run(storage: Any) -> Any:
        return reconcile_state(config, pipeline_id="reports", destination_id="archive", now=NOW, storage=storage,
                               lock_wait=0.2, **kwargs)

    return run


def test_every_fault_in_a_reconcile_audit_apply(backend: Backend, tmp_path: Path) -> None:  # noqa: F811
    published = published_state(tmp_path)
    cases = _sweep(backend, lambda d: seed_damaged(d, published), _reconcile(tmp_path, audit=True), "audit")
    count(f"fault indexes, reconcile-state --audit ({backend.name})", cases)


@pytest.mark.parametrize("seed_name", ["restored", "stateless"])
def test_every_fault_in_an_adopt_apply(backend: Backend, tmp_path: Path, seed_name: str) -> None:  # noqa: F811
    published = published_state(tmp_path)
    seed = (lambda d: seed_restored_copy(d, published)) if seed_name == "restored" else seed_stateless_copy
    cases = _sweep(backend, seed, _reconcile(tmp_path, adopt=True), f"adopt {seed_name}")
    count(f"fault indexes, reconcile-state --adopt {seed_name} ({backend.name})", cases)


def test_every_fault_in_an_audit_leaves_everything_as_it_was(backend: Backend, tmp_path: Path) -> None:  # noqa: F811
    published = published_state(tmp_path)
    config = adopt_config(tmp_path, tmp_path / "unused")
    dest = _reset(backend, lambda d: seed_damaged(d, published))
    before = _snapshot(dest)

    def run(storage: Any) -> Any:
        return audit_destination(config, "reports", "archive", storage=storage)

    probe = FaultInjectingStorage(backend.storage())
    clean = run(probe)
    assert [c.status for c in clean.outputs] == ["digest_mismatch", "missing", "size_mismatch"]
    cases = 0
    for kind in ("stat", "list", "read"):
        for n in range(1, probe.count(kind) + 1):  # type: ignore[arg-type]
            storage = FaultInjectingStorage(backend.storage(), [Fault(kind, nth=n)])  # type: ignore[arg-type]
            try:
                report = run(storage)
            except StorageError as exc:
                assert "\n" not in str(exc)
            else:  # the fault hit a call whose failure only costs a warning
                assert [c.status for c in report.outputs] == [c.status for c in clean.outputs]
            assert _snapshot(dest) == before, (kind, n)
            cases += 1
    assert probe.count("write") == probe.count("delete") == probe.count("rename") == 0
    count(f"fault indexes, audit ({backend.name})", cases)

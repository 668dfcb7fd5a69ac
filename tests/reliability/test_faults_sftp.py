"""Storage faults at every call of publications to an SFTP destination (issue 9).

``tests/engine/test_faults.py`` sweeps faults over local destinations. Here the destination is a
real OpenSSH server: ``FaultInjectingStorage`` wraps ``SFTPStorage`` and, for the engine's publish
scenarios, the n-th call of each kind (write, rename, delete, stat, list) fails, before it takes
effect or, for write/rename/delete, after it did (a lost acknowledgement). The engine's own
invariants are checked after each failure (``check_after_fault``: rolled back to exactly the
previous publication, or rolled forward with only what the journal still settles; state never
lies), then a retry over SFTP without faults must complete with exactly the clean result.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from distributor_core.bundle import load_manifest
from distributor_core.plan.model import Action
from distributor_core.storage.faults import Fault, FaultInjectingStorage
from distributor_core.storage.local import LocalStorage
from tests.engine.conftest import LATER, Env
from tests.engine.test_faults import BUNDLE, SCENARIOS, STATE, Expected, Run, _outputs, _unmanaged, check_after_fault
from tests.peers.sshd import make_sftp_storage

from .conftest import count

pytestmark = [pytest.mark.sftp, pytest.mark.slow]

KINDS = ("write", "rename", "delete", "stat", "list")
#: every engine publish scenario (tests/engine/test_faults.py)
SFTP_FAULT_SCENARIOS = list(SCENARIOS)


class Site:
    """One SFTP root reused by every case of a test (cleared and re-seeded on this machine, then
    handed to the SFTP user), and one connection to it."""

    def __init__(self, server: Any, base: Path, transport: str = "paramiko") -> None:
        self.server = server
        self.root = server.make_sftp_root()
        self.base = base
        self.sftp = make_sftp_storage(server, self.root, transport=transport)
        self._count = 0

    def prepare(self, scenario: str) -> tuple[Env, dict[str, Any]]:
        for child in self.root.iterdir():
            shutil.rmtree(child) if child.is_dir() else child.unlink()
        self._count += 1
        src = self.base / f"src{self._count}"
        src.mkdir(parents=True)
        env = Env(tmp=self.base, src_root=src, dst_root=self.root, src=LocalStorage(src), dst=LocalStorage(self.root))
        kwargs = SCENARIOS[scenario][0](env)
        env.src_manifest = load_manifest(src / BUNDLE)  # type: ignore[attr-defined]
        self.server.chown_to_user(self.root)
        return env, kwargs


@pytest.fixture(params=["paramiko", "openssh"])
def site(sshd_server: Any, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Site]:
    """The site over each SSH transport (paramiko; the system ssh client)."""
    site = Site(sshd_server, tmp_path, request.param)
    try:
        yield site
    finally:
        site.sftp.close()


def _retry(run: Run, site: Site, expected: Expected, direction: str, label: str) -> None:
    env = run.env
    retry = run.publish(now=LATER, storage=site.sftp, lock_wait=1.0)
    assert retry.status in ("completed", "skipped"), (label, retry.error)
    if direction == "forward":
        assert (retry.status, retry.plan.action) == ("skipped", Action.SKIP_SAME), label
    files = env.files()
    assert files.keys() == expected.new.keys(), (label, sorted(set(files) ^ set(expected.new)))
    assert {p: d for p, d in files.items() if p != STATE} == {p: d for p, d in expected.new.items() if p != STATE}
    assert _outputs(files[STATE]) == _outputs(expected.new[STATE]), label
    env.assert_consistent(unmanaged=_unmanaged(run.previous, files))


@pytest.mark.parametrize("scenario", SFTP_FAULT_SCENARIOS)
def test_every_nth_sftp_call_failing(site: Site, scenario: str) -> None:
    env, kwargs = site.prepare(scenario)
    probe = Run(env, FaultInjectingStorage(site.sftp), kwargs, env.files())
    outcome = probe.publish()
    assert outcome.status == "completed", outcome.error
    assert outcome.plan.action == SCENARIOS[scenario][1]
    expected = Expected(probe.storage.counts, env.files(), list(probe.storage.calls))
    cases = 0
    directions: set[str] = set()
    for kind in KINDS:
        total = expected.counts[kind]
        if kind != "delete":
            assert total > 0, kind
        for n in range(1, total + 1):
            for when in ("before", "after") if kind in ("write", "rename", "delete") else ("before",):
                label = f"{scenario} (sftp): {kind} #{n} {when}"
                env, kwargs = site.prepare(scenario)
                run = Run(env, FaultInjectingStorage(site.sftp, [Fault(kind, nth=n, when=when)]), kwargs, env.files())
                outcome = run.publish()
                assert len(run.storage.injected) <= 1, label
                direction = check_after_fault(run, outcome, expected, label)
                directions.add(direction)
                _retry(run, site, expected, direction, label)
                cases += 1
    assert directions == {"back", "forward"}, directions
    count(f"fault indexes, sftp publication ({scenario})", cases)

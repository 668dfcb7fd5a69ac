"""A file truncated in place while it is hashed does not kill repairs (issue 26, item 8).

Large local files were hashed from memory maps everywhere: truncating one in place while it was
hashed killed ``reconcile-state --adopt`` (4 rounds of 8) and ``--audit`` with ``SIGBUS``.
Adoption, which hashes files other tools wrote, now never maps; audits map only files that the
current user owns and nobody else may write. Through the console script, with a test-only hook
(a ``sitecustomize`` on ``PYTHONPATH``, the code under test unchanged) that truncates the 64 MiB
file to 1 MiB 2 ms after the command opens it, in several rounds: every round must end with a
report, never with a signal (before, every round ended with ``Bus error``).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.bundle.conftest import make_bundle
from tests.cli.conftest import run_script

SIZE = 64 * 1024 * 1024
ROUNDS = 6
OTHER_UID = 65534

_HOOK = """
import os, sys, threading

_name = os.environ["TEST_TRUNCATE_NAME"]
_path = os.environ["TEST_TRUNCATE_PATH"]
_armed = [True]


def _truncate():
    try:
        os.truncate(_path, 1 << 20)
    except OSError:
        pass


def _hook(event, args):
    if event == "open" and _armed[0] and isinstance(args[0], str) and args[0].endswith(_name):
        flags = args[2] if len(args) > 2 and isinstance(args[2], int) else 0
        if flags & os.O_ACCMODE == os.O_RDONLY:
            _armed[0] = False
            threading.Timer(0.002, _truncate).start()


sys.addaudithook(_hook)
"""


def _big() -> bytes:
    block = bytes(range(256)) * 4096  # 1 MiB
    return block * (SIZE // len(block))


@pytest.fixture(scope="module")
def big_bytes() -> bytes:
    return _big()


def _setup(tmp_path: Path, big: bytes) -> tuple[Path, Path]:
    source = tmp_path / "spool" / "b1"
    make_bundle(source, {"big.bin": big, "small.txt": b"small\n"}, bundle_id="big.bundle")
    (tmp_path / "hook").mkdir()
    (tmp_path / "hook" / "sitecustomize.py").write_text(_HOOK)
    config = tmp_path / "distributor.yml"
    config.write_text(
        "pipelines:\n"
        "  - id: reports\n"
        f"    source: {{backend: local, path: {tmp_path / 'spool'}}}\n"
        "    destinations:\n"
        f"      - {{id: archive, backend: local, path: {tmp_path / 'archive'}}}\n"
        f"      - {{id: copied, backend: local, path: {tmp_path / 'copied'}}}\n"
    )
    published = run_script("run", "--config", str(config), "--destination", "archive", "--pipeline", "reports",
                           cwd=tmp_path, env={"DISTRIBUTOR_VALIDATION_CACHE": "off"})
    assert published.returncode == 0, published.stderr
    return config, source


def _run_with_truncation(tmp_path: Path, config: Path, target: Path, *args: str) -> tuple[int, str, str]:
    result = run_script(*args, "--config", str(config), "--pipeline", "reports", cwd=tmp_path, env={
        "PYTHONPATH": str(tmp_path / "hook"), "TEST_TRUNCATE_NAME": "/big.bin", "TEST_TRUNCATE_PATH": str(target),
        "DISTRIBUTOR_VALIDATION_CACHE": "off"})
    return result.returncode, result.stdout, result.stderr


def _restore(target: Path, big: bytes, *, owner: int | None = None) -> None:
    with open(target, "r+b") as out:  # in place: the same inode, as the tools that truncate it write it
        out.write(big)
        out.truncate(len(big))
    if owner is not None:
        os.chown(target, owner, owner)


def test_adoption_survives_a_file_truncated_while_it_is_hashed(tmp_path: Path, big_bytes: bytes) -> None:
    """The destination was filled by another tool (a copy of the source, owned by this user):
    adoption reads the copy, which is truncated under it; the report refuses it, every round."""
    config, source = _setup(tmp_path, big_bytes)
    copied = tmp_path / "copied" / "b1"
    copied.mkdir(parents=True)
    for name in ("big.bin", "small.txt"):
        shutil.copyfile(source / name, copied / name)
    untouched = run_script("reconcile-state", "--config", str(config), "--pipeline", "reports", "--destination",
                           "copied", "--bundle", "b1", "--adopt", cwd=tmp_path)
    assert "adopted=2" in untouched.stdout, untouched.stdout + untouched.stderr  # a copy run would publish
    outcomes = []
    for _ in range(ROUNDS):
        _restore(copied / "big.bin", big_bytes)
        code, stdout, stderr = _run_with_truncation(
            tmp_path, config, copied / "big.bin", "reconcile-state", "--destination", "copied", "--bundle", "b1",
            "--adopt")
        outcomes.append((code, stdout, stderr))
    assert [code for code, _, _ in outcomes if code < 0 or code >= 128] == []  # never killed by a signal
    for _, stdout, stderr in outcomes:
        assert "Reconcile state: pipeline=reports destination=copied" in stdout, stdout + stderr
        assert "adopted=0" in stdout, stdout  # the truncated copy is not what run would publish
        assert "big.bin" in stdout


@pytest.mark.parametrize("command", [("reconcile-state", "--audit"), ("audit",)], ids=["reconcile-audit", "audit"])
def test_audits_survive_a_file_of_another_user_truncated_while_it_is_hashed(
    tmp_path: Path, big_bytes: bytes, command: tuple[str, ...]
) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to give a file to another user")  # CI runs as root
    config, _ = _setup(tmp_path, big_bytes)
    target = tmp_path / "archive" / "b1" / "big.bin"
    outcomes = []
    for _ in range(ROUNDS):
        _restore(target, big_bytes, owner=OTHER_UID)
        code, stdout, stderr = _run_with_truncation(
            tmp_path, config, target, *command[:1], "--destination", "archive", "--bundle", "b1", *command[1:],
            *(("--dry-run",) if command[0] == "reconcile-state" else ()))
        outcomes.append((code, stdout, stderr))
    assert [code for code, _, _ in outcomes if code < 0 or code >= 128] == []
    for code, stdout, stderr in outcomes:
        assert code == (1 if command[0] == "audit" else 0), stdout + stderr
        assert "big.bin status=size_mismatch" in stdout, stdout + stderr  # the truncated file is found

"""The validation cache of local sources (issue 17 P3), through the real ``distributor run``.

Which source files a run reads is observed from inside the console script: a ``sitecustomize``
on ``PYTHONPATH`` registers an audit hook (``sys.addaudithook``) that notes every ``open`` of a
path below the source root, so "not hashed" means "not opened", whatever the timing.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from distributor_core.bundle import parse_manifest
from distributor_core.validation_cache import cache_file, encode, settled
from tests.bundle.conftest import make_bundle
from tests.cli.conftest import run_script

FILES = {f"f{n}.txt": f"content of file {n}\n".encode() for n in range(6)}
ALL = set(FILES)

_HOOK = """
import atexit, os, sys

_root = os.environ["TEST_OPEN_ROOT"] + os.sep
_out = os.environ["TEST_OPEN_LOG"]
_seen = []


def _hook(event, args):
    if event == "open" and isinstance(args[0], str) and args[0].startswith(_root):
        _seen.append(args[0][len(_root):])


def _write():
    with open(_out, "w") as log:
        log.write("\\n".join(_seen))


sys.addaudithook(_hook)
atexit.register(_write)
"""


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str
    #: source files opened, relative to the bundle directory (manifest.json included)
    opened: set[str]


@dataclass
class Setup:
    tmp: Path
    root: Path
    bundle: Path
    config: Path
    cache_dir: Path

    def run(self, *args: str, **env: str) -> Run:
        log = self.tmp / "opened.log"
        log.unlink(missing_ok=True)
        result = run_script(
            "run",
            "--config",
            str(self.config),
            *args,
            cwd=self.tmp,
            env={
                "PYTHONPATH": str(self.tmp / "hook"),
                "TEST_OPEN_ROOT": str(self.bundle),
                "TEST_OPEN_LOG": str(log),
                "DISTRIBUTOR_CACHE_DIR": str(self.cache_dir),
                **env,
            },
        )
        opened = set(log.read_text().split("\n")) - {""} if log.exists() else set()
        return Run(result.returncode, result.stdout, result.stderr, opened)

    @property
    def cache_path(self) -> Path:
        found = cache_file(str(self.root), {"DISTRIBUTOR_CACHE_DIR": str(self.cache_dir)})
        assert found is not None
        return found


def _settle(*paths: Path) -> None:
    """Wait until every file is older than the cache's safety margin (so a run may record it)."""
    deadline = time.monotonic() + 30
    while not all(settled(_identity(p), time.time_ns()) for p in paths):
        assert time.monotonic() < deadline
        time.sleep(0.05)


def _identity(path: Path) -> tuple[int, int, int, int, int]:
    info = os.lstat(path)
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def _setup(tmp_path: Path, validation: str = "") -> Setup:
    root = tmp_path / "spool"
    bundle = root / "b1"
    make_bundle(bundle, FILES, bundle_id="cache.test")
    (tmp_path / "hook").mkdir()
    (tmp_path / "hook" / "sitecustomize.py").write_text(_HOOK)
    config = tmp_path / "distributor.yml"
    config.write_text(
        "pipelines:\n"
        "  - id: reports\n"
        f"    source: {{backend: local, path: {root}}}\n"
        f"{validation}"
        f"    destinations: [{{id: archive, backend: local, path: {tmp_path / 'out'}}}]\n"
    )
    _settle(*(bundle / name for name in FILES))
    return Setup(tmp_path, root, bundle, config, tmp_path / "cache")


def _action(run: Run) -> str:
    actions = [line for line in run.stdout.splitlines() if line.startswith("Action:")]
    assert len(actions) == 1, run.stdout + run.stderr
    return actions[0].split(" action=")[1].split()[0]


def _rewrite_same_size_and_mtime(path: Path, data: bytes) -> None:
    """Change the bytes in place, same size, and set the modification time back (ctime moves)."""
    before = os.lstat(path)
    assert len(data) == before.st_size
    with open(path, "r+b") as out:
        out.write(data)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.lstat(path)
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (before.st_ino, before.st_size, before.st_mtime_ns)


def test_a_rerun_over_an_unchanged_source_reads_no_listed_file(tmp_path: Path) -> None:
    s = _setup(tmp_path)
    dry = s.run("--dry-run")
    assert (dry.code, _action(dry)) == (0, "publish_new") and not s.cache_path.exists()  # a dry run writes no cache
    first = s.run()
    assert (first.code, _action(first)) == (0, "publish_new"), first.stderr
    assert first.opened == ALL | {"manifest.json"}  # every file hashed, each read once
    assert s.cache_path.is_file()
    second = s.run()
    assert (second.code, _action(second)) == (0, "skip_same"), second.stderr
    assert second.opened == {"manifest.json"}  # the manifest is parsed; no listed file is read
    # the files published on the first run are the source's bytes
    assert {p.name: p.read_bytes() for p in (tmp_path / "out" / "b1").glob("f*.txt")} == FILES


def test_a_file_changed_in_place_with_its_mtime_restored_fails_the_run(tmp_path: Path) -> None:
    s = _setup(tmp_path)
    assert s.run().code == 0
    target = s.bundle / "f2.txt"
    _rewrite_same_size_and_mtime(target, b"CONTENT" + FILES["f2.txt"][7:])
    broken = s.run()
    assert broken.code == 1
    assert "invalid source bundle b1: file f2.txt sha256 sha256:" in broken.stderr
    assert "does not match manifest sha256" in broken.stderr
    assert broken.opened == {"manifest.json", "f2.txt"}  # only the changed file was hashed
    assert (tmp_path / "out" / "b1" / "f2.txt").read_bytes() == FILES["f2.txt"]  # nothing written


def test_a_replaced_file_is_hashed_again(tmp_path: Path) -> None:
    s = _setup(tmp_path)
    assert s.run().code == 0
    target = s.bundle / "f3.txt"
    before = os.lstat(target)

    def replace_with(data: bytes) -> None:
        new = s.bundle / "f3.new"
        new.write_bytes(data)
        os.utime(new, ns=(before.st_atime_ns, before.st_mtime_ns))
        os.replace(new, target)  # a new inode under the same name, same size and mtime

    replace_with(FILES["f3.txt"])  # the same bytes: hashed again, and found valid
    assert os.lstat(target).st_ino != before.st_ino
    same = s.run()
    assert (same.code, _action(same)) == (0, "skip_same")
    assert same.opened == {"manifest.json", "f3.txt"}
    replace_with(b"X" * before.st_size)  # other bytes: caught
    broken = s.run()
    assert broken.code == 1 and "file f3.txt sha256 sha256:" in broken.stderr
    assert "f3.txt" in broken.opened


@pytest.mark.parametrize(
    ("validation", "env"),
    [("    validation: {cache: false}\n", {}), ("", {"DISTRIBUTOR_VALIDATION_CACHE": "off"})],
    ids=["config", "environment"],
)
def test_the_cache_can_be_turned_off(tmp_path: Path, validation: str, env: dict[str, str]) -> None:
    s = _setup(tmp_path, validation)
    for expected in ("publish_new", "skip_same"):
        result = s.run(**env)
        assert (result.code, _action(result)) == (0, expected), result.stderr
        assert result.opened == ALL | {"manifest.json"}  # every file hashed on every run
    assert not s.cache_path.exists()  # neither read nor written


def test_a_corrupt_or_unwritable_cache_is_ignored(tmp_path: Path) -> None:
    s = _setup(tmp_path)
    assert s.run().code == 0
    s.cache_path.write_bytes(b"\x93not a cache")
    ignored = s.run()
    assert (ignored.code, _action(ignored)) == (0, "skip_same"), ignored.stderr
    assert ignored.opened == ALL | {"manifest.json"}  # hashed as without a cache ...
    assert s.run().opened == {"manifest.json"}  # ... which was written afresh
    s.cache_path.write_bytes(b"")
    assert s.run().opened == ALL | {"manifest.json"}
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("")
    for _ in range(2):  # the cache cannot be written below a regular file: every run hashes
        result = s.run(DISTRIBUTOR_CACHE_DIR=str(blocked))
        assert (result.code, _action(result), result.stderr) == (0, "skip_same", "")
        assert result.opened == ALL | {"manifest.json"}


def _forge(s: Setup, target: Path, sha256: str, checked_ns: int) -> None:
    """A cache file claiming ``target``, as it is now, hashed to ``sha256`` (at ``checked_ns``)."""
    entries = {f"b1/{target.name}": (*_identity(target), sha256)}
    s.cache_path.parent.mkdir(parents=True, exist_ok=True)
    s.cache_path.write_bytes(encode(str(s.root), checked_ns, entries))


def test_a_racily_clean_entry_is_not_trusted(tmp_path: Path) -> None:
    """An entry taken within the safety margin of the file's last change (as if the file changed
    in the same timestamp tick as the cache was made) is hashed again. The control case shows
    the same entry taken after the margin would be trusted (so the margin is what catches the
    change), and that a write still verifies every byte it publishes."""
    s = _setup(tmp_path)
    assert s.run().code == 0
    target = s.bundle / "f1.txt"
    sha = next(f.sha256 for f in parse_manifest((s.bundle / "manifest.json").read_bytes()).files if f.path == "f1.txt")
    _rewrite_same_size_and_mtime(target, b"changed " + FILES["f1.txt"][8:])
    _forge(s, target, sha, _identity(target)[4] + 1_000_000)  # 1 ms after the change: racily clean
    racy = s.run()
    assert racy.code == 1 and "file f1.txt sha256 sha256:" in racy.stderr
    assert "f1.txt" in racy.opened
    _settle(target)
    _forge(s, target, sha, time.time_ns())  # the same entry, taken after the margin: trusted
    trusted = s.run()
    assert (trusted.code, _action(trusted)) == (0, "skip_same"), trusted.stderr
    assert "f1.txt" not in trusted.opened
    rewrite = s.run("--republish")  # writing reads the file and verifies it: the change is caught
    assert rewrite.code == 1 and "f1.txt" in rewrite.opened
    assert "write local b1/f1.txt: integrity: sha256 sha256:" in rewrite.stderr  # the output, not its temporary
    assert f"does not match expected {sha} (read from source bundle b1 file f1.txt)" in rewrite.stderr
    assert ".distributor-tmp-" not in rewrite.stderr
    assert (tmp_path / "out" / "b1" / "f1.txt").read_bytes() == FILES["f1.txt"]
    assert not [p.name for p in (tmp_path / "out").rglob(".distributor-*") if p.name != ".distributor.json"]

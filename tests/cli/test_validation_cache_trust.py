"""The validation cache trusts only a private location (issue 26, item 7), through ``distributor run``.

A cache directory owned by another user or writable by group or others was used; a symlinked
cache file was read through the link; a symlinked ``validation/`` directory received the cache
write. Now each of them is ignored with a warning: the run hashes every file as without a cache,
and writes nothing there.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.cli.test_validation_cache import ALL, Setup, _action, _setup

OTHER_UID = 65534  # nobody


def _warned(stderr: str, message: str) -> bool:
    return f"distributor: warning: validation cache {message}; ignored\n" in stderr


def _first_run(tmp_path: Path) -> Setup:
    s = _setup(tmp_path)
    first = s.run()
    assert (first.code, _action(first)) == (0, "publish_new"), first.stderr
    assert s.cache_path.is_file() and first.stderr == ""
    return s


@pytest.mark.parametrize("mode", [0o770, 0o707], ids=["group-writable", "others-writable"])
def test_a_cache_directory_writable_by_others_is_ignored_with_a_warning(tmp_path: Path, mode: int) -> None:
    s = _first_run(tmp_path)
    os.chmod(s.cache_dir, mode)
    before = s.cache_path.read_bytes()
    run = s.run()
    assert (run.code, _action(run)) == (0, "skip_same")
    assert run.opened == ALL | {"manifest.json"}  # every file hashed: the cache was not read
    assert _warned(run.stderr, f"directory {s.cache_dir} is writable by group or others (mode {mode:04o})")
    assert s.cache_path.read_bytes() == before  # and not written
    os.chmod(s.cache_dir, 0o700)
    trusted = s.run()
    assert trusted.opened == {"manifest.json"} and trusted.stderr == ""


def test_a_cache_directory_of_another_user_is_ignored(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to give a directory to another user")  # CI runs as root
    s = _first_run(tmp_path)
    validation = s.cache_path.parent
    os.chown(validation, OTHER_UID, OTHER_UID)
    run = s.run()
    assert run.opened == ALL | {"manifest.json"}
    assert _warned(run.stderr, f"directory {validation} is owned by another user (uid {OTHER_UID})")
    os.chown(validation, 0, 0)
    os.chown(s.cache_path, OTHER_UID, OTHER_UID)
    file_run = s.run()
    assert file_run.opened == ALL | {"manifest.json"}
    assert _warned(file_run.stderr, f"file {s.cache_path} is owned by another user (uid {OTHER_UID})")


def test_a_symlinked_cache_file_is_not_read_through_the_link(tmp_path: Path) -> None:
    s = _first_run(tmp_path)
    planted = tmp_path / "planted-cache"
    os.rename(s.cache_path, planted)  # a cache that would vouch for every file
    planted_bytes = planted.read_bytes()
    os.symlink(planted, s.cache_path)
    run = s.run()
    assert run.opened == ALL | {"manifest.json"}
    assert _warned(run.stderr, f"file {s.cache_path} is a symbolic link")
    # the link itself was replaced by this run's own cache (in the trusted directory); its target untouched
    assert not s.cache_path.is_symlink() and s.cache_path.is_file()
    assert planted.read_bytes() == planted_bytes


def test_a_symlinked_validation_directory_receives_no_write(tmp_path: Path) -> None:
    s = _setup(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    s.cache_dir.mkdir(mode=0o700)
    os.symlink(elsewhere, s.cache_dir / "validation")
    for _ in range(2):
        run = s.run()
        assert run.code == 0 and run.opened == ALL | {"manifest.json"}
        assert _warned(run.stderr, f"directory {s.cache_dir / 'validation'} is a symbolic link")
    assert list(elsewhere.iterdir()) == []


def test_the_warning_is_in_the_json_envelope(tmp_path: Path) -> None:
    import json

    s = _first_run(tmp_path)
    os.chmod(s.cache_dir, 0o777)
    run = s.run("--format", "json")
    envelope = json.loads(run.stdout)
    assert envelope["ok"] is True
    assert envelope["warnings"] == [
        f"validation cache directory {s.cache_dir} is writable by group or others (mode 0777); ignored"]

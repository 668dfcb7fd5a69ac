"""``distributor_core.validation_cache`` and ``LocalStorage.file_identities`` on real files: where the
cache lives, what it records and trusts (the racily-clean margin), and that a bad cache file is
ignored. The runs through the console script are in tests/cli/test_validation_cache.py."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import pytest

from distributor_core import validation_cache as vc
from distributor_core.bundle import BundleValidationError
from distributor_core.source import load_source_manifest, validate_source_bundle
from distributor_core.storage.capabilities import Feature
from distributor_core.storage.errors import ErrorKind, StorageError
from distributor_core.storage.faults import FaultInjectingStorage
from distributor_core.storage.local import LocalStorage
from tests.bundle.conftest import make_bundle

S = 1_000_000_000
NOW = 1_700_000_000 * S + 123_456_789
SHA = "sha256:" + "ab" * 32


def test_cache_location_and_switch() -> None:
    assert vc.cache_dir({"DISTRIBUTOR_CACHE_DIR": "/c", "XDG_CACHE_HOME": "/x"}) == Path("/c")
    assert vc.cache_dir({"XDG_CACHE_HOME": "/x"}) == Path("/x/distributor")
    home = Path.home() / ".cache" / "distributor"
    assert vc.cache_dir({"XDG_CACHE_HOME": "relative"}) == home  # the XDG spec ignores relative values
    assert vc.cache_dir({}) == home
    name = hashlib.sha256(b"/data/spool").hexdigest()
    assert vc.cache_file("/data/spool", {"DISTRIBUTOR_CACHE_DIR": "/c"}) == Path("/c/validation") / name
    for off in ("off", "OFF", "0", "false", "no"):
        assert not vc.enabled_by_env({"DISTRIBUTOR_VALIDATION_CACHE": off})
    assert vc.enabled_by_env({}) and vc.enabled_by_env({"DISTRIBUTOR_VALIDATION_CACHE": "on"})


def test_settled_needs_both_stamps_older_than_the_margin() -> None:
    fine = NOW - vc.SUBSECOND_MARGIN_NS - 1
    assert vc.settled((1, 2, 3, fine, fine), NOW)
    assert not vc.settled((1, 2, 3, fine, NOW - vc.SUBSECOND_MARGIN_NS), NOW)  # ctime too recent
    assert not vc.settled((1, 2, 3, NOW - 1, fine), NOW)  # mtime too recent
    assert not vc.settled((1, 2, 3, fine, NOW + S), NOW)  # stamps in the future
    # whole-second stamps (1 s / 2 s granularity) need the larger margin
    whole = (NOW // S - 2) * S
    assert not vc.settled((1, 2, 3, whole, whole), NOW)
    old = (NOW - vc.WHOLE_SECOND_MARGIN_NS) // S * S - S
    assert vc.settled((1, 2, 3, old, old), NOW)


def _cache(tmp_path: Path, checked_ns: int = NOW) -> vc.ValidationCache:
    return vc.ValidationCache("/data/spool", tmp_path / "validation" / "file", checked_ns=checked_ns)


def _roundtrip(tmp_path: Path, cache: vc.ValidationCache) -> vc.ValidationCache:
    env = {"DISTRIBUTOR_CACHE_DIR": str(tmp_path)}
    cache.file = vc.cache_file(cache.root, env)
    assert cache.save()
    return vc.ValidationCache.load(cache.root, env)


def test_record_save_load_trust(tmp_path: Path) -> None:
    old = NOW - 10 * S + 5
    cache = _cache(tmp_path)
    cache.record("b/a.txt", (1, 2, 3, old, old), SHA)
    cache.record("b/racy.txt", (1, 3, 3, old, NOW - 5), SHA)  # changed just before the check: not recorded
    cache.record("b/none.txt", None, SHA)
    loaded = _roundtrip(tmp_path, cache)
    assert len(loaded) == 1
    assert loaded.trusted("b/a.txt", (1, 2, 3, old, old), 3, SHA)
    assert not loaded.trusted("b/racy.txt", (1, 3, 3, old, NOW - 5), 3, SHA)
    for identity, size, sha in [
        ((9, 2, 3, old, old), 3, SHA),  # another device
        ((1, 9, 3, old, old), 3, SHA),  # another inode
        ((1, 2, 4, old, old), 4, SHA),  # another size
        ((1, 2, 3, old + 1, old), 3, SHA),  # another mtime
        ((1, 2, 3, old, old + 1), 3, SHA),  # another ctime
        ((1, 2, 3, old, old), 4, SHA),  # the manifest records another size
        ((1, 2, 3, old, old), 3, "sha256:" + "cd" * 32),  # ... or another sha256
        (None, 3, SHA),  # not a regular file now
    ]:
        assert not loaded.trusted("b/a.txt", identity, size, sha)
    assert (loaded.hits, loaded.misses) == (1, 9)


def test_only_what_the_last_run_saw_is_kept(tmp_path: Path) -> None:
    old = NOW - 10 * S + 5
    first = _cache(tmp_path)
    first.record("b/a.txt", (1, 2, 3, old, old), SHA)
    first.record("b/gone.txt", (1, 4, 3, old, old), SHA)
    second = _roundtrip(tmp_path, first)
    assert second.trusted("b/a.txt", (1, 2, 3, old, old), 3, SHA)  # seen (a hit) ...
    third = _roundtrip(tmp_path, second)
    assert len(third) == 1 and third.trusted("b/a.txt", (1, 2, 3, old, old), 3, SHA)  # ... gone.txt is dropped


@pytest.mark.parametrize(
    "content",
    [b"", b"garbage", b"\x94\x01\xa3/x\x00\x80", None],
    ids=["empty", "garbage", "wrong-shape", "directory"],
)
def test_a_bad_cache_file_is_ignored(tmp_path: Path, content: bytes | None) -> None:
    env = {"DISTRIBUTOR_CACHE_DIR": str(tmp_path)}
    file = vc.cache_file("/data/spool", env)
    assert file is not None
    file.parent.mkdir(parents=True)
    if content is None:
        file.mkdir()
    else:
        file.write_bytes(content)
    loaded = vc.ValidationCache.load("/data/spool", env)
    assert len(loaded) == 0
    assert loaded.save() is (content is not None)  # a directory in the way: not written, no error


def test_another_root_a_future_check_or_another_format_is_ignored(tmp_path: Path) -> None:
    env = {"DISTRIBUTOR_CACHE_DIR": str(tmp_path)}
    old = NOW - 10 * S + 5
    file = vc.cache_file("/data/spool", env)
    assert file is not None
    file.parent.mkdir(parents=True)
    entries = {"a": (1, 2, 3, old, old, SHA)}
    for stored in [
        vc.encode("/data/other", NOW, entries),  # a hash collision
        vc.encode("/data/spool", NOW, entries, format=vc.FORMAT + 1),
        vc.encode("/data/spool", time.time_ns() + 3600 * S, entries),  # the clock went back
    ]:
        file.write_bytes(stored)
        assert len(vc.ValidationCache.load("/data/spool", env)) == 0
    file.write_bytes(vc.encode("/data/spool", NOW, entries))
    assert len(vc.ValidationCache.load("/data/spool", env)) == 1


def test_unwritable_cache_directory(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    cache = vc.ValidationCache.load("/data/spool", {"DISTRIBUTOR_CACHE_DIR": str(blocker)})
    cache.record("a", (1, 2, 3, 5, 5), SHA)
    assert cache.save() is False
    assert list(tmp_path.iterdir()) == [blocker]


def test_local_file_identities(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "d").mkdir(parents=True)
    (root / "d" / "a.txt").write_bytes(b"abc")
    (root / "top.txt").write_bytes(b"x")
    os.symlink(root / "d" / "a.txt", root / "d" / "link.txt")
    os.symlink(root / "d", root / "linked")
    os.mkfifo(root / "fifo")
    storage = LocalStorage(root)
    assert Feature.FILE_IDENTITY in storage.capabilities
    found = storage.file_identities(["d/a.txt", "top.txt", "d/link.txt", "linked/a.txt", "d", "fifo", "missing/x"])
    info = os.lstat(root / "d" / "a.txt")
    assert found[0] == (info.st_dev, info.st_ino, 3, info.st_mtime_ns, info.st_ctime_ns)
    assert found[1] is not None and found[1][2] == 1
    assert found[2:] == [None] * 5  # symlink, symlinked directory, directory, FIFO, missing
    wrapped = FaultInjectingStorage(storage)  # the fault injector reads every file: not offered
    assert Feature.FILE_IDENTITY not in wrapped.capabilities
    with pytest.raises(StorageError) as raised:
        wrapped.file_identities(["d/a.txt"])
    assert raised.value.kind == ErrorKind.UNSUPPORTED


def test_validation_with_a_cache_records_and_still_reports_the_first_broken_file(tmp_path: Path) -> None:
    root = tmp_path / "spool"
    make_bundle(root / "b", {"one.txt": b"one\n", "two.txt": b"two\n", "three.txt": b"three\n"})
    (root / "b" / "two.txt").write_bytes(b"TWO\n")
    storage = LocalStorage(root)
    manifest = load_source_manifest(storage, "b")
    cache = vc.ValidationCache(str(root), None, checked_ns=time.time_ns() + 10 * S)
    with pytest.raises(BundleValidationError, match=r"file two\.txt sha256"):
        validate_source_bundle(storage, "b", manifest, cache=cache)
    assert set(cache._new) == {"b/one.txt"}  # checked before the broken file; nothing after it
    (root / "b" / "two.txt").write_bytes(b"two\n")
    cache = vc.ValidationCache(str(root), None, checked_ns=time.time_ns() + 10 * S)
    validate_source_bundle(storage, "b", manifest, cache=cache)
    assert set(cache._new) == {"b/one.txt", "b/two.txt", "b/three.txt"}
    assert cache.misses == 3 and cache.hits == 0


def test_the_upload_servers_publication_never_uses_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``publish_source_bundle`` (what ``serve`` runs on a staged upload) hashes every file and
    neither reads nor writes a validation cache, even for a pipeline with a local source."""
    from distributor_core.app.run import publish_source_bundle
    from distributor_core.config import load_config

    cache_dir = tmp_path / "cache"
    monkeypatch.setenv("DISTRIBUTOR_CACHE_DIR", str(cache_dir))
    staged = tmp_path / "staged"
    make_bundle(staged, {"a.txt": b"a\n"})
    config_file = tmp_path / "distributor.yml"
    config_file.write_text(
        f"pipelines: [{{id: reports, source: {{backend: local, path: {staged}}}, "
        f"destinations: [{{id: out, backend: local, path: {tmp_path / 'out'}}}]}}]\n"
    )
    config = load_config(config_file)
    # a cache for the staged root: a run that used it would rewrite (or remove) it afterwards
    file = vc.cache_file(str(staged), {"DISTRIBUTOR_CACHE_DIR": str(cache_dir)})
    assert file is not None
    file.parent.mkdir(parents=True)
    old = NOW - 10 * S + 5
    file.write_bytes(vc.encode(str(staged), NOW, {"b/x.txt": (1, 2, 3, old, old, SHA)}))
    before = file.read_bytes()
    report = publish_source_bundle(config, "reports", LocalStorage(staged), "")
    assert report.ok and [a.action for a in report.actions] == ["publish_new"]
    assert file.read_bytes() == before and os.listdir(file.parent) == [file.name]


"""LocalStorage shortcuts of issue 8 keep the documented behaviour: the root is created on the
first write wherever that write lands, in-place writes are exclusive and removed on failure (and
are asked for explicitly, never inferred from a reserved name), renames without overwrite never
clobber, special files never block a reader."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from distributor_core.storage.errors import ErrorKind, StorageError
from distributor_core.storage.local import LocalStorage


@pytest.mark.parametrize("path", [".distributor.lock", "top.txt", "a/b/c.txt"])
def test_first_write_creates_a_missing_root(tmp_path: Path, path: str) -> None:
    storage = LocalStorage(tmp_path / "not" / "yet")
    storage.write_bytes(path, b"x", overwrite=False)
    assert (tmp_path / "not" / "yet" / path).read_bytes() == b"x"


def test_top_level_rename_into_a_missing_root_reports_the_missing_source(tmp_path: Path) -> None:
    storage = LocalStorage(tmp_path / "root")
    with pytest.raises(StorageError) as info:
        storage.rename("a.txt", "b.txt", overwrite=False)
    assert info.value.kind == ErrorKind.NOT_FOUND


def test_in_place_write_is_exclusive_and_removed_on_integrity_failure(tmp_path: Path) -> None:
    storage = LocalStorage(tmp_path)
    name = "dir/.distributor-tmp-0123456789abcdef"
    storage.write_stream(name, [b"abc"], overwrite=False, expected_size=3, in_place=True)
    with pytest.raises(StorageError) as info:
        storage.write_stream(name, [b"abc"], overwrite=False, in_place=True)
    assert info.value.kind == ErrorKind.ALREADY_EXISTS
    assert (tmp_path / name).read_bytes() == b"abc"
    other = "dir/.distributor-tmp-fedcba9876543210"
    with pytest.raises(StorageError) as info:
        storage.write_stream(other, [b"abcd"], overwrite=False, expected_size=3, in_place=True)
    assert info.value.kind == ErrorKind.INTEGRITY
    assert not (tmp_path / other).exists()
    assert sorted(os.listdir(tmp_path / "dir")) == [".distributor-tmp-0123456789abcdef"]


def test_a_reserved_name_alone_does_not_make_a_write_in_place(tmp_path: Path) -> None:
    storage = LocalStorage(tmp_path)
    name = ".distributor-tmp-0123456789abcdef"
    seen: list[list[str]] = []

    def chunks():
        yield b"abc"
        seen.append(sorted(os.listdir(tmp_path)))

    storage.write_stream(name, chunks(), overwrite=False, expected_size=3)
    assert len(seen) == 1 and len(seen[0]) == 1 and seen[0] != [name]  # a temporary of its own
    assert os.listdir(tmp_path) == [name] and (tmp_path / name).read_bytes() == b"abc"


def test_rename_without_overwrite_never_clobbers_and_refuses_directories(tmp_path: Path) -> None:
    storage = LocalStorage(tmp_path)
    storage.write_bytes("d/a", b"a", overwrite=False)
    storage.write_bytes("d/b", b"b", overwrite=False)
    with pytest.raises(StorageError) as info:
        storage.rename("d/a", "d/b", overwrite=False)
    assert info.value.kind == ErrorKind.ALREADY_EXISTS
    assert (tmp_path / "d" / "a").read_bytes() == b"a" and (tmp_path / "d" / "b").read_bytes() == b"b"
    (tmp_path / "d" / "sub").mkdir()
    with pytest.raises(StorageError) as info:
        storage.rename("d/sub", "d/moved", overwrite=False)
    assert info.value.kind == ErrorKind.UNSUPPORTED
    storage.rename("d/a", "d/c", overwrite=False)
    assert not (tmp_path / "d" / "a").exists() and (tmp_path / "d" / "c").read_bytes() == b"a"


def test_open_read_of_a_fifo_does_not_block(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(StorageError) as info:
        LocalStorage(tmp_path).open_read("pipe")
    assert info.value.kind == ErrorKind.UNSUPPORTED

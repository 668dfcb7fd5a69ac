"""Hashing local outputs from memory maps (issue 18 P11): same digests and statuses as reading,
window by window, with the ``DISTRIBUTOR_MMAP=off`` switch and a fallback to reads where a map
cannot be made."""

from __future__ import annotations

import hashlib
import mmap
from pathlib import Path

import pytest

from distributor_core.app import output_check
from distributor_core.app.output_check import DIGEST_MISMATCH, OK, SIZE_MISMATCH, check_file, hash_stream
from distributor_core.storage.local import LocalStorage

WINDOW = 64 * 1024
_REAL_MMAP = mmap.mmap  # the tests replace mmap.mmap


@pytest.fixture
def small_windows(monkeypatch: pytest.MonkeyPatch) -> None:
    """Windows and thresholds scaled down so a few hundred KiB cross several window edges."""
    monkeypatch.setattr(output_check, "MAP_WINDOW", WINDOW)
    monkeypatch.setattr(output_check, "MAP_MIN_SIZE", WINDOW)
    monkeypatch.setattr(output_check, "LOCAL_READ_SIZE", 16 * 1024)


class _CountingMmap:
    """``mmap.mmap`` that records each map's length (and can refuse from the ``fail_from``-th)."""

    def __init__(self, fail_from: int | None = None) -> None:
        self.lengths: list[int] = []
        self.fail_from = fail_from

    def __call__(self, fd: int, length: int, **kwargs: object) -> mmap.mmap:
        if self.fail_from is not None and len(self.lengths) >= self.fail_from:
            raise OSError(19, "No such device")
        self.lengths.append(length)
        return _REAL_MMAP(fd, length, **kwargs)  # type: ignore[arg-type]


def _write(path: Path, size: int) -> bytes:
    data = bytes((i * 7 + i // 251) % 256 for i in range(size))
    path.write_bytes(data)
    return data


@pytest.mark.parametrize("size", [WINDOW, WINDOW + 1, 3 * WINDOW, 5 * WINDOW - 17])
def test_mapped_digest_equals_hashlib_across_window_edges(
    tmp_path: Path, small_windows: None, monkeypatch: pytest.MonkeyPatch, size: int
) -> None:
    data = _write(tmp_path / "f.bin", size)
    maps = _CountingMmap()
    monkeypatch.setattr(output_check.mmap, "mmap", maps)
    counted: list[int] = []
    with open(tmp_path / "f.bin", "rb", buffering=0) as stream:
        got = hash_stream(stream, counted.append)
    assert got == (size, "sha256:" + hashlib.sha256(data).hexdigest())
    assert sum(counted) == size
    assert maps.lengths == [min(WINDOW, size - offset) for offset in range(0, size, WINDOW)]


def test_below_the_threshold_and_with_the_switch_off_nothing_is_mapped(
    tmp_path: Path, small_windows: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    small = _write(tmp_path / "small.bin", WINDOW - 1)
    large = _write(tmp_path / "large.bin", 3 * WINDOW)
    maps = _CountingMmap()
    monkeypatch.setattr(output_check.mmap, "mmap", maps)
    with open(tmp_path / "small.bin", "rb", buffering=0) as stream:
        assert hash_stream(stream)[1] == "sha256:" + hashlib.sha256(small).hexdigest()
    for value in ("off", "0", "FALSE", "no"):
        monkeypatch.setenv("DISTRIBUTOR_MMAP", value)
        with open(tmp_path / "large.bin", "rb", buffering=0) as stream:
            assert hash_stream(stream)[1] == "sha256:" + hashlib.sha256(large).hexdigest()
    assert maps.lengths == []
    monkeypatch.setenv("DISTRIBUTOR_MMAP", "on")
    with open(tmp_path / "large.bin", "rb", buffering=0) as stream:
        assert hash_stream(stream)[1] == "sha256:" + hashlib.sha256(large).hexdigest()
    assert len(maps.lengths) == 3


@pytest.mark.parametrize("fail_from", [0, 1, 2])
def test_a_map_that_cannot_be_made_falls_back_to_reading_the_rest(
    tmp_path: Path, small_windows: None, monkeypatch: pytest.MonkeyPatch, fail_from: int
) -> None:
    data = _write(tmp_path / "f.bin", 3 * WINDOW + 5)
    maps = _CountingMmap(fail_from=fail_from)
    monkeypatch.setattr(output_check.mmap, "mmap", maps)
    counted: list[int] = []
    with open(tmp_path / "f.bin", "rb", buffering=0) as stream:
        got = hash_stream(stream, counted.append)
    assert got == (len(data), "sha256:" + hashlib.sha256(data).hexdigest())
    assert sum(counted) == len(data)
    assert len(maps.lengths) == fail_from


def test_a_file_that_shrinks_between_windows_is_hashed_to_its_new_end(
    tmp_path: Path, small_windows: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "f.bin"
    data = _write(path, 4 * WINDOW)
    made: list[int] = []

    def truncating(fd: int, length: int, **kwargs: object) -> mmap.mmap:
        made.append(length)
        mapped = _REAL_MMAP(fd, length, **kwargs)  # type: ignore[arg-type]
        if len(made) == 1:
            with open(path, "r+b") as handle:  # another process truncates it in place
                handle.truncate(2 * WINDOW + 10)
        return mapped

    monkeypatch.setattr(output_check.mmap, "mmap", truncating)
    with open(path, "rb", buffering=0) as stream:
        size, digest = hash_stream(stream)
    assert (size, made) == (2 * WINDOW + 10, [WINDOW, WINDOW, 10])
    assert digest == "sha256:" + hashlib.sha256(data[: 2 * WINDOW + 10]).hexdigest()


@pytest.mark.parametrize("mmap_switch", ["on", "off"])
def test_check_file_finds_a_byte_changed_in_place_and_a_truncation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mmap_switch: str
) -> None:
    """Real thresholds: a 5 MiB output is hashed from maps (or read, switched off)."""
    monkeypatch.setenv("DISTRIBUTOR_MMAP", mmap_switch)
    size = 5 * 1024 * 1024
    data = _write(tmp_path / "big.bin", size)
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    storage = LocalStorage(tmp_path)
    assert check_file(storage, "big.bin", path="big.bin", size=size, sha256=digest).status == OK
    with open(tmp_path / "big.bin", "r+b") as handle:  # same size, one byte changed in the middle
        handle.seek(size // 2)
        handle.write(bytes([data[size // 2] ^ 0xFF]))
    changed = check_file(storage, "big.bin", path="big.bin", size=size, sha256=digest)
    assert (changed.status, changed.bytes_read) == (DIGEST_MISMATCH, size)
    assert changed.actual_sha256 not in (None, digest)
    with open(tmp_path / "big.bin", "r+b") as handle:
        handle.truncate(size - 1)
    truncated = check_file(storage, "big.bin", path="big.bin", size=size, sha256=digest)
    assert (truncated.status, truncated.actual_size) == (SIZE_MISMATCH, size - 1)

"""Property tests of :func:`extract_bundle`: arbitrary or mutated archives either yield a valid
bundle or raise a staging error (400/413), and never write outside the destination."""

from __future__ import annotations

import gzip
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distributor_core.bundle import validate_bundle
from distributor_core.server.archive import ArchiveError, StagingError, TooLargeError, extract_bundle
from tests.server.harness import craft_tar, snapshot, valid_entries

VALID = craft_tar(valid_entries())


def _extract(data: bytes, *, compressed: bool, max_bytes: int = 1 << 20) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        base = Path(scratch)
        archive = base / "upload.archive"
        archive.write_bytes(data)
        before = snapshot(base)
        dest = base / "bundle"
        try:
            manifest = extract_bundle(archive, dest, compressed=compressed, max_bytes=max_bytes)
        except StagingError as exc:
            assert exc.status_code in (400, 413)
            assert str(exc).startswith(("invalid upload archive: ", "invalid source bundle: ")) or isinstance(
                exc, TooLargeError)
            outside = {k: v for k, v in snapshot(base).items() if not k.startswith("bundle")}
            assert outside == before
            return
        validate_bundle(dest, manifest)
        outside = {k: v for k, v in snapshot(base).items() if not k.startswith("bundle")}
        assert outside == before


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=4096), st.booleans())
def test_random_bytes(data: bytes, compressed: bool) -> None:
    _extract(data, compressed=compressed)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, len(VALID) - 1), st.integers(0, 255)), min_size=1, max_size=8),
       st.booleans())
def test_mutated_valid_archive(mutations: list[tuple[int, int]], compressed: bool) -> None:
    data = bytearray(VALID)
    for offset, value in mutations:
        data[offset] = value
    payload = gzip.compress(bytes(data), mtime=0) if compressed else bytes(data)
    _extract(payload, compressed=compressed)


@settings(max_examples=100, deadline=None)
@given(st.integers(1, len(VALID)))
def test_every_truncation(cut: int) -> None:
    _extract(VALID[:cut], compressed=False)


def test_valid_archive_extracts() -> None:
    with tempfile.TemporaryDirectory() as scratch:
        archive = Path(scratch) / "a"
        archive.write_bytes(VALID)
        manifest = extract_bundle(archive, Path(scratch) / "b", compressed=False, max_bytes=1 << 20)
        assert [f.path for f in manifest.files] == ["report.md", "summary.txt"]


def test_limit_is_exact() -> None:
    """The extracted-bytes limit counts manifest.json and the files; one byte less is refused."""
    with tempfile.TemporaryDirectory() as scratch:
        archive = Path(scratch) / "a"
        archive.write_bytes(VALID)
        entries = valid_entries()
        total = sum(len(e.data) for e in entries)
        extract_bundle(archive, Path(scratch) / "ok", compressed=False, max_bytes=total)
        with pytest.raises(TooLargeError):
            extract_bundle(archive, Path(scratch) / "no", compressed=False, max_bytes=total - 1)


def test_entry_cap_is_configurable() -> None:
    with tempfile.TemporaryDirectory() as scratch:
        archive = Path(scratch) / "a"
        archive.write_bytes(VALID)
        with pytest.raises(ArchiveError) as info:
            extract_bundle(archive, Path(scratch) / "b", compressed=False, max_bytes=1 << 20, max_entries=2)
        assert str(info.value) == (
            "invalid upload archive: too many entries (more than 2): server.http.limits.max_entries")

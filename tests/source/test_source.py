"""Bundles inside a storage backend: discovery, loading, streaming validation, newest selection."""

from __future__ import annotations

import os
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from distributor_core.bundle import (
    BundleValidationError,
    Manifest,
    ManifestError,
    ManifestFile,
    build_manifest,
    bundle_digest,
    write_manifest,
)
from distributor_core.source import (
    SourceBundle,
    discover_bundles,
    load_source_manifest,
    select_newest,
    validate_source_bundle,
)
from distributor_core.storage.capabilities import Capabilities, Feature
from distributor_core.storage.errors import ErrorKind, StorageError
from distributor_core.storage.local import LocalStorage
from tests.bundle.conftest import CREATED, REPORT, SUMMARY, make_bundle


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "spool"
    make_bundle(root / "daily-2")
    make_bundle(root / "daily-1", {"report.md": REPORT})
    make_bundle(root / "nested" / "weekly", {"a.txt": b"a"}, bundle_id="weekly")
    # a bundle inside a bundle is part of the outer bundle, never a bundle of its own
    make_bundle(root / "daily-2" / "attachments", {"x.txt": b"x"}, bundle_id="inner")
    # staging directories of write_bundle use reserved names and are never discovered
    make_bundle(root / ".distributor-tmp-0123456789abcdef", {"t.txt": b"t"}, bundle_id="staging")
    (root / "loose.txt").write_bytes(b"not a bundle")
    (root / "empty-dir").mkdir()
    return root


def test_discover_sorted_and_not_nested(tree: Path) -> None:
    storage = LocalStorage(tree)
    assert discover_bundles(storage) == ["daily-1", "daily-2", "nested/weekly"]


def test_discover_under_prefix(tree: Path) -> None:
    storage = LocalStorage(tree)
    assert discover_bundles(storage, "nested") == ["nested/weekly"]
    assert discover_bundles(storage, "daily-2") == ["daily-2"]
    assert discover_bundles(storage, "empty-dir") == []


def test_discover_root_bundle_stops_search(tree: Path) -> None:
    make_bundle(tree, {"loose.txt": b"not a bundle"}, bundle_id="root")
    assert discover_bundles(LocalStorage(tree)) == [""]


def test_discover_walk_limit(tree: Path) -> None:
    with pytest.raises(StorageError) as info:
        discover_bundles(LocalStorage(tree), limit=3)
    assert info.value.kind == ErrorKind.LIMIT_EXCEEDED


def test_discover_finds_symlinked_manifest_so_loading_reports_it(tmp_path: Path) -> None:
    root = tmp_path / "spool"
    make_bundle(root / "real")
    (root / "linked").mkdir()
    (root / "linked" / "manifest.json").symlink_to(root / "real" / "manifest.json")
    storage = LocalStorage(root)
    assert discover_bundles(storage) == ["linked", "real"]
    with pytest.raises(BundleValidationError, match=r"^manifest\.json is not a regular file"):
        load_source_manifest(storage, "linked")


def test_load_and_validate_valid_bundle(tree: Path) -> None:
    storage = LocalStorage(tree)
    manifest = load_source_manifest(storage, "daily-2")
    assert [f.path for f in manifest.files] == ["report.md", "summary.txt"]
    progress: list[int] = []
    assert validate_source_bundle(storage, "daily-2", manifest, progress=progress.append) is manifest
    assert sum(progress) == len(REPORT) + len(SUMMARY)


def test_load_root_bundle(tmp_path: Path) -> None:
    manifest = make_bundle(tmp_path)
    storage = LocalStorage(tmp_path)
    assert load_source_manifest(storage, "") == manifest
    validate_source_bundle(storage, "", manifest)


def test_load_missing_manifest(tree: Path) -> None:
    with pytest.raises(BundleValidationError, match=r"^manifest\.json does not exist$"):
        load_source_manifest(LocalStorage(tree), "empty-dir")


def test_load_invalid_manifest(tree: Path) -> None:
    (tree / "daily-1" / "manifest.json").write_text('{"schema_version": 1, "id": ""}')
    with pytest.raises(ManifestError, match=r"^manifest id is required$"):
        load_source_manifest(LocalStorage(tree), "daily-1")


def test_changed_file_fails_with_file_name(tree: Path) -> None:
    storage = LocalStorage(tree)
    manifest = load_source_manifest(storage, "daily-2")
    (tree / "daily-2" / "summary.txt").write_bytes(b"Summary\n\n")
    with pytest.raises(BundleValidationError) as info:
        validate_source_bundle(storage, "daily-2", manifest)
    assert str(info.value) == "file summary.txt size 9 does not match manifest size 8"


def test_same_size_change_fails_on_sha(tree: Path) -> None:
    storage = LocalStorage(tree)
    manifest = load_source_manifest(storage, "daily-2")
    (tree / "daily-2" / "report.md").write_bytes(b"# Report\nRainy.\n")
    with pytest.raises(BundleValidationError, match=r"^file report\.md sha256 sha256:[0-9a-f]{64} does not match"):
        validate_source_bundle(storage, "daily-2", manifest)


def test_missing_file(tree: Path) -> None:
    storage = LocalStorage(tree)
    manifest = load_source_manifest(storage, "daily-2")
    (tree / "daily-2" / "report.md").unlink()
    with pytest.raises(BundleValidationError, match=r"^file report\.md does not exist$"):
        validate_source_bundle(storage, "daily-2", manifest)


def subset(manifest: Manifest, count: slice) -> Manifest:
    files = manifest.files[count]
    return Manifest(1, manifest.id, bundle_digest(files), manifest.created, files)


def test_symlinked_file_and_ancestor(tmp_path: Path) -> None:
    root = tmp_path / "spool"
    manifest = make_bundle(root / "b", {"sub/report.md": REPORT, "top.md": REPORT})
    storage = LocalStorage(root)
    (root / "b" / "top.md").unlink()
    (root / "b" / "top.md").symlink_to(root / "b" / "sub" / "report.md")
    with pytest.raises(BundleValidationError, match=r"^file top\.md is not a regular file \(symlink\)$"):
        validate_source_bundle(storage, "b", subset(manifest, slice(1, 2)))
    os.rename(root / "b" / "sub", tmp_path / "elsewhere")
    (root / "b" / "sub").symlink_to(tmp_path / "elsewhere")
    expected = r"^file sub/report\.md is not a valid bundle file: symlinked path component b/sub$"
    with pytest.raises(BundleValidationError, match=expected):
        validate_source_bundle(storage, "b", subset(manifest, slice(0, 1)))


def test_directory_in_place_of_file(tree: Path) -> None:
    storage = LocalStorage(tree)
    manifest = load_source_manifest(storage, "daily-1")
    (tree / "daily-1" / "report.md").unlink()
    (tree / "daily-1" / "report.md").mkdir()
    with pytest.raises(BundleValidationError, match=r"^file report\.md is not a regular file \(directory\)$"):
        validate_source_bundle(storage, "daily-1", manifest)


def test_transport_errors_stay_storage_errors(tree: Path) -> None:
    storage = LocalStorage(tree)
    manifest = load_source_manifest(storage, "daily-1")

    class Broken(LocalStorage):
        def open_read(self, path: str):  # type: ignore[override]
            raise self.error("read", path, ErrorKind.UNAVAILABLE, "connection reset")

    with pytest.raises(StorageError) as info:
        validate_source_bundle(Broken(tree), "daily-1", manifest)
    assert info.value.kind == ErrorKind.UNAVAILABLE


def bundle(path: str, created: datetime) -> SourceBundle:
    files = (ManifestFile("a", "sha256:" + "0" * 64, 0),)
    return SourceBundle(path, Manifest(1, path or "root", "sha256:" + "1" * 64, created, files))


def test_select_newest_by_created_then_path() -> None:
    older = bundle("a", CREATED)
    newer = bundle("z", CREATED + timedelta(seconds=1))
    tie_b = bundle("b", CREATED + timedelta(seconds=1))
    assert select_newest([older, newer]) is newer
    assert select_newest([newer, tie_b]) is tie_b
    assert select_newest([tie_b, newer]) is tie_b
    assert select_newest([]) is None
    assert select_newest(iter([older])) is older


def test_select_newest_compares_instants_with_microseconds() -> None:
    base = datetime(2026, 1, 1, tzinfo=UTC)
    a = bundle("a", base)
    b = bundle("b", base + timedelta(microseconds=1))
    assert select_newest([a, b]) is b


def test_build_and_validate_round_trip_through_storage(tmp_path: Path) -> None:
    root = tmp_path / "b"
    root.mkdir()
    (root / "x.bin").write_bytes(os.urandom(3 * 1024 * 1024 + 17))
    manifest = build_manifest(root, id="big", scan=True, created=CREATED)
    write_manifest(root, manifest)
    seen: list[int] = []
    storage = LocalStorage(tmp_path)
    validate_source_bundle(storage, "b", load_source_manifest(storage, "b"), progress=seen.append)
    assert sum(seen) == manifest.files[0].size
    assert len(seen) >= 1


@pytest.mark.s3
def test_discover_and_validate_on_s3(moto_server, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from tests.peers.moto import make_s3_storage

    local = tmp_path / "b"
    manifest = make_bundle(local)
    storage = make_s3_storage(moto_server, prefix="spool")
    try:
        for name in ["manifest.json", "report.md", "summary.txt"]:
            storage.write_bytes(f"daily/{name}", (local / name).read_bytes(), overwrite=False)
        storage.write_bytes("daily/extra/manifest.json", b"{}", overwrite=False)
        storage.write_bytes("loose.txt", b"x", overwrite=False)
        assert discover_bundles(storage) == ["daily"]
        loaded = load_source_manifest(storage, "daily")
        assert loaded == manifest
        validate_source_bundle(storage, "daily", loaded)
        storage.write_bytes("daily/summary.txt", b"changed!\n", overwrite=True)
        with pytest.raises(BundleValidationError, match=r"^file summary\.txt size 9 does not match manifest size 8$"):
            validate_source_bundle(storage, "daily", loaded)
        storage.delete_file("daily/report.md")
        with pytest.raises(BundleValidationError, match=r"^file report\.md does not exist$"):
            validate_source_bundle(storage, "daily", loaded)
    finally:
        storage.close()


# ---------------------------------------------------------------------------- declared capabilities


class Declaring(LocalStorage):
    """Local storage declaring the capabilities of the test's choice; records stats, opens and
    the threads that opened."""

    def __init__(self, root: Path, capabilities: Capabilities, meet: int = 0) -> None:
        super().__init__(root)
        self._declared = capabilities
        self.calls: list[tuple[str, str]] = []
        self.threads: set[str] = set()
        # The first `meet` opens wait for each other: they can only all pass if that many reads
        # really run at once (a lone reader breaks the barrier after its timeout).
        self._meet = threading.Barrier(meet, timeout=30) if meet else None
        self._opens = 0
        self._count = threading.Lock()

    @property  # type: ignore[override]
    def capabilities(self) -> Capabilities:
        return self._declared

    def stat(self, path: str):  # type: ignore[override]
        self.calls.append(("stat", path))
        return super().stat(path)

    def open_read(self, path: str):  # type: ignore[override]
        self.calls.append(("open", path))
        self.threads.add(threading.current_thread().name)
        with self._count:
            self._opens += 1
            waits = self._meet is not None and self._opens <= self._meet.parties
        if waits:
            assert self._meet is not None
            self._meet.wait()
        return super().open_read(path)


@pytest.mark.parametrize("declared", [True, False])
def test_small_files_are_opened_before_a_stat_only_with_nonblocking_open(tree: Path, declared: bool) -> None:
    caps = LocalStorage.capabilities
    storage = Declaring(tree, caps if declared else caps.without(Feature.NONBLOCKING_OPEN))
    manifest = load_source_manifest(LocalStorage(tree), "daily-1")
    validate_source_bundle(storage, "daily-1", manifest)
    report = "daily-1/report.md"
    assert storage.calls == ([("open", report)] if declared else [("stat", report), ("open", report)])


def test_large_files_are_validated_on_the_declared_read_threads(tmp_path: Path) -> None:
    root = tmp_path / "src"
    make_bundle(root / "big", {f"f{n}.bin": bytes([n]) * (2 * 1024 * 1024) for n in range(4)})
    manifest = load_source_manifest(LocalStorage(root), "big")
    parallel = Declaring(root, LocalStorage.capabilities, meet=2)
    validate_source_bundle(parallel, "big", manifest)
    assert parallel.threads == {"distributor-validate-0", "distributor-validate-1"}
    sequential = Declaring(root, LocalStorage.capabilities.without(Feature.PARALLEL_READS))
    validate_source_bundle(sequential, "big", manifest)
    assert sequential.threads == {threading.main_thread().name}

"""Declared storage capabilities (storage/capabilities.py, issue 16 item 4) checked against what
each backend does: local, SFTP (real sshd) and S3 (moto), each bare and through the fault
injector, which must pass the declaration through (less only what it states it leaves out)."""

from __future__ import annotations

import os
import re
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from distributor_core.storage.base import Storage
from distributor_core.storage.capabilities import Capabilities, Feature
from distributor_core.storage.errors import ErrorKind, StorageError
from distributor_core.storage.faults import NOT_FORWARDED, FaultInjectingStorage
from distributor_core.storage.local import LocalStorage
from tests.storage.conftest import BackendCase

MiB = 1024 * 1024

#: what each backend declares; docs/integrations/storage-capabilities.md shows the same table
DECLARED: dict[str, set[Feature]] = {
    "local": {
        Feature.ATOMIC_RENAME,
        Feature.IN_PLACE_WRITES,
        Feature.CONDITIONAL_WRITES,
        Feature.EXCLUSIVE_CREATE,
        Feature.REVISIONS,
        Feature.NONBLOCKING_OPEN,
        Feature.FILE_IDENTITY,
        Feature.PARALLEL_WRITES,
        Feature.PARALLEL_READS,
    },
    "sftp": {
        Feature.ATOMIC_RENAME,
        Feature.IN_PLACE_WRITES,
        Feature.CONDITIONAL_WRITES,
        Feature.EXCLUSIVE_CREATE,
        Feature.REVISIONS,
        Feature.PARALLEL_WRITES,
    },
    "s3": {
        Feature.CONDITIONAL_WRITES,
        Feature.EXCLUSIVE_CREATE,
        Feature.REVISIONS,
        Feature.BATCHED_DELETES,
        Feature.STORED_SHA256,
        Feature.RECURSIVE_LISTING,
        Feature.PARALLEL_WRITES,
    },
}

DOCS = Path(__file__).resolve().parents[2] / "docs" / "integrations" / "storage-capabilities.md"


@pytest.fixture(params=["bare", "wrapped"])
def subject(backend: BackendCase, request: pytest.FixtureRequest) -> Storage:
    """The backend under test, or the fault injector around it (no faults)."""
    return backend.storage if request.param == "bare" else FaultInjectingStorage(backend.storage)


def test_each_backend_declares_the_documented_features(backend: BackendCase, subject: Storage) -> None:
    expected = DECLARED[backend.name] if subject is backend.storage else DECLARED[backend.name] - NOT_FORWARDED
    assert subject.capabilities.features == expected
    assert subject.capabilities == backend.storage.capabilities.without(*(expected ^ DECLARED[backend.name]))



def test_the_documentation_table_matches_the_declarations() -> None:
    rows = [line for line in DOCS.read_text().splitlines() if line.startswith("| `")]
    table = {}
    for row in rows:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        table[cells[0].strip("`")] = cells[1:4]
    assert set(table) == {f.value for f in Feature}
    for feature in Feature:
        marks = table[feature.value]
        shown = {name for name, mark in zip(("local", "sftp", "s3"), marks, strict=True) if mark.startswith("yes")}
        assert shown == {name for name, features in DECLARED.items() if feature in features}, feature


@pytest.mark.parametrize(("name", "page"), [("sftp", "ssh-sftp.md"), ("s3", "s3.md")])
def test_each_backend_page_lists_its_declaration(name: str, page: str) -> None:
    text = " ".join((DOCS.parent / page).read_text().split())
    start = text.index("Declared capabilities ([storage-capabilities.md](storage-capabilities.md)): ")
    sentence = text[start:].split(". ", 1)[0]
    declared, _, absent = sentence.partition("; not ")
    assert set(re.findall(r"`([a-z0-9_]+)`", declared)) == {f.value for f in DECLARED[name]}
    assert set(re.findall(r"`([a-z0-9_]+)`", absent)) == {f.value for f in Feature} - {f.value for f in DECLARED[name]}


def test_a_backend_that_does_not_declare_capabilities_cannot_be_instantiated() -> None:
    class Undeclared(Storage):  # a wrapper that forgot to pass the declaration through
        def stat(self, path):  # type: ignore[no-untyped-def]
            raise NotImplementedError

        def open_read(self, path):  # type: ignore[no-untyped-def]
            raise NotImplementedError

        def _write_stream(self, path, chunks, request):  # type: ignore[no-untyped-def]
            raise NotImplementedError

        def rename(self, src, dst, *, overwrite):  # type: ignore[no-untyped-def]
            raise NotImplementedError

        def delete_file(self, path):  # type: ignore[no-untyped-def]
            raise NotImplementedError

        def _iter_entries(self, prefix, recursive):  # type: ignore[no-untyped-def]
            raise NotImplementedError

    with pytest.raises(TypeError, match="capabilities"):
        Undeclared()  # type: ignore[abstract]


def test_the_wrapper_reports_a_changed_declaration_of_its_backend(tmp_path: Path) -> None:
    class ObjectStoreLike(LocalStorage):
        capabilities = LocalStorage.capabilities.without(Feature.ATOMIC_RENAME, Feature.IN_PLACE_WRITES)

    wrapped = FaultInjectingStorage(ObjectStoreLike(tmp_path))
    assert Feature.ATOMIC_RENAME not in wrapped.capabilities
    assert wrapped.capabilities.features == (
        DECLARED["local"] - {Feature.ATOMIC_RENAME, Feature.IN_PLACE_WRITES} - NOT_FORWARDED
    )
    with pytest.raises(StorageError) as info:
        wrapped.write_stream(".distributor-tmp-0123456789abcdef", [b"x"], overwrite=False, in_place=True)
    assert info.value.kind == ErrorKind.UNSUPPORTED
    assert os.listdir(tmp_path) == []


# ---------------------------------------------------------------------------- atomic rename


def test_atomic_rename_moves_the_entry_instead_of_copying_it(backend: BackendCase, subject: Storage) -> None:
    subject.write_bytes("r/src.bin", b"payload", overwrite=False)
    before = subject.stat("r/src.bin")
    time.sleep(1.1)  # modification times have one-second resolution on SFTP and S3
    subject.rename("r/src.bin", "r/dst.bin", overwrite=False)
    after = subject.stat("r/dst.bin")
    assert not subject.exists("r/src.bin") and subject.read_bytes("r/dst.bin") == b"payload"
    moved = (after.revision, after.mtime) == (before.revision, before.mtime)
    assert moved == (Feature.ATOMIC_RENAME in subject.capabilities)
    if not moved:  # a copy (S3 CopyObject) is a new object written at rename time
        assert after.mtime is not None and before.mtime is not None and after.mtime > before.mtime


# ---------------------------------------------------------------------------- in-place writes

TEMP = "w/.distributor-tmp-0123456789abcdef"


def _reserved_entries(storage: Storage) -> list[str]:
    return [e.path for e in storage.scan("", include_reserved=True, include_dirs=False).entries]


def test_in_place_write_goes_straight_to_the_name(backend: BackendCase, subject: Storage) -> None:
    observer = backend.other()
    seen: list[list[str]] = []

    def chunks() -> Iterator[bytes]:
        yield b"a" * MiB
        seen.append(_reserved_entries(observer))
        yield b"b" * MiB

    data_sha = _sha(b"a" * MiB + b"b" * MiB)
    if Feature.IN_PLACE_WRITES not in subject.capabilities:
        with pytest.raises(StorageError) as info:
            subject.write_stream(TEMP, chunks(), overwrite=False, in_place=True)
        assert (info.value.kind, info.value.op, info.value.path) == (ErrorKind.UNSUPPORTED, "write", TEMP)
        assert seen == [] and _reserved_entries(observer) == []
        return
    entry = subject.write_stream(
        TEMP, chunks(), overwrite=False, expected_size=2 * MiB, expected_sha256=data_sha, in_place=True
    )
    assert (entry.path, entry.size) == (TEMP, 2 * MiB)
    assert seen == [[TEMP]]  # visible under its own name while written; no temporary of its own
    assert subject.read_bytes(TEMP) == b"a" * MiB + b"b" * MiB


def test_in_place_write_is_exclusive_and_leaves_nothing_on_failure(backend: BackendCase, subject: Storage) -> None:
    if Feature.IN_PLACE_WRITES not in subject.capabilities:
        with pytest.raises(StorageError) as info:
            subject.write_stream(TEMP, [b"abc"], overwrite=False, in_place=True)
        assert info.value.kind == ErrorKind.UNSUPPORTED
        return
    subject.write_stream(TEMP, [b"abc"], overwrite=False, expected_size=3, in_place=True)
    with pytest.raises(StorageError) as info:
        subject.write_stream(TEMP, [b"zzz"], overwrite=False, in_place=True)
    assert info.value.kind == ErrorKind.ALREADY_EXISTS
    assert subject.read_bytes(TEMP) == b"abc"
    other = "w/.distributor-tmp-fedcba9876543210"
    with pytest.raises(StorageError) as info:
        subject.write_stream(other, [b"abcd"], overwrite=False, expected_size=3, in_place=True)
    assert info.value.kind == ErrorKind.INTEGRITY
    with pytest.raises(SourceBroke):
        subject.write_stream(other, _breaking([b"x" * MiB]), overwrite=False, in_place=True)
    assert _reserved_entries(subject) == [TEMP]


@pytest.mark.parametrize("kwargs", [{"overwrite": True}, {"overwrite": False, "if_revision": ""}])
def test_in_place_write_refuses_replacing_arguments(backend: BackendCase, subject: Storage, kwargs: dict) -> None:
    with pytest.raises((ValueError, StorageError)) as info:
        subject.write_stream(TEMP, [b"x"], in_place=True, **kwargs)
    if Feature.IN_PLACE_WRITES in subject.capabilities:
        assert info.type is ValueError and "in-place" in str(info.value)
    assert _reserved_entries(subject) == []


class SourceBroke(Exception):
    pass


def _breaking(chunks: list[bytes]) -> Iterator[bytes]:
    yield from chunks
    raise SourceBroke()


def _sha(data: bytes) -> str:
    import hashlib

    return "sha256:" + hashlib.sha256(data).hexdigest()


# ---------------------------------------------------------------------------- conditional writes, revisions


def test_conditional_writes(backend: BackendCase, subject: Storage) -> None:
    assert Feature.CONDITIONAL_WRITES in subject.capabilities  # every backend: state writes need it
    path = "c/.distributor.json"
    subject.write_bytes(path, b"v1", overwrite=True, if_revision="")  # "" : nothing there yet
    with pytest.raises(StorageError) as info:
        subject.write_bytes(path, b"v1 again", overwrite=True, if_revision="")
    assert info.value.kind == ErrorKind.CONFLICT
    current = subject.stat(path).revision
    assert current
    with pytest.raises(StorageError) as info:
        subject.write_bytes(path, b"stale", overwrite=True, if_revision=current + "x")
    assert info.value.kind == ErrorKind.CONFLICT
    subject.write_bytes(path, b"version 2", overwrite=True, if_revision=current)
    assert subject.read_bytes(path) == b"version 2"
    assert backend.leftovers() == []


def test_revisions_identify_the_stored_version(backend: BackendCase, subject: Storage) -> None:
    assert Feature.REVISIONS in subject.capabilities
    subject.write_bytes("v/file.txt", b"one", overwrite=False)
    first = subject.stat("v/file.txt").revision
    listed = {e.path: e.revision for e in subject.walk("v")}
    assert first and listed["v/file.txt"] == first
    subject.write_bytes("v/file.txt", b"version two", overwrite=True)
    second = subject.stat("v/file.txt").revision
    assert second and second != first


# ---------------------------------------------------------------------------- batched deletes


@pytest.mark.parametrize("call", ["delete_paths", "delete_prefix"])
def test_batched_deletes_remove_many_targets_per_request(
    backend: BackendCase, subject: Storage, call: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = [f"d/{n}.txt" for n in range(5)]
    for path in paths:
        subject.write_bytes(path, b"x", overwrite=False)
    one_by_one: list[str] = []
    delete_file = subject.delete_file

    def counted(path: str) -> None:
        one_by_one.append(path)
        delete_file(path)

    monkeypatch.setattr(subject, "delete_file", counted)
    with _s3_requests(backend, "DeleteObject", "DeleteObjects") as requests:
        if call == "delete_paths":
            deleted = subject.delete_paths(paths, op="delete managed outputs")
        else:
            deleted = subject.delete_prefix("d")
    assert deleted == paths
    assert [p for p in paths if subject.exists(p)] == []
    if Feature.BATCHED_DELETES in subject.capabilities:
        assert one_by_one == []
        assert requests == {"DeleteObjects": 1}  # five keys, one request
    else:
        assert one_by_one == paths
        if backend.name == "s3":  # S3 under the fault injector: the generic one-by-one deletes
            assert requests == {"DeleteObject": 5}


@contextmanager
def _s3_requests(backend: BackendCase, *operations: str) -> Iterator[Counter[str]]:
    """Count the S3 API calls ``operations`` made by the backend's client (nothing elsewhere)."""
    seen: Counter[str] = Counter()
    if backend.name != "s3":
        yield seen
        return
    events = backend.storage.client.meta.events  # type: ignore[attr-defined]
    handlers = {name: (lambda name=name, **_: seen.update([name])) for name in operations}
    for name, handler in handlers.items():
        events.register(f"before-call.s3.{name}", handler)
    try:
        yield seen
    finally:
        for name, handler in handlers.items():
            events.unregister(f"before-call.s3.{name}", handler)


# ---------------------------------------------------------------------------- parallelism, non-blocking opens


def test_declared_write_threads_write_concurrently(backend: BackendCase, subject: Storage) -> None:
    capabilities = subject.capabilities
    threads = capabilities.write_threads(8, 8 * capabilities.parallel_min_file_size + 8)
    assert (threads > 1) == (Feature.PARALLEL_WRITES in capabilities)
    assert threads == min(capabilities.parallel_writes, 8)
    inside = 0
    most = 0
    lock = threading.Lock()
    barrier = threading.Barrier(threads, timeout=30)

    def chunks(n: int) -> Iterator[bytes]:
        nonlocal inside, most
        with lock:
            inside += 1
            most = max(most, inside)
        barrier.wait()  # every declared writer is inside its write at the same time
        yield bytes([n]) * 1000
        with lock:
            inside -= 1

    from distributor_core.parallel import run_ordered

    run_ordered(
        threads,
        lambda n: subject.write_stream(f"par/{n}.bin", chunks(n), overwrite=False, expected_size=1000),
        threads=threads,
        name="test-write",
    )
    assert most == threads
    assert [subject.read_bytes(f"par/{n}.bin") for n in range(threads)] == [bytes([n]) * 1000 for n in range(threads)]


def test_nonblocking_open_refuses_a_fifo_at_once(tmp_path: Path) -> None:
    storage = LocalStorage(tmp_path)
    assert Feature.NONBLOCKING_OPEN in storage.capabilities
    os.mkfifo(tmp_path / "pipe")
    outcome: list[BaseException] = []
    reader = threading.Thread(target=lambda: _open_into(storage, "pipe", outcome), daemon=True)
    reader.start()
    reader.join(5)
    assert not reader.is_alive(), "open_read waited on a FIFO"
    assert isinstance(outcome[0], StorageError) and outcome[0].kind == ErrorKind.UNSUPPORTED


def test_file_identity_is_the_lstat_of_each_regular_file(backend: BackendCase, subject: Storage) -> None:
    subject.write_bytes("id/a.txt", b"abc", overwrite=False)
    if Feature.FILE_IDENTITY not in subject.capabilities:
        with pytest.raises(StorageError) as raised:
            subject.file_identities(["id/a.txt"])
        assert raised.value.kind == ErrorKind.UNSUPPORTED
        return
    assert isinstance(subject, LocalStorage)
    info = os.lstat(subject.root / "id" / "a.txt")
    assert subject.file_identities(["id/a.txt", "id", "id/missing"]) == [
        (info.st_dev, info.st_ino, 3, info.st_mtime_ns, info.st_ctime_ns), None, None,
    ]


def _open_into(storage: Storage, path: str, outcome: list[BaseException]) -> None:
    try:
        storage.open_read(path).close()
    except BaseException as exc:
        outcome.append(exc)


# ---------------------------------------------------------------------------- the declaration type


def test_thread_counts_follow_the_file_sizes() -> None:
    caps = Capabilities(
        frozenset({Feature.ATOMIC_RENAME}), parallel_writes=2, parallel_reads=3, parallel_min_file_size=MiB
    )
    assert caps.features == {Feature.ATOMIC_RENAME, Feature.PARALLEL_WRITES, Feature.PARALLEL_READS}
    assert caps.write_threads(10, 10 * MiB) == 2
    assert caps.read_threads(10, 10 * MiB) == 3
    assert caps.read_threads(2, 10 * MiB) == 2
    assert caps.write_threads(10, 10 * MiB - 1) == 1  # small on average: one thread
    assert caps.write_threads(1, 100 * MiB) == 1
    sequential = Capabilities(frozenset())
    assert sequential.features == frozenset() and sequential.write_threads(100, 100 * MiB) == 1
    assert Capabilities(parallel_writes=4).write_threads(3, 0) == 3  # no size floor


def test_declarations_are_checked() -> None:
    with pytest.raises(ValueError, match="parallel_writes follow from the thread counts"):
        Capabilities(frozenset({Feature.PARALLEL_WRITES}))
    with pytest.raises(ValueError, match="at least 1"):
        Capabilities(parallel_reads=0)
    with pytest.raises(ValueError):
        Capabilities(frozenset({"teleport"}))  # type: ignore[arg-type]
    caps = Capabilities(frozenset({Feature.REVISIONS}))
    with pytest.raises(AttributeError):
        caps.parallel_writes = 8  # type: ignore[misc]
    assert caps.names() == ["revisions"]


# ---------------------------------------------------------------------------- recursive listing

#: a spool of bundles: nested ones inside a bundle and reserved staging names are not bundles
SPOOL = [
    "daily-1/manifest.json", "daily-1/report.md",
    "daily-2/manifest.json", "daily-2/a/b/c.txt", "daily-2/attachments/manifest.json",
    "nested/weekly/manifest.json", "nested/weekly/w.txt",
    ".distributor-tmp-0123456789abcdef/manifest.json", "loose.txt",
]


def test_discovery_finds_the_same_bundles_on_every_backend(backend: BackendCase, subject: Storage) -> None:
    from distributor_core.source import discover_bundles

    backend.plant_many(SPOOL)
    assert discover_bundles(subject) == ["daily-1", "daily-2", "nested/weekly"]
    assert discover_bundles(subject, "nested") == ["nested/weekly"]
    assert discover_bundles(subject, "daily-2") == ["daily-2"]
    with pytest.raises(StorageError) as info:
        discover_bundles(subject, limit=3)
    assert info.value.kind == ErrorKind.LIMIT_EXCEEDED


def test_discovery_lists_once_with_recursive_listing_and_never_inside_a_bundle_without(
    backend: BackendCase, subject: Storage, monkeypatch: pytest.MonkeyPatch
) -> None:
    from distributor_core.source import discover_bundles

    backend.plant_many(SPOOL)
    walked: list[tuple[str, bool]] = []
    walk = subject.walk

    def recorded(prefix: str = "", **kwargs):  # type: ignore[no-untyped-def]
        walked.append((prefix, kwargs.get("recursive", True)))
        return walk(prefix, **kwargs)

    monkeypatch.setattr(subject, "walk", recorded)
    with _s3_requests(backend, "ListObjectsV2") as requests:
        assert discover_bundles(subject) == ["daily-1", "daily-2", "nested/weekly"]
    if Feature.RECURSIVE_LISTING in subject.capabilities:
        assert walked == [("", True)]
        assert requests == {"ListObjectsV2": 1}
    else:
        assert all(recursive is False for _, recursive in walked)
        assert sorted(prefix for prefix, _ in walked) == ["", "daily-1", "daily-2", "nested", "nested/weekly"]

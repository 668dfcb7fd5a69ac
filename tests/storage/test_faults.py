"""FaultInjectingStorage (issue 9): counting, nth-call and path faults, half-way writes, and the
generic base operations running on the wrapped primitives so faults reach them."""

from __future__ import annotations

from pathlib import Path

import pytest

from distributor_core.storage.base import Storage
from distributor_core.storage.capabilities import Feature
from distributor_core.storage.errors import ErrorKind, StorageError
from distributor_core.storage.faults import OP_KINDS, Fault, FaultInjectingStorage
from distributor_core.storage.local import LocalStorage
from tests.storage.conftest import BackendCase


@pytest.fixture
def inner(tmp_path: Path) -> LocalStorage:
    return LocalStorage(tmp_path / "root", create=True)


def files(storage: Storage) -> list[str]:
    return [e.path for e in storage.walk("", include_dirs=False, include_reserved=True)]


def publish(storage: Storage) -> None:
    """A miniature publication: two outputs under temporary names, renamed, then state."""
    storage.write_bytes("b/.distributor-tmp-aaaaaaaaaaaaaaaa", b"report", overwrite=False)
    storage.write_bytes("b/.distributor-tmp-bbbbbbbbbbbbbbbb", b"<html>", overwrite=False)
    storage.rename("b/.distributor-tmp-aaaaaaaaaaaaaaaa", "b/report.md", overwrite=True)
    storage.rename("b/.distributor-tmp-bbbbbbbbbbbbbbbb", "b/report.html", overwrite=True)
    storage.write_bytes("b/.distributor.json", b"{}", overwrite=True)


def test_counts_every_primitive_call(inner: LocalStorage) -> None:
    storage = FaultInjectingStorage(inner)
    publish(storage)
    assert storage.read_bytes("b/report.md") == b"report"
    assert storage.exists("b/report.html")
    assert storage.has_any("b")
    storage.delete_managed_outputs("b", ["report.md", "report.html"])
    assert storage.counts == {"write": 3, "rename": 2, "delete": 2, "stat": 3, "list": 1, "read": 1, "rmdir": 2}
    assert storage.calls[:3] == [
        ("write", "b/.distributor-tmp-aaaaaaaaaaaaaaaa"),
        ("write", "b/.distributor-tmp-bbbbbbbbbbbbbbbb"),
        ("rename", "b/.distributor-tmp-aaaaaaaaaaaaaaaa -> b/report.md"),
    ]
    assert storage.injected == []
    storage.reset_counts()
    assert storage.counts == dict.fromkeys(OP_KINDS, 0) and storage.calls == []


def test_fail_every_index_after_counting_a_clean_run(tmp_path: Path) -> None:
    probe = FaultInjectingStorage(LocalStorage(tmp_path / "probe", create=True))
    publish(probe)
    clean = files(probe)
    for op in ("write", "rename"):
        total = probe.count(op)
        assert total > 0
        for n in range(1, total + 1):
            storage = FaultInjectingStorage(LocalStorage(tmp_path / f"{op}-{n}", create=True), [Fault(op, nth=n)])
            with pytest.raises(StorageError) as info:
                publish(storage)
            assert (info.value.kind, info.value.cause) == (ErrorKind.OTHER, "injected fault")
            assert storage.count(op) == n  # stopped right at the failed call
            assert len(storage.injected) == 1 and storage.injected[0][0] == op
            assert files(storage) != clean


def test_nth_delete_fails_with_permission_and_stops_a_managed_delete(inner: LocalStorage) -> None:
    storage = FaultInjectingStorage(inner)
    for name in ("a.txt", "b.txt", "c.txt"):
        storage.write_bytes(f"bundle/{name}", b"x", overwrite=False)
    fault = storage.fail("delete", nth=2)
    with pytest.raises(StorageError) as info:
        storage.delete_managed_outputs("bundle", ["a.txt", "b.txt", "c.txt"])
    assert (info.value.kind, info.value.op, info.value.path) == (ErrorKind.PERMISSION, "delete", "bundle/b.txt")
    assert str(info.value) == "delete local bundle/b.txt: permission: injected fault"
    assert files(inner) == ["bundle/b.txt", "bundle/c.txt"]
    assert (fault.seen, fault.hits) == (2, 1)
    # the fault fired once; the retry goes through
    assert storage.delete_managed_outputs("bundle", ["b.txt", "c.txt"]) == ["bundle/b.txt", "bundle/c.txt"]


def test_path_predicate_and_times(inner: LocalStorage) -> None:
    storage = FaultInjectingStorage(inner)
    storage.fail("write", path=lambda p: p.endswith(".html"), times=None, kind="unavailable")
    storage.write_bytes("a.md", b"a", overwrite=False)
    for _ in range(3):
        with pytest.raises(StorageError) as info:
            storage.write_bytes("a.html", b"a", overwrite=False)
        assert info.value.kind == ErrorKind.UNAVAILABLE
    storage.clear_faults()
    storage.write_bytes("a.html", b"a", overwrite=False)
    assert files(inner) == ["a.html", "a.md"]

    storage.fail("stat", path="a.md", times=2)
    assert [storage.exists("a.html"), storage.exists("a.html")] == [True, True]
    for _ in range(2):
        with pytest.raises(StorageError):
            storage.exists("a.md")
    assert storage.exists("a.md")


def test_rename_faults_match_either_side(inner: LocalStorage) -> None:
    storage = FaultInjectingStorage(inner)
    storage.write_bytes("tmp", b"t", overwrite=False)
    storage.fail("rename", path="final.txt")
    with pytest.raises(StorageError) as info:
        storage.rename("tmp", "final.txt", overwrite=True)
    assert (info.value.op, info.value.path) == ("rename", "final.txt")
    assert files(inner) == ["tmp"]


def test_after_mode_lets_the_call_take_effect(inner: LocalStorage) -> None:
    storage = FaultInjectingStorage(inner)
    storage.write_bytes("tmp", b"t", overwrite=False)
    storage.fail("rename", when="after")
    with pytest.raises(StorageError):
        storage.rename("tmp", "final.txt", overwrite=True)
    assert files(inner) == ["final.txt"]
    storage.fail("write", when="after")
    with pytest.raises(StorageError):
        storage.write_bytes("state.json", b"{}", overwrite=False)
    assert inner.read_bytes("state.json") == b"{}"


def test_list_faults_reach_walks_has_any_and_prefix_deletes(inner: LocalStorage) -> None:
    inner.write_bytes("p/a.txt", b"a", overwrite=False)
    storage = FaultInjectingStorage(inner)
    storage.fail("list", times=None)
    for call in (
        lambda: storage.walk("p"),
        lambda: storage.scan("p"),
        lambda: storage.list(""),
        lambda: storage.has_any("p"),
        lambda: storage.delete_prefix("p"),
    ):
        with pytest.raises(StorageError) as info:
            call()
        assert (info.value.op, info.value.kind) == ("walk", ErrorKind.OTHER)
    assert storage.count("list") == 5
    assert files(inner) == ["p/a.txt"]


def test_stat_and_rmdir_faults_reach_managed_deletes(inner: LocalStorage) -> None:
    inner.write_bytes("b/d/x.txt", b"x", overwrite=False)
    inner.write_bytes("b/y.txt", b"y", overwrite=False)
    storage = FaultInjectingStorage(inner, [Fault("stat", path="b/y.txt")])
    with pytest.raises(StorageError) as info:
        storage.delete_managed_outputs("b", ["d/x.txt", "y.txt"])
    assert (info.value.op, info.value.path) == ("stat", "b/y.txt")
    assert files(inner) == ["b/y.txt"]
    # after x.txt: b/d was pruned, then b was tried (not empty) before y.txt failed
    assert [call for call in storage.calls if call[0] == "rmdir"] == [("rmdir", "b/d"), ("rmdir", "b")]

    inner.write_bytes("c/e/z.txt", b"z", overwrite=False)
    storage = FaultInjectingStorage(inner, [Fault("rmdir", kind="permission")])
    with pytest.raises(StorageError) as info:
        storage.delete_managed_outputs("c", ["e/z.txt"])
    assert (info.value.op, info.value.kind) == ("remove directory", ErrorKind.PERMISSION)
    assert inner.stat("c/e").type == "directory"


def test_read_fault_half_way(inner: LocalStorage) -> None:
    inner.write_bytes("src.bin", bytes(range(256)) * 4, overwrite=False)
    storage = FaultInjectingStorage(inner, [Fault("read", after_bytes=300)])
    stream = storage.open_read("src.bin")
    assert len(stream.read(200)) == 200
    assert len(stream.read(200)) == 100
    with pytest.raises(StorageError) as info:
        stream.read(200)
    assert (info.value.op, info.value.path) == ("read", "src.bin")
    stream.close()
    assert storage.read_bytes("src.bin") == bytes(range(256)) * 4  # only the first read failed


def test_custom_errors(inner: LocalStorage) -> None:
    class Crash(BaseException):
        pass

    storage = FaultInjectingStorage(inner)
    storage.fail("write", error=Crash("power cut"))
    with pytest.raises(Crash):
        storage.write_bytes("a.txt", b"a", overwrite=False)
    storage.fail("delete", error=lambda op, path: OSError(f"{op} {path} failed"))
    inner.write_bytes("b.txt", b"b", overwrite=False)
    with pytest.raises(OSError, match=r"delete b\.txt failed"):
        storage.delete_file("b.txt")
    assert files(inner) == ["b.txt"]


def test_wrapper_forwards_backend_attributes(inner: LocalStorage) -> None:
    storage = FaultInjectingStorage(inner)
    assert (storage.backend, storage.root_display) == ("local", inner.root_display)
    # local declares one feature the wrapper leaves out: file identities (validation under the
    # wrapper reads, and can fail, every file instead of trusting a validation cache)
    assert storage.capabilities == inner.capabilities.without(Feature.FILE_IDENTITY)
    assert storage.root == inner.root
    assert repr(storage).startswith("FaultInjectingStorage(")


@pytest.mark.parametrize(
    "kwargs",
    [{"op": "copy"}, {"op": "write", "nth": 0}, {"op": "stat", "after_bytes": 3}, {"op": "write", "when": "later"}],
)
def test_bad_fault_definitions(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        Fault(**kwargs)  # type: ignore[arg-type]


def test_half_way_write_fault_leaves_nothing_on_any_backend(backend: BackendCase) -> None:
    storage = FaultInjectingStorage(backend.storage)
    storage.write_bytes("out/old.bin", b"previous", overwrite=False)
    storage.fail("write", after_bytes=3 * 1024 * 1024, kind="unavailable")
    block = b"z" * (1024 * 1024)
    with pytest.raises(StorageError) as info:
        storage.write_stream("out/new.bin", [block] * 4, overwrite=False)
    assert (info.value.kind, info.value.op, info.value.path) == (ErrorKind.UNAVAILABLE, "write", "out/new.bin")
    storage.fail("write", after_bytes=10)
    with pytest.raises(StorageError):
        storage.write_stream("out/old.bin", [block], overwrite=True)
    assert files(backend.storage) == ["out/old.bin"]
    assert backend.storage.read_bytes("out/old.bin") == b"previous"
    assert backend.leftovers() == []


def test_nth_delete_fault_on_any_backend(backend: BackendCase) -> None:
    backend.plant_many(["b/1.txt", "b/2.txt", "b/3.txt", "b/.distributor.json"])
    storage = FaultInjectingStorage(backend.storage, [Fault("delete", nth=3)])
    with pytest.raises(StorageError) as info:
        storage.delete_managed_bundle("b", ["1.txt", "2.txt", "3.txt"])
    assert (info.value.kind, info.value.path) == (ErrorKind.PERMISSION, "b/3.txt")
    assert files(backend.storage) == ["b/.distributor.json", "b/3.txt"]

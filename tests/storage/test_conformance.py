"""Backend conformance: the storage contract (core-semantics §8, interfaces §5.1, §5.5,
resolutions A4) checked identically against local, SFTP (real sshd) and S3 (moto)."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from distributor_core import paths as lp
from distributor_core.storage.base import iter_chunks
from distributor_core.storage.capabilities import Feature
from distributor_core.storage.errors import ErrorKind, StorageError
from tests.storage.conftest import BackendCase, io_probe

MiB = 1024 * 1024
EMPTY_SHA256 = "sha256:" + hashlib.sha256(b"").hexdigest()


def sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def kind_of(info: pytest.ExceptionInfo[StorageError]) -> ErrorKind:
    return info.value.kind


def random_chunks(count: int, size: int = MiB, seed: int = 7) -> list[bytes]:
    rng = random.Random(seed)
    return [rng.randbytes(size) for _ in range(count)]


class SourceBroke(Exception):
    """Raised by a chunk iterator half way through a write."""


def breaking(chunks: list[bytes], error: BaseException) -> Iterator[bytes]:
    yield from chunks
    raise error


def files_under(case: BackendCase, prefix: str = "") -> list[str]:
    return [e.path for e in case.storage.scan(prefix, include_reserved=True, include_dirs=False, limit=100_000).entries]


# ---------------------------------------------------------------------------- names


NAMES = [
    "dir with space/file name.txt",
    "ünïcødé/日本語 ✓.txt",
    "chars #%+&/a#b%c+d&e=f.txt",
    "percent%2F lookalike/100%25 x%20y.txt",
    "plus+ +/+ + +.md",
]


@pytest.mark.parametrize("name", NAMES)
def test_unusual_names_round_trip(backend: BackendCase, name: str) -> None:
    storage = backend.storage
    data = f"content of {name}".encode()
    entry = storage.write_bytes(name, data, overwrite=False)
    assert (entry.path, entry.size) == (name, len(data))
    stat = storage.stat(name)
    assert (stat.type, stat.size) == ("file", len(data))
    assert storage.read_bytes(name) == data
    assert backend.raw_bytes(name) == data
    parent = lp.parent(name)
    assert [e.path for e in storage.list(parent)] == [name]
    assert [e.path for e in storage.walk("", include_dirs=False)] == [name]
    storage.delete_file(name)
    with pytest.raises(StorageError) as info:
        storage.stat(name)
    assert kind_of(info) == ErrorKind.NOT_FOUND


# ---------------------------------------------------------------------------- sizes and streaming


def test_zero_length_file(backend: BackendCase) -> None:
    storage = backend.storage
    entry = storage.write_stream("empty.txt", iter([]), overwrite=False, expected_size=0, expected_sha256=EMPTY_SHA256)
    assert entry.size == 0
    storage.write_stream("empty-chunks.txt", [b"", b""], overwrite=False, expected_size=0)
    for path in ("empty.txt", "empty-chunks.txt"):
        assert storage.stat(path).size == 0
        assert storage.read_bytes(path) == b""
        with storage.open_read(path) as stream:
            assert stream.read(10) == b""
            assert stream.read() == b""
        assert backend.raw_bytes(path) == b""


def test_multi_megabyte_file_streams_both_ways(backend: BackendCase) -> None:
    storage = backend.storage
    chunks = random_chunks(12)
    digest = hashlib.sha256()
    for chunk in chunks:
        digest.update(chunk)
    size = 12 * MiB
    expected = "sha256:" + digest.hexdigest()
    entry = storage.write_stream(
        "big/blob.bin", iter(chunks), overwrite=False, expected_size=size, expected_sha256=expected
    )
    assert entry.size == size
    assert storage.stat("big/blob.bin").size == size

    read_digest = hashlib.sha256()
    total = 0
    largest = 0
    with storage.open_read("big/blob.bin") as stream:
        for chunk in iter_chunks(stream, MiB):
            read_digest.update(chunk)
            total += len(chunk)
            largest = max(largest, len(chunk))
    assert (total, read_digest.hexdigest()) == (size, digest.hexdigest())
    assert largest <= MiB

    # odd-sized reads return exactly what was asked for, then the rest, then nothing
    with storage.open_read("big/blob.bin") as stream:
        assert stream.read(0) == b""
        assert stream.read(7) == chunks[0][:7]
        assert stream.read(MiB) == chunks[0][7:] + chunks[1][:7]
        rest = stream.read()
        assert len(rest) == size - MiB - 7
        assert rest[-16:] == chunks[-1][-16:]
        assert stream.read() == b""
        assert stream.read(5) == b""


def test_read_bytes_limit(backend: BackendCase) -> None:
    backend.storage.write_bytes("small.json", b"0123456789", overwrite=False)
    assert backend.storage.read_bytes("small.json", max_size=10) == b"0123456789"
    with pytest.raises(StorageError) as info:
        backend.storage.read_bytes("small.json", max_size=9)
    assert kind_of(info) == ErrorKind.LIMIT_EXCEEDED


def test_stream_closed_early_leaves_backend_usable(backend: BackendCase) -> None:
    storage = backend.storage
    storage.write_stream("partial.bin", iter(random_chunks(6)), overwrite=False)
    for _ in range(3):
        stream = storage.open_read("partial.bin")
        assert len(stream.read(1000)) == 1000
        stream.close()
        stream.close()  # closing twice is harmless
    assert storage.stat("partial.bin").size == 6 * MiB
    storage.write_bytes("after.txt", b"still fine", overwrite=False)
    assert storage.read_bytes("after.txt") == b"still fine"


def test_reading_a_closed_stream_is_a_value_error(backend: BackendCase) -> None:
    backend.storage.write_bytes("closed.txt", b"0123456789", overwrite=False)
    stream = backend.storage.open_read("closed.txt")
    assert stream.read(3) == b"012"
    stream.close()
    assert stream.closed
    with pytest.raises(ValueError):
        stream.read(1)


# ---------------------------------------------------------------------------- failed writes


def test_write_failing_half_way_leaves_nothing(backend: BackendCase) -> None:
    storage = backend.storage
    broke = SourceBroke("source went away")
    # 9 MiB: past S3's default part size, so a multipart upload is in progress when it breaks
    with pytest.raises(SourceBroke) as info:
        storage.write_stream("out/report.bin", breaking(random_chunks(9), broke), overwrite=False)
    assert info.value is broke
    assert not storage.exists("out/report.bin")
    assert backend.raw_bytes("out/report.bin") is None
    assert backend.leftovers() == []
    assert files_under(backend) == []


def test_write_failing_half_way_keeps_the_old_content(backend: BackendCase) -> None:
    storage = backend.storage
    storage.write_bytes("out/report.bin", b"old publication", overwrite=False)
    with pytest.raises(SourceBroke):
        storage.write_stream("out/report.bin", breaking([b"new " * 1000], SourceBroke()), overwrite=True)
    assert storage.read_bytes("out/report.bin") == b"old publication"
    assert backend.leftovers() == []
    assert files_under(backend) == ["out/report.bin"]


@pytest.mark.parametrize(
    ("expected_size", "expected_sha256", "problem"),
    [
        (None, sha256(b"something else"), "sha256"),
        (5, None, "does not match expected size 5"),
        (20, None, "size 11 does not match expected size 20"),
        (11, sha256(b"hello world") + "0", "sha256"),
    ],
)
def test_integrity_mismatch_leaves_nothing(
    backend: BackendCase, expected_size: int | None, expected_sha256: str | None, problem: str
) -> None:
    storage = backend.storage
    with pytest.raises(StorageError) as info:
        storage.write_stream(
            "d/file.txt",
            [b"hello ", b"world"],
            overwrite=False,
            expected_size=expected_size,
            expected_sha256=expected_sha256,
        )
    assert kind_of(info) == ErrorKind.INTEGRITY
    assert info.value.op == "write"
    assert problem in str(info.value)
    assert not storage.exists("d/file.txt")
    assert backend.leftovers() == []
    assert files_under(backend) == []


def test_integrity_mismatch_on_overwrite_keeps_the_old_content(backend: BackendCase) -> None:
    storage = backend.storage
    storage.write_bytes("state.json", b"{}", overwrite=False)
    with pytest.raises(StorageError) as info:
        storage.write_stream("state.json", [b'{"v": 2}'], overwrite=True, expected_sha256=sha256(b"other"))
    assert kind_of(info) == ErrorKind.INTEGRITY
    assert storage.read_bytes("state.json") == b"{}"
    assert backend.leftovers() == []


def test_overwrite_false_refuses_an_existing_file(backend: BackendCase) -> None:
    storage = backend.storage
    storage.write_bytes("keep.txt", b"original", overwrite=False)
    with pytest.raises(StorageError) as info:
        storage.write_bytes("keep.txt", b"clobber", overwrite=False)
    assert kind_of(info) == ErrorKind.ALREADY_EXISTS
    assert (info.value.op, info.value.path) == ("write", "keep.txt")
    assert storage.read_bytes("keep.txt") == b"original"
    assert backend.leftovers() == []


def test_overwrite_false_never_clobbers_a_racing_writer(backend: BackendCase) -> None:
    storage = backend.storage
    assert Feature.EXCLUSIVE_CREATE in storage.capabilities  # this is what the feature promises
    racer = backend.other()

    def chunks() -> Iterator[bytes]:
        yield b"first half, "
        racer.write_bytes("race.txt", b"the racer won", overwrite=False)
        yield b"second half"

    with pytest.raises(StorageError) as info:
        storage.write_stream("race.txt", chunks(), overwrite=False)
    assert kind_of(info) == ErrorKind.ALREADY_EXISTS
    assert storage.read_bytes("race.txt") == b"the racer won"
    assert backend.leftovers() == []


def test_overwrite_true_replaces(backend: BackendCase) -> None:
    storage = backend.storage
    storage.write_bytes("a/state.json", b"v1", overwrite=False)
    storage.write_bytes("a/state.json", b"version two", overwrite=True)
    assert storage.read_bytes("a/state.json") == b"version two"
    assert storage.stat("a/state.json").size == len(b"version two")
    assert files_under(backend) == ["a/state.json"]


def test_conditional_write_on_revision(backend: BackendCase) -> None:
    storage = backend.storage
    storage.write_bytes("s/.distributor.json", b"v1", overwrite=False)
    first = storage.stat("s/.distributor.json").revision
    assert first
    storage.write_bytes("s/.distributor.json", b"version 2", overwrite=True, if_revision=first)
    assert storage.read_bytes("s/.distributor.json") == b"version 2"
    with pytest.raises(StorageError) as info:
        storage.write_bytes("s/.distributor.json", b"lost update", overwrite=True, if_revision=first)
    assert kind_of(info) == ErrorKind.CONFLICT
    assert storage.read_bytes("s/.distributor.json") == b"version 2"
    assert backend.leftovers() == []


def test_writes_create_parent_directories(backend: BackendCase) -> None:
    storage = backend.storage
    storage.write_bytes("a/b/c/d.txt", b"deep", overwrite=False)
    assert storage.stat("a/b").type == "directory"
    assert storage.stat("a/b/c/d.txt").size == 4
    assert [(e.path, e.type) for e in storage.walk("a")] == [
        ("a/b", "directory"),
        ("a/b/c", "directory"),
        ("a/b/c/d.txt", "file"),
    ]


def test_parallel_writes(backend: BackendCase) -> None:
    storage = backend.storage
    payloads = {f"p/{worker}/file-{n}.bin": bytes([worker, n]) * 65536 for worker in range(4) for n in range(6)}

    def write(item: tuple[str, bytes]) -> str:
        path, data = item
        storage.write_bytes(path, data, overwrite=False)
        return path

    with ThreadPoolExecutor(max_workers=4) as pool:
        written = list(pool.map(write, payloads.items()))
    assert sorted(written) == sorted(payloads)
    assert files_under(backend, "p") == sorted(payloads)
    for path, data in payloads.items():
        assert storage.read_bytes(path) == data


# ---------------------------------------------------------------------------- stat, listing, walks


def test_stat_of_missing_paths_is_not_found(backend: BackendCase) -> None:
    storage = backend.storage
    backend.plant("file.txt", b"x")
    for path in ("nope.txt", "missing/dir/x.txt", "file.txt/child"):
        with pytest.raises(StorageError) as info:
            storage.stat(path)
        assert (kind_of(info), info.value.op, info.value.path) == (ErrorKind.NOT_FOUND, "stat", path)
        assert not storage.exists(path)
    with pytest.raises(StorageError) as info:
        storage.open_read("nope.txt")
    assert kind_of(info) == ErrorKind.NOT_FOUND
    with pytest.raises(StorageError) as info:
        storage.delete_file("nope.txt")
    assert kind_of(info) == ErrorKind.NOT_FOUND


def test_stat_entries(backend: BackendCase) -> None:
    storage = backend.storage
    backend.plant("d/file.txt", b"12345")
    entry = storage.stat("d/file.txt")
    assert (entry.path, entry.type, entry.size, entry.is_file) == ("d/file.txt", "file", 5, True)
    assert entry.mtime is not None and entry.revision
    directory = storage.stat("d")
    assert (directory.type, directory.size, directory.is_dir) == ("directory", 0, True)
    assert storage.stat("").type == "directory"


def test_directories_cannot_be_read_or_deleted_as_files(backend: BackendCase) -> None:
    storage = backend.storage
    backend.plant("d/inner.txt", b"x")
    with pytest.raises(StorageError) as info:
        storage.open_read("d")
    assert kind_of(info) == ErrorKind.UNSUPPORTED
    with pytest.raises(StorageError) as info:
        storage.delete_file("d")
    assert kind_of(info) == ErrorKind.UNSUPPORTED
    assert storage.read_bytes("d/inner.txt") == b"x"


def test_listing_is_sorted_and_complete_past_one_page(backend: BackendCase) -> None:
    names = [f"many/f{i}.txt" for i in range(1001)] + ["many/sub/z.txt", "many/A.txt"]
    shuffled = list(names)
    random.Random(3).shuffle(shuffled)
    backend.plant_many(shuffled, b"1")
    storage = backend.storage
    files = storage.walk("many", include_dirs=False, limit=5000)
    assert [e.path for e in files] == sorted(names)
    everything = storage.walk("many", limit=5000)
    assert [e.path for e in everything] == sorted([*names, "many/sub"])
    children = storage.list("many")
    assert [e.path for e in children] == sorted([n for n in names if n != "many/sub/z.txt"] + ["many/sub"])
    assert storage.has_any("many")


def test_walk_bound(backend: BackendCase) -> None:
    backend.plant_many([f"lim/{n}.txt" for n in "abcde"])
    storage = backend.storage
    assert len(storage.walk("lim", limit=5)) == 5
    with pytest.raises(StorageError) as info:
        storage.walk("lim", limit=4)
    assert (kind_of(info), info.value.op, info.value.path) == (ErrorKind.LIMIT_EXCEEDED, "walk", "lim")
    result = storage.scan("lim", limit=4)
    assert result.truncated
    assert len(result.entries) == 4
    assert [e.path for e in result.entries] == sorted(e.path for e in result.entries)
    assert {e.path for e in result.entries} < {f"lim/{n}.txt" for n in "abcde"}
    assert not storage.scan("lim", limit=5).truncated


def test_walk_of_missing_prefix_is_empty(backend: BackendCase) -> None:
    assert backend.storage.walk("no/such/prefix") == []
    assert backend.storage.list("") == []
    assert not backend.storage.has_any("")


def test_reserved_names_are_hidden_from_walks_unless_asked(backend: BackendCase) -> None:
    reserved = [
        "b/.distributor.json",
        "b/.distributor.lock",
        "b/.distributor.pending.json",
        "b/.distributor-tmp-0123456789abcdef",
        "b/.distributor-bak-0123456789abcdef",
    ]
    backend.plant_many([*reserved, "b/x.txt"])
    storage = backend.storage
    assert [e.path for e in storage.walk("b")] == ["b/x.txt"]
    assert [e.path for e in storage.walk("b", include_reserved=True)] == sorted([*reserved, "b/x.txt"])
    assert [e.path for e in storage.list("b")] == sorted([*reserved, "b/x.txt"])


def test_has_any(backend: BackendCase) -> None:
    storage = backend.storage
    assert not storage.has_any("")
    backend.plant_many(
        ["bundle/.distributor.json", "bundle/.distributor.lock", "bundle/.distributor-tmp-00ff00ff00ff00ff"]
    )
    assert not storage.has_any("bundle")
    if backend.has_dirs:
        backend.mkdir("bundle/empty/deeper")
        backend.mkdir("bundle/other")
        assert not storage.has_any("bundle")
    backend.plant("bundle-sibling/x.txt")
    assert not storage.has_any("bundle")
    assert storage.has_any("")
    backend.plant("bundle/nested/deep/x.txt")
    assert storage.has_any("bundle")
    assert storage.has_any("bundle/nested")


# ---------------------------------------------------------------------------- deletes


def test_delete_prefix_never_touches_a_sibling_prefix(backend: BackendCase) -> None:
    backend.plant_many(
        ["bundle/a.txt", "bundle/nested/b.txt", "bundle/.distributor.lock", "bundle-sibling/keep.txt", "bundle.txt"]
    )
    storage = backend.storage
    deleted = storage.delete_prefix("bundle")
    assert deleted == ["bundle/a.txt", "bundle/nested/b.txt"]
    assert files_under(backend) == ["bundle-sibling/keep.txt", "bundle.txt", "bundle/.distributor.lock"]
    assert backend.raw_bytes("bundle-sibling/keep.txt") == b"x"
    if backend.has_dirs:
        assert not backend.disk("bundle/nested").exists()
        assert backend.disk("bundle").is_dir()


def test_delete_prefix_of_the_root_keeps_the_root(backend: BackendCase) -> None:
    backend.plant_many(["a.txt", "d/e/f.txt", ".distributor.pending.json"])
    storage = backend.storage
    assert storage.delete_prefix("") == ["a.txt", "d/e/f.txt"]
    assert files_under(backend) == [".distributor.pending.json"]
    assert storage.stat("").type == "directory"
    if backend.has_dirs:
        assert sorted(p.name for p in backend.disk("").iterdir()) == [".distributor.pending.json"]


def test_delete_managed_outputs_keeps_state_and_prunes_empty_dirs(backend: BackendCase) -> None:
    backend.plant_many(["bundle/report.md", "bundle/nested/report.html", "bundle/.distributor.json", "other/x.txt"])
    storage = backend.storage
    deleted = storage.delete_managed_outputs("bundle", ["report.md", "nested/report.html"])
    assert deleted == ["bundle/report.md", "bundle/nested/report.html"]
    assert files_under(backend) == ["bundle/.distributor.json", "other/x.txt"]
    if backend.has_dirs:
        assert not backend.disk("bundle/nested").exists()
        assert backend.disk("bundle").is_dir()


def test_delete_managed_bundle_deletes_state_last_and_prunes_to_the_root(backend: BackendCase) -> None:
    backend.plant_many(["pub/b/report.md", "pub/b/x/y/z.html", "pub/b/.distributor.json"])
    storage = backend.storage
    deleted = storage.delete_managed_bundle("pub/b", ["report.md", "x/y/z.html"])
    assert deleted == ["pub/b/report.md", "pub/b/x/y/z.html", "pub/b/.distributor.json"]
    assert files_under(backend) == []
    if backend.has_dirs:
        assert list(backend.disk("").iterdir()) == []
        assert backend.disk("").is_dir()


def test_delete_managed_outputs_prune_disabled_keeps_directories(backend: BackendCase) -> None:
    backend.plant("bundle/nested/report.html")
    storage = backend.storage
    assert storage.delete_managed_outputs("bundle", ["nested/report.html"], prune_empty_dirs=False) == [
        "bundle/nested/report.html"
    ]
    assert files_under(backend) == []
    if backend.has_dirs:
        assert backend.disk("bundle/nested").is_dir()


def test_delete_managed_outputs_missing_targets(backend: BackendCase) -> None:
    backend.plant("bundle/present.txt")
    storage = backend.storage
    assert storage.delete_managed_outputs("bundle", ["missing.txt", "present.txt"]) == ["bundle/present.txt"]
    backend.plant("bundle/present.txt")
    with pytest.raises(StorageError) as info:
        storage.delete_managed_outputs("bundle", ["missing.txt", "present.txt"], ignore_missing=False)
    assert (kind_of(info), info.value.op, info.value.path) == (
        ErrorKind.NOT_FOUND,
        "delete managed outputs",
        "bundle/missing.txt",
    )
    assert backend.raw_bytes("bundle/present.txt") == b"x"


def test_delete_managed_outputs_directory_target_is_unsupported_and_stops(backend: BackendCase) -> None:
    backend.plant_many(["bundle/a.txt", "bundle/dir/inner.txt", "bundle/c.txt"])
    storage = backend.storage
    with pytest.raises(StorageError) as info:
        storage.delete_managed_outputs("bundle", ["a.txt", "dir", "c.txt"])
    assert (kind_of(info), info.value.op, info.value.path) == (
        ErrorKind.UNSUPPORTED,
        "delete managed outputs",
        "bundle/dir",
    )
    assert files_under(backend) == ["bundle/c.txt", "bundle/dir/inner.txt"]


def test_delete_managed_outputs_invalid_path_fails_before_any_delete(backend: BackendCase) -> None:
    backend.plant("bundle/a.txt")
    storage = backend.storage
    for outputs in (["a.txt", "../x"], ["a.txt", ""], ["a.txt", "/abs"]):
        with pytest.raises(StorageError) as info:
            storage.delete_managed_outputs("bundle", outputs)
        assert kind_of(info) == ErrorKind.INVALID_PATH
        assert info.value.op == "delete managed outputs"
    with pytest.raises(StorageError) as info:
        storage.delete_managed_bundle("../bundle", ["a.txt"])
    assert (kind_of(info), info.value.op) == (ErrorKind.INVALID_PATH, "delete managed bundle")
    assert files_under(backend) == ["bundle/a.txt"]


def test_deleting_the_backend_root_is_refused(backend: BackendCase) -> None:
    backend.plant("a.txt")
    with pytest.raises(StorageError) as info:
        backend.storage.delete_paths([""], op="delete managed outputs")
    assert (kind_of(info), info.value.op, info.value.path) == (ErrorKind.INVALID_PATH, "delete managed outputs", "")
    assert files_under(backend) == ["a.txt"]


# ---------------------------------------------------------------------------- rename


def test_rename_into_a_new_directory(backend: BackendCase) -> None:
    storage = backend.storage
    storage.write_bytes("tmp/a.txt", b"moved", overwrite=False)
    storage.rename("tmp/a.txt", "final/dir/a.txt", overwrite=False)
    assert storage.read_bytes("final/dir/a.txt") == b"moved"
    assert not storage.exists("tmp/a.txt")


def test_rename_without_overwrite_refuses_an_existing_target(backend: BackendCase) -> None:
    storage = backend.storage
    storage.write_bytes("src.txt", b"new", overwrite=False)
    storage.write_bytes("dst.txt", b"old", overwrite=False)
    with pytest.raises(StorageError) as info:
        storage.rename("src.txt", "dst.txt", overwrite=False)
    assert (kind_of(info), info.value.op) == (ErrorKind.ALREADY_EXISTS, "rename")
    assert storage.read_bytes("src.txt") == b"new"
    assert storage.read_bytes("dst.txt") == b"old"


def test_rename_with_overwrite_replaces(backend: BackendCase) -> None:
    storage = backend.storage
    storage.write_bytes("src.txt", b"new content", overwrite=False)
    storage.write_bytes("dst.txt", b"old", overwrite=False)
    storage.rename("src.txt", "dst.txt", overwrite=True)
    assert storage.read_bytes("dst.txt") == b"new content"
    assert files_under(backend) == ["dst.txt"]


def test_rename_errors(backend: BackendCase) -> None:
    storage = backend.storage
    with pytest.raises(StorageError) as info:
        storage.rename("missing.txt", "x.txt", overwrite=True)
    assert (kind_of(info), info.value.op) == (ErrorKind.NOT_FOUND, "rename")
    backend.plant("dir/inner.txt")
    with pytest.raises(StorageError) as info:
        storage.rename("dir", "moved", overwrite=True)
    assert (kind_of(info), info.value.op) == (ErrorKind.UNSUPPORTED, "rename")
    assert files_under(backend) == ["dir/inner.txt"]


# ---------------------------------------------------------------------------- invalid paths


INVALID_PATHS = ["/abs", "a//b", "a/../b", "./a", "a/.", "..", "back\\slash", "ctl\x01char", "nul\x00", "lone\ud800"]


def test_invalid_paths_are_refused_before_any_io(backend: BackendCase, monkeypatch: pytest.MonkeyPatch) -> None:
    storage, io_count = io_probe(backend, monkeypatch)
    before = io_count()
    attempts = {
        "stat": lambda p: storage.stat(p),
        "read": lambda p: storage.open_read(p),
        "write": lambda p: storage.write_bytes(p, b"x", overwrite=True),
        "write stream": lambda p: storage.write_stream(p, iter([b"x"]), overwrite=False),
        "delete": lambda p: storage.delete_file(p),
        "rename from": lambda p: storage.rename(p, "ok.txt", overwrite=True),
        "rename to": lambda p: storage.rename("ok.txt", p, overwrite=True),
        "walk": lambda p: storage.walk(p),
        "scan": lambda p: storage.scan(p),
        "list": lambda p: storage.list(p),
        "has any": lambda p: storage.has_any(p),
        "delete prefix": lambda p: storage.delete_prefix(p),
        "managed outputs": lambda p: storage.delete_managed_outputs("bundle", ["ok.txt", p]),
        "managed bundle": lambda p: storage.delete_managed_bundle(p, ["ok.txt"]),
    }
    for label, attempt in attempts.items():
        for path in INVALID_PATHS:
            with pytest.raises(StorageError) as info:
                attempt(path)
            assert kind_of(info) == ErrorKind.INVALID_PATH, (label, path, str(info.value))
    for label, attempt in (("read", attempts["read"]), ("write", attempts["write"]), ("delete", attempts["delete"])):
        with pytest.raises(StorageError) as info:
            attempt("")
        assert kind_of(info) == ErrorKind.INVALID_PATH, label
    assert io_count() == before
    assert files_under(backend) == []

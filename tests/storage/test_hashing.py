"""``Storage.sha256`` conformance: every backend answers the digest of a file's current content,
against real peers (local disk, sshd, moto S3 with auth), bare and under the fault injector."""

from __future__ import annotations

import hashlib

import pytest

from distributor_core.storage.errors import ErrorKind, StorageError
from distributor_core.storage.faults import Fault, FaultInjectingStorage
from tests.storage.conftest import BackendCase

MiB = 1024 * 1024


def sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def pattern(size: int, seed: int = 0) -> bytes:
    block = hashlib.sha256(str(seed).encode()).digest() * 2048  # 64 KiB
    return (block * (size // len(block) + 1))[:size]


@pytest.mark.parametrize("size", [0, 1, MiB - 1, 5 * MiB + 17])
def test_sha256_is_the_digest_of_the_whole_content(backend: BackendCase, size: int) -> None:
    """Sizes around the read buffers (1 MiB local, 4 MiB chunks elsewhere) and past them."""
    data = pattern(size)
    backend.storage.write_bytes("dir/file.bin", data, overwrite=False)
    seen: list[int] = []
    digest = backend.storage.sha256("dir/file.bin", on_bytes=seen.append)
    assert (digest.size, digest.sha256, digest.stored) == (size, sha256(data), False)
    assert sum(seen) == size


def test_a_file_changed_between_writes_hashes_to_its_new_content(backend: BackendCase) -> None:
    storage = backend.storage
    first, second = pattern(2 * MiB, seed=1), pattern(2 * MiB, seed=2)
    storage.write_bytes("out.bin", first, overwrite=False)
    assert storage.sha256("out.bin").sha256 == sha256(first)
    storage.write_bytes("out.bin", second, overwrite=True)  # same size, other bytes
    assert storage.sha256("out.bin").sha256 == sha256(second)
    third = b"rewritten behind the backend's back"
    backend.plant("out.bin", third)
    assert (storage.sha256("out.bin").size, storage.sha256("out.bin").sha256) == (len(third), sha256(third))
    assert backend.other().sha256("out.bin").sha256 == sha256(third)  # a fresh connection agrees


def test_a_byte_changed_in_place_and_a_truncation_are_seen(disk_backend: BackendCase) -> None:
    """Backends whose files can be changed in place (a directory tree; S3 objects cannot be)."""
    backend = disk_backend
    data = pattern(3 * MiB)
    backend.storage.write_bytes("big.bin", data, overwrite=False)
    with open(backend.disk("big.bin"), "r+b") as handle:  # another process edits it in place
        handle.seek(len(data) // 2)
        handle.write(bytes([data[len(data) // 2] ^ 0xFF]))
    changed = backend.storage.sha256("big.bin")
    assert changed.size == len(data)
    assert changed.sha256 not in (sha256(data), None)
    with open(backend.disk("big.bin"), "r+b") as handle:
        handle.truncate(len(data) - 1)
    truncated = backend.storage.sha256("big.bin")
    assert truncated.size == len(data) - 1


def test_an_object_written_without_a_stored_checksum_is_streamed(backend: BackendCase) -> None:
    """A raw write (on S3 a ``PutObject`` without ``ChecksumSHA256``) is read and hashed."""
    data = b"planted without a checksum\n"
    backend.plant("raw.txt", data)
    seen: list[int] = []
    digest = backend.storage.sha256("raw.txt", on_bytes=seen.append)
    assert (digest.size, digest.sha256, digest.stored, sum(seen)) == (len(data), sha256(data), False, len(data))


def test_sha256_of_what_is_not_a_regular_file(backend: BackendCase) -> None:
    storage = backend.storage
    with pytest.raises(StorageError) as info:
        storage.sha256("missing.txt")
    assert (info.value.kind, info.value.path) == (ErrorKind.NOT_FOUND, "missing.txt")
    backend.plant("d/inner.txt", b"x")
    with pytest.raises(StorageError) as info:
        storage.sha256("d")
    assert info.value.kind == ErrorKind.UNSUPPORTED
    with pytest.raises(StorageError) as info:
        storage.sha256("../escape.txt")
    assert info.value.kind == ErrorKind.INVALID_PATH
    if backend.has_symlinks:
        backend.symlink("link.txt", backend.disk("d/inner.txt"))
        with pytest.raises(StorageError) as info:
            storage.sha256("link.txt")
        assert info.value.kind == ErrorKind.UNSUPPORTED


def test_under_the_fault_injector_a_hash_reads_through_the_failable_read(backend: BackendCase) -> None:
    data = pattern(MiB + 5)
    backend.storage.write_bytes("f.bin", data, overwrite=False)
    wrapped = FaultInjectingStorage(backend.storage)
    assert wrapped.sha256("f.bin").sha256 == sha256(data)
    assert wrapped.count("read") == 1
    failing = FaultInjectingStorage(backend.storage, [Fault("read", after_bytes=1000)])
    with pytest.raises(StorageError) as info:
        failing.sha256("f.bin")
    assert (info.value.op, info.value.path) == ("read", "f.bin")

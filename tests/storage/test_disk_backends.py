"""Contract points that only exist on directory-tree backends (local and SFTP): symlinks below the
root, real directories, temporary siblings (interfaces §5.2, §5.3, §5.5 case 3)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

import pytest

from distributor_core.storage.base import Storage
from distributor_core.storage.errors import ErrorKind, StorageError
from tests.storage.conftest import BackendCase

TEMP_NAME = re.compile(r"^\.distributor-tmp-[0-9a-f]{16}$")


def expect(kind: ErrorKind, call: Callable[[], object]) -> StorageError:
    with pytest.raises(StorageError) as info:
        call()
    assert info.value.kind == kind, str(info.value)
    return info.value


def test_symlinked_ancestors_are_refused(disk_backend: BackendCase) -> None:
    case = disk_backend
    storage = case.storage
    case.plant("real/inner.txt", b"secret")
    case.symlink("link", "real")
    checks: dict[str, Callable[[], object]] = {
        "read": lambda: storage.open_read("link/inner.txt"),
        "stat": lambda: storage.stat("link/inner.txt"),
        "write": lambda: storage.write_bytes("link/new.txt", b"x", overwrite=False),
        "write nested": lambda: storage.write_bytes("link/sub/new.txt", b"x", overwrite=False),
        "delete": lambda: storage.delete_file("link/inner.txt"),
        "rename from": lambda: storage.rename("link/inner.txt", "moved.txt", overwrite=True),
        "walk": lambda: storage.walk("link"),
        "has any": lambda: storage.has_any("link"),
        "managed delete": lambda: storage.delete_managed_outputs("link", ["inner.txt"]),
    }
    for label, call in checks.items():
        error = expect(ErrorKind.INVALID_PATH, call)
        assert "symlinked path component link" in str(error), label
    storage.write_bytes("plain.txt", b"p", overwrite=False)
    expect(ErrorKind.INVALID_PATH, lambda: storage.rename("plain.txt", "link/plain.txt", overwrite=False))
    assert sorted(p.name for p in case.disk("real").iterdir()) == ["inner.txt"]
    assert case.disk("real/inner.txt").read_bytes() == b"secret"
    assert case.disk("plain.txt").exists()


def test_a_symlink_cannot_lead_out_of_the_root(
    disk_backend: BackendCase, tmp_path_factory: pytest.TempPathFactory
) -> None:
    outside = tmp_path_factory.mktemp("outside")
    (outside / "passwd").write_text("not yours")
    outside.chmod(0o755)
    (outside / "passwd").chmod(0o644)
    disk_backend.symlink("escape", outside)
    storage = disk_backend.storage
    expect(ErrorKind.INVALID_PATH, lambda: storage.read_bytes("escape/passwd"))
    expect(ErrorKind.INVALID_PATH, lambda: storage.write_bytes("escape/planted", b"x", overwrite=True))
    expect(ErrorKind.INVALID_PATH, lambda: storage.delete_file("escape/passwd"))
    assert sorted(p.name for p in outside.iterdir()) == ["passwd"]


def test_a_final_symlink_is_an_entry_not_a_file(disk_backend: BackendCase) -> None:
    case = disk_backend
    storage = case.storage
    case.plant("target.txt", b"t")
    case.symlink("file-link", "target.txt")
    assert storage.stat("file-link").type == "symlink"
    error = expect(ErrorKind.UNSUPPORTED, lambda: storage.open_read("file-link"))
    assert "not a regular file" in str(error)
    assert [(e.path, e.type) for e in storage.walk("")] == [("file-link", "symlink"), ("target.txt", "file")]
    assert storage.has_any("")
    storage.delete_file("file-link")
    assert not case.disk("file-link").is_symlink()
    assert case.disk("target.txt").read_bytes() == b"t"


def test_a_parent_that_is_a_file_is_refused(disk_backend: BackendCase) -> None:
    case = disk_backend
    case.plant("file.txt", b"f")
    error = expect(ErrorKind.ALREADY_EXISTS, lambda: case.storage.write_bytes("file.txt/x", b"x", overwrite=False))
    assert "a parent path is not a directory" in str(error)
    assert case.disk("file.txt").read_bytes() == b"f"


def test_a_directory_is_never_overwritten(disk_backend: BackendCase) -> None:
    case = disk_backend
    storage = case.storage
    case.plant("dir/inner.txt", b"i")
    expect(ErrorKind.UNSUPPORTED, lambda: storage.write_bytes("dir", b"x", overwrite=True))
    expect(ErrorKind.ALREADY_EXISTS, lambda: storage.write_bytes("dir", b"x", overwrite=False))
    storage.write_bytes("file.txt", b"f", overwrite=False)
    expect(ErrorKind.UNSUPPORTED, lambda: storage.rename("file.txt", "dir", overwrite=True))
    assert case.disk("dir/inner.txt").read_bytes() == b"i"
    assert case.leftovers() == []


def test_writes_go_through_a_reserved_temporary_sibling(disk_backend: BackendCase) -> None:
    case = disk_backend
    storage = case.storage
    storage.write_bytes("out/old.txt", b"o", overwrite=False)
    seen: list[list[str]] = []

    def chunks() -> Iterator[bytes]:
        yield b"part one "
        seen.append(sorted(p.name for p in case.disk("out").iterdir()))
        yield b"part two"

    storage.write_stream("out/new.txt", chunks(), overwrite=False)
    assert len(seen) == 1
    temps = [name for name in seen[0] if name.startswith(".distributor-tmp-")]
    assert len(temps) == 1 and TEMP_NAME.match(temps[0]), seen
    assert "new.txt" not in seen[0]
    assert sorted(p.name for p in case.disk("out").iterdir()) == ["new.txt", "old.txt"]
    assert case.disk("out/new.txt").read_bytes() == b"part one part two"


def test_empty_directories_are_listed_but_not_content(disk_backend: BackendCase) -> None:
    case = disk_backend
    case.mkdir("a/b/c")
    storage: Storage = case.storage
    assert [(e.path, e.type) for e in storage.walk("")] == [
        ("a", "directory"),
        ("a/b", "directory"),
        ("a/b/c", "directory"),
    ]
    assert storage.walk("", include_dirs=False) == []
    assert not storage.has_any("a")
    storage.delete_prefix("a")
    assert not case.disk("a").exists()

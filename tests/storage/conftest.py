"""The ``backend`` fixture: one storage backend per parameter (local, sftp, s3), each on a fresh
root, with helpers to arrange content behind the backend's back and to check what is left.

The SFTP and S3 peers are only started when a test asks for those parameters.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from distributor_core import paths as lp
from distributor_core.storage import local as local_module
from distributor_core.storage.base import Storage
from distributor_core.storage.local import LocalStorage

BACKENDS = ("local", "sftp", "s3")


@dataclass
class BackendCase:
    """A backend under test plus ways to look at and arrange its content directly."""

    name: str
    storage: Storage
    #: a second storage object on the same root (fresh connection/client)
    new_storage: Callable[[], Storage]
    #: the root on this machine's disk (local and SFTP roots are local directories)
    local_root: Path | None = None
    #: give disk paths to the SFTP test user so the backend may change them
    chown: Callable[[Path], None] = lambda _path: None
    #: S3 only: raw boto3 client, bucket and key prefix
    s3: Any = None
    bucket: str = ""
    prefix: str = ""
    _opened: list[Storage] = field(default_factory=list)

    @property
    def has_dirs(self) -> bool:
        """Real directories (which can be empty, and are pruned) exist on this backend."""
        return self.local_root is not None

    @property
    def has_symlinks(self) -> bool:
        return self.local_root is not None

    def other(self) -> Storage:
        storage = self.new_storage()
        self._opened.append(storage)
        return storage

    def key(self, path: str) -> str:
        return f"{self.prefix}/{path}" if self.prefix else path

    def disk(self, path: str) -> Path:
        assert self.local_root is not None, f"{self.name} has no local disk"
        return self.local_root / path if path else self.local_root

    def plant(self, path: str, data: bytes = b"x") -> None:
        """Create a file without going through the backend (raw put on S3)."""
        if self.local_root is None:
            self.s3.put_object(Bucket=self.bucket, Key=self.key(path), Body=data)
            return
        target = self.disk(path)
        created = self._make_parents(target.parent)
        target.write_bytes(data)
        self.chown(target)
        for directory in created:
            self.chown(directory)

    def plant_many(self, paths: list[str], data: bytes = b"x") -> None:
        if self.local_root is not None:
            for path in paths:
                self.plant(path, data)
            return
        with ThreadPoolExecutor(max_workers=16) as pool:
            list(pool.map(lambda p: self.plant(p, data), paths))

    def mkdir(self, path: str) -> None:
        """An (empty) directory; only for backends with real directories."""
        for directory in self._make_parents(self.disk(path)):
            self.chown(directory)

    def symlink(self, path: str, target: str | os.PathLike[str]) -> None:
        link = self.disk(path)
        for directory in self._make_parents(link.parent):
            self.chown(directory)
        os.symlink(target, link)

    def raw_bytes(self, path: str) -> bytes | None:
        """Content stored under ``path`` as seen directly (``None`` when absent)."""
        if self.local_root is None:
            try:
                return self.s3.get_object(Bucket=self.bucket, Key=self.key(path))["Body"].read()
            except self.s3.exceptions.NoSuchKey:
                return None
        target = self.disk(path)
        return target.read_bytes() if target.is_file() else None

    def leftovers(self) -> list[str]:
        """Temporary files, and on S3 unfinished multipart uploads, anywhere on the root."""
        found: list[str] = []
        if self.local_root is not None:
            for dirpath, dirnames, filenames in os.walk(self.local_root):
                for name in dirnames + filenames:
                    if name.startswith(lp.TEMP_PREFIX):
                        found.append(os.path.relpath(os.path.join(dirpath, name), self.local_root))
            return sorted(found)
        listed = self.s3.list_objects_v2(Bucket=self.bucket, Prefix=self.prefix)
        found += [o["Key"] for o in listed.get("Contents", ()) if lp.TEMP_PREFIX in o["Key"]]
        uploads = self.s3.list_multipart_uploads(Bucket=self.bucket).get("Uploads", ())
        found += [f"multipart upload of {u['Key']}" for u in uploads]
        return sorted(found)

    def _make_parents(self, directory: Path) -> list[Path]:
        missing: list[Path] = []
        current = directory
        while not current.exists():
            missing.append(current)
            current = current.parent
        directory.mkdir(parents=True, exist_ok=True)
        return list(reversed(missing))


def _local_case(tmp_path: Path) -> BackendCase:
    root = tmp_path / "root"
    root.mkdir()
    return BackendCase(
        name="local",
        storage=LocalStorage(root),
        new_storage=lambda: LocalStorage(root),
        local_root=root,
    )


def _sftp_case(request: pytest.FixtureRequest, transport: str = "paramiko") -> BackendCase:
    """An SFTP backend over ``transport`` (``paramiko``, or ``openssh``: the system ssh client)."""
    from tests.peers.sshd import make_sftp_storage

    server = request.getfixturevalue("sshd_server")
    root = server.make_sftp_root()
    return BackendCase(
        name="sftp",
        storage=make_sftp_storage(server, root, transport=transport),
        new_storage=lambda: make_sftp_storage(server, root, transport=transport),
        local_root=root,
        chown=server.chown_to_user,
    )


def _s3_case(request: pytest.FixtureRequest) -> BackendCase:
    from tests.peers.moto import make_s3_storage

    server = request.getfixturevalue("moto_server")
    prefix = "conformance/root"
    storage = make_s3_storage(server, prefix=prefix)
    bucket = storage.bucket
    client = server.client()
    request.addfinalizer(client.close)
    return BackendCase(
        name="s3",
        storage=storage,
        new_storage=lambda: make_s3_storage(server, bucket=bucket, prefix=prefix),
        s3=client,
        bucket=bucket,
        prefix=prefix,
    )


_PARAMS = [
    pytest.param("local"),
    pytest.param("sftp", marks=pytest.mark.sftp),
    pytest.param("sftp-openssh", marks=pytest.mark.sftp),
    pytest.param("s3", marks=pytest.mark.s3),
]


@pytest.fixture(params=_PARAMS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BackendCase]:
    name = request.param
    if name == "local":
        case = _local_case(tmp_path)
    elif name == "sftp":
        case = _sftp_case(request)
    elif name == "sftp-openssh":
        case = _sftp_case(request, transport="openssh")
    else:
        case = _s3_case(request)
    try:
        yield case
    finally:
        for storage in [case.storage, *case._opened]:
            storage.close()


# ---------------------------------------------------------------------------- I/O probes


class _CountingOs:
    """Stands in for the ``os`` module inside ``storage.local`` and counts calls that touch the
    filesystem."""

    _IO = frozenset(
        {"lstat", "stat", "open", "scandir", "makedirs", "mkdir", "unlink", "rename", "replace", "link", "rmdir"}
    )

    def __init__(self, real: Any) -> None:
        self._real = real
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._real, name)
        if name in self._IO and callable(value):

            def counted(*args: Any, **kwargs: Any) -> Any:
                self.calls += 1
                return value(*args, **kwargs)

            return counted
        return value


def io_probe(case: BackendCase, monkeypatch: pytest.MonkeyPatch) -> tuple[Storage, Callable[[], int]]:
    """A fresh storage on the case's root and a function counting the I/O it has done since."""
    storage = case.other()
    if case.name == "local":
        counting = _CountingOs(os)
        monkeypatch.setattr(local_module, "os", counting)
        return storage, lambda: counting.calls
    if case.name == "sftp":
        return storage, lambda: storage.connect_count  # type: ignore[attr-defined]
    sent: list[object] = []
    storage.client.meta.events.register("before-send", lambda **kwargs: sent.append(kwargs))  # type: ignore[attr-defined]
    return storage, lambda: len(sent)


@pytest.fixture(params=_PARAMS[:3])
def disk_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BackendCase]:
    """Backends whose root is a real directory tree (directories, symlinks, permissions)."""
    if request.param == "local":
        case = _local_case(tmp_path)
    else:
        case = _sftp_case(request, transport="openssh" if request.param == "sftp-openssh" else "paramiko")
    try:
        yield case
    finally:
        for storage in [case.storage, *case._opened]:
            storage.close()

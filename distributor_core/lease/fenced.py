"""A storage that writes only while a lease is held (fenced commits): every write, rename, delete
and streamed chunk asks :meth:`~.lease.Lease.ensure` first, so a holder that stalled past its lease
stops at its next call; the write of a state file (the commit) re-reads the lease record first
(:meth:`~.lease.Lease.check`) and stays the caller's compare-and-swap. Reads pass through."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, BinaryIO

from distributor_core import paths as lp
from distributor_core.lease.lease import Lease
from distributor_core.storage.base import Entry, Storage, WriteRequest
from distributor_core.storage.capabilities import Capabilities


class FencedStorage(Storage):
    def __init__(self, inner: Storage, lease: Lease) -> None:
        self.inner, self.lease, self.backend, self.root_display = inner, lease, inner.backend, inner.root_display

    @property
    def capabilities(self) -> Capabilities:
        return self.inner.capabilities

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def stat(self, path: str) -> Entry:
        return self.inner.stat(path)

    def open_read(self, path: str) -> BinaryIO:
        return self.inner.open_read(path)

    def _iter_entries(self, prefix: str, recursive: bool) -> Iterator[Entry]:
        return self.inner._iter_entries(prefix, recursive)

    def _fence(self, path: str = "") -> None:
        (self.lease.check if lp.basename(path) == lp.STATE_FILE_NAME else self.lease.ensure)()

    def _chunks(self, chunks: Iterable[bytes]) -> Iterator[bytes]:
        for chunk in chunks:
            self.lease.ensure()
            yield chunk

    def write_stream(self, path: str, chunks: Iterable[bytes], **options: Any) -> Entry:
        self._fence(path)
        return self.inner.write_stream(path, self._chunks(chunks), **options)

    def rename(self, src: str, dst: str, *, overwrite: bool) -> None:
        self._fence(dst)
        self.inner.rename(src, dst, overwrite=overwrite)

    def delete_file(self, path: str) -> None:
        self._fence(path)
        self.inner.delete_file(path)

    def delete_paths(self, targets: list[str], **options: Any) -> list[str]:
        self._fence()
        return self.inner.delete_paths(targets, **options)

    def _remove_dir_if_empty(self, path: str) -> bool:
        self._fence()
        return self.inner._remove_dir_if_empty(path)

    def _write_stream(self, path: str, chunks: Iterable[bytes], request: WriteRequest) -> Entry:
        raise AssertionError("write_stream forwards whole writes")

"""A storage that writes only while a lease is held (issue 34: fenced commits).

Every write, rename and delete first asks the lease (:meth:`~.lease.Lease.ensure`: free while the
grant is safe, a renewal at once after a stall), and every chunk of a streamed write too, so a
holder that stalled past its lease and resumes stops at its next operation with
:class:`~.lease.LeaseLost` instead of moving its successor's files. A write of a state file
(``.distributor.json``, the commit of the write protocol) re-reads the lease record first
(:meth:`~.lease.Lease.check`); the write itself stays the caller's compare-and-swap on the state's
revision. Reads pass straight through; so do the backend's own bulk operations (S3's batched
deletes), each after one check.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, BinaryIO

from distributor_core import paths as lp
from distributor_core.lease.lease import Lease
from distributor_core.storage.base import ContentDigest, Entry, Storage, WriteRequest
from distributor_core.storage.capabilities import Capabilities


class FencedStorage(Storage):
    def __init__(self, inner: Storage, lease: Lease) -> None:
        self.inner = inner
        self.lease = lease
        self.backend = inner.backend
        self.root_display = inner.root_display

    @property
    def capabilities(self) -> Capabilities:
        return self.inner.capabilities

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _fence(self, path: str) -> None:
        if lp.basename(path) == lp.STATE_FILE_NAME:
            self.lease.check()
        else:
            self.lease.ensure()

    def _fenced(self, chunks: Iterable[bytes]) -> Iterator[bytes]:
        for chunk in chunks:
            self.lease.ensure()
            yield chunk

    # reads
    def stat(self, path: str) -> Entry:
        return self.inner.stat(path)

    def open_read(self, path: str) -> BinaryIO:
        return self.inner.open_read(path)

    def sha256(self, path: str, **kwargs: Any) -> ContentDigest:
        return self.inner.sha256(path, **kwargs)

    def _iter_entries(self, prefix: str, recursive: bool) -> Iterator[Entry]:
        return self.inner._iter_entries(prefix, recursive)

    # writes
    def write_stream(self, path: str, chunks: Iterable[bytes], **kwargs: Any) -> Entry:
        self._fence(path)
        return self.inner.write_stream(path, self._fenced(chunks), **kwargs)

    def _write_stream(self, path: str, chunks: Iterable[bytes], request: WriteRequest) -> Entry:
        raise AssertionError("FencedStorage.write_stream forwards whole writes")

    def rename(self, src: str, dst: str, *, overwrite: bool) -> None:
        self._fence(dst)
        self.inner.rename(src, dst, overwrite=overwrite)

    def delete_file(self, path: str) -> None:
        self._fence(path)
        self.inner.delete_file(path)

    def delete_paths(self, targets: list[str], **kwargs: Any) -> list[str]:
        self.lease.ensure()
        return self.inner.delete_paths(targets, **kwargs)

    def delete_prefix(self, prefix: str, **kwargs: Any) -> list[str]:
        self.lease.ensure()
        return self.inner.delete_prefix(prefix, **kwargs)

    def _remove_dir_if_empty(self, path: str) -> bool:
        self.lease.ensure()
        return self.inner._remove_dir_if_empty(path)

    def close(self) -> None:
        """The wrapped storage belongs to the caller."""

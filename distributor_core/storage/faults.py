"""Fault injection around any storage backend (tests only; issue 9, core-semantics §8.5).

:class:`FaultInjectingStorage` forwards every primitive to the wrapped backend, counts calls per
kind and fails the calls its :class:`Fault` rules select. The generic operations of
:class:`~distributor_core.storage.base.Storage` (walk, has_any, the managed and prefix deletes,
read_bytes, write_bytes, ...) are *not* forwarded: they run here, on top of the wrapped
primitives, so every stat, delete or listing they make can be failed. (A backend's own faster
versions, such as S3's batched deletes, are therefore bypassed under the wrapper.) The wrapped
backend's declared ``capabilities`` are reported as they are, less :data:`NOT_FORWARDED` (the
features a backend provides by overriding a generic operation, which the wrapper runs itself:
``batched_deletes``, ``stored_sha256`` (``sha256`` streams through the wrapped ``open_read``, so
a read fault can fail a hash); and ``file_identity``, so that source validation under the wrapper hashes
every file through the failable primitives instead of trusting a validation cache), and every
argument of a primitive (``in_place`` included) is passed on, so callers take the same branches
as without the wrapper.

Kinds of calls (``OpKind``):

========== =============================================== ======================
kind       primitive                                       default error kind
========== =============================================== ======================
``write``  ``write_stream`` (and ``write_bytes``)          ``other``
``rename`` ``rename``                                      ``other``
``delete`` ``delete_file``                                 ``permission``
``stat``   ``stat`` (and ``exists``)                       ``other``
``list``   ``_iter_entries`` (walk, scan, has_any)         ``other``
``read``   ``open_read`` (and ``read_bytes``, ``sha256``)  ``other``
``rmdir``  ``_remove_dir_if_empty``                        ``other``
========== =============================================== ======================

Typical use: run once through a wrapper without faults and read :meth:`count`, then, for every
``n`` up to that count, run again with ``Fault("write", nth=n)``::

    probe = FaultInjectingStorage(make_backend())
    publish(probe)
    for n in range(1, probe.count("write") + 1):
        storage = FaultInjectingStorage(make_backend(), [Fault("write", nth=n)])
        ...

``Fault("write", after_bytes=k)`` fails a write half way: the chunk iterator the backend sees
raises after ``k`` bytes, so the backend's own cleanup runs. ``when="after"`` lets the call take
effect and raises afterwards (a lost acknowledgement).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Literal

import msgspec

from distributor_core.storage.base import Entry, ReadStream, Storage, WriteRequest
from distributor_core.storage.capabilities import Capabilities, Feature
from distributor_core.storage.errors import ErrorKind, StorageError

#: features the wrapper does not report: the backend implements them in a generic operation of
#: its own (S3's ``delete_paths`` and ``delete_prefix``), which runs here on the wrapped
#: primitives instead, one ``delete_file`` per target; ``stored_sha256`` (S3's ``sha256``: here
#: every hash reads through ``open_read``); ``file_identity`` (``Storage.file_identities``,
#: refused here), so validation never skips a read the wrapper could fail
NOT_FORWARDED = frozenset({Feature.BATCHED_DELETES, Feature.STORED_SHA256, Feature.FILE_IDENTITY})

OpKind = Literal["write", "rename", "delete", "stat", "list", "read", "rmdir"]
OP_KINDS: tuple[OpKind, ...] = ("write", "rename", "delete", "stat", "list", "read", "rmdir")

#: operation names the injected errors carry (those the backends use for the same calls)
OP_NAMES: dict[str, str] = {
    "write": "write",
    "rename": "rename",
    "delete": "delete",
    "stat": "stat",
    "list": "walk",
    "read": "read",
    "rmdir": "remove directory",
}
DEFAULT_ERROR_KINDS: dict[str, ErrorKind] = {kind: ErrorKind.OTHER for kind in OP_KINDS} | {
    "delete": ErrorKind.PERMISSION
}
INJECTED_CAUSE = "injected fault"

PathMatcher = Callable[[str], bool]
ErrorFactory = Callable[[str, str], BaseException]


@dataclass
class Fault:
    """One rule: which calls of ``op`` fail and how.

    - ``nth``: fail only the n-th (1-based) call of ``op`` that matches ``path``, counted from
      when the fault was added; ``None`` fails matching calls from the first on.
    - ``path``: an exact logical path or a predicate; a rename matches on either side.
    - ``times``: how many calls this rule fails at most (``None``: every matching call).
    - ``kind`` / ``cause``: the :class:`StorageError` raised (default kind per ``op``).
    - ``error``: raise this exception instead (or ``error(op_name, path)`` when callable).
    - ``after_bytes``: ``write``: the chunks fed to the backend raise after this many bytes;
      ``read``: the returned stream raises after yielding this many bytes.
    - ``when``: ``"before"`` (nothing happens) or ``"after"`` (the call takes effect, then
      the error is raised).
    """

    op: OpKind
    nth: int | None = None
    path: str | PathMatcher | None = None
    kind: ErrorKind | str | None = None
    cause: str = INJECTED_CAUSE
    error: BaseException | ErrorFactory | None = None
    times: int | None = 1
    after_bytes: int | None = None
    when: Literal["before", "after"] = "before"
    #: matching calls seen so far / calls this rule selected
    seen: int = field(default=0, init=False)
    hits: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        if self.op not in OP_KINDS:
            raise ValueError(f"unknown fault op {self.op!r}; expected one of {', '.join(OP_KINDS)}")
        if self.nth is not None and self.nth < 1:
            raise ValueError("nth counts from 1")
        if self.after_bytes is not None and self.op not in ("write", "read"):
            raise ValueError("after_bytes applies to write and read faults only")
        if self.after_bytes is not None and self.when != "before":
            raise ValueError("after_bytes faults happen during the call, not after it")
        if self.when not in ("before", "after"):
            raise ValueError("when must be 'before' or 'after'")
        if self.kind is not None:
            self.kind = ErrorKind(self.kind)

    def matches_path(self, *paths: str) -> bool:
        if self.path is None:
            return True
        if callable(self.path):
            return any(self.path(p) for p in paths)
        return self.path in paths


class FaultInjectingStorage(Storage):
    """Wraps ``inner``; see the module docstring. Thread-safe counting."""

    def __init__(self, inner: Storage, faults: Iterable[Fault] = ()) -> None:
        self.inner = inner
        self.backend = inner.backend
        self.root_display = inner.root_display
        self._lock = threading.Lock()
        self._faults: list[Fault] = list(faults)
        self._counts: Counter[str] = Counter()
        #: every call in order, as ``(kind, path)`` (a rename records ``src -> dst``)
        self.calls: list[tuple[str, str]] = []
        #: the calls that were failed, as ``(kind, path)``
        self.injected: list[tuple[str, str]] = []

    @property
    def capabilities(self) -> Capabilities:
        """The wrapped backend's declaration, less :data:`NOT_FORWARDED`."""
        return self.inner.capabilities.without(*NOT_FORWARDED)

    def __getattr__(self, name: str) -> Any:
        # backend-specific attributes (root, bucket, client, ...) of the wrapped storage
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def __repr__(self) -> str:
        return f"FaultInjectingStorage({self.inner!r})"

    # ------------------------------------------------------------------ rules and counts

    def add_fault(self, fault: Fault) -> Fault:
        with self._lock:
            self._faults.append(fault)
        return fault

    def fail(
        self,
        op: OpKind,
        *,
        nth: int | None = None,
        path: str | PathMatcher | None = None,
        kind: ErrorKind | str | None = None,
        cause: str = INJECTED_CAUSE,
        error: BaseException | ErrorFactory | None = None,
        times: int | None = 1,
        after_bytes: int | None = None,
        when: Literal["before", "after"] = "before",
    ) -> Fault:
        """Add a :class:`Fault` (same arguments) and return it."""
        return self.add_fault(
            Fault(
                op,
                nth=nth,
                path=path,
                kind=kind,
                cause=cause,
                error=error,
                times=times,
                after_bytes=after_bytes,
                when=when,
            )
        )

    def clear_faults(self) -> None:
        with self._lock:
            self._faults.clear()

    @property
    def faults(self) -> list[Fault]:
        with self._lock:
            return list(self._faults)

    def count(self, op: OpKind) -> int:
        """Calls of ``op`` since construction or :meth:`reset_counts` (failed ones included)."""
        with self._lock:
            return self._counts[op]

    @property
    def counts(self) -> dict[str, int]:
        with self._lock:
            return {kind: self._counts[kind] for kind in OP_KINDS}

    def reset_counts(self) -> None:
        with self._lock:
            self._counts.clear()
            self.calls.clear()
            self.injected.clear()

    def _select(self, op: OpKind, path: str, *paths: str) -> Fault | None:
        """Count the call and return the rule that fails it, if any."""
        with self._lock:
            self._counts[op] += 1
            self.calls.append((op, path))
            chosen: Fault | None = None
            for fault in self._faults:
                if fault.op != op or not fault.matches_path(*(paths or (path,))):
                    continue
                fault.seen += 1
                if chosen is not None:
                    continue
                if fault.nth is not None and fault.seen != fault.nth:
                    continue
                if fault.times is not None and fault.hits >= fault.times:
                    continue
                fault.hits += 1
                chosen = fault
            return chosen

    def _error(self, fault: Fault, op: OpKind, path: str) -> BaseException:
        with self._lock:
            self.injected.append((op, path))
        name = OP_NAMES[op]
        if isinstance(fault.error, BaseException):
            return fault.error
        if fault.error is not None:
            return fault.error(name, path)
        kind = fault.kind if fault.kind is not None else DEFAULT_ERROR_KINDS[op]
        return StorageError(name, self.backend, path, kind, fault.cause)

    def _before(self, fault: Fault | None, op: OpKind, path: str) -> None:
        if fault is not None and fault.when == "before" and fault.after_bytes is None:
            raise self._error(fault, op, path)

    def _after(self, fault: Fault | None, op: OpKind, path: str) -> None:
        if fault is not None and fault.when == "after":
            raise self._error(fault, op, path)

    # ------------------------------------------------------------------ primitives

    def stat(self, path: str) -> Entry:
        fault = self._select("stat", path)
        self._before(fault, "stat", path)
        entry = self.inner.stat(path)
        self._after(fault, "stat", path)
        return entry

    def open_read(self, path: str) -> BinaryIO:
        fault = self._select("read", path)
        self._before(fault, "read", path)
        stream = self.inner.open_read(path)
        if fault is not None and fault.when == "after":
            stream.close()
            raise self._error(fault, "read", path)
        if fault is not None and fault.after_bytes is not None:
            return _FailingReader(stream, fault.after_bytes, lambda: self._error(fault, "read", path))  # type: ignore[return-value]
        return stream

    def _write_stream(self, path: str, chunks: Iterable[bytes], request: WriteRequest) -> Entry:
        fault = self._select("write", path)
        self._before(fault, "write", path)
        if fault is not None and fault.after_bytes is not None:
            chunks = _fail_after(chunks, fault.after_bytes, lambda: self._error(fault, "write", path))
        entry = self.inner.write_stream(path, chunks, **msgspec.structs.asdict(request))
        self._after(fault, "write", path)
        return entry

    def rename(self, src: str, dst: str, *, overwrite: bool) -> None:
        fault = self._select("rename", f"{src} -> {dst}", src, dst)
        self._before(fault, "rename", dst)
        self.inner.rename(src, dst, overwrite=overwrite)
        self._after(fault, "rename", dst)

    def delete_file(self, path: str) -> None:
        fault = self._select("delete", path)
        self._before(fault, "delete", path)
        self.inner.delete_file(path)
        self._after(fault, "delete", path)

    def _iter_entries(self, prefix: str, recursive: bool) -> Iterator[Entry]:
        fault = self._select("list", prefix)
        self._before(fault, "list", prefix)
        yield from self.inner._iter_entries(prefix, recursive)
        self._after(fault, "list", prefix)

    def _remove_dir_if_empty(self, path: str) -> bool:
        fault = self._select("rmdir", path)
        self._before(fault, "rmdir", path)
        removed = self.inner._remove_dir_if_empty(path)
        self._after(fault, "rmdir", path)
        return removed

    def close(self) -> None:
        self.inner.close()


def _fail_after(chunks: Iterable[bytes], limit: int, error: Callable[[], BaseException]) -> Iterator[bytes]:
    """Yield exactly ``limit`` bytes of ``chunks`` (splitting a chunk if needed), then raise."""
    passed = 0
    for chunk in chunks:
        room = limit - passed
        if len(chunk) >= room:
            if room:
                yield chunk[:room]
            raise error()
        passed += len(chunk)
        yield chunk
    if passed >= limit:
        raise error()


class _FailingReader(ReadStream):
    """A read stream that raises after ``limit`` bytes were returned."""

    def __init__(self, inner: BinaryIO, limit: int, error: Callable[[], BaseException]) -> None:
        super().__init__()
        self._inner = inner
        self._left = limit
        self._error = error

    def read(self, size: int | None = -1) -> bytes:
        if self._left <= 0:
            raise self._error()
        want = self._left if size is None or size < 0 else min(size, self._left)
        data = self._inner.read(want)
        self._left -= len(data)
        return data

    def readall(self) -> bytes:
        parts = []
        while True:
            data = self.read(-1)
            if not data:
                return b"".join(parts)
            parts.append(data)

    def close(self) -> None:
        try:
            self._inner.close()
        finally:
            super().close()

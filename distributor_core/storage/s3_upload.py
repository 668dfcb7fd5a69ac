"""Streaming uploads and server-side copies for the S3 backend (resolutions A4).

:class:`PartBuffer` cuts an iterable of arbitrary chunks into parts of a fixed size without ever
holding more than one part plus one chunk. :class:`PartPool` uploads parts on a bounded thread
pool: at most ``max_concurrency`` parts are in flight, so memory stays flat in the file size
(``(max_concurrency + 1) * part_size`` plus one caller chunk). Both are independent of the
storage class so they can be tested and reused (multipart copies use the pool too).
"""

from __future__ import annotations

import base64
import hashlib
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

#: S3 refuses non-final parts below 5 MiB and any part above 5 GiB, and at most 10,000 parts.
MIN_PART_SIZE = 5 * 1024 * 1024
MAX_PART_SIZE = 5 * 1024 * 1024 * 1024
MAX_PARTS = 10_000
MIB = 1024 * 1024


def content_md5(data: bytes | bytearray | memoryview) -> str:
    """``Content-MD5`` header value: S3 rejects the request when the body it received differs."""
    return base64.b64encode(hashlib.md5(data, usedforsecurity=False).digest()).decode("ascii")


def part_size_for(size: int | None, preferred: int) -> int:
    """A part size of at least ``preferred`` that fits ``size`` bytes in 10,000 parts."""
    if size is None or size <= preferred * MAX_PARTS:
        return preferred
    needed = -(-size // MAX_PARTS)
    return min(MAX_PART_SIZE, -(-needed // MIB) * MIB)


class BufferPool:
    """Recycled part buffers of one size, shared by every write of a storage.

    Fresh allocations per part would fragment the heap and let RSS creep up with the file size;
    recycling keeps it flat. Buffers are only created when none is free, so the pool never holds
    more than the most buffers ever in use at once: parts in flight (bounded storage-wide) plus
    one filling buffer per concurrent write. The free list is dropped when the last write using
    the pool finishes, so an idle storage holds no part memory.
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self._free: list[bytearray] = []
        self._lock = threading.Lock()
        self._users = 0
        #: buffers created so far
        self.allocated = 0

    def enter(self) -> None:
        with self._lock:
            self._users += 1

    def exit(self) -> None:
        with self._lock:
            self._users -= 1
            if self._users <= 0:
                self._users = 0
                self._free.clear()

    def acquire(self) -> bytearray:
        """A free full-size buffer, or a new empty one that grows as it fills."""
        with self._lock:
            if self._free:
                return self._free.pop()
            self.allocated += 1
        return bytearray()

    def release(self, buffer: bytearray) -> None:
        if len(buffer) != self.size:
            return
        with self._lock:
            if self._users > 0:
                self._free.append(buffer)

    @property
    def free(self) -> int:
        with self._lock:
            return len(self._free)


class PartBuffer:
    """Cuts a stream of chunks into parts of exactly ``part_size`` bytes.

    A full part is handed out as a ``bytearray`` from ``pool`` and goes back through
    :meth:`release` once uploaded. A fresh buffer grows with the data, so a small payload never
    costs a whole part.
    """

    def __init__(self, part_size: int, pool: BufferPool | None = None) -> None:
        if pool is not None and pool.size != part_size:
            raise ValueError("buffer pool size differs from the part size")
        self.part_size = part_size
        self.pool = pool if pool is not None else BufferPool(part_size)
        self._current: bytearray | None = None
        self._filled = 0

    def __len__(self) -> int:
        return self._filled

    def release(self, buffer: bytearray) -> None:
        """Give a full part's buffer back once its upload finished."""
        self.pool.release(buffer)

    def feed(self, chunk: bytes) -> Iterator[bytearray]:
        """Add ``chunk`` and yield every part that became full (release each when done)."""
        view = memoryview(chunk).cast("B")
        while view:
            if self._current is None:
                self._current = self.pool.acquire()
                self._filled = 0
            buffer = self._current
            size = min(len(view), self.part_size - self._filled)
            end = self._filled + size
            if len(buffer) < end:  # a fresh buffer grows
                buffer[self._filled :] = view[:size]
            else:
                buffer[self._filled : end] = view[:size]
            self._filled = end
            view = view[size:]
            if end == self.part_size:
                self._current = None
                self._filled = 0
                yield buffer

    def take_rest(self) -> bytearray:
        """The bytes that did not fill a whole part (possibly empty), in a buffer of their own."""
        buffer = self._current if self._current is not None else bytearray()
        del buffer[self._filled :]
        self._current = None
        self._filled = 0
        return buffer


class PartPool:
    """Runs part jobs (upload or copy) with at most ``max_concurrency`` in flight.

    ``submit`` blocks while the pool is full and re-raises the first failure of a finished
    job; ``finish`` waits for everything and returns the results ordered by part number.
    ``shutdown`` waits for running jobs (so nothing lands after an abort) and drops queued ones.
    ``slots``, when given, is shared by every pool of one storage: a part holds a slot from
    submission until it finished or was cancelled, which bounds the part buffers in flight
    across parallel writes.
    """

    def __init__(self, max_concurrency: int, slots: threading.Semaphore | None = None) -> None:
        self.max_concurrency = max(1, max_concurrency)
        self._executor = ThreadPoolExecutor(max_workers=self.max_concurrency, thread_name_prefix="s3-part")
        self._pending: set[Future[tuple[int, str]]] = set()
        self._done: dict[int, str] = {}
        self._slots = slots

    def submit(self, number: int, job: Callable[[], str]) -> None:
        while len(self._pending) >= self.max_concurrency:
            self._harvest(FIRST_COMPLETED)
        slots = self._slots
        if slots is not None:
            slots.acquire()
        try:
            future = self._executor.submit(_run, number, job)
        except BaseException:
            if slots is not None:
                slots.release()
            raise
        if slots is not None:
            future.add_done_callback(lambda _: slots.release())  # also runs when cancelled
        self._pending.add(future)

    def _harvest(self, when: str) -> None:
        done, pending = wait(self._pending, return_when=when)
        self._pending = set(pending)
        for future in done:
            number, etag = future.result()  # re-raises the job's failure
            self._done[number] = etag

    def finish(self) -> list[dict[str, object]]:
        if self._pending:
            self._harvest("ALL_COMPLETED")
        return [{"PartNumber": n, "ETag": self._done[n]} for n in sorted(self._done)]

    def shutdown(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)
        self._pending.clear()


def _run(number: int, job: Callable[[], str]) -> tuple[int, str]:
    return number, job()


def copy_ranges(size: int, part_size: int) -> Iterable[tuple[int, int, int]]:
    """``(part number, first byte, last byte)`` covering ``size`` bytes."""
    number = 1
    start = 0
    while start < size:
        end = min(size, start + part_size) - 1
        yield number, start, end
        number += 1
        start = end + 1

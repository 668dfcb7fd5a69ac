"""Admission order without a shared counter (issue 29): every replica numbers its own admissions
from its clock, and the store lists them in that order.

An admission number is the admitting process's wall clock in microseconds since the Unix epoch,
strictly increasing within the process (two admissions in the same microsecond, or a clock stepped
back, get the previous number plus one). Numbers of different replicas interleave in time order up
to their clocks' skew; ties between replicas are broken by run id. Nothing relies on them being
unique or gap-free: :mod:`.objectstore` finds every unfinished upload by listing, never by
"everything after number N", so an upload a slower replica admits late is never passed over.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

#: digits of an admission number in a name (microseconds since 1970 stay below 10**17 until 5138)
NUMBER_DIGITS = 17


class AdmissionClock:
    """Strictly increasing, time-ordered admission numbers for one process."""

    def __init__(self, now_ns: Callable[[], int] = time.time_ns) -> None:
        self._now_ns = now_ns
        self._last = 0
        self._lock = threading.Lock()

    def next(self) -> int:
        with self._lock:
            number = max(self._last + 1, self._now_ns() // 1000)
            self._last = number
            return number


def marker_name(number: int, run_id: str) -> str:
    """``<17-digit admission number>.<run id>``: names that sort in admission order."""
    return f"{number:0{NUMBER_DIGITS}d}.{run_id}"


def parse_marker(name: str) -> tuple[int, str] | None:
    """``(number, run id)`` of a :func:`marker_name`, ``None`` for any other name."""
    number, dot, run_id = name.partition(".")
    if not dot or len(number) != NUMBER_DIGITS or not number.isdigit() or not run_id:
        return None
    return int(number), run_id

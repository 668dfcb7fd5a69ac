"""run_ordered: parallel indexed tasks that fail like a sequential loop."""

from __future__ import annotations

import threading
import time

import pytest

from distributor_core.parallel import run_ordered


def test_every_index_runs_once_on_several_threads() -> None:
    seen: list[int] = []
    names: set[str] = set()
    lock = threading.Lock()

    def task(index: int) -> None:
        time.sleep(0.001)
        with lock:
            seen.append(index)
            names.add(threading.current_thread().name)

    run_ordered(50, task, threads=3, name="t")
    assert sorted(seen) == list(range(50))
    assert len(names) > 1 and all(name.startswith("t-") for name in names)


def test_the_earliest_failure_is_raised_and_later_indexes_do_not_start() -> None:
    started: list[int] = []
    lock = threading.Lock()

    def task(index: int) -> None:
        with lock:
            started.append(index)
        if index == 3:
            time.sleep(0.05)  # fails after index 7 has already failed
            raise ValueError("three")
        if index == 7:
            raise ValueError("seven")
        time.sleep(0.01)

    with pytest.raises(ValueError, match="three"):
        run_ordered(40, task, threads=2, name="t")
    assert set(range(4)) <= set(started)
    assert max(started) < 12  # nothing far past the failures was started


def test_one_thread_is_a_plain_loop() -> None:
    order: list[int] = []
    run_ordered(5, order.append, threads=1, name="t")
    assert order == [0, 1, 2, 3, 4]
    with pytest.raises(KeyError):
        run_ordered(3, lambda i: (_ for _ in ()).throw(KeyError(i)), threads=1, name="t")

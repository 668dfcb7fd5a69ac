"""Run indexed tasks on a few threads with the failure a sequential loop would report."""

from __future__ import annotations

import threading
from collections.abc import Callable


def run_ordered(count: int, task: Callable[[int], None], *, threads: int, name: str) -> None:
    """Call ``task(i)`` for every ``i`` in ``range(count)`` on ``threads`` workers.

    Workers take indexes in ascending order. After ``task(f)`` raises an ``Exception`` no index
    above ``f`` starts, while indexes below it still run, so the error raised at the end is the
    one of the earliest failing index: what a plain loop would have raised. Anything else (an
    interrupt) stops every worker from taking more. The call returns or raises only once every
    worker has stopped, so nothing is still running when the caller cleans up.
    """
    if threads <= 1 or count <= 1:
        for index in range(count):
            task(index)
        return
    take = threading.Lock()
    position = iter(range(count))
    failures: dict[int, BaseException] = {}
    stop = threading.Event()

    def worker() -> None:
        while not stop.is_set():
            with take:
                index = next(position, None)
                if index is None or (failures and index > min(failures)):
                    return
            try:
                task(index)
            except BaseException as exc:
                with take:
                    failures[index] = exc
                if not isinstance(exc, Exception):
                    stop.set()
                return

    pool = [threading.Thread(target=worker, name=f"{name}-{n}", daemon=True) for n in range(min(threads, count))]
    for thread in pool:
        thread.start()
    try:
        for thread in pool:
            thread.join()
    except BaseException:
        stop.set()  # interrupted: let the tasks in progress finish, start no more
        for thread in pool:
            thread.join()
        raise
    if failures:
        raise failures[min(failures)]

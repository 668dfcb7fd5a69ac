"""Test-only kill hook for the reliability suites (issue 9). Never installed; loaded only when a
test puts this directory on ``PYTHONPATH`` of a ``distributor`` subprocess.

It wraps every *destination* storage the process opens (``open_destination_storage``) in a
:class:`~distributor_core.storage.faults.FaultInjectingStorage` and, driven by environment
variables, records or kills:

``DISTRIBUTOR_TEST_TRACE=<file>``
    append one line per mutating storage call (``write``, ``rename``, ``delete``; all
    destinations, in order): ``<kind>\\t<path>\\t<expected size or ->\\t<ok or error kind>``.
``DISTRIBUTOR_TEST_KILL=<kind>:<nth>:<when>[:<after_bytes>]``
    ``SIGKILL`` this process at the ``nth`` call of ``kind`` (``write``, ``rename``, ``delete``,
    ...) counted over all destinations: ``before`` the call reaches the backend, ``after`` it took
    effect, or ``during`` a write once ``after_bytes`` bytes were streamed to the backend.

``DISTRIBUTOR_TEST_STOP=<kind>:<nth>:<when>[:<after_bytes>]``
    like ``KILL`` but ``SIGSTOP``: the whole process (lock renewal included) stalls there until
    the test sends ``SIGCONT`` (a writer that is merely slow). ``nth`` may be ``*``: every call
    of ``kind``, so ``write:*:during:<k>`` stops in the first write that streams more than ``k``
    bytes, whichever its place among parallel writes. A ``during`` stop is for a test that kills
    the stopped process from outside (continued, the write fails).
``DISTRIBUTOR_TEST_FAIL=<kind>:<path>``
    fail the first call of ``kind`` on the destination-relative ``path`` with the storage error
    the fault injector raises by default (``delete``: ``permission``): a failure, not a crash.
``DISTRIBUTOR_TEST_DELAY=<kind>:<nth>:<seconds>``
    sleep ``seconds`` right before the ``nth`` call of ``kind`` that is not a write of the lock
    record (its other threads, the lock's renewal included, keep running): a writer that is slow
    but alive.
``DISTRIBUTOR_TEST_LOCK_WAIT`` / ``DISTRIBUTOR_TEST_LOCK_LEASE`` (seconds)
    override the lock wait (30 s) and lease (60 s) of every publication.

Nothing else changes: the wrapper forwards every primitive to the real backend.
"""

from __future__ import annotations

import os
import signal
import threading


def _install() -> None:
    _lock_timing()
    trace = os.environ.get("DISTRIBUTOR_TEST_TRACE")
    kill = os.environ.get("DISTRIBUTOR_TEST_KILL")
    stop = os.environ.get("DISTRIBUTOR_TEST_STOP")
    fail = os.environ.get("DISTRIBUTOR_TEST_FAIL")
    delay = os.environ.get("DISTRIBUTOR_TEST_DELAY")
    if not trace and not kill and not stop and not fail and not delay:
        return
    from distributor_core.storage import factory
    from distributor_core.storage.faults import Fault, FaultInjectingStorage

    def die(op: str, path: str) -> BaseException:
        os.kill(os.getpid(), signal.SIGKILL)
        raise SystemExit(137)  # not reached

    faults: list[Fault] = []
    if kill:
        parts = kill.split(":")
        kind, nth, when = parts[0], int(parts[1]), parts[2]
        if when == "during":
            faults.append(Fault(kind, nth=nth, after_bytes=int(parts[3]), error=die))  # type: ignore[arg-type]
        else:
            faults.append(Fault(kind, nth=nth, when=when, error=die))  # type: ignore[arg-type]
    if stop:
        kind, nth, when, *during = stop.split(":")

        def stall(op: str, path: str) -> BaseException:
            os.kill(os.getpid(), signal.SIGSTOP)
            # resumed: let the call go ahead as if nothing happened (a "before" stop)
            raise _Resume()

        every = nth == "*"
        if when == "during":
            faults.append(Fault(kind, nth=None if every else int(nth), times=None if every else 1,  # type: ignore[arg-type]
                                after_bytes=int(during[0]), error=stall))
        else:
            faults.append(Fault(kind, nth=None if every else int(nth), times=None if every else 1,  # type: ignore[arg-type]
                                when=when, error=stall))
    if fail:
        kind, _, path = fail.partition(":")
        faults.append(Fault(kind, path=path))  # type: ignore[arg-type]
    if delay:
        kind, nth, seconds = delay.split(":")

        def slow(op: str, path: str) -> BaseException:
            # not time.sleep: under libfaketime with the monotonic clock left alone it fails (EINVAL)
            threading.Event().wait(float(seconds))
            raise _Resume()

        def work(path: str) -> bool:  # the lock's own writes are the renewal's, which must go on
            return not path.endswith(".distributor.lock")

        faults.append(Fault(kind, nth=int(nth), path=work, times=1, when="before", error=slow))  # type: ignore[arg-type]
    trace_fd = os.open(trace, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644) if trace else None

    class Hooked(FaultInjectingStorage):
        def _before(self, fault, op, path):  # type: ignore[no-untyped-def]
            try:
                super()._before(fault, op, path)
            except _Resume:
                pass

        def _after(self, fault, op, path):  # type: ignore[no-untyped-def]
            try:
                super()._after(fault, op, path)
            except _Resume:
                pass

        """Traces each primitive as ``<kind>\t<path>\t<bytes written or ->\t<ok|error kind>``."""

        def _traced(self, op, path, size, call):  # type: ignore[no-untyped-def]
            try:
                result = call()
            except BaseException as exc:
                if trace_fd is not None:
                    os.write(trace_fd, f"{op}\t{path}\t{size}\t{getattr(exc, 'kind', 'error')}\n".encode())
                raise
            if trace_fd is not None:
                os.write(trace_fd, f"{op}\t{path}\t{size}\tok\n".encode())
            return result

        def write_stream(self, path, chunks, **kwargs):  # type: ignore[no-untyped-def]
            size = kwargs.get("expected_size")
            call = super().write_stream
            return self._traced("write", path, "-" if size is None else size, lambda: call(path, chunks, **kwargs))

        def rename(self, src, dst, *, overwrite):  # type: ignore[no-untyped-def]
            call = super().rename
            return self._traced("rename", f"{src} -> {dst}", "-", lambda: call(src, dst, overwrite=overwrite))

        def delete_file(self, path):  # type: ignore[no-untyped-def]
            call = super().delete_file
            return self._traced("delete", path, "-", lambda: call(path))

    original = factory.open_destination_storage

    def open_destination_storage(dest_cfg, env, *, dry_run=False):  # type: ignore[no-untyped-def]
        storage = original(dest_cfg, env, dry_run=dry_run)
        # one shared list: the Fault objects count calls over every destination of the run
        return Hooked(storage, faults)

    factory.open_destination_storage = open_destination_storage


class _Resume(Exception):
    """Raised by a stop rule once the process is continued: swallowed, the call proceeds."""


def _lock_timing() -> None:
    wait = os.environ.get("DISTRIBUTOR_TEST_LOCK_WAIT")
    lease = os.environ.get("DISTRIBUTOR_TEST_LOCK_LEASE")
    if not wait and not lease:
        return
    from distributor_core.execute import publish as publish_module

    original = publish_module.publish

    def publish(request, **kwargs):  # type: ignore[no-untyped-def]
        if wait:
            kwargs["lock_wait"] = float(wait)
        if lease:
            kwargs["lock_lease"] = float(lease)
        return original(request, **kwargs)

    publish_module.publish = publish


_install()

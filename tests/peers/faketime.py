"""Debian's libfaketime as a test peer: shift one process's wall clock, leave its monotonic clock
alone (``shared/notes/test-peers.md``). ``skewed(seconds)`` is the environment a child process gets:
``LD_PRELOAD`` of the library (its path asked of ``dpkg -L libfaketime``, so no architecture is
written down), ``FAKETIME`` and ``FAKETIME_DONT_FAKE_MONOTONIC=1``. It applies to the child and its
children, never to the test process. A missing package fails the test, naming the remedy."""

from __future__ import annotations

import functools
import subprocess

import pytest


@functools.cache
def library() -> str:
    try:
        listed = subprocess.run(["dpkg", "-L", "libfaketime"], capture_output=True, text=True, check=False).stdout
    except FileNotFoundError:
        listed = ""
    for line in listed.splitlines():
        if line.endswith("/libfaketime.so.1"):
            return line
    pytest.fail("libfaketime is missing: install it with `bash scripts/install-test-peers.sh` (or `make peers`)",
                pytrace=False)


def skewed(seconds: float) -> dict[str, str]:
    """The environment of a child whose wall clock is ``seconds`` off (negative: behind)."""
    return {"LD_PRELOAD": library(), "FAKETIME": f"{seconds:+.0f}s", "FAKETIME_DONT_FAKE_MONOTONIC": "1"}

"""Pause the cyclic garbage collector while building large, acyclic structures.

Parsing a state file with 100,000 outputs allocates a few hundred thousand objects; every
allocation threshold crossed triggers a collection that walks all of them again, which costs
about a quarter of the parse. None of these objects form cycles, so collection can wait until
the structure is built. The pause is process-wide but short (well under a second even for the
largest documents), and nested or concurrent pauses only re-enable what they disabled.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused(enabled: bool = True) -> Iterator[None]:
    """Disable the cyclic collector for the block when ``enabled`` (and it is running)."""
    if not enabled or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()

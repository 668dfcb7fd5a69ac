"""Pause the cyclic garbage collector while building large, acyclic structures.

Parsing a state file with 100,000 outputs allocates a few hundred thousand objects; every
allocation threshold crossed triggers a collection that walks all of them again, which costs
about a quarter of the parse. None of these objects form cycles, so collection can wait until
the structure is built. The pause is process-wide but short (well under a second even for the
largest documents), and nested or concurrent pauses only re-enable what they disabled.

When the pause ends, everything allocated during it would be young: the first allocation after
re-enabling would run a young collection that walks all of those objects (~0.1 s for a
100,000-output state and its plan). Instead they join the oldest generation directly
(``gc.freeze()`` then ``gc.unfreeze()``: two list splices, no walk); the next full collection
looks at whatever of it is still alive, and whatever is freed by reference counting before then
costs the collector nothing. Cyclic garbage is still found, by that full collection. A process
that has frozen objects itself (``gc.get_freeze_count()``) is left as it was: plain re-enable.
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
        if gc.get_freeze_count():  # someone froze objects on purpose (say before a fork): keep them so
            gc.enable()
        else:
            gc.freeze()  # every tracked object to the permanent generation ...
            gc.enable()
            gc.unfreeze()  # ... and from there to the oldest one (no young collection walks them)

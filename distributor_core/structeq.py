"""Equality that leaves fields out, for msgspec Structs (what a dataclass's ``compare=False`` did).

A Struct compares and hashes every field. A few carry a payload that is not part of the value
(validated source bytes handed to execution, the outcome an entry was made from); their classes
define ``__eq__`` (and, when frozen, ``__hash__``) over :func:`key_without`'s getter instead.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter
from typing import Any


def key_without(cls: Any, *names: str) -> Callable[[Any], tuple]:
    """A getter of the tuple of ``cls``'s fields other than ``names``, in field order."""
    kept = [name for name in cls.__struct_fields__ if name not in names]
    if len(kept) < 2:
        raise ValueError("key_without needs at least two compared fields")
    return attrgetter(*kept)

"""Equality that leaves fields out, for msgspec Structs (what a dataclass's ``compare=False`` did).

A Struct compares and hashes every field. A few carry a payload that is not part of the value
(validated source bytes handed to execution, the outcome an entry was made from, the schema a
state was read from); their classes are decorated with :func:`compare_without`.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter
from typing import Any, TypeVar

T = TypeVar("T")


def key_without(cls: Any, *names: str) -> Callable[[Any], tuple]:
    """A getter of the tuple of ``cls``'s fields other than ``names``, in field order."""
    kept = [name for name in cls.__struct_fields__ if name not in names]
    if len(kept) < 2:
        raise ValueError("key_without needs at least two compared fields")
    return attrgetter(*kept)


def compare_without(*names: str) -> Callable[[type[T]], type[T]]:
    """Class decorator: ``==`` (and, for a frozen Struct, ``hash``) over every field but ``names``;
    values of another type compare unequal."""

    def apply(cls: type[T]) -> type[T]:
        key = key_without(cls, *names)

        def __eq__(self: Any, other: object) -> bool:
            if type(other) is not type(self):
                return NotImplemented
            return key(self) == key(other)

        def __ne__(self: Any, other: object) -> bool:
            if type(other) is not type(self):
                return NotImplemented
            return key(self) != key(other)

        cls.__eq__ = __eq__  # type: ignore[method-assign,assignment]
        cls.__ne__ = __ne__  # type: ignore[method-assign,assignment]
        if cls.__struct_config__.frozen:  # type: ignore[attr-defined]
            cls.__hash__ = lambda self: hash(key(self))  # type: ignore[method-assign,assignment]
        return cls

    return apply

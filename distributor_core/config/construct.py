"""Building the :class:`~distributor_core.config.models.Config` Structs from an already validated
tree (issue 17, start-up).

``load.py`` only gets here after ``decode`` converted every value to its type, ``defaults`` filled
every default and ``validate`` checked every rule (and worded every message), so this step can
never fail on a user's file. ``msgspec.convert`` builds the nested Structs in C: tuples from
lists, the backend unions by their ``backend`` tag, ``Path`` fields from text (the one type
msgspec does not know, via :func:`_decode_hook`), ``timedelta`` values taken as they are. Any
mismatch raises ``TypeError`` (a bug in the steps before, never a config error).
tests/config/test_construct.py checks the result field by field against the tree for every
example and a spread of configs.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import msgspec

M = TypeVar("M", bound=msgspec.Struct)


def construct(model: type[M], data: Mapping[str, Any]) -> M:
    """``model`` built from the validated mapping ``data`` (its keys are ``model``'s fields)."""
    try:
        return msgspec.convert(data, model, dec_hook=_decode_hook, builtin_types=(timedelta,))
    except msgspec.ValidationError as exc:
        raise TypeError(f"validated config does not fit {model.__name__}: {exc}") from None


def _decode_hook(kind: type, value: Any) -> Any:
    if kind is Path and isinstance(value, str | Path):
        return Path(value)
    raise NotImplementedError(f"no conversion of {type(value).__name__} to {kind}")

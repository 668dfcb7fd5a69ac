"""Small helpers for mutating fixture documents in tests."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from distributor_core.state import StateError


def mutate(text: str, change: Callable[[dict[str, Any]], None]) -> bytes:
    """Load ``text``, apply ``change`` to the object, and re-encode it."""
    obj = json.loads(text)
    change(obj)
    return json.dumps(obj, indent=2).encode()


def expect_error(parse: Callable[[bytes], Any], data: bytes | str, message: str) -> StateError:
    """``parse(data)`` must raise a StateError whose message is exactly ``message``."""
    with pytest.raises(StateError) as info:
        parse(data if isinstance(data, bytes) else data.encode())
    assert str(info.value) == message
    return info.value


def expect_error_prefix(parse: Callable[[bytes], Any], data: bytes | str, prefix: str) -> StateError:
    with pytest.raises(StateError) as info:
        parse(data if isinstance(data, bytes) else data.encode())
    assert str(info.value).startswith(prefix), str(info.value)
    return info.value

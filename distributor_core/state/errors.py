"""State errors and Go-style quoting for the messages that quote values (core-semantics §2.6)."""

from __future__ import annotations

from distributor_core.state.scope import OwnerScope


class StateError(ValueError):
    """Destination state is malformed, invalid, or cannot be changed as asked.

    The message is exactly the contract text, e.g. ``state outputs[0].created_at is required`` or
    ``parse distributor state: trailing data``.
    """


class StateOwnerError(StateError):
    """Single-owner state belongs to ``owner``, not to ``expected`` (the selected pipeline and
    destination): ``state owner is <owner>, not <expected>``."""

    def __init__(self, owner: OwnerScope, expected: OwnerScope) -> None:
        self.owner, self.expected = owner, expected
        super().__init__(f"state owner is {owner}, not {expected}")

    def __reduce__(self) -> tuple[object, ...]:
        return (self.__class__, (self.owner, self.expected))


class PathOwnerError(StateError):
    """A path recorded for one owner of shared-root state was planned for another:
    ``state output path "<path>" is owned by <owner>`` (``, not <expected>`` for a planned record
    that names another owner than the one writing)."""

    def __init__(self, path: str, owner: OwnerScope, expected: OwnerScope | None = None) -> None:
        self.path, self.owner, self.expected = path, owner, expected
        tail = f", not {expected}" if expected is not None else ""
        super().__init__(f"state output path {go_quote(path)} is owned by {owner}{tail}")

    def __reduce__(self) -> tuple[object, ...]:
        return (self.__class__, (self.path, self.owner, self.expected))


_GO_ESCAPES = {
    "\a": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
    "\\": "\\\\",
    '"': '\\"',
}


def go_quote(value: str) -> str:
    """Quote like Go's ``%q`` / ``strconv.Quote``: printable characters raw, others escaped."""
    out = ['"']
    for ch in value:
        escaped = _GO_ESCAPES.get(ch)
        if escaped is not None:
            out.append(escaped)
            continue
        code = ord(ch)
        if code < 0x20 or code == 0x7F:
            out.append(f"\\x{code:02x}")
        elif ch.isprintable():
            out.append(ch)
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)


__all__ = [
    "PathOwnerError",
    "StateError",
    "StateOwnerError",
    "go_quote",
]

"""State errors and Go-style quoting for the messages that quote values (core-semantics §2.6)."""

from __future__ import annotations


class StateError(ValueError):
    """Destination state is malformed, invalid, or cannot be changed as asked.

    The message is exactly the contract text, e.g. ``state outputs[0].created_at is required`` or
    ``parse distributor state: trailing data``.
    """


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
    "StateError",
    "go_quote",
]

"""The closed sets of values a destination policy chooses from (core-semantics §4, §6).

Each is a :class:`~enum.StrEnum`: a member *is* its string, so reports, JSON and f-strings show
the same bytes as the plain strings the config holds, and a plain string compares equal to its
member. :func:`coerce` turns a configured string into a member, or the contract's error text.
"""

from __future__ import annotations

from enum import StrEnum
from typing import TypeVar

from distributor_core.state.model import ReconciliationMode, StateMode

__all__ = [
    "ConflictChoice",
    "LinkPrimary",
    "MarkdownMode",
    "NewerChoice",
    "OlderChoice",
    "PathMapping",
    "ReconciliationMode",
    "SameChoice",
    "StateMode",
    "TakeoverMode",
    "choices",
    "coerce",
]


class PathMapping(StrEnum):
    """``path_mapping.mode`` (§4.4.4): where a bundle lands in the destination."""

    PRESERVE_RELATIVE = "preserve_relative"
    FIXED = "fixed"


class TakeoverMode(StrEnum):
    """``takeover.mode`` (§6.1): which valid managed content a normal run may replace."""

    SAME_PIPELINE = "same_pipeline"
    SAME_SOURCE = "same_source"
    ANY_MANAGED = "any_managed"
    NEVER = "never"


class SameChoice(StrEnum):
    """``transfer.on_destination_same``."""

    SKIP = "skip"
    FAIL = "fail"


class OlderChoice(StrEnum):
    """``transfer.on_destination_older``."""

    REPLACE = "replace"
    FAIL = "fail"


class NewerChoice(StrEnum):
    """``transfer.on_destination_newer``."""

    SKIP = "skip"
    FAIL = "fail"
    REPLACE = "replace"


class ConflictChoice(StrEnum):
    """``transfer.on_conflict``."""

    FAIL = "fail"
    REPLACE = "replace"


class MarkdownMode(StrEnum):
    """``transform.markdown_to_html.mode`` (§4.4.2)."""

    SIDECAR = "sidecar"
    INDEX = "index"


class LinkPrimary(StrEnum):
    """``links.primary`` (§4.4.5). ``generated`` is accepted as another name for ``html``."""

    AUTO = "auto"
    SOURCE = "source"
    HTML = "html"
    GENERATED = "generated"


E = TypeVar("E", bound=StrEnum)


def choices(kind: type[StrEnum]) -> str:
    """``a, b or c``: the members of ``kind`` as the contract's messages list them."""
    values = [member.value for member in kind]
    return values[0] if len(values) == 1 else ", ".join(values[:-1]) + " or " + values[-1]


def coerce(kind: type[E], value: object, field: str) -> E:
    """``value`` as a member of ``kind``; ``ValueError("<field> must be <choices>")`` otherwise."""
    try:
        return kind(value)
    except ValueError:
        raise ValueError(f"{field} must be {choices(kind)}") from None

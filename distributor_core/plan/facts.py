"""What planning knows about a destination, and the questions it may still ask (sans-IO).

Planning never reads storage. Whoever drives it (``execute.facts``) reads the state file first
(:class:`StateFacts`), then calls :func:`distributor_core.plan.decide` with the
:class:`DestinationFacts` gathered so far. ``decide`` returns either the plan or the one
:data:`FactRequest` it needs answered next — in the manner of h11's "need more data" — and the
driver answers it (:meth:`DestinationFacts.with_answer`) and calls ``decide`` again. Requests
are frozen values, so an answer is kept against the very question it answers.

Paths in requests and answers are bundle-relative unless a field says otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, TypeAlias

import msgspec

from distributor_core.bundle import ValidManifest
from distributor_core.compare import DestinationStatus
from distributor_core.state import SharedRootState, StateDocument, StateError, parse_state_document


class StateFacts(msgspec.Struct, frozen=True):
    """What reading ``<bundle path>/.distributor.json`` found.

    ``present`` is false when there was no state file. Otherwise ``document`` is the parsed,
    valid state, or ``error`` the parse/validation error text; ``revision`` is the file's
    revision as stat'ed before the read ("" when the backend has none), which conditional state
    writes are based on.
    """

    present: bool
    revision: str = ""
    document: StateDocument | None = None
    error: str | None = None

    @classmethod
    def absent(cls) -> StateFacts:
        return cls(present=False)

    @classmethod
    def from_bytes(
        cls, data: bytes, revision: str = "", *, source_manifest: ValidManifest | None = None
    ) -> StateFacts:
        """Parse (and fully validate) the state file's bytes.

        ``source_manifest`` is the manifest about to be planned: when the state records exactly
        that manifest, the document reuses it instead of building and validating an equal one
        (the usual unchanged re-run).
        """
        try:
            document = parse_state_document(data, source_manifest=source_manifest)
        except StateError as exc:
            return cls(present=True, revision=revision, error=str(exc))
        return cls(present=True, revision=revision, document=document)

    def status(self, has_contents: bool) -> DestinationStatus:
        """The comparison input (§3.1); ``has_contents`` matters only without a state file."""
        if not self.present:
            return DestinationStatus(has_contents=has_contents)
        if self.error is not None:
            return DestinationStatus(state_error=self.error, has_contents=True)
        if isinstance(self.document, SharedRootState):
            return DestinationStatus(shared_root=self.document, has_contents=True, validated=True)
        return DestinationStatus(state=self.document, has_contents=True, validated=True)


# -- the questions -------------------------------------------------------------------------


class HasAny(msgspec.Struct, frozen=True):
    """Does ``bundle_path`` hold anything but distributor's reserved names? Answer: ``bool``."""

    bundle_path: str


class ListFiles(msgspec.Struct, frozen=True):
    """The files under ``bundle_path``, at most ``limit`` of them, as a :class:`Listing`.

    ``include_reserved``: reserved names too (a forced replacement must see nested state
    files); otherwise they are left out as the storage scan leaves them out.
    """

    bundle_path: str
    limit: int
    include_reserved: bool = False


class FirstExisting(msgspec.Struct, frozen=True):
    """Which of ``paths`` (bundle-relative, tried in order) exists first under ``bundle_path``?
    Answer: that path, or ``None`` when none does. A stat error other than not-found is not an
    answer: the driver lets it fail planning."""

    bundle_path: str
    paths: tuple[str, ...]


FactRequest: TypeAlias = HasAny | ListFiles | FirstExisting


class Listing(msgspec.Struct, frozen=True):
    """The answer to :class:`ListFiles`: bundle-relative file paths in the storage's scan
    order; ``truncated`` when more entries than the limit exist."""

    paths: tuple[str, ...]
    truncated: bool = False


class DestinationFacts(msgspec.Struct, frozen=True):
    """The state read plus every answered request."""

    state: StateFacts
    answers: Mapping[Any, Any] = msgspec.field(default_factory=lambda: MappingProxyType({}))

    def answered(self, request: FactRequest) -> bool:
        return request in self.answers

    def answer(self, request: FactRequest) -> Any:
        return self.answers[request]

    def with_answer(self, request: FactRequest, answer: Any) -> DestinationFacts:
        """These facts plus ``answer`` to ``request`` (checked for its type)."""
        expected = _ANSWER_TYPES[type(request)]
        if not isinstance(answer, expected):
            raise TypeError(f"{type(request).__name__} is answered by {expected}, not {type(answer).__name__}")
        return DestinationFacts(self.state, MappingProxyType({**self.answers, request: answer}))


_ANSWER_TYPES: dict[type, type | tuple[type, ...]] = {
    HasAny: bool,
    ListFiles: Listing,
    FirstExisting: (str, type(None)),
}


__all__ = [
    "DestinationFacts",
    "FactRequest",
    "FirstExisting",
    "HasAny",
    "ListFiles",
    "Listing",
    "StateFacts",
]

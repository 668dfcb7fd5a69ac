"""Takeover rules (core-semantics §6) as tables the code executes.

* :data:`TAKEOVER_OUTCOMES` — which comparison outcomes takeover is evaluated for, per state
  mode (§6.2); every other outcome goes straight to the action table.
* :data:`TAKEOVER_RULES` — per ``takeover.mode``, which recorded identity must equal the current
  one (§6.3, §6.4). One rule serves all three places takeover is asked about: a single-owner
  state, a shared-root path recorded under another owner (§6.4(a)), and the current owner's own
  record (§6.4(b), where the recorded pipeline is the current one and the source id differs, so
  ``same_pipeline`` and ``any_managed`` permit and ``same_source`` and ``never`` do not).
* :func:`ordering_guard` and :func:`source_not_newer` — a permitted takeover still may not
  replace a newer publication.
"""

from __future__ import annotations

from datetime import datetime

import msgspec

from distributor_core.bundle import Manifest, manifests_equal
from distributor_core.compare import Comparison, Outcome
from distributor_core.plan.modes import StateMode, TakeoverMode
from distributor_core.timefmt import truncate_seconds

REASON_NEWER = "destination source is newer than source"
REASON_DIFFERENT_ID = "destination source id differs from source"
REASON_SAME_CREATED = "destination source has same id and created time but different digest"

#: §6.2: the outcomes of valid parsed state that takeover is evaluated for
TAKEOVER_OUTCOMES: dict[StateMode, frozenset[Outcome]] = {
    StateMode.SINGLE_OWNER: frozenset({Outcome.IDENTITY_MISMATCH, Outcome.DIFFERENT_SOURCE_CONFLICT}),
    StateMode.SHARED_ROOT: frozenset({Outcome.DIFFERENT_SOURCE_CONFLICT}),
}


class TakeoverRule(msgspec.Struct, frozen=True):
    """When a mode permits replacing managed content recorded under another identity."""

    #: False: never permitted
    permitted: bool = True
    #: the recorded pipeline id must be the current pipeline id
    same_pipeline: bool = False
    #: the recorded source id must be the current source manifest id
    same_source: bool = False

    def permits(self, *, recorded_pipeline_id: str, recorded_source_id: str, pipeline_id: str, source_id: str) -> bool:
        if not self.permitted:
            return False
        if self.same_pipeline and recorded_pipeline_id != pipeline_id:
            return False
        return not (self.same_source and recorded_source_id != source_id)


#: §6.1 / §6.3 / §6.4: ``takeover.mode`` → its rule
TAKEOVER_RULES: dict[TakeoverMode, TakeoverRule] = {
    TakeoverMode.SAME_PIPELINE: TakeoverRule(same_pipeline=True),
    TakeoverMode.SAME_SOURCE: TakeoverRule(same_source=True),
    TakeoverMode.ANY_MANAGED: TakeoverRule(),
    TakeoverMode.NEVER: TakeoverRule(permitted=False),
}


def takeover_permitted(
    mode: TakeoverMode, *, recorded_pipeline_id: str, recorded_source_id: str, pipeline_id: str, source_id: str
) -> bool:
    """Whether ``mode`` lets the current (pipeline, source) replace what the record names."""
    return TAKEOVER_RULES[TakeoverMode(mode)].permits(
        recorded_pipeline_id=recorded_pipeline_id,
        recorded_source_id=recorded_source_id,
        pipeline_id=pipeline_id,
        source_id=source_id,
    )


def ordering_guard(recorded: Manifest, source: Manifest) -> Comparison | None:
    """The ordering guard of core-semantics §6.3.

    Returns ``None`` when the takeover may proceed, otherwise the comparison to map instead
    (``destination_newer`` or a conflict).
    """
    if manifests_equal(recorded, source) or recorded.created < source.created:
        return None
    if recorded.created > source.created:
        return Comparison(Outcome.DESTINATION_NEWER, REASON_NEWER)
    if recorded.id != source.id:
        return Comparison(Outcome.DIFFERENT_SOURCE_CONFLICT, REASON_DIFFERENT_ID)
    return Comparison(Outcome.SAME_CREATED_CONFLICT, REASON_SAME_CREATED)


def takeover_reason(mode: str, original_reason: str) -> str:
    return f"takeover permitted by takeover.mode {mode}: {original_reason}"


def source_not_newer(record_source_created: datetime, source: Manifest) -> bool:
    """Path-takeover guard (§6.4(a)): the colliding record's source is not later than the current
    source (whole-second precision, since ``source_created`` is stored in seconds)."""
    return truncate_seconds(record_source_created) <= truncate_seconds(source.created)

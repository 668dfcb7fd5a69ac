"""Retention by bundle (issue 37 item 2): which bundle paths of a ``preserve_relative`` destination
a ``retention.prune.bundles`` policy keeps and which it removes. Pure: it decides from the
bundle paths' states, handed in; it never touches storage.

A bundle path is a candidate when its ``.distributor.json`` records the selected owner: the
owner of single-owner state, or an owner record of shared-root state (the bundle paths of other
owners are never candidates). Its age is the ``created`` time of the manifest the owner last
published there (the producer's time, as the ``fixed`` mapping's "newest bundle" uses), ties by
bundle path ascending. The newest ``keep_latest`` candidates are kept first; of the rest, those
created before ``now - older_than`` are removed (with only ``keep_latest``, all the rest).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import msgspec

from distributor_core.state.model import OwnerScope, SharedRootState, SingleOwnerState, StateDocument
from distributor_core.timefmt import format_precise, format_seconds, to_utc

KEEP = "keep"
REMOVE = "remove"


class BundlePolicy(msgspec.Struct, frozen=True):
    """A destination's ``retention.prune.bundles`` (validated by the config loader)."""

    keep_latest: int | None = None
    older_than: timedelta | None = None

    def describe(self) -> str:
        """``keep_latest=30 older_than=2160h0m0s`` style, for reports."""
        parts = []
        if self.keep_latest is not None:
            parts.append(f"keep_latest {self.keep_latest}")
        if self.older_than is not None:
            parts.append(f"older_than {_hours(self.older_than)}")
        return ", ".join(parts)


class BundleCandidate(msgspec.Struct, frozen=True):
    """A bundle path whose state records the selected owner, with the identity of the bundle that
    owner last published there."""

    bundle_path: str
    created: datetime
    bundle_id: str
    digest: str
    output_count: int


class BundleVerdict(msgspec.Struct, frozen=True):
    """What the policy does with one candidate: ``keep`` or ``remove``, and why."""

    candidate: BundleCandidate
    action: str
    reason: str

    @property
    def bundle_path(self) -> str:
        return self.candidate.bundle_path

    @property
    def removed(self) -> bool:
        return self.action == REMOVE

    def to_dict(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "reason": self.reason,
            "bundle_id": self.candidate.bundle_id,
            "created": format_precise(self.candidate.created),
            "digest": self.candidate.digest,
        }


def bundle_candidate(doc: StateDocument, scope: OwnerScope, bundle_path: str) -> BundleCandidate | None:
    """The candidate a bundle path's state makes for ``scope``; ``None`` when another owner's."""
    if isinstance(doc, SingleOwnerState):
        if doc.scope != scope:
            return None
        return BundleCandidate(bundle_path, doc.manifest.created, doc.manifest.id, doc.manifest.digest,
                               len(doc.outputs))
    if isinstance(doc, SharedRootState):
        for owner in doc.owners:
            if owner.scope == scope:
                count = sum(1 for output in doc.outputs if output.scope == scope)
                return BundleCandidate(bundle_path, owner.manifest.created, owner.manifest.id,
                                       owner.manifest.digest, count)
    return None


def _hours(value: timedelta) -> str:
    seconds = int(value.total_seconds())
    return f"{seconds // 3600}h" if seconds % 3600 == 0 else f"{seconds}s"


def plan_bundle_retention(
    candidates: Sequence[BundleCandidate], policy: BundlePolicy, *, now: datetime
) -> list[BundleVerdict]:
    """One verdict per candidate, newest first (``created`` descending, ties by path ascending)."""
    ordered = sorted(sorted(candidates, key=lambda c: c.bundle_path), key=lambda c: to_utc(c.created), reverse=True)
    keep = min(policy.keep_latest, len(ordered)) if policy.keep_latest is not None else 0
    cutoff = to_utc(now) - policy.older_than if policy.older_than is not None else None
    verdicts = []
    for index, candidate in enumerate(ordered):
        if index < keep:
            verdicts.append(BundleVerdict(candidate, KEEP, f"one of the newest {keep} bundles (keep_latest)"))
        elif cutoff is None:
            verdicts.append(BundleVerdict(
                candidate, REMOVE, f"not one of the newest {policy.keep_latest} bundles (keep_latest)"))
        elif to_utc(candidate.created) < cutoff:
            verdicts.append(BundleVerdict(
                candidate, REMOVE,
                f"created before {format_seconds(cutoff)} (older_than {_hours(policy.older_than)})"))  # type: ignore[arg-type]
        else:
            verdicts.append(BundleVerdict(
                candidate, KEEP,
                f"created at or after {format_seconds(cutoff)} (older_than {_hours(policy.older_than)})"))  # type: ignore[arg-type]
    return verdicts


__all__ = [
    "KEEP",
    "REMOVE",
    "BundleCandidate",
    "BundlePolicy",
    "BundleVerdict",
    "bundle_candidate",
    "plan_bundle_retention",
]

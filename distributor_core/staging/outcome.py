"""Whether a finished upload published anything, as its run status says it (``published``,
``note``): a run can succeed and still publish nothing, when every destination already holds a
newer bundle of the same id (``skip_destination_newer``), and a producer reading ``succeeded``
alone would believe its bundle is out.

A destination holds the upload's bundle after the run when its action wrote it
(``publish_new``, ``replace_older``, ``replace_takeover``, ``force_replace``) or found it there
already (``skip_same``).
"""

from __future__ import annotations

from typing import Any

from distributor_core.plan.model import WRITE_ACTIONS, Action

#: the actions after which the destination holds this bundle
HOLDS = frozenset({*WRITE_ACTIONS, Action.SKIP_SAME})


def publication_outcome(report: dict[str, Any]) -> dict[str, Any]:
    """``{"published": bool}`` for a succeeded upload's report, with a ``note`` naming the
    destinations that hold a newer bundle; ``{}`` for a report without actions."""
    actions = [action for action in report.get("actions", []) if isinstance(action, dict)]
    if not actions:
        return {}
    holding = [a for a in actions if a.get("action") in HOLDS]
    newer = [str(a.get("destination_id", "")) for a in actions if a.get("action") == Action.SKIP_DESTINATION_NEWER]
    outcome: dict[str, Any] = {"published": bool(holding)}
    if newer:
        which = ", ".join(newer)
        if holding:
            outcome["note"] = (f"not published to {which}: it holds a newer bundle of this id "
                               "(skip_destination_newer)")
        else:
            outcome["note"] = (f"nothing was published: {which} already hold{'s' if len(newer) == 1 else ''} a "
                               "newer bundle of this id (skip_destination_newer)")
    return outcome

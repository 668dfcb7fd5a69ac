"""Publish planning, pure (core-semantics §4–6): facts about a destination in, a plan out.

Owns: the plan model and the policy modes (:mod:`.model`, :mod:`.modes`), output planning and
links (:mod:`.outputs`), the outcome → action table (:mod:`.actions`), the takeover rules
(:mod:`.takeover`), the facts planning consumes and the requests it makes (:mod:`.facts`), and
:func:`prepare` / :func:`decide` (:mod:`.decide`).

Must not know: storage (no ``distributor_core.storage`` import, no open files, no network),
execution, the server, the app layer, the CLI, Dagster. Reading the facts is
``distributor_core.execute.facts``'s job.
"""

from typing import TYPE_CHECKING

from distributor_core.lazyexports import lazy_exports

if TYPE_CHECKING:
    from distributor_core.plan.decide import (
        FORCE_WALK_LIMIT,
        REPLACE_CHECK_SLACK,
        Publication,
        check_request,
        current_owner_records,
        decide,
        prepare,
    )
    from distributor_core.plan.facts import (
        DestinationFacts,
        FactRequest,
        FirstExisting,
        HasAny,
        ListFiles,
        Listing,
        StateFacts,
    )
    from distributor_core.plan.model import (
        ACTION_ORDER,
        Action,
        DestinationPolicy,
        LinkPolicy,
        Plan,
        PlanError,
        PlannedOutput,
        TakenOverOutput,
        TransferPolicy,
    )
    from distributor_core.plan.outputs import bundle_path_for, markdown_sources, render_markdown

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "decide": (
            "FORCE_WALK_LIMIT",
            "REPLACE_CHECK_SLACK",
            "Publication",
            "check_request",
            "current_owner_records",
            "decide",
            "prepare",
        ),
        "facts": (
            "DestinationFacts",
            "FactRequest",
            "FirstExisting",
            "HasAny",
            "ListFiles",
            "Listing",
            "StateFacts",
        ),
        "model": (
            "ACTION_ORDER",
            "Action",
            "DestinationPolicy",
            "LinkPolicy",
            "Plan",
            "PlanError",
            "PlannedOutput",
            "TakenOverOutput",
            "TransferPolicy",
        ),
        "outputs": (
            "bundle_path_for",
            "markdown_sources",
            "render_markdown",
        ),
    },
)

__all__ = [
    "ACTION_ORDER",
    "FORCE_WALK_LIMIT",
    "REPLACE_CHECK_SLACK",
    "Action",
    "DestinationFacts",
    "DestinationPolicy",
    "FactRequest",
    "FirstExisting",
    "HasAny",
    "LinkPolicy",
    "ListFiles",
    "Listing",
    "Plan",
    "PlanError",
    "PlannedOutput",
    "Publication",
    "StateFacts",
    "TakenOverOutput",
    "TransferPolicy",
    "bundle_path_for",
    "check_request",
    "current_owner_records",
    "decide",
    "markdown_sources",
    "prepare",
    "render_markdown",
]

"""Publish planning, pure (core-semantics §4–6): facts about a destination in, a plan out.

Owns: the plan model and the policy modes (:mod:`.model`, :mod:`.modes`), output planning and
links (:mod:`.outputs`), the outcome → action table (:mod:`.actions`), the takeover rules
(:mod:`.takeover`), the facts planning consumes and the requests it makes (:mod:`.facts`), and
:func:`prepare` / :func:`decide` (:mod:`.planner`).

Must not know: storage (no ``distributor_core.storage`` import, no open files, no network),
execution, the server, the app layer, the CLI, Dagster. Reading the facts is
``distributor_core.execute.facts``'s job.
"""

from __future__ import annotations

from distributor_core.plan import facts, model, outputs, planner
from distributor_core.plan.facts import *  # noqa: F403
from distributor_core.plan.model import *  # noqa: F403
from distributor_core.plan.outputs import *  # noqa: F403
from distributor_core.plan.planner import *  # noqa: F403

__all__: list[str] = []
__all__ += model.__all__
__all__ += facts.__all__
__all__ += outputs.__all__
__all__ += planner.__all__

"""Which destinations a maintenance run works on (issue 28 item 1).

The maintenance jobs are site-wide: a run names its destinations in its config, as
``<pipeline id>/<destination id>``, or a pipeline id for all of that pipeline's destinations; no
name means every destination of the code location. An unknown name fails the run before anything
is read, listing the names it knows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import dagster as dg

from distributor_core.app.selection import Target
from distributor_core.config import Destination, Environment, Pipeline
from distributor_dagster.names import DestinationNames
from distributor_dagster.site import Site

#: How many known names an unknown-name error lists.
SHOWN = 20


@dataclass(frozen=True)
class SelectedDestination:
    """One destination a maintenance run works on: the core's target and its asset's names."""

    target: Target
    names: DestinationNames

    @property
    def pipeline(self) -> Pipeline:
        return self.target.pipeline

    @property
    def destination(self) -> Destination:
        return self.target.destination

    @property
    def label(self) -> str:
        return f"{self.pipeline.id}/{self.destination.id}"

    @property
    def asset_key(self) -> dg.AssetKey:
        return dg.AssetKey(list(self.names.asset_key))


def every_destination(site: Site, environment: Environment) -> list[SelectedDestination]:
    return [
        SelectedDestination(Target(site.config, pipeline, destination, environment), names.destination(destination.id))
        for pipeline, names in zip(site.config.pipelines, site.names, strict=True)
        for destination in pipeline.destinations
    ]


def select_destinations(site: Site, wanted: Sequence[str]) -> list[SelectedDestination]:
    """The destinations ``wanted`` names, in config order (all of them when it is empty); their
    secrets resolve from the site's environment as the run starts."""
    targets = every_destination(site, site.environment())
    if not wanted:
        return targets
    by_label = {target.label: target for target in targets}
    pipelines = {target.pipeline.id for target in targets}
    unknown = [name for name in wanted if name not in by_label and name not in pipelines]
    if unknown:
        known = sorted(by_label)
        shown = ", ".join(known[:SHOWN]) + (f" and {len(known) - SHOWN} more" if len(known) > SHOWN else "")
        raise dg.Failure(
            f"unknown destination {unknown[0]!r} in config destinations: name '<pipeline id>/<destination id>' "
            f"or a pipeline id; this code location has {shown}"
        )
    chosen = set(wanted)
    return [target for target in targets if target.label in chosen or target.pipeline.id in chosen]

"""``DistributorComponent``: the same definitions from a dg project's ``defs.yaml``.

    type: distributor_dagster.DistributorComponent
    attributes:
      config_path: distributor.yml        # relative to this defs.yaml's folder
      sensor_interval: 30
      default_sensor_status: stopped
      name_prefix: ""
      automation: sensors                 # or eager: destinations publish by automation condition
      blocking_checks: [managed_outputs_present]
      digest_checks: false                # true: the opt-in outputs_match_digests check
"""

from __future__ import annotations

from pathlib import Path

import dagster as dg
from pydantic import Field

from distributor_dagster.translator import DistributorTranslator


class DistributorComponent(dg.Component, dg.Resolvable, dg.Model):
    """Publishes validated source bundles: compiles a distributor YAML config into assets, jobs,
    sensors and asset checks (``distributor_dagster.build_definitions``)."""

    config_path: str = Field(description="Distributor config file, relative to the folder of this defs.yaml.")
    sensor_interval: int = Field(default=30, description="Minimum seconds between sensor ticks.")
    default_sensor_status: str = Field(default="stopped", description="running or stopped.")
    name_prefix: str = Field(default="", description="Prefix of every generated job, sensor, op and group name.")
    asset_key_prefix: list[str] = Field(default_factory=list, description="Components prepended to asset keys.")
    max_runs_per_tick: int = Field(default=100, description="Run requests per sensor tick at most.")
    bundles_per_run: int = Field(
        default=100,
        description="Bundles one run publishes at most when many are published at once (a backfill, a sensor "
        "tick that finds many new bundles).",
    )
    automation: str = Field(
        default="sensors",
        description="sensors (the watch sensor requests publish runs) or eager (destination assets carry "
        "AutomationCondition.eager() and publish when their source is observed with a new bundle).",
    )
    blocking_checks: list[str] = Field(
        default_factory=lambda: ["managed_outputs_present"],
        description="Asset checks whose failure blocks downstream assets in the same run.",
    )
    digest_checks: bool = Field(
        default=False,
        description="Add the outputs_match_digests check to every destination asset (re-reads every byte "
        "of every published output whenever it is evaluated).",
    )

    def resolved_config_path(self, folder: Path) -> Path:
        path = Path(self.config_path).expanduser()
        return path if path.is_absolute() else folder / path

    def get_translator(self) -> DistributorTranslator:
        """How the assets look; override in a subclass to return your own
        :class:`~distributor_dagster.DistributorTranslator` (the config's ``dagster`` blocks apply
        through the default one)."""
        return DistributorTranslator()

    def build_defs(self, context: dg.ComponentLoadContext) -> dg.Definitions:
        from distributor_dagster.build import build_definitions

        return build_definitions(
            self.resolved_config_path(Path(context.path)),
            translator=self.get_translator(),
            sensor_interval=self.sensor_interval,
            default_sensor_status=self.default_sensor_status,
            name_prefix=self.name_prefix,
            asset_key_prefix=tuple(self.asset_key_prefix),
            max_runs_per_tick=self.max_runs_per_tick,
            bundles_per_run=self.bundles_per_run,
            automation=self.automation,
            blocking_checks=tuple(self.blocking_checks),
            digest_checks=self.digest_checks,
        )

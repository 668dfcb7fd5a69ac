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

from distributor_dagster.options import BuildOptions
from distributor_dagster.translator import DistributorTranslator


class DistributorComponent(dg.Component, dg.Resolvable, BuildOptions):
    """Publishes validated source bundles: compiles a distributor YAML config into assets, jobs,
    sensors and asset checks (``distributor_dagster.build_definitions``). Its attributes are the
    config file and the :class:`~distributor_dagster.options.BuildOptions` (their defaults,
    descriptions and checks are the options')."""

    config_path: str = Field(description="Distributor config file, relative to the folder of this defs.yaml.")

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

        return build_definitions(self.resolved_config_path(Path(context.path)), self, translator=self.get_translator())

"""Dagster integration for distributor: a distributor YAML config compiled into Dagster
definitions (a source asset per pipeline, an asset per destination, publish and maintenance jobs,
sensors, asset checks), presented as :class:`DistributorTranslator` says.

Importing this package loads no config; :mod:`distributor_dagster.definitions` does, from
``$DISTRIBUTOR_CONFIG``.

Owns: names, assets, checks, jobs, sensors and the Component — the Dagster shape of a config.
Must not know: the HTTP server (``distributor_core.server``), business rules (it calls
``distributor_core.app``), the CLI.
"""

from distributor_dagster.build import build_definitions
from distributor_dagster.component import DistributorComponent
from distributor_dagster.names import NameCollisionError
from distributor_dagster.options import BuildOptions
from distributor_dagster.translator import BACKEND_KINDS, DistributorAssetProps, DistributorTranslator

__all__ = [
    "BACKEND_KINDS",
    "BuildOptions",
    "DistributorAssetProps",
    "DistributorComponent",
    "DistributorTranslator",
    "NameCollisionError",
    "build_definitions",
]

"""Building a code location from environment variables (used by :mod:`distributor_dagster.definitions`).

``DISTRIBUTOR_CONFIG`` names the config file; ``DISTRIBUTOR_DAGSTER_SENSOR_INTERVAL`` (seconds),
``DISTRIBUTOR_DAGSTER_SENSOR_STATUS`` (``running`` or ``stopped``),
``DISTRIBUTOR_DAGSTER_NAME_PREFIX``, ``DISTRIBUTOR_DAGSTER_AUTOMATION`` (``sensors`` or ``eager``)
``DISTRIBUTOR_DAGSTER_BLOCKING_CHECKS`` (comma-separated check names, ``none`` for none) and
``DISTRIBUTOR_DAGSTER_DIGEST_CHECKS`` (``true``/``false``: the opt-in ``outputs_match_digests``
check) and ``DISTRIBUTOR_DAGSTER_BUNDLES_PER_RUN`` (bundles one run publishes at most when many
are published at once) set options. Every failure names the variable.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import dagster as dg

from distributor_core.config import ConfigError
from distributor_core.gcpause import gc_paused
from distributor_dagster.build import build_definitions
from distributor_dagster.names import NameCollisionError
from distributor_dagster.options import BuildOptions

CONFIG_VARIABLE = "DISTRIBUTOR_CONFIG"
OPTION_VARIABLES = {
    "sensor_interval": "DISTRIBUTOR_DAGSTER_SENSOR_INTERVAL",
    "default_sensor_status": "DISTRIBUTOR_DAGSTER_SENSOR_STATUS",
    "name_prefix": "DISTRIBUTOR_DAGSTER_NAME_PREFIX",
    "automation": "DISTRIBUTOR_DAGSTER_AUTOMATION",
    "blocking_checks": "DISTRIBUTOR_DAGSTER_BLOCKING_CHECKS",
    "digest_checks": "DISTRIBUTOR_DAGSTER_DIGEST_CHECKS",
    "bundles_per_run": "DISTRIBUTOR_DAGSTER_BUNDLES_PER_RUN",
}
#: options given as whole numbers, and what the number is
NUMBERS = {"sensor_interval": "a number of seconds", "bundles_per_run": "a whole number"}


class DistributorConfigError(Exception):
    """The code location cannot be built from ``$DISTRIBUTOR_CONFIG``."""


def options_from_environment(environ: Mapping[str, str]) -> dict[str, object]:
    options: dict[str, object] = {}
    for option, variable in OPTION_VARIABLES.items():
        value = environ.get(variable)
        if not value:
            continue
        if option in NUMBERS:
            try:
                options[option] = int(value)
            except ValueError:
                raise DistributorConfigError(f"{variable} must be {NUMBERS[option]}, got {value!r}") from None
        else:
            options[option] = value
    return options


def definitions_from_environment(environ: Mapping[str, str] | None = None) -> dg.Definitions:
    environ = os.environ if environ is None else environ
    path = environ.get(CONFIG_VARIABLE, "")
    if not path:
        raise DistributorConfigError(
            f"{CONFIG_VARIABLE} is not set: point it at a distributor config file, "
            f"e.g. {CONFIG_VARIABLE}=examples/local-publish.yml"
        )
    options = options_from_environment(environ)
    for option in ("automation", "blocking_checks", "digest_checks", "bundles_per_run"):
        if option in options:
            try:
                BuildOptions.create(**{option: options[option]})  # type: ignore[arg-type]
            except ValueError as exc:
                raise DistributorConfigError(f"{OPTION_VARIABLES[option]}: {exc}") from None
    try:
        defs = build_definitions(path, **options)
        # what Dagster does first with a module's Definitions: build the repository (cached on the
        # object); done here with the collector paused (build_definitions says why)
        with gc_paused():
            defs.get_repository_def()
        return defs
    except (ConfigError, NameCollisionError) as exc:
        raise DistributorConfigError(f"{CONFIG_VARIABLE}={path}: {exc}") from None
    except ValueError as exc:
        raise DistributorConfigError(f"{CONFIG_VARIABLE}={path}: {exc}") from None


"""Building a code location from environment variables (used by :mod:`distributor_dagster.definitions`).

``DISTRIBUTOR_CONFIG`` names the config file; the options that have a variable
(``DISTRIBUTOR_DAGSTER_SENSOR_INTERVAL``, ``..._SENSOR_STATUS``, ``..._NAME_PREFIX``,
``..._AUTOMATION``, ``..._BLOCKING_CHECKS``, ``..._DIGEST_CHECKS``, ``..._BUNDLES_PER_RUN``) set
them: each variable is declared with its option (:class:`~distributor_dagster.options.BuildOptions`).
Every failure names the variable.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import dagster as dg

from distributor_core.config import ConfigError
from distributor_core.gcpause import gc_paused
from distributor_dagster.build import build_definitions
from distributor_dagster.names import NameCollisionError
from distributor_dagster.options import BuildOptions, OptionError, number_words

CONFIG_VARIABLE = "DISTRIBUTOR_CONFIG"
#: option name -> its environment variable (declared with the option, :class:`BuildOptions`)
OPTION_VARIABLES = BuildOptions.variables()


class DistributorConfigError(Exception):
    """The code location cannot be built from ``$DISTRIBUTOR_CONFIG``."""


def options_from_environment(environ: Mapping[str, str]) -> BuildOptions:
    """The options the variables set (each failure names its variable)."""
    values: dict[str, object] = {}
    for option, variable in OPTION_VARIABLES.items():
        value = environ.get(variable)
        if not value:
            continue
        words = number_words(option)
        if words is None:
            values[option] = value
            continue
        try:
            values[option] = int(value)
        except ValueError:
            raise DistributorConfigError(f"{variable} must be {words}, got {value!r}") from None
    try:
        return BuildOptions.of(values)
    except OptionError as exc:
        raise DistributorConfigError(f"{OPTION_VARIABLES[exc.option]}: {exc}") from None


def definitions_from_environment(environ: Mapping[str, str] | None = None) -> dg.Definitions:
    environ = os.environ if environ is None else environ
    path = environ.get(CONFIG_VARIABLE, "")
    if not path:
        raise DistributorConfigError(
            f"{CONFIG_VARIABLE} is not set: point it at a distributor config file, "
            f"e.g. {CONFIG_VARIABLE}=examples/local-publish.yml"
        )
    options = options_from_environment(environ)
    try:
        defs = build_definitions(path, options)
        # what Dagster does first with a module's Definitions: build the repository (cached on the
        # object); done here with the collector paused (build_definitions says why)
        with gc_paused():
            defs.get_repository_def()
        return defs
    except (ConfigError, NameCollisionError) as exc:
        raise DistributorConfigError(f"{CONFIG_VARIABLE}={path}: {exc}") from None
    except ValueError as exc:
        raise DistributorConfigError(f"{CONFIG_VARIABLE}={path}: {exc}") from None


"""The config file a command reads: ``--config``, else ``./distributor.yml``."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from distributor_core.cli.errors import CommandError

if TYPE_CHECKING:
    from distributor_core.config import Config

DEFAULT_CONFIG = "distributor.yml"


def load(path: str | None) -> Config:
    """The config at ``path`` (``./distributor.yml`` when ``None``); a missing default says how
    to name one. Raises :class:`CommandError` with the loader's message(s)."""
    from distributor_core.config import ConfigError, load_config

    try:
        return load_config(path or DEFAULT_CONFIG)
    except ConfigError as exc:
        if not path and not os.path.exists(DEFAULT_CONFIG):
            raise CommandError(
                f"no config: ./{DEFAULT_CONFIG} does not exist and no --config was given; name one with "
                "--config <path> (a clone's examples/ holds configs to try, e.g. --config examples/local-publish.yml; "
                "`distributor config schema` prints the format)"
            ) from None
        raise CommandError(str(exc)) from None

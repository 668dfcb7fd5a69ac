"""Loading a config: YAML → strict decode → defaults → validation → models (interfaces §1.1).

YAML problems are reported alone. Schema problems (unknown fields, wrong types, malformed
durations and byte sizes) are reported together, in document order. When there are none,
defaults are applied and every rule violation is reported, in discovery order. Any of these
raises :class:`ConfigError`, whose ``messages`` list them all.

Every step reads the one declaration (:mod:`.models` through :mod:`.shape`); the last builds the
models from the validated tree with ``msgspec.convert`` (in C: tuples from lists, the backend
union by its ``backend`` tag, ``Path`` from text through :func:`_decode_hook`, ``timedelta`` as it
is), which checks the declared types and bounds once more and so can never fail on a user's
file: a mismatch is a bug in the steps before (``TypeError``), never a config error.
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path
from typing import Any

import msgspec

from distributor_core.config.decode import decode_document
from distributor_core.config.errors import ConfigError, ConfigFileError
from distributor_core.config.fill import fill
from distributor_core.config.loader import load_yaml_mapping
from distributor_core.config.models import Config
from distributor_core.config.validate import staging_location_messages, validate_tree


def parse_config(
    text: str, *, base_dir: str | os.PathLike[str], source_name: str = "<string>"
) -> Config:
    """Load a config from YAML text; relative paths resolve against ``base_dir``."""
    return _parse(text, base_dir=base_dir, source_name=source_name, config_path=None)


def load_config(path: str | os.PathLike[str]) -> Config:
    """Load the config file at ``path``; relative paths in it resolve against its directory."""
    name = os.fspath(path)
    try:
        data = Path(name).read_bytes()
    except OSError as exc:
        raise ConfigFileError([f"cannot read config {name}: {exc.strerror or exc}"], source=name) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            [f"{name}: yaml: invalid UTF-8 at byte {exc.start}"], source=name
        ) from None
    config_path = Path(os.path.abspath(name))
    return _parse(text, base_dir=config_path.parent, source_name=name, config_path=config_path)


def _parse(
    text: str, *, base_dir: str | os.PathLike[str], source_name: str, config_path: Path | None
) -> Config:
    raw = load_yaml_mapping(text, source_name=source_name)
    tree, messages = decode_document(raw)
    if messages:
        raise ConfigError(messages, source=source_name)
    refused = staging_location_messages(tree)
    filled = fill(tree, Path(os.path.abspath(base_dir)))
    messages = [*refused, *validate_tree(filled)]
    if messages:
        raise ConfigError(messages, source=source_name)
    try:
        return msgspec.convert(
            {**filled, "config_path": config_path}, Config, dec_hook=_decode_hook, builtin_types=(timedelta,)
        )
    except msgspec.ValidationError as exc:
        raise TypeError(f"validated config does not fit the models: {exc}") from None


def _decode_hook(kind: type, value: Any) -> Any:
    if kind is Path and isinstance(value, str | Path):
        return Path(value)
    raise NotImplementedError(f"no conversion of {type(value).__name__} to {kind}")

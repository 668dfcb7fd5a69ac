"""The command registry: every module in :mod:`distributor_core.cli.commands` that defines
``COMMAND`` is a command. Adding a command is adding one module; nothing else changes.

Root help lists commands in the documented order (``HELP_ORDER``, from the Go tool's root help
plus ``config``); a command not named there follows, alphabetically. Modules whose name starts
with ``_`` are helpers, not commands.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

from distributor_core.cli import commands as commands_package
from distributor_core.cli.spec import Command

HELP_ORDER = (
    "version",
    "run",
    "reconcile-state",
    "audit",
    "prune",
    "serve",
    "validate",
    "inspect",
    "manifest",
    "config",
)


def _sort_key(command: Command) -> tuple[int, str]:
    try:
        return (HELP_ORDER.index(command.name), command.name)
    except ValueError:
        return (len(HELP_ORDER), command.name)


@cache
def all_commands() -> tuple[Command, ...]:
    """Every registered command, in root-help order. Duplicate names are a programming error."""
    found: dict[str, Command] = {}
    for info in pkgutil.iter_modules(commands_package.__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{commands_package.__name__}.{info.name}")
        command = getattr(module, "COMMAND", None)
        if not isinstance(command, Command):
            continue
        if command.name in found:
            raise RuntimeError(f"command {command.name} is defined twice")
        found[command.name] = command
    return tuple(sorted(found.values(), key=_sort_key))


def find(name: str) -> Command | None:
    """The command called ``name``. Its own module (``reconcile-state`` is
    ``commands/reconcile_state.py``) is tried first, so running one command imports only what
    that command needs; the full scan is the fallback."""
    key = name.replace("-", "_")
    if not key.startswith("_") and any(info.name == key for info in pkgutil.iter_modules(commands_package.__path__)):
        module = importlib.import_module(f"{commands_package.__name__}.{key}")
        command = getattr(module, "COMMAND", None)
        if isinstance(command, Command) and command.name == name:
            return command
    for command in all_commands():
        if command.name == name:
            return command
    return None

"""The command registry: every module in :mod:`distributor_core.cli.commands` that defines
``COMMAND`` is a command. Adding a command is adding one module; nothing else changes.

Root help lists commands in the documented order (``HELP_ORDER``, from the Go tool's root help
plus ``config``); a command not named there follows, alphabetically. Modules whose name starts
with ``_`` are helpers, not commands.

Loading is lazy: running a command imports only its own module (``reconcile-state`` lives in
``commands/reconcile_state.py``), so ``distributor version`` does not pay for the config models,
storage adapters or the server; root help and an unknown name import every command module.
"""

from __future__ import annotations

import importlib
from functools import cache
from importlib.machinery import PathFinder

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
    "explain",
    "completion",
)


def _sort_key(command: Command) -> tuple[int, str]:
    try:
        return (HELP_ORDER.index(command.name), command.name)
    except ValueError:
        return (len(HELP_ORDER), command.name)


@cache
def all_commands() -> tuple[Command, ...]:
    """Every registered command, in root-help order. Duplicate names are a programming error."""
    import pkgutil  # only for the full list: running one command does not need it

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


def _named_module(name: str) -> Command | None:
    """The command of the module named for ``name`` (dashes as underscores), if it defines it."""
    module_name = name.replace("-", "_")
    if not module_name.isidentifier() or module_name.startswith("_"):
        return None
    # looked up on the package's path as it is now (not only in sys.modules), as all_commands does
    if PathFinder.find_spec(module_name, list(commands_package.__path__)) is None:
        return None
    module = importlib.import_module(f"{commands_package.__name__}.{module_name}")
    command = getattr(module, "COMMAND", None)
    return command if isinstance(command, Command) and command.name == name else None


def find(name: str) -> Command | None:
    """The command called ``name``: its own module first, else a search of every module."""
    command = _named_module(name)
    if command is not None:
        return command
    for command in all_commands():
        if command.name == name:
            return command
    return None

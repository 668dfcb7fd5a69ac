"""How a command is described: its flags, positional argument, help text and ``run`` function.

A command module under :mod:`distributor_core.cli.commands` exposes ``COMMAND``; the registry
finds it by itself. The framework parses and checks arguments in the documented order (help →
flags → positional arguments → ``--format``) before ``run`` sees an :class:`Invocation`.

The four descriptions are named tuples: every command starts by building them, and a named tuple
is made without importing ``dataclasses`` or ``msgspec`` (``distributor version`` needs neither).
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import TYPE_CHECKING, NamedTuple

from distributor_core.cli.errors import UsageError

if TYPE_CHECKING:
    from distributor_core.cli.output import Output


class Flag(NamedTuple):
    """A ``--name`` flag (also accepted as ``-name``, Go style). Without ``metavar`` it is a boolean
    switch; ``repeat`` collects every occurrence in order into a list."""

    name: str
    help: str
    metavar: str | None = None
    repeat: bool = False

    @property
    def key(self) -> str:
        """The name without dashes, as it is matched on the command line."""
        return self.name.lstrip("-")

    @property
    def dest(self) -> str:
        return self.key.replace("-", "_")

    @property
    def is_switch(self) -> bool:
        return self.metavar is None


class Positional(NamedTuple):
    """The one positional argument a command may take (``<path>``). ``required`` means exactly
    one; otherwise at most one."""

    metavar: str
    required: bool = False


class Invocation(NamedTuple):
    """What ``run`` receives: the full command name, parsed flags, the positional argument (or
    ``None``) and the output helpers bound to the chosen format."""

    command: str
    args: SimpleNamespace
    positional: str | None
    out: Output

    def require(self, *flags: str) -> None:
        """Usage error ``<command> requires <flag>`` for the first flag that is unset or empty,
        checked in the order given (e.g. ``inv.require("--config", "--pipeline")``)."""
        for flag in flags:
            if not getattr(self.args, flag.lstrip("-").replace("-", "_"), None):
                raise UsageError(f"{self.command} requires {flag}")


RunFunction = Callable[[Invocation], int]


class Command(NamedTuple):
    """One command, or a group of subcommands (``manifest create``, ``config schema``).

    ``usage`` lines follow ``distributor `` in the help; ``formats`` adds ``--format text|json``.
    A group has ``subcommands`` and no ``run``.
    """

    name: str
    summary: str
    usage: tuple[str, ...] = ()
    description: str = ""
    flags: tuple[Flag, ...] = ()
    formats: bool = True
    positional: Positional | None = None
    run: RunFunction | None = None
    subcommands: tuple[Command, ...] = ()

    @property
    def is_group(self) -> bool:
        return bool(self.subcommands)

    def subcommand(self, name: str) -> Command | None:
        for sub in self.subcommands:
            if sub.name == name:
                return sub
        return None

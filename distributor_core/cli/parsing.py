"""Argument parsing on argparse with every parser message replaced (interfaces §2.2).

argparse never prints here: its errors become :class:`UsageError` with Go-flag-like wording
(``distributor: validate: unknown flag --bogus``, ``... flag needs an argument: --config``), help is
handled before parsing, and abbreviations of long flags are not accepted.
"""

from __future__ import annotations

import argparse
import re

from distributor_core.cli.errors import UsageError
from distributor_core.cli.spec import Command, Flag

FORMATS = ("text", "json")
FORMAT_FLAG = Flag("--format", "output format: text (default) or json", metavar="text|json")
HELP_ARGS = ("-h", "--help")


class _ParserError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise _ParserError(message)

    def exit(self, status: int = 0, message: str | None = None) -> None:  # type: ignore[override]
        raise _ParserError(message or "invalid arguments")


def wants_help(argv: list[str]) -> bool:
    """``-h``/``--help`` anywhere before a ``--`` terminator."""
    for arg in argv:
        if arg == "--":
            return False
        if arg in HELP_ARGS:
            return True
    return False


def command_flags(command: Command) -> tuple[Flag, ...]:
    return (*command.flags, FORMAT_FLAG) if command.formats else command.flags


def _build(command: Command, full_name: str) -> _Parser:
    parser = _Parser(prog=f"distributor {full_name}", add_help=False, allow_abbrev=False)
    for flag in command_flags(command):
        if flag.is_switch:
            parser.add_argument(flag.name, dest=flag.dest, action="store_true")
        elif flag.repeat:
            parser.add_argument(flag.name, dest=flag.dest, action="append", default=[])
        else:
            default = "text" if flag is FORMAT_FLAG else None
            parser.add_argument(flag.name, dest=flag.dest, default=default)
    return parser


_EXPECTED_ONE = re.compile(r"argument (?P<flag>[^:/ ]+)(?:/[^:]+)?: expected one argument")
_IGNORED_VALUE = re.compile(r"argument (?P<flag>[^:/ ]+)(?:/[^:]+)?: ignored explicit argument")


def _reword(message: str) -> str:
    match = _EXPECTED_ONE.match(message)
    if match:
        return f"flag needs an argument: {match['flag']}"
    match = _IGNORED_VALUE.match(message)
    if match:
        return f"flag {match['flag']} does not take a value"
    if message.startswith("argument "):
        return message[len("argument ") :]
    return message


def parse_arguments(command: Command, full_name: str, argv: list[str]) -> tuple[argparse.Namespace, str | None]:
    """Parse ``argv`` for ``command``; return the flags and the positional argument.

    Order of checks: flag parsing, positional arguments, then ``--format``.
    """
    parser = _build(command, full_name)
    try:
        namespace, extras = parser.parse_known_args(argv)
    except (_ParserError, argparse.ArgumentError) as exc:
        raise UsageError(f"{full_name}: {_reword(str(exc))}") from None
    positionals: list[str] = []
    after_terminator = False
    for arg in extras:
        if not after_terminator and arg == "--":
            after_terminator = True
            continue
        if not after_terminator and arg.startswith("-") and arg != "-":
            raise UsageError(f"{full_name}: unknown flag {arg.split('=', 1)[0]}")
        positionals.append(arg)
    positional = _check_positionals(command, full_name, positionals)
    if command.formats and namespace.format not in FORMATS:
        raise UsageError("format must be text or json")
    return namespace, positional


def _check_positionals(command: Command, full_name: str, values: list[str]) -> str | None:
    spec = command.positional
    if spec is None:
        if values:
            raise UsageError(f"{full_name} does not accept positional arguments")
        return None
    if spec.required and not values:
        raise UsageError(f"{full_name} requires {spec.metavar}")
    if len(values) > 1:
        quantity = "exactly" if spec.required else "at most"
        raise UsageError(f"{full_name} accepts {quantity} one {spec.metavar}")
    return values[0] if values else None

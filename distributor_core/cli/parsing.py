"""Argument parsing with the Go ``flag`` package's syntax and messages (interfaces §2.2, issue 15).

The Go tool parses every command with Go's standard ``flag`` package, so scripts written for it
call ``distributor run -config c.yml -dry-run``, ``-format=json``, ``--config=c.yml`` or
``--dry-run=false``. This module accepts exactly those forms:

- one or two dashes (``-config`` and ``--config`` are the same flag);
- a value flag takes its value after ``=`` or as the next argument, even when that argument starts
  with a dash (``--config -x.yml``); ``--config=`` sets it to the empty string;
- a switch takes no separate value: bare it means true, ``=value`` accepts what Go's
  ``strconv.ParseBool`` accepts (``1 t T TRUE true True 0 f F FALSE false False``);
- ``--`` ends the flags, and ``-`` alone is a positional argument;
- a command without positional arguments stops at the first one, as Go does (everything after it
  is positional, so ``version extra --bogus`` is a positional-argument error). A command that takes
  a ``<path>`` also reads flags after it (a superset of Go, where they would be extra arguments).

Errors carry Go's own texts after ``<command>: `` (``distributor: run: flag provided but not
defined: -bogus``): ``flag provided but not defined: -<name>``, ``flag needs an argument:
-<name>``, ``invalid boolean value "<v>" for -<name>: parse error`` and ``bad flag syntax: <arg>``.
Go prints flag names with one dash in these messages whichever form was typed, and so do we.

Only the standard library's ``types`` is imported: parsing is on every command's start-up path.
"""

from __future__ import annotations

from types import SimpleNamespace

from distributor_core.cli.errors import UsageError
from distributor_core.cli.spec import Command, Flag

FORMATS = ("text", "json")
FORMAT_FLAG = Flag("--format", "output format: text (default) or json", metavar="text|json")
#: What asks for help, before any other check (Go's flag package treats ``-h`` and ``-help``, with
#: one or two dashes, as a help request).
HELP_ARGS = ("-h", "--help", "-help", "--h")
#: ``strconv.ParseBool``'s accepted spellings.
GO_BOOLS = {
    "1": True, "t": True, "T": True, "TRUE": True, "true": True, "True": True,
    "0": False, "f": False, "F": False, "FALSE": False, "false": False, "False": False,
}  # fmt: skip

_GO_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v",
               '"': '\\"', "\\": "\\\\"}  # fmt: skip


def go_quote(value: str) -> str:
    """``value`` as Go's ``%q`` (``strconv.Quote``) writes it: printable characters as they are,
    Go escapes for the rest; bytes that were not UTF-8 (surrogate-escaped by Python) as ``\\xNN``."""
    parts = ['"']
    for ch in value:
        code = ord(ch)
        if ch in _GO_ESCAPES:
            parts.append(_GO_ESCAPES[ch])
        elif 0xDC80 <= code <= 0xDCFF:
            parts.append(f"\\x{code - 0xDC00:02x}")
        elif ch.isprintable():  # Go's IsPrint: letters, marks, numbers, punctuation, symbols, space
            parts.append(ch)
        elif code < 0x80:
            parts.append(f"\\x{code:02x}")
        elif code <= 0xFFFF:
            parts.append(f"\\u{code:04x}")
        else:
            parts.append(f"\\U{code:08x}")
    parts.append('"')
    return "".join(parts)


def wants_help(argv: list[str]) -> bool:
    """``-h``, ``-help``, ``--h`` or ``--help`` anywhere before a ``--`` terminator."""
    for arg in argv:
        if arg == "--":
            return False
        if arg in HELP_ARGS:
            return True
    return False


def command_flags(command: Command) -> tuple[Flag, ...]:
    return (*command.flags, FORMAT_FLAG) if command.formats else command.flags


def _defaults(flags: tuple[Flag, ...]) -> dict[str, object]:
    values: dict[str, object] = {}
    for flag in flags:
        if flag.is_switch:
            values[flag.dest] = False
        elif flag.repeat:
            values[flag.dest] = []
        else:
            values[flag.dest] = "text" if flag is FORMAT_FLAG else None
    return values


def parse_flags(command: Command, full_name: str, argv: list[str]) -> tuple[SimpleNamespace, list[str]]:
    """Go-style flag parsing: the flag values (by ``Flag.dest``) and the positional arguments."""
    flags = command_flags(command)
    by_name = {flag.key: flag for flag in flags}
    values = _defaults(flags)
    positionals: list[str] = []
    interspersed = command.positional is not None

    def fail(message: str) -> UsageError:
        return UsageError(f"{full_name}: {message}")

    index = 0
    while index < len(argv):
        arg = argv[index]
        index += 1
        if arg == "--":
            positionals.extend(argv[index:])
            break
        if len(arg) < 2 or arg[0] != "-":
            positionals.append(arg)
            if not interspersed:
                positionals.extend(argv[index:])
                break
            continue
        name = arg[2:] if arg[1] == "-" else arg[1:]
        if not name or name[0] in "-=":
            raise fail(f"bad flag syntax: {arg}")
        name, equals, value = name.partition("=")
        flag = by_name.get(name)
        if flag is None:
            raise fail(f"flag provided but not defined: -{name}")
        if flag.is_switch:
            switch = GO_BOOLS.get(value) if equals else True
            if switch is None:
                raise fail(f"invalid boolean value {go_quote(value)} for -{name}: parse error")
            values[flag.dest] = switch
            continue
        if not equals:
            if index >= len(argv):
                raise fail(f"flag needs an argument: -{name}")
            value = argv[index]
            index += 1
        if flag.repeat:
            repeated = values[flag.dest]
            assert isinstance(repeated, list)
            repeated.append(value)
        else:
            values[flag.dest] = value
    return SimpleNamespace(**values), positionals


def parse_arguments(command: Command, full_name: str, argv: list[str]) -> tuple[SimpleNamespace, str | None]:
    """Parse ``argv`` for ``command``; return the flags and the positional argument.

    Order of checks: flag parsing, positional arguments, then ``--format``.
    """
    namespace, positionals = parse_flags(command, full_name, argv)
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

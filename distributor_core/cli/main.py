"""The ``distributor`` console script: dispatch, help, exit codes (interfaces §2.2).

Exit codes: 0 success, 1 runtime failure, 2 usage error (stdout stays empty), 130 interrupted.
Every diagnostic is one ``distributor: ...`` line on stderr; no traceback reaches the user (set
``DISTRIBUTOR_DEBUG=1`` to see one for an unexpected error).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import TextIO

from distributor_core.cli import help as helptext
from distributor_core.cli import registry
from distributor_core.cli.errors import EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, CLIError, UsageError
from distributor_core.cli.output import PROGRAM, Output
from distributor_core.cli.parsing import HELP_ARGS, parse_arguments, wants_help
from distributor_core.cli.spec import Command, Invocation


def error_text(exc: BaseException) -> str:
    """One-line message for an exception (OSError as ``<file>: <reason>``)."""
    if isinstance(exc, OSError) and exc.strerror:
        filename = exc.filename
        if filename is not None and str(filename) not in exc.strerror:
            return f"{filename}: {exc.strerror}"
        return exc.strerror
    text = str(exc).strip()
    first_line = text.splitlines()[0] if text else ""
    return first_line or type(exc).__name__


def _resolve(argv: list[str]) -> tuple[Command, str, list[str]]:
    """The leaf command named by ``argv``, its full name, and its own arguments."""
    name = argv[0]
    command = registry.find(name)
    if command is None:
        raise UsageError(f'unknown command "{name}"')
    rest = argv[1:]
    full_name = command.name
    while command.is_group:
        names = ", ".join(sub.name for sub in command.subcommands)
        if not rest:
            raise UsageError(f"{full_name} requires a subcommand: {names}")
        if rest[0] in HELP_ARGS:
            return command, full_name, rest
        sub = command.subcommand(rest[0])
        if sub is None:
            raise UsageError(f'{full_name}: unknown subcommand "{rest[0]}" (want {names})')
        command, full_name, rest = sub, f"{full_name} {sub.name}", rest[1:]
    return command, full_name, rest


#: ``distributor --version`` (one or two dashes, as every flag) is ``distributor version``.
VERSION_ARGS = ("--version", "-version")


def _run(argv: list[str], stdout: TextIO, stderr: TextIO) -> int:
    if argv and argv[0] in VERSION_ARGS:
        argv = ["version", *argv[1:]]
    if not argv or argv[0] in HELP_ARGS or (argv[0] == "help" and len(argv) == 1):
        stdout.write(helptext.root_help(registry.all_commands()))
        return EXIT_OK
    if argv[0] == "help":
        command, full_name, _ = _resolve(argv[1:])
        stdout.write(helptext.command_help(command, full_name))
        return EXIT_OK
    command, full_name, rest = _resolve(argv)
    if command.is_group or wants_help(rest):
        stdout.write(helptext.command_help(command, full_name))
        return EXIT_OK
    args, positional = parse_arguments(command, full_name, rest)
    if any(flag.name == "--config" for flag in command.flags):
        # remedies name the config this command reads, so they run as printed
        from distributor_core.app.refusal import name_config
        from distributor_core.cli.configfile import DEFAULT_CONFIG

        name_config(getattr(args, "config", None) or DEFAULT_CONFIG)
    out = Output(full_name, getattr(args, "format", "text"), stdout, stderr)
    assert command.run is not None
    return command.run(Invocation(full_name, args, positional, out))


def main(
    argv: Sequence[str] | None = None, *, stdout: TextIO | None = None, stderr: TextIO | None = None
) -> int:
    """Run the CLI with ``argv`` (default ``sys.argv[1:]``); return the exit code."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    out = sys.stdout if stdout is None else stdout
    err = sys.stderr if stderr is None else stderr
    try:
        return _run(arguments, out, err)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except CLIError as exc:
        err.write(f"{PROGRAM}: {exc.message}\n")
        return exc.exit_code
    except BrokenPipeError:
        raise
    except Exception as exc:
        if os.environ.get("DISTRIBUTOR_DEBUG"):
            import traceback  # only here: start-up does not pay for it

            traceback.print_exc(file=err)
        err.write(f"{PROGRAM}: {error_text(exc)}\n")
        return EXIT_FAILURE


def console_main() -> None:
    """Entry point of the ``distributor`` console script."""
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:
        # the reader went away (``distributor ... | head``): stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        code = EXIT_FAILURE
    except KeyboardInterrupt:
        code = EXIT_INTERRUPTED
    sys.exit(code)


__all__ = ["EXIT_USAGE", "console_main", "error_text", "main"]

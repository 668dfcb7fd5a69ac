"""Errors that end a CLI command with a given exit code (interfaces §2.2).

The message is printed as ``distributor: <message>`` on stderr. Usage errors exit 2 and are
raised before anything is written to stdout; command failures exit 1.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class CLIError(Exception):
    """End the command: print ``distributor: <message>`` to stderr and exit ``exit_code``."""

    exit_code = EXIT_FAILURE

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class UsageError(CLIError):
    """Bad or missing flags, positional arguments or format (exit 2, stdout empty)."""

    exit_code = EXIT_USAGE


class CommandError(CLIError):
    """A runtime failure with a message already worded for the user (exit 1)."""

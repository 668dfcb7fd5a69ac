"""Help texts: the root help (command list) and each command's help, printed to stdout."""

from __future__ import annotations

from distributor_core.cli.parsing import command_flags
from distributor_core.cli.spec import Command

ROOT_INTRO = "distributor publishes validated source bundles to local, SFTP and S3 destinations."
FLAG_FORMS = (
    "Flags take one or two dashes and their value after = or as the next argument\n"
    "(-config c.yml, --config=c.yml); a switch alone means true, or takes =true / =false."
)


def _columns(rows: list[tuple[str, str]], indent: str = "  ", width: int = 16) -> list[str]:
    lines = []
    for name, text in rows:
        if len(name) >= width:
            lines.append(f"{indent}{name}")
            lines.append(f"{indent}{' ' * width}{text}")
        else:
            lines.append(f"{indent}{name.ljust(width)}{text}")
    return lines


def root_help(commands: tuple[Command, ...]) -> str:
    lines = [
        ROOT_INTRO,
        "",
        "Usage:",
        "  distributor <command> [flags]",
        "  distributor help [<command>]",
        "  distributor --version",
        "",
        "Commands:",
        *_columns([(c.name, c.summary) for c in commands]),
        "",
        'Run "distributor <command> --help" for the flags of a command.',
        FLAG_FORMS,
        "Exit codes: 0 success, 1 failure, 2 usage error.",
    ]
    return "\n".join(lines) + "\n"


def command_help(command: Command, full_name: str) -> str:
    usage = command.usage or (f"{full_name} [flags]",)
    lines = ["Usage:", *(f"  distributor {line}" for line in usage), "", command.summary + "."]
    if command.description:
        lines += ["", command.description.strip()]
    if command.is_group:
        lines += ["", "Commands:", *_columns([(s.name, s.summary) for s in command.subcommands])]
    rows = []
    for flag in command_flags(command):
        name = flag.name if flag.is_switch else f"{flag.name} {flag.metavar}"
        text = flag.help + (" (repeatable)" if flag.repeat else "")
        rows.append((name, text))
    rows.append(("-h, --help", "show this help"))
    lines += ["", "Flags:", *_columns(rows, width=24)]
    if len(rows) > 1:
        lines += ["", FLAG_FORMS]
    return "\n".join(lines) + "\n"

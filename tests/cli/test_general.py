"""Dispatch, help, usage errors, exit codes and the JSON envelope (interfaces §2.2–2.4)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from distributor_core import __version__
from distributor_core.cli import main, registry
from distributor_core.cli.commands import _bundles
from distributor_core.cli.output import Progress, envelope, format_value, record_line
from tests.cli.conftest import Runner

EXPECTED_COMMANDS = [
    "version", "run", "reconcile-state", "audit", "prune", "serve", "validate", "inspect", "manifest", "config",
    "explain", "completion",
]


@pytest.mark.parametrize("argv", [[], ["help"], ["--help"], ["-h"]])
def test_root_help(cli: Runner, argv: list[str]) -> None:
    result = cli(*argv)
    assert result.code == 0
    assert result.stderr == ""
    assert "Commands:" in result.stdout
    listed = [line.split()[0] for line in result.stdout.split("Commands:\n")[1].split("\n\n")[0].splitlines()]
    assert listed == EXPECTED_COMMANDS
    assert "  validate        Validate a source bundle or bundle tree" in result.stdout
    assert "  inspect         Inspect bundles or distributor state" in result.stdout


def test_registry_order() -> None:
    names = [c.name for c in registry.all_commands()]
    assert names == EXPECTED_COMMANDS


def test_unknown_command(cli: Runner) -> None:
    result = cli("publish", "--now")
    assert (result.code, result.stdout, result.stderr) == (2, "", 'distributor: unknown command "publish"\n')


def _all_leaf_names() -> list[list[str]]:
    names: list[list[str]] = []
    for command in registry.all_commands():
        names.append([command.name])
        names.extend([command.name, sub.name] for sub in command.subcommands)
    return names


@pytest.mark.parametrize("names", _all_leaf_names(), ids=lambda n: " ".join(n))
@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_every_command_help_on_stdout(cli: Runner, names: list[str], flag: str) -> None:
    result = cli(*names, flag)
    assert result.code == 0
    assert result.stderr == ""
    assert result.stdout.startswith("Usage:\n  distributor " + " ".join(names))
    assert "-h, --help" in result.stdout


def test_help_command_for_a_command(cli: Runner) -> None:
    assert cli("help", "validate").stdout == cli("validate", "--help").stdout
    assert cli("help", "manifest", "create").stdout == cli("manifest", "create", "--help").stdout
    bad = cli("help", "nope")
    assert (bad.code, bad.stdout, bad.stderr) == (2, "", 'distributor: unknown command "nope"\n')


def test_help_wins_over_every_other_check(cli: Runner) -> None:
    result = cli("validate", "--format", "xml", "a", "b", "--bogus", "--help")
    assert result.code == 0
    assert result.stdout.startswith("Usage:\n  distributor validate")
    assert result.stderr == ""


def test_help_after_terminator_is_positional(cli: Runner) -> None:
    result = cli("version", "--", "--help")
    assert result.code == 2
    assert result.stderr == "distributor: version does not accept positional arguments\n"


# ---------------------------------------------------------------- version


def test_version_text(cli: Runner) -> None:
    result = cli("version")
    assert (result.code, result.stdout, result.stderr) == (0, f"distributor {__version__}\n", "")


@pytest.mark.parametrize("argv", [["version", "--format", "json"], ["version", "--format=json"]])
def test_version_json_envelope(cli: Runner, argv: list[str]) -> None:
    result = cli(*argv)
    assert result.code == 0
    assert result.json() == {
        "command": "version",
        "ok": True,
        "result": {"name": "distributor", "version": __version__},
    }
    assert result.stdout.endswith("}\n")
    assert result.stdout.startswith('{\n  "command": "version",\n  "ok": true,\n  "result": {\n    "name"')


@pytest.mark.parametrize(
    ("argv", "stderr"),
    [
        (["version", "--format", "xml"], "distributor: format must be text or json\n"),
        (["version", "--format="], "distributor: format must be text or json\n"),
        (["version", "extra"], "distributor: version does not accept positional arguments\n"),
        (["version", "extra", "--format", "xml"], "distributor: version does not accept positional arguments\n"),
        # Go flag package texts (issue 15 item 3): names shown with one dash whatever was typed
        (["version", "--bogus"], "distributor: version: flag provided but not defined: -bogus\n"),
        (["version", "-bogus"], "distributor: version: flag provided but not defined: -bogus\n"),
        (["version", "--bogus=1", "extra"], "distributor: version: flag provided but not defined: -bogus\n"),
        (["version", "--form", "json"], "distributor: version: flag provided but not defined: -form\n"),
        (["version", "-x"], "distributor: version: flag provided but not defined: -x\n"),
        (["version", "--format"], "distributor: version: flag needs an argument: -format\n"),
        (["version", "-format"], "distributor: version: flag needs an argument: -format\n"),
        (["version", "---format", "json"], "distributor: version: bad flag syntax: ---format\n"),
        (["version", "-=json"], "distributor: version: bad flag syntax: -=json\n"),
        # Go stops at the first positional argument of a command that takes none
        (["version", "extra", "--bogus"], "distributor: version does not accept positional arguments\n"),
        (
            ["manifest", "create", "--scan=yes", "d"],
            'distributor: manifest create: invalid boolean value "yes" for -scan: parse error\n',
        ),
        (
            ["manifest", "create", "-overwrite=", "d"],
            'distributor: manifest create: invalid boolean value "" for -overwrite: parse error\n',
        ),
        (["manifest"], "distributor: manifest requires a subcommand: create\n"),
        (["manifest", "build"], 'distributor: manifest: unknown subcommand "build" (want create)\n'),
        (["config"], "distributor: config requires a subcommand: schema, check\n"),
        (["config", "schema", "extra"], "distributor: config schema does not accept positional arguments\n"),
        (
            ["config", "schema", "--format", "json"],
            "distributor: config schema: flag provided but not defined: -format\n",
        ),
    ],
)
def test_usage_errors(cli: Runner, argv: list[str], stderr: str) -> None:
    result = cli(*argv)
    assert result.code == 2
    assert result.stdout == ""
    assert result.stderr == stderr


# ---------------------------------------------------------------- config schema


def test_config_schema_prints_json_schema(cli: Runner) -> None:
    from distributor_core.config import config_json_schema

    result = cli("config", "schema")
    assert result.code == 0
    assert result.stderr == ""
    assert json.loads(result.stdout) == config_json_schema()
    assert result.stdout.startswith('{\n  "$schema"')
    assert result.stdout.endswith("}\n")


# ---------------------------------------------------------------- failures and interrupts


def test_unexpected_error_is_one_line_without_traceback(
    cli: Runner, tree: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    def boom(*_args: object, **_kwargs: object) -> list[str]:
        raise RuntimeError("disk exploded\nsecond line")

    monkeypatch.setattr(_bundles, "discover_bundles", boom)
    result = cli("validate", str(tree))
    assert (result.code, result.stdout, result.stderr) == (1, "", "distributor: disk exploded\n")


def test_os_errors_are_worded(cli: Runner, tree: object, monkeypatch: pytest.MonkeyPatch) -> None:
    def denied(*_args: object, **_kwargs: object) -> list[str]:
        raise PermissionError(13, "Permission denied", "/srv/spool")

    monkeypatch.setattr(_bundles, "discover_bundles", denied)
    result = cli("validate", str(tree))
    assert result.stderr == "distributor: /srv/spool: Permission denied\n"
    assert result.code == 1


def test_keyboard_interrupt_exits_130_quietly(cli: Runner, tree: object, monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted(*_args: object, **_kwargs: object) -> list[str]:
        raise KeyboardInterrupt

    monkeypatch.setattr(_bundles, "discover_bundles", interrupted)
    result = cli("validate", str(tree))
    assert (result.code, result.stdout, result.stderr) == (130, "", "")


def test_main_defaults_to_sys_argv(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr("sys.argv", ["distributor", "version"])
    assert main() == 0
    assert capsys.readouterr().out == f"distributor {__version__}\n"


# ---------------------------------------------------------------- rendering helpers


def test_envelope_omits_empty_error_and_warnings() -> None:
    assert envelope("x", {"a": 1}) == {"command": "x", "ok": True, "result": {"a": 1}}
    doc = envelope("x", {}, ok=False, error="boom", warnings=["careful"])
    assert list(doc) == ["command", "ok", "error", "warnings", "result"]
    assert envelope("x", {}, error="", warnings=[]) == {"command": "x", "ok": True, "result": {}}


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (True, "true"),
        (False, "false"),
        (3, "3"),
        ("reports.daily", "reports.daily"),
        ("", '""'),
        ("two words", '"two words"'),
        ('say "hi"', '"say \\"hi\\""'),
        ("tab\there", '"tab\\there"'),
        ("a=b", "a=b"),
    ],
)
def test_format_value(value: object, text: str) -> None:
    assert format_value(value) == text


def test_record_line() -> None:
    assert record_line("Valid", {"path": "a b", "files": 2}) == 'Valid: path="a b" files=2'


def test_progress_only_draws_when_enabled() -> None:
    stream = io.StringIO()
    ticks = iter([0.0, 0.05, 0.2, 0.3])
    progress = Progress(stream, "validating x", 2048, enabled=True, clock=lambda: next(ticks))
    progress(1024)
    progress(512)  # throttled: 0.05 s after the last draw
    progress(512)  # complete: always drawn
    progress.finish()
    text = stream.getvalue()
    assert text.count("\r") == 3
    assert "distributor: validating x: 1.0 KiB / 2.0 KiB (50%)" in text
    assert "2.0 KiB / 2.0 KiB (100%)" in text
    assert text.endswith("\r\x1b[K")
    silent = io.StringIO()
    disabled = Progress(silent, "x", 10, enabled=False)
    disabled(10)
    disabled.finish()
    assert silent.getvalue() == ""


# ---------------------------------------------------------------- registry: one module per command


HELLO = '''
from distributor_core.cli.spec import Command, Flag, Invocation


def run(inv: Invocation) -> int:
    inv.require("--name")
    if inv.out.json:
        inv.out.emit_envelope({"greeting": inv.args.name})
    else:
        inv.out.record("Hello", name=inv.args.name)
    return 0


COMMAND = Command(
    name="greet",
    summary="Greet someone",
    usage=("greet --name <name> [--format text|json]",),
    flags=(Flag("--name", "who to greet", metavar="<name>"),),
    run=run,
)
'''


def test_a_new_command_is_one_module(cli: Runner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from distributor_core.cli import commands

    (tmp_path / "greet.py").write_text(HELLO)
    monkeypatch.setattr(commands, "__path__", [*commands.__path__, str(tmp_path)])
    registry.all_commands.cache_clear()
    try:
        root = cli("--help")
        listed = [line.split()[0] for line in root.stdout.split("Commands:\n")[1].split("\n\n")[0].splitlines()]
        assert listed == [*EXPECTED_COMMANDS, "greet"]
        ok = cli("greet", "--name", "ops", "--format", "json")
        assert (ok.code, ok.json()) == (0, {"command": "greet", "ok": True, "result": {"greeting": "ops"}})
        missing = cli("greet")
        assert (missing.code, missing.stdout, missing.stderr) == (2, "", "distributor: greet requires --name\n")
        extra = cli("greet", "--name", "ops", "extra")
        assert extra.stderr == "distributor: greet does not accept positional arguments\n"
    finally:
        monkeypatch.undo()
        registry.all_commands.cache_clear()
    assert registry.find("greet") is None

"""Go ``flag`` syntax for every command (issue 15 item 3), through the real console script.

The Go tool parses with Go's standard ``flag`` package, so scripts call ``-config c.yml``,
``-dry-run``, ``-format=json``, ``--config=c.yml`` and ``--dry-run=true|false``. Every form must
work for every command, with Go's error texts and exit code 2 for bad flags.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from distributor_core import __version__
from distributor_core.cli import registry
from distributor_core.cli.parsing import GO_BOOLS, command_flags, go_quote, parse_flags
from distributor_core.cli.spec import Command
from tests.bundle.conftest import make_bundle
from tests.cli.conftest import Runner, run_script


def _config(tmp_path: Path, *, prune: bool = False) -> Path:
    make_bundle(tmp_path / "spool" / "daily")
    retention = "\n        retention:\n          prune: {enabled: true, older_than: 1h}" if prune else ""
    config = tmp_path / "c.yml"
    config.write_text(
        f"""\
pipelines:
  - id: reports
    source: {{backend: local, path: spool}}
    destinations:
      - id: archive
        backend: local
        path: published{retention}
"""
    )
    return config


def _usage(result: object, stderr: str) -> None:
    assert (result.returncode, result.stdout, result.stderr) == (2, "", stderr)  # type: ignore[attr-defined]


# ---------------------------------------------------------------- accepted forms, end to end


@pytest.mark.parametrize(
    "flags",
    [
        ["-config", "{c}", "-dry-run"],
        ["--config", "{c}", "--dry-run"],
        ["-config={c}", "-dry-run=true"],
        ["--config={c}", "--dry-run=true"],
        ["--config={c}", "-dry-run=1", "--dry-run=T"],
    ],
    ids=["single-dash", "double-dash", "single-equals", "double-equals", "numeric-bool-last-wins"],
)
def test_run_dry_run_in_every_form(tmp_path: Path, flags: list[str]) -> None:
    config = _config(tmp_path)
    result = run_script("run", *[f.format(c=config) for f in flags])
    assert (result.returncode, result.stderr) == (0, "")
    assert "action=publish_new status=planned dry_run=true" in result.stdout
    assert not (tmp_path / "published").exists()


def test_run_dry_run_false_publishes_and_format_equals_json(tmp_path: Path) -> None:
    config = _config(tmp_path)
    result = run_script("run", "-config", str(config), "--dry-run=false", "-format=json")
    assert (result.returncode, result.stderr) == (0, "")
    doc = json.loads(result.stdout)
    assert doc["result"]["dry_run"] is False
    assert doc["result"]["actions"][0]["status"] == "completed"
    assert (tmp_path / "published" / "daily" / "report.md").is_file()
    again = run_script("run", f"--config={config}", "-format", "json", "-dry-run=False")
    assert json.loads(again.stdout)["result"]["actions"][0]["action"] == "skip_same"


def test_prune_and_reconcile_state_single_dash(tmp_path: Path) -> None:
    config = _config(tmp_path, prune=True)
    assert run_script("run", "-config", str(config)).returncode == 0
    select = ["-pipeline", "reports", "-destination=archive", "-bundle=daily"]
    pruned = run_script("prune", f"-config={config}", *select, "-dry-run=true", "-apply=false")
    assert (pruned.returncode, pruned.stderr) == (0, "")
    assert pruned.stdout.startswith("Prune: pipeline=reports destination=archive ") and "bundle=daily" in pruned.stdout
    assert "dry_run=true" in pruned.stdout
    both = run_script("prune", "-config", str(config), *select, "-dry-run", "-apply")
    _usage(both, "distributor: prune requires exactly one of --dry-run or --apply\n")
    repaired = run_script("reconcile-state", "-config", str(config), *select, "-dry-run", "-format=json")
    assert repaired.returncode == 0, repaired.stderr
    doc = json.loads(repaired.stdout)
    assert (doc["command"], doc["result"]["dry_run"], doc["result"]["checked_count"]) == ("reconcile-state", True, 2)


def test_validate_inspect_and_manifest_create_single_dash(tmp_path: Path) -> None:
    bundle = tmp_path / "b"
    bundle.mkdir()
    (bundle / "a.txt").write_text("alpha\n")
    (bundle / "b.txt").write_text("beta\n")
    created = run_script(
        "manifest", "create", "-id", "flags.test", "-file", "a.txt", "-file=b.txt",
        "-created=2026-06-07T15:00:00Z", "-format=json", str(bundle),
    )
    assert created.returncode == 0, created.stderr
    assert [f["path"] for f in json.loads(created.stdout)["result"]["files"]] == ["a.txt", "b.txt"]
    again = run_script("manifest", "create", "-id=flags.test", "-overwrite=true", "-scan", str(bundle))
    assert again.returncode == 0, again.stderr
    refused = run_script("manifest", "create", "-id=flags.test", "-overwrite=false", str(bundle))
    assert refused.returncode == 1 and "already exists" in refused.stderr
    valid = run_script("validate", "-format=json", str(bundle))
    assert json.loads(valid.stdout)["result"]["bundles"][0]["id"] == "flags.test"
    inspected = run_script("inspect", "-format", "json", str(bundle))
    assert json.loads(inspected.stdout)["result"]["bundles"][0]["file_count"] == 2
    config = _config(tmp_path)
    configured = run_script("validate", "-config", str(config), "-pipeline=reports", "-bundle", "daily")
    assert configured.stdout == "Valid: path=daily id=reports.daily files=2\n"


def test_version_and_serve_single_dash(tmp_path: Path) -> None:
    version = run_script("version", "-format=json")
    assert json.loads(version.stdout)["result"]["version"] == __version__
    served = run_script("serve", "-config", str(_config(tmp_path)), "-publisher=inline")
    assert (served.returncode, served.stdout) == (1, "")
    assert served.stderr == "distributor: serve requires at least one http_upload pipeline\n"


def test_value_flag_takes_a_dash_value_and_terminator_ends_flags(tmp_path: Path) -> None:
    # Go: a value flag consumes the next argument whatever it looks like
    result = run_script("run", "-config", "-dry-run")
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr.startswith("distributor: ") and "-dry-run" in result.stderr
    make_bundle(tmp_path / "-odd")
    odd = run_script("validate", "--", "-odd", cwd=tmp_path)
    assert (odd.returncode, odd.stdout) == (0, "Valid: path=-odd id=reports.daily files=2\n")
    dash = run_script("validate", "-", cwd=tmp_path)
    assert (dash.returncode, dash.stderr) == (1, "distributor: path - does not exist\n")


# ---------------------------------------------------------------- Go's error texts, exit 2


@pytest.mark.parametrize(
    ("argv", "stderr"),
    [
        (["run", "-bogus"], "distributor: run: flag provided but not defined: -bogus\n"),
        (["run", "--bogus=1"], "distributor: run: flag provided but not defined: -bogus\n"),
        (["run", "-config"], "distributor: run: flag needs an argument: -config\n"),
        (["run", "--config"], "distributor: run: flag needs an argument: -config\n"),
        (["run", "--dry-run=maybe"], 'distributor: run: invalid boolean value "maybe" for -dry-run: parse error\n'),
        (["run", "-force=yes"], 'distributor: run: invalid boolean value "yes" for -force: parse error\n'),
        # a switch never takes a separate value: "false" is a positional argument, as in Go
        (["run", "--dry-run", "false"], "distributor: run does not accept positional arguments\n"),
        (["run", "---config", "c.yml"], "distributor: run: bad flag syntax: ---config\n"),
        (["prune", "-format=xml"], "distributor: format must be text or json\n"),
        (["validate", "-pipeline"], "distributor: validate: flag needs an argument: -pipeline\n"),
    ],
)
def test_go_flag_errors(argv: list[str], stderr: str) -> None:
    _usage(run_script(*argv), stderr)


@pytest.mark.parametrize("flag", ["-h", "-help", "--help", "--h"])
def test_help_in_every_go_form_shows_double_dash_flags(flag: str) -> None:
    result = run_script("run", flag)
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout.startswith("Usage:\n  distributor run [--config <path>]")
    assert "  --dry-run " in result.stdout and "  --config <path> " in result.stdout
    assert "-config c.yml, --config=c.yml" in result.stdout


# ---------------------------------------------------------------- every flag of every command


def _leaves() -> list[tuple[str, Command]]:
    leaves = []
    for command in registry.all_commands():
        if command.is_group:
            leaves.extend((f"{command.name} {sub.name}", sub) for sub in command.subcommands)
        else:
            leaves.append((command.name, command))
    return leaves


LEAVES = _leaves()


@pytest.mark.parametrize(("name", "command"), LEAVES, ids=[name for name, _ in LEAVES])
def test_every_flag_accepts_every_form(name: str, command: Command) -> None:
    for flag in command_flags(command):
        key = flag.key
        if flag.is_switch:
            forms = [[f"-{key}"], [f"--{key}"], [f"-{key}=true"], [f"--{key}=1"]]
            for argv in forms:
                args, positionals = parse_flags(command, name, argv)
                assert (getattr(args, flag.dest), positionals) == (True, []), argv
            for argv in ([f"--{key}=false"], [f"-{key}", f"-{key}=0"], [f"--{key}=F"]):
                assert getattr(parse_flags(command, name, argv)[0], flag.dest) is False, argv
        else:
            forms = [[f"-{key}", "v"], [f"--{key}", "v"], [f"-{key}=v"], [f"--{key}=v"]]
            for argv in forms:
                args, positionals = parse_flags(command, name, argv)
                expected = ["v"] if flag.repeat else "v"
                assert (getattr(args, flag.dest), positionals) == (expected, []), argv


def test_parse_bool_spellings_are_go_strconv() -> None:
    assert sorted(k for k, v in GO_BOOLS.items() if v) == sorted(["1", "t", "T", "TRUE", "true", "True"])
    assert sorted(k for k, v in GO_BOOLS.items() if not v) == sorted(["0", "f", "F", "FALSE", "false", "False"])


@pytest.mark.parametrize(
    ("value", "quoted"),
    [
        ("maybe", '"maybe"'),
        ("", '""'),
        ('a"b\\c', '"a\\"b\\\\c"'),
        ("tab\tnl\n", '"tab\\tnl\\n"'),
        ("\x00\x7f", '"\\x00\\x7f"'),
        ("é<>&", '"é<>&"'),
        ("\u0085\u00a0", '"\\u0085\\u00a0"'),
        ("\U000e0001", '"\\U000e0001"'),
        (b"\xff".decode("utf-8", "surrogateescape"), '"\\xff"'),
    ],
)
def test_go_quote_matches_strconv_quote(value: str, quoted: str) -> None:
    assert go_quote(value) == quoted


def test_path_command_reads_flags_after_its_path(tmp_path: Path) -> None:
    # a superset of Go (where they would be extra arguments): a path, then flags
    make_bundle(tmp_path / "b")
    result = run_script("validate", str(tmp_path / "b"), "-format=json")
    assert result.returncode == 0
    assert json.loads(result.stdout)["ok"] is True


DOC = (Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text()


@pytest.mark.parametrize(
    ("argv", "stderr"),
    [
        (["validate", "--bogus"], "distributor: validate: flag provided but not defined: -bogus"),
        (["validate", "--config"], "distributor: validate: flag needs an argument: -config"),
        (["run", "--dry-run=maybe"], 'distributor: run: invalid boolean value "maybe" for -dry-run: parse error'),
        (["run", "---config"], "distributor: run: bad flag syntax: ---config"),
    ],
)
def test_documented_flag_errors_are_what_the_cli_prints(cli: Runner, argv: list[str], stderr: str) -> None:
    assert f"`{stderr}`" in DOC
    result = cli(*argv)
    assert (result.code, result.stdout, result.stderr) == (2, "", stderr + "\n")

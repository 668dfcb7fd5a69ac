"""``distributor config schema`` (resolutions C4) and ``distributor config check``."""

from __future__ import annotations

from distributor_core.cli.spec import Command, Flag, Invocation


def run_schema(inv: Invocation) -> int:
    from distributor_core.config import config_json_schema

    inv.out.emit_json(config_json_schema())
    return 0


def run_check(inv: Invocation) -> int:
    import os

    from distributor_core.app.config_check import check_config
    from distributor_core.cli import configfile

    config = configfile.load(inv.args.config)
    path = os.path.abspath(inv.args.config or configfile.DEFAULT_CONFIG)
    result = check_config(config, path, connect=bool(inv.args.connect))
    problems = result.problems()
    if inv.out.json:
        inv.out.emit_envelope(result.to_dict(), ok=result.ok,
                              error=f"config check: {'; '.join(problems)}" if problems else None)
    else:
        doc = result.to_dict()
        inv.out.record("Config", path=path, status=doc["status"], pipelines=doc["pipelines"],
                       destinations=doc["destinations"], upload_tokens=result.upload_tokens, connect=result.connect)
        for root in result.roots:
            inv.out.record("Source" if root.role == "source" else "Destination", **root.fields())
    if problems:
        if not inv.out.json:
            for problem in problems:
                inv.out.diagnostic(f"config check: {problem}")
        return 1
    return 0


CHECK = Command(
    name="check",
    summary="Check a config without running it: load, validate, resolve secrets and roots",
    usage=("config check [--config <path>] [--connect] [--format text|json]",),
    description=(
        "Loads and validates the config, resolves every secret a run would need (upload tokens, S3\n"
        "credentials, SSH key and config files) and names every source and destination root as\n"
        "refusals name them. Nothing is contacted: without --connect no source, destination or\n"
        "server is reached. With --connect each root is opened as a dry run would open it and looked\n"
        "at once: a source root must exist; a destination root must answer (a local or SSH\n"
        "directory that does not exist yet is `absent`: the first publication creates it).\n"
        "Exit status 1 when anything does not resolve; each problem is one stderr line with its\n"
        "remedy. The config defaults to ./distributor.yml."
    ),
    flags=(
        Flag("--config", "configuration file (default ./distributor.yml)", metavar="<path>"),
        Flag("--connect", "also open every source and destination and look at its root"),
    ),
    run=run_check,
)

COMMAND = Command(
    name="config",
    summary="Work with the configuration file",
    usage=("config schema", "config check [--config <path>] [--connect] [--format text|json]"),
    formats=False,
    subcommands=(
        Command(
            name="schema",
            summary="Print the JSON Schema of the YAML configuration",
            usage=("config schema",),
            description=(
                "Writes the JSON Schema (2-space indented) to stdout. Editors and CI can use it to\n"
                "check a distributor.yml before `distributor config check` or `run` loads it."
            ),
            formats=False,
            run=run_schema,
        ),
        CHECK,
    ),
)

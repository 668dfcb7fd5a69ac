"""``distributor config schema``: the JSON Schema of the YAML config on stdout (resolutions C4)."""

from __future__ import annotations

from distributor_core.cli.spec import Command, Invocation


def run_schema(inv: Invocation) -> int:
    from distributor_core.config import config_json_schema

    inv.out.emit_json(config_json_schema())
    return 0


COMMAND = Command(
    name="config",
    summary="Work with the configuration file",
    usage=("config schema",),
    formats=False,
    subcommands=(
        Command(
            name="schema",
            summary="Print the JSON Schema of the YAML configuration",
            usage=("config schema",),
            description=(
                "Writes the JSON Schema (2-space indented) to stdout. Editors and CI can use it to\n"
                "check a distributor.yml before `distributor validate --config` or `run` loads it."
            ),
            formats=False,
            run=run_schema,
        ),
    ),
)

"""``distributor serve [--config <path>] [--publisher inline|dagster]`` (interfaces §2.8, resolutions C4)."""

from __future__ import annotations

from distributor_core.cli.errors import CommandError, UsageError
from distributor_core.cli.spec import Command, Flag, Invocation

DEFAULT_CONFIG = "distributor.yml"
PUBLISHERS = ("inline", "dagster")


def run(inv: Invocation) -> int:
    publisher = inv.args.publisher or "inline"
    if publisher not in PUBLISHERS:
        raise UsageError("publisher must be inline or dagster")
    from distributor_core.config import ConfigError, SecretError, load_config
    from distributor_core.server.errors import ServerSetupError
    from distributor_core.server.serve import serve

    try:
        config = load_config(inv.args.config or DEFAULT_CONFIG)
        return serve(config, publisher=publisher, stderr=inv.out.stderr)
    except (ConfigError, SecretError, ServerSetupError) as exc:
        raise CommandError(str(exc)) from None


COMMAND = Command(
    name="serve",
    summary="Run the HTTP upload server",
    usage=("serve [--config <path>] [--publisher inline|dagster]",),
    description=(
        "Serves the HTTP upload API for the config's http_upload pipelines on server.http.bind\n"
        "until SIGINT or SIGTERM. Accepted uploads are staged durably under each pipeline's\n"
        "staging_path (one server per staging directory), or in the shared store of an\n"
        "s3://bucket/prefix server.http.staging_root (any number of serve replicas). With\n"
        "--publisher inline (the default) the servers publish them themselves; with\n"
        "--publisher dagster they only stage them for the Dagster upload sensor.\n\n"
        "On a signal the server stops accepting requests, gives running publications up to 30 s\n"
        "to finish and exits 0; anything left queued or running resumes at the next start (on\n"
        "S3 staging: on another replica once its publication lease has expired).\n"
        "The config defaults to ./distributor.yml."
    ),
    flags=(
        Flag("--config", "configuration file (default ./distributor.yml)", metavar="<path>"),
        Flag("--publisher", "who publishes accepted uploads: inline (default) or dagster", metavar="inline|dagster"),
    ),
    formats=False,
    run=run,
)

"""``distributor serve [--config <path>] [--publisher inline|dagster] [--bind <host:port> | --port <port>]``
(interfaces §2.8, resolutions C4)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from distributor_core.cli.errors import CommandError, UsageError
from distributor_core.cli.spec import Command, Flag, Invocation

if TYPE_CHECKING:
    from distributor_core.config import Config

PUBLISHERS = ("inline", "dagster")


def bind_override(inv: Invocation) -> str | None:
    """The address ``--bind`` or ``--port`` asks for, checked as ``server.http.bind`` is
    (``None``: the config's). Usage errors name the flag."""
    from distributor_core.config.addresses import split_host_port

    bind, port = inv.args.bind, inv.args.port
    if bind is not None and port is not None:
        raise UsageError("serve: --bind and --port exclude each other (--bind takes host:port)")
    if bind is not None:
        try:
            split_host_port(bind)
        except ValueError as exc:
            raise UsageError(f"serve: --bind must be a host:port address such as 127.0.0.1:8080 ({exc})") from None
        return bind
    if port is not None:
        if not port.isdigit() or len(port) > 5 or int(port) > 65535:
            raise UsageError(f"serve: --port must be a port number 0-65535, not {port!r}")
        return port
    return None


def with_bind(config: Config, override: str) -> Config:
    """``config`` listening on ``override`` (``host:port``, or a port for the config's host)."""
    import msgspec

    from distributor_core.config.addresses import split_host_port

    http = config.server.http
    if override.isdigit():
        host = http.bind_host
        override = f"[{host}]:{int(override)}" if ":" in host else f"{host}:{int(override)}"
    split_host_port(override)
    server = msgspec.structs.replace(config.server, http=msgspec.structs.replace(http, bind=override))
    return msgspec.structs.replace(config, server=server)


def run(inv: Invocation) -> int:
    publisher = inv.args.publisher or "inline"
    if publisher not in PUBLISHERS:
        raise UsageError("publisher must be inline or dagster")
    override = bind_override(inv)
    from distributor_core.cli import configfile
    from distributor_core.config import ConfigError, SecretError
    from distributor_core.server.errors import ServerSetupError
    from distributor_core.server.serve import serve

    config = configfile.load(inv.args.config)
    if override is not None:
        config = with_bind(config, override)
    try:
        return serve(config, publisher=publisher, stderr=inv.out.stderr)
    except (ConfigError, SecretError, ServerSetupError) as exc:
        raise CommandError(str(exc)) from None


COMMAND = Command(
    name="serve",
    summary="Run the HTTP upload server",
    usage=("serve [--config <path>] [--publisher inline|dagster] [--bind <host:port> | --port <port>]",),
    description=(
        "Serves the HTTP upload API for the config's http_upload pipelines on server.http.bind\n"
        "(or the address --bind names, or --port on the config's host) until SIGINT or SIGTERM.\n"
        "Accepted uploads are staged durably under each pipeline's\n"
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
        Flag("--bind", "listen on this address instead of server.http.bind (IPv6 as [::1]:8080)",
             metavar="<host:port>"),
        Flag("--port", "listen on this port of server.http.bind's host (0: a free port)", metavar="<port>"),
    ),
    formats=False,
    run=run,
)

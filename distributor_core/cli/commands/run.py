"""``distributor run`` (interfaces §2.5, resolutions B3, C2, C4): publish every configured pipeline."""

from __future__ import annotations

from distributor_core.app.run import RunEvent, RunOptions, RunSelectionError, SetupError, run_config
from distributor_core.cli.configfile import DEFAULT_CONFIG, load
from distributor_core.cli.errors import CommandError, UsageError
from distributor_core.cli.output import Progress
from distributor_core.cli.spec import Command, Flag, Invocation
from distributor_core.config import Config
from distributor_core.config.errors import ConfigLookupError


class _ProgressView:
    """Shows ``<pipeline>/<destination> [<bundle>]`` with files and bytes on a terminal."""

    def __init__(self, inv: Invocation) -> None:
        self.inv = inv
        self.enabled = inv.out.progress_enabled()
        self._bar: Progress | None = None
        self._key: tuple[str, str, str, str] | None = None

    def __call__(self, event: RunEvent) -> None:
        if not self.enabled:
            return
        key = (event.kind, event.pipeline_id, event.destination_id, event.bundle_path)
        if key != self._key:
            self.close()
            self._key = key
            where = f"{event.pipeline_id}/{event.destination_id}" if event.destination_id else event.pipeline_id
            bundle = event.bundle_path or "."
            verb = "validating" if event.kind == "validate" else "publishing"
            total = event.progress.bytes_total if event.progress is not None else None
            self._bar = self.inv.out.progress(f"{verb} {where} [{bundle}]", total)
            self._files = 0
        if self._bar is None:
            return
        if event.progress is not None:
            progress = event.progress
            self._bar.label = (
                f"publishing {event.pipeline_id}/{event.destination_id} [{event.bundle_path or '.'}] "
                f"{progress.files_done}/{progress.files_total} files"
            )
            self._bar.advance(progress.bytes_done - self._bar.done)
        else:
            self._bar.advance(event.bytes_done)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.finish()
            self._bar = None


def _require_pipelines_to_run(config: Config, options: RunOptions, path: str) -> None:
    """A run whose selected pipelines all receive their bundles over HTTP has nothing to publish:
    say so, and what does publish them, instead of a silent ``pipelines=0`` (exit 1, so a timer or
    script pointed at the upload server's config notices)."""
    from distributor_core.app.run import selected_pipelines

    try:
        pipelines = selected_pipelines(config, options)
    except ConfigLookupError as exc:
        raise CommandError(str(exc)) from None
    if pipelines and all(p.is_upload for p in pipelines):
        names = ", ".join(p.id for p in pipelines)
        which = f"pipeline {names} is" if len(pipelines) == 1 else f"pipelines {names} are"
        raise CommandError(
            f"nothing to run: {which} http_upload (producers push their bundles over HTTP); "
            f"`distributor serve --config {path}` accepts and publishes them"
        )


def run(inv: Invocation) -> int:
    args = inv.args
    config = load(args.config)
    options = RunOptions(
        dry_run=bool(args.dry_run),
        force=bool(args.force),
        republish=bool(args.republish),
        pipeline_id=args.pipeline or None,
        destination_id=args.destination or None,
    )
    _require_pipelines_to_run(config, options, args.config or DEFAULT_CONFIG)
    view = _ProgressView(inv)
    options.events = view if view.enabled else None
    try:
        report = run_config(config, options)
    except RunSelectionError as exc:
        raise UsageError(str(exc)) from None
    except SetupError as exc:
        if inv.out.json and exc.refusal is not None:
            inv.out.emit_envelope(None, ok=False, error=exc.detailed(), refusal=exc.refusal.to_dict())
        raise CommandError(exc.detailed()) from None
    except ConfigLookupError as exc:
        raise CommandError(str(exc)) from None
    finally:
        view.close()
    warnings = [*report.warnings, *(w for action in report.actions for w in action.warnings)]
    error = report.error_message()
    if inv.out.json:
        inv.out.emit_envelope(report.to_dict(), ok=report.ok, error=error or None, warnings=warnings or None)
    else:
        for line in report.text_lines():
            inv.out.line(line)
        for warning in warnings:
            inv.out.diagnostic(f"warning: {warning}")
    if not report.ok:
        if not inv.out.json:
            inv.out.diagnostic(error)
        return 1
    return 0


COMMAND = Command(
    name="run",
    summary="Run configured distribution pipelines",
    usage=(
        "run [--config <path>] [--pipeline <id> [--destination <id>]] [--dry-run] [--force] [--republish] "
        "[--format text|json]",
    ),
    description=(
        "Discovers the source bundles of every pipeline (or the one named by --pipeline), validates\n"
        "them, plans each destination and publishes. --dry-run plans only and writes nothing.\n"
        "--force replaces conflicting or unmanaged content of one destination; --republish rewrites\n"
        "a destination that already matches its source. Both need a run that targets exactly one\n"
        f"destination. The config defaults to ./{DEFAULT_CONFIG}. Exit status 1 when any destination failed,\n"
        "or before anything is planned when a source path does not exist or a credential does not resolve."
    ),
    flags=(
        Flag("--config", "configuration file", metavar="<path>"),
        Flag("--pipeline", "run only this pipeline", metavar="<id>"),
        Flag("--destination", "run only this destination of --pipeline", metavar="<id>"),
        Flag("--dry-run", "plan and report without writing anything"),
        Flag("--force", "replace conflicting or unmanaged content (one destination only)"),
        Flag("--republish", "rewrite a destination whose content already matches (one destination only)"),
    ),
    run=run,
)

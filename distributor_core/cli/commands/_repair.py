"""Flags, checks and rendering shared by ``reconcile-state``, ``prune`` and ``audit`` (interfaces
§2.6–2.7, resolutions B2, C3, issue 18)."""

from __future__ import annotations

from typing import Any, NoReturn

from distributor_core.app.audit import AuditProgress
from distributor_core.app.audit_report import AuditReport
from distributor_core.app.bundle_set import BundleSetReport
from distributor_core.app.bundles import BUNDLE_ERRORS
from distributor_core.app.config_walk import ConfigSetReport
from distributor_core.app.refusal import for_maintenance_error
from distributor_core.app.repair_report import PruneReport, ReconcileStateReport
from distributor_core.app.selection import SelectionError, normalise_bundle_path, resolve_target
from distributor_core.cli.errors import CommandError, UsageError
from distributor_core.cli.output import Progress
from distributor_core.cli.spec import Flag, Invocation
from distributor_core.config import ConfigError, ConfigLookupError

SELECTOR_FLAGS = (
    Flag("--config", "configuration file (required)", metavar="<path>"),
    Flag("--pipeline", "pipeline id that selects the destination root (required)", metavar="<id>"),
    Flag("--destination", "destination id that selects the destination root (required)", metavar="<id>"),
)

#: the selectors of commands that also take ``--all``
SELECTOR_OR_ALL_FLAGS = (
    SELECTOR_FLAGS[0],
    Flag("--pipeline", "pipeline id that selects the destination root (required unless --all)", metavar="<id>"),
    Flag(
        "--destination", "destination id that selects the destination root (required unless --all)", metavar="<id>"
    ),
)

RepairReport = ReconcileStateReport | PruneReport | AuditReport | BundleSetReport | ConfigSetReport

ALL_FLAG = Flag("--all", "every destination of every pipeline of the config (instead of --pipeline/--destination)")

BUNDLE_FLAGS = (
    Flag("--bundle", "destination-relative bundle path to work on (default: the root)", metavar="<path>"),
    Flag("--all-bundles", "every bundle path under the root that holds a .distributor.json"),
)

BUNDLE_HELP = """\
--bundle <path> works on <root>/<path>/.distributor.json instead of the root's state file
("." is the root). --all-bundles finds every bundle path under the root that holds a
.distributor.json and works on each one independently: one report section per bundle path,
exit 1 when any of them failed."""


def check_bundle_flags(inv: Invocation) -> str:
    """After the required flags: ``--bundle`` xor ``--all-bundles``, and a valid ``--bundle``."""
    args = inv.args
    if args.all_bundles and args.bundle is not None:
        raise UsageError(f"{inv.command} accepts either --bundle or --all-bundles")
    try:
        return normalise_bundle_path(args.bundle)
    except SelectionError as exc:
        raise UsageError(f"{inv.command}: {exc}") from None


def check_selection(inv: Invocation) -> str:
    """``--config``, then ``--all`` or ``--pipeline`` and ``--destination`` (and the bundle flags,
    which ``--all`` does not take); returns the normalised ``--bundle``."""
    args = inv.args
    inv.require("--config")
    if args.all:
        if args.pipeline or args.destination:
            raise UsageError(f"{inv.command} accepts either --all or --pipeline and --destination")
        if args.bundle is not None or args.all_bundles:
            raise UsageError(f"{inv.command} --all works on every bundle path; drop --bundle and --all-bundles")
        return ""
    inv.require("--pipeline", "--destination")
    return check_bundle_flags(inv)


class AuditProgressView:
    """``auditing <p>/<d> [<bundle>] <k>/<n> files`` with bytes, on a terminal only."""

    def __init__(self, inv: Invocation) -> None:
        self.inv = inv
        self.enabled = inv.out.progress_enabled()
        self._bar: Progress | None = None
        self._key: tuple[str, str, str] | None = None

    def callback(self) -> Any:
        return self if self.enabled else None

    def __call__(self, event: AuditProgress) -> None:
        key = (event.pipeline_id, event.destination_id, event.bundle_path)
        if key != self._key:
            self.close()
            self._key = key
            self._bar = self.inv.out.progress("", event.bytes_total)
        assert self._bar is not None
        self._bar.label = (
            f"auditing {event.pipeline_id}/{event.destination_id} [{event.bundle_path or '.'}] "
            f"{event.files_done}/{event.files_total} files"
        )
        self._bar.advance(event.bytes_done - self._bar.done)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.finish()
            self._bar = None


def emit(inv: Invocation, report: RepairReport) -> int:
    """Print a successful report (one bundle path or a :class:`BundleSetReport`)."""
    warnings = list(report.warnings)
    if inv.out.json:
        inv.out.emit_envelope(report.to_dict(), warnings=warnings or None)
    else:
        for line in report.text_lines():
            inv.out.line(line)
    return 0


def emit_failure(inv: Invocation, report: RepairReport, error: str) -> int:
    """A failure with a report (resolutions C3): the report on stdout (text: its lines, then
    ``Failed: path=<p> error=<e>``; JSON: an ``ok: false`` envelope with ``error`` and the full
    result), ``distributor: <error>`` on stderr, exit 1."""
    warnings = list(report.warnings)
    if inv.out.json:
        inv.out.emit_envelope(report.to_dict(), ok=False, error=error, warnings=warnings or None)
    else:
        lines = report.text_lines()
        if not isinstance(report, BundleSetReport | ConfigSetReport | AuditReport):
            failed = report.failed_output
            path = f" path={failed.path}" if failed is not None else ""
            lines.append(f"Failed:{path} error={error}")
        for line in lines:
            inv.out.line(line)
    inv.out.diagnostic(error)
    return 1


#: failures of one selected destination that a refusal can explain (``refuse``)
REFUSABLE = BUNDLE_ERRORS


def refuse(inv: Invocation, exc: Exception, bundle_path: str) -> NoReturn:
    """End a command whose one selected destination failed: ``distributor: <error> (root <root>;
    paths ...; remedy: ...; see <docs>)`` on stderr, exit 1; with ``--format json`` also an
    ``ok: false`` envelope with ``error``, ``refusal`` and ``"result": null``. Without a refusal
    (an error it cannot explain, or ``--all``) the error alone, as before."""
    args = inv.args
    refusal = None
    if not getattr(args, "all", False) and args.pipeline and args.destination:
        try:
            target = resolve_target(args.config, args.pipeline, args.destination)
        except (ConfigError, ConfigLookupError):  # then the error stands alone
            target = None
        if target is not None:
            refusal = for_maintenance_error(
                target.destination.storage, target.pipeline.id, target.destination.id, bundle_path, exc)
    if refusal is None:
        raise exc
    message = f"{exc} ({refusal.sentence()})"
    if inv.out.json:
        inv.out.emit_envelope(None, ok=False, error=message, refusal=refusal.to_dict())
    raise CommandError(message) from None

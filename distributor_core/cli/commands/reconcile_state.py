"""``distributor reconcile-state`` (interfaces §2.6, resolutions A1, A3, B2, issue 18): drop the
records of managed outputs that no longer exist (``--audit``: or no longer match), adopt matching
unmanaged files (``--adopt``), for one destination or the whole config (``--all``). Applies by
default; ``--dry-run`` only reports. ``--adopt`` is the exception: it plans unless ``--apply``."""

from __future__ import annotations

from distributor_core.app.config_walk import ConfigSetReport
from distributor_core.app.reconcile import ReconcileStateError, reconcile_config, reconcile_state
from distributor_core.cli.commands import _repair
from distributor_core.cli.errors import UsageError
from distributor_core.cli.spec import Command, Flag, Invocation


def dry_run_of(inv: Invocation) -> bool:
    """``--apply`` writes, ``--dry-run`` reports; neither: write, except with ``--adopt``."""
    args = inv.args
    if args.apply and args.dry_run:
        raise UsageError(f"{inv.command} accepts either --dry-run or --apply")
    if args.apply:
        return False
    return bool(args.dry_run) or bool(args.adopt)


def run(inv: Invocation) -> int:
    args = inv.args
    bundle = _repair.check_selection(inv)
    dry_run = dry_run_of(inv)
    # bytes read to check outputs: drawn on a terminal only
    bar = inv.out.progress("checking output bytes") if args.audit or args.adopt else None
    on_bytes = bar.advance if bar is not None and bar.enabled else None
    try:
        if args.all:
            report = reconcile_config(
                args.config,
                all_owners=bool(args.all_owners),
                dry_run=dry_run,
                audit=bool(args.audit),
                adopt=bool(args.adopt),
                on_bytes=on_bytes,
            )
        else:
            report = reconcile_state(
                args.config,
                pipeline_id=args.pipeline,
                destination_id=args.destination,
                all_owners=bool(args.all_owners),
                dry_run=dry_run,
                bundle_path=bundle,
                all_bundles=bool(args.all_bundles),
                audit=bool(args.audit),
                adopt=bool(args.adopt),
                on_bytes=on_bytes,
            )
    except ReconcileStateError as exc:
        return _repair.emit_failure(inv, exc.report, str(exc))
    except _repair.REFUSABLE as exc:
        _repair.refuse(inv, exc, bundle)
    finally:
        if bar is not None:
            bar.finish()
    if isinstance(report, ConfigSetReport) and not report.ok:
        return _repair.emit_failure(inv, report, report.error_message())
    return _repair.emit(inv, report)


COMMAND = Command(
    name="reconcile-state",
    summary="Repair missing managed-output records in destination state",
    usage=(
        "reconcile-state --config <path> --pipeline <id> --destination <id> [--all-owners] [--audit] [--adopt]"
        " [--dry-run | --apply] [--bundle <path> | --all-bundles] [--format text|json]",
        "reconcile-state --config <path> --all [--all-owners] [--audit] [--adopt] [--dry-run | --apply]"
        " [--format text|json]",
    ),
    description=(
        "Checks every managed output recorded in the selected destination's .distributor.json\n"
        "with a storage stat and, unless --dry-run is given, removes the records of outputs that\n"
        "no longer exist, rewriting the state file atomically under the destination lock. It\n"
        "reports unmanaged entries but never deletes or restores files and never rewrites invalid\n"
        "or mismatched state. Shared-root repair is scoped to the selected owner; --all-owners\n"
        "repairs every owner of that root.\n\n"
        "--audit re-reads every recorded output (sha256, streamed) and also removes the records of\n"
        "outputs whose bytes no longer match; the files stay, as unmanaged content.\n"
        "--adopt records as managed the unmanaged files that have exactly the path, size and sha256\n"
        "of an output the current source would publish there; everything else stays unmanaged and\n"
        "is listed. Unlike the rest of reconcile-state, --adopt only reports unless --apply is given.\n"
        "--all works on every destination of every pipeline of the config (their bundle paths with\n"
        "state); one failing destination does not stop the others.\n\n" + _repair.BUNDLE_HELP
    ),
    flags=(
        *_repair.SELECTOR_OR_ALL_FLAGS,
        _repair.ALL_FLAG,
        Flag("--all-owners", "repair every owner of a shared-root state file"),
        Flag("--audit", "also drop the records of outputs whose bytes no longer match (re-reads every output)"),
        Flag("--adopt", "record matching unmanaged files as managed (a dry run unless --apply)"),
        Flag("--dry-run", "report repairs without rewriting state"),
        Flag("--apply", "rewrite state (the default, except with --adopt)"),
        *_repair.BUNDLE_FLAGS,
    ),
    run=run,
)

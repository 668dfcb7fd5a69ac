"""``distributor reconcile-state`` (interfaces §2.6, resolutions A1, A3, B2): drop the records of
managed outputs that no longer exist. Applies by default; ``--dry-run`` only reports."""

from __future__ import annotations

from distributor_core.app.reconcile import ReconcileStateError, reconcile_state
from distributor_core.cli.commands import _repair
from distributor_core.cli.spec import Command, Flag, Invocation


def run(inv: Invocation) -> int:
    args = inv.args
    inv.require("--config", "--pipeline", "--destination")
    bundle = _repair.check_bundle_flags(inv)
    try:
        report = reconcile_state(
            args.config,
            pipeline_id=args.pipeline,
            destination_id=args.destination,
            all_owners=bool(args.all_owners),
            dry_run=bool(args.dry_run),
            bundle_path=bundle,
            all_bundles=bool(args.all_bundles),
        )
    except ReconcileStateError as exc:
        return _repair.emit_failure(inv, exc.report, str(exc))
    return _repair.emit(inv, report)


COMMAND = Command(
    name="reconcile-state",
    summary="Repair missing managed-output records in destination state",
    usage=(
        "reconcile-state --config <path> --pipeline <id> --destination <id> [--all-owners] [--dry-run]"
        " [--bundle <path> | --all-bundles] [--format text|json]",
    ),
    description=(
        "Checks every managed output recorded in the selected destination's .distributor.json\n"
        "with a storage stat and, unless --dry-run is given, removes the records of outputs that\n"
        "no longer exist, rewriting the state file atomically under the destination lock. It\n"
        "reports unmanaged entries but never deletes, adopts or restores files, never checks\n"
        "digests and never rewrites invalid or mismatched state. Shared-root repair is scoped to\n"
        "the selected owner; --all-owners repairs every owner of that root.\n\n" + _repair.BUNDLE_HELP
    ),
    flags=(
        *_repair.SELECTOR_FLAGS,
        Flag("--all-owners", "repair every owner of a shared-root state file"),
        Flag("--dry-run", "report repairs without rewriting state"),
        *_repair.BUNDLE_FLAGS,
    ),
    run=run,
)

"""``distributor prune`` (interfaces §2.7, resolutions A1, A3, B2, B4, C3): delete the managed
outputs the destination's ``retention.prune`` policy selects. Exactly one of ``--dry-run`` or
``--apply``."""

from __future__ import annotations

from distributor_core.app.prune import PruneError, prune
from distributor_core.cli.commands import _repair
from distributor_core.cli.errors import UsageError
from distributor_core.cli.spec import Command, Flag, Invocation


def run(inv: Invocation) -> int:
    args = inv.args
    inv.require("--config", "--pipeline", "--destination")
    if bool(args.dry_run) == bool(args.apply):
        raise UsageError(f"{inv.command} requires exactly one of --dry-run or --apply")
    bundle = _repair.check_bundle_flags(inv)
    try:
        report = prune(
            args.config,
            pipeline_id=args.pipeline,
            destination_id=args.destination,
            dry_run=bool(args.dry_run),
            bundle_path=bundle,
            all_bundles=bool(args.all_bundles),
        )
    except PruneError as exc:
        return _repair.emit_failure(inv, exc.report, str(exc))
    except _repair.REFUSABLE as exc:
        _repair.refuse(inv, exc, bundle)
    return _repair.emit(inv, report)


COMMAND = Command(
    name="prune",
    summary="Prune managed outputs using configured retention policy",
    usage=(
        "prune --config <path> --pipeline <id> --destination <id> (--dry-run|--apply)"
        " [--bundle <path> | --all-bundles] [--format text|json]",
    ),
    description=(
        "Plans from the selected destination's retention.prune policy (older_than, keep_latest)\n"
        "over the managed outputs of the selected owner, newest kept first. --dry-run only\n"
        "reports. --apply deletes the planned managed outputs oldest first under the destination\n"
        "lock and removes their records from .distributor.json; unmanaged files and the state\n"
        "file are never deleted. If a delete fails, state keeps the records of the failed and\n"
        "unattempted outputs, the report ends with \"Failed: path=<p> error=<e>\" and the exit\n"
        "status is 1. Pruning never runs automatically and takes no one-off overrides.\n\n"
        "With retention.prune.bundles (keep_latest, older_than) whole bundle paths go instead: every\n"
        "bundle path of the selected owner (or the one --bundle names) is ranked by its manifest's\n"
        "created time; the newest are kept, the others lose their outputs, their .distributor.json and\n"
        "the folders left empty.\n\n" + _repair.BUNDLE_HELP
    ),
    flags=(
        *_repair.SELECTOR_FLAGS,
        Flag("--dry-run", "report planned deletes without deleting outputs or rewriting state"),
        Flag("--apply", "delete planned managed outputs and rewrite state"),
        *_repair.BUNDLE_FLAGS,
    ),
    run=run,
)

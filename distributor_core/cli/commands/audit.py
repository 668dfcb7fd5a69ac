"""``distributor audit`` (issue 18 items 1–2): re-read every managed output recorded in destination
state and report each as ok, missing, not a file, size mismatch or digest mismatch, plus unmanaged
entries. Read only. Exit 1 when anything is wrong."""

from __future__ import annotations

from distributor_core.app.audit import audit_config, audit_destination, audit_error_message
from distributor_core.cli.commands import _repair
from distributor_core.cli.spec import Command, Flag, Invocation


def run(inv: Invocation) -> int:
    args = inv.args
    bundle = _repair.check_selection(inv)
    view = _repair.AuditProgressView(inv)
    try:
        if args.all:
            report = audit_config(
                args.config,
                all_owners=bool(args.all_owners),
                allow_unmanaged=bool(args.allow_unmanaged),
                progress=view.callback(),
            )
        else:
            report = audit_destination(
                args.config,
                args.pipeline,
                args.destination,
                bundle_path=bundle,
                all_bundles=bool(args.all_bundles),
                all_owners=bool(args.all_owners),
                allow_unmanaged=bool(args.allow_unmanaged),
                progress=view.callback(),
            )
    except _repair.REFUSABLE as exc:
        _repair.refuse(inv, exc, bundle)
    finally:
        view.close()
    if not report.clean:
        return _repair.emit_failure(inv, report, audit_error_message(report))
    return _repair.emit(inv, report)


COMMAND = Command(
    name="audit",
    summary="Check that managed outputs still have the bytes destination state records",
    usage=(
        "audit --config <path> --pipeline <id> --destination <id> [--all-owners] [--allow-unmanaged]"
        " [--bundle <path> | --all-bundles] [--format text|json]",
        "audit --config <path> --all [--all-owners] [--allow-unmanaged] [--format text|json]",
    ),
    description=(
        "Re-reads every managed output recorded in the selected destination's .distributor.json,\n"
        "streaming its bytes through sha256 (on S3 an object's stored whole-object ChecksumSHA256\n"
        "is used instead when it has one), and reports each output as ok, missing, not_a_file,\n"
        "size_mismatch or digest_mismatch, plus unmanaged entries. It takes no lock and writes\n"
        "nothing; to drop the records of outputs that no longer match use reconcile-state --audit,\n"
        "to restore them run --republish. Exit status 1 when an output is not ok or an unmanaged\n"
        "entry exists (--allow-unmanaged lists those without failing). --all audits every\n"
        "destination of every pipeline of the config.\n\n" + _repair.BUNDLE_HELP
    ),
    flags=(
        *_repair.SELECTOR_OR_ALL_FLAGS,
        _repair.ALL_FLAG,
        Flag("--all-owners", "shared-root state: audit every owner's outputs, not only the selected one's"),
        Flag("--allow-unmanaged", "list unmanaged entries without failing the audit"),
        *_repair.BUNDLE_FLAGS,
    ),
    run=run,
)

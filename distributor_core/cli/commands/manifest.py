"""``distributor manifest create`` (interfaces §2.9): build ``manifest.json`` for files already
under a bundle directory."""

from __future__ import annotations

import os
from pathlib import Path

from distributor_core.bundle import MANIFEST_NAME, build_manifest, manifest_to_obj, write_manifest
from distributor_core.cli.errors import CommandError, UsageError
from distributor_core.cli.spec import Command, Flag, Invocation, Positional
from distributor_core.timefmt import TimestampError, format_precise, parse_rfc3339


def run_create(inv: Invocation) -> int:
    args = inv.args
    inv.require("--id")
    if args.file and args.scan:
        raise UsageError(f"{inv.command} accepts either --file or --scan")
    created = None
    if args.created is not None:
        try:
            created = parse_rfc3339(args.created)
        except TimestampError as exc:
            raise UsageError(f"{inv.command}: --created must be RFC3339: {exc}") from None
    root = Path(inv.positional or "")
    if not root.is_dir():
        raise CommandError(f"bundle path {inv.positional} is not a directory")
    target = root / MANIFEST_NAME
    if not args.overwrite and os.path.lexists(target):
        raise CommandError(f"{target} already exists (use --overwrite to replace it)")
    with inv.out.progress(f"hashing {inv.positional}") as progress:
        manifest = build_manifest(
            root,
            id=args.id,
            files=list(args.file) if args.file else None,
            scan=not args.file,
            created=created,
            progress=progress,
        )
    try:
        write_manifest(root, manifest, overwrite=args.overwrite)
    except FileExistsError:
        raise CommandError(f"{target} already exists (use --overwrite to replace it)") from None
    if inv.out.json:
        inv.out.emit_envelope(manifest_to_obj(manifest))
    else:
        inv.out.record(
            "Created",
            path=os.fspath(target),
            id=manifest.id,
            digest=manifest.digest,
            created=format_precise(manifest.created),
            files=len(manifest.files),
        )
    return 0


CREATE = Command(
    name="create",
    summary="Create manifest.json for the files in a bundle directory",
    usage=(
        "manifest create --id <bundle-id> [--file <rel-path>]... [--scan] [--created <RFC3339>]"
        " [--overwrite] [--format text|json] <bundle-path>",
    ),
    description=(
        "Without --file, every regular file under <bundle-path> is listed (--scan, the default):\n"
        "dotfiles included, manifest.json and distributor's reserved names skipped, paths sorted\n"
        "by byte order; a symlink or special file fails. --file lists files explicitly, in the\n"
        "given order (order is part of the digest). --created defaults to now (UTC, whole\n"
        "seconds). An existing manifest.json is kept unless --overwrite is given."
    ),
    flags=(
        Flag("--id", "stable logical bundle id (required)", metavar="<bundle-id>"),
        Flag("--file", "bundle-relative file to list, in order", metavar="<rel-path>", repeat=True),
        Flag("--scan", "list every regular file under <bundle-path> (default)"),
        Flag("--created", "creation time, RFC 3339 (default: now)", metavar="<RFC3339>"),
        Flag("--overwrite", "replace an existing manifest.json"),
    ),
    positional=Positional("<bundle-path>", required=True),
    run=run_create,
)

COMMAND = Command(
    name="manifest",
    summary="Create source bundle manifests",
    usage=("manifest create --id <bundle-id> [options] <bundle-path>",),
    formats=False,
    subcommands=(CREATE,),
)

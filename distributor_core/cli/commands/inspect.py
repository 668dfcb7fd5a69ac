"""``distributor inspect`` (interfaces §2.9, issue 15 item 5): report manifests and their files, or
the parsed ``.distributor.json`` of a destination directory.

Every listed file is checked as ``validate`` checks it (streamed once, hashed), and its actual
size and sha256 are reported next to the recorded ones. A bundle whose files do not match is
invalid: one stderr line, ``ok: false`` in JSON, exit 1, with the full report still on stdout.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from distributor_core.bundle import MANIFEST_NAME, STATE_FILE_NAME, ManifestFile, manifest_to_obj
from distributor_core.cli.commands import _bundles
from distributor_core.cli.errors import CommandError
from distributor_core.cli.spec import Command, Invocation, Positional
from distributor_core.source import FileCheck, check_source_files, load_source_manifest
from distributor_core.storage.base import Storage
from distributor_core.storage.errors import StorageError

#: A state file larger than this is refused (state is metadata; 256 MiB is far beyond real use).
MAX_STATE_SIZE = 256 * 1024 * 1024


def run(inv: Invocation) -> int:
    _bundles.check_selection(inv)
    outcome = _bundles.Outcome()
    with _bundles.open_selection(inv, state_fallback=True) as selection:
        if not selection.bundles:
            return _inspect_state(inv, selection.storage, selection.root)
        for bundle in selection.bundles:
            path = selection.show(bundle)
            try:
                manifest = load_source_manifest(selection.storage, bundle)
                with inv.out.progress(f"inspecting {path}", manifest.total_size) as progress:
                    checks = check_source_files(selection.storage, bundle, manifest, progress=progress)
            except _bundles.BUNDLE_ERRORS as exc:
                _bundles.report_invalid(inv, outcome, path, exc)
                continue
            error = next((check.error for check in checks if check.error is not None), None)
            result = _bundles.summary(path, manifest)
            result["total_size"] = manifest.total_size
            result["valid"] = error is None
            if error is not None:
                result["error"] = error
            result["manifest"] = manifest_to_obj(manifest)
            result["files"] = [_file_entry(record, check) for record, check in zip(manifest.files, checks, strict=True)]
            outcome.results.append(result)
            if not inv.out.json:
                inv.out.record(
                    "Bundle",
                    path=path,
                    id=manifest.id,
                    digest=manifest.digest,
                    created=result["created"],
                    files=result["file_count"],
                    size=manifest.total_size,
                    valid=error is None,
                )
                for item in result["files"]:
                    inv.out.record("File", **item)
            if error is not None:
                _bundles.report_invalid(inv, outcome, path, error)
    return _bundles.finish(inv, outcome)


def _file_entry(record: ManifestFile, check: FileCheck) -> dict[str, Any]:
    """Recorded size and sha256, then what the file actually is (omitted when it could not be
    read), ``ok``, and the validation error when it is not."""
    entry: dict[str, Any] = {"path": record.path, "size": record.size, "sha256": record.sha256}
    if check.size is not None:
        entry["actual_size"] = check.size
        entry["actual_sha256"] = check.sha256
    entry["ok"] = check.ok
    if check.error is not None:
        entry["error"] = check.error
    return entry


def _inspect_state(inv: Invocation, storage: Storage, root: Path | None) -> int:
    shown = inv.positional or "."
    if root is None or not os.path.lexists(root / STATE_FILE_NAME):
        raise CommandError(
            f"no source bundles ({MANIFEST_NAME}) or distributor state ({STATE_FILE_NAME}) found under {shown}"
        )
    from distributor_core.state import StateError, parse_state_document, state_to_obj

    label = f"{shown.rstrip('/') or '/'}/{STATE_FILE_NAME}"
    try:
        data = storage.read_bytes(STATE_FILE_NAME, max_size=MAX_STATE_SIZE)
        document = state_to_obj(parse_state_document(data))
    except (StateError, StorageError) as exc:
        raise CommandError(f"invalid state {label}: {exc}") from None
    result = {
        "path": shown,
        "state_schema": document["schema_version"],
        "state_mode": document["state"]["mode"],
        "state": document,
    }
    if inv.out.json:
        inv.out.emit_envelope(result)
    else:
        _state_text(inv, shown, document)
    return 0


def _state_text(inv: Invocation, shown: str, document: dict[str, Any]) -> None:
    shared = document["state"]["mode"] == "shared_root"
    owners = document["owners"] if shared else [document]
    outputs = document["outputs"]
    inv.out.record(
        "State",
        path=shown,
        schema=document["schema_version"],
        mode=document["state"]["mode"],
        owners=len(owners),
        outputs=len(outputs),
        updated_at=document["updated_at"],
    )
    for owner in owners:
        manifest = owner["source"]["manifest"]
        inv.out.record(
            "Owner",
            pipeline=owner["pipeline_id"],
            destination=owner["destination_id"],
            reconciliation=owner["reconciliation"]["mode"],
            source_id=manifest["id"],
            source_digest=manifest["digest"],
            source_created=manifest["created"],
        )
    for output in outputs:
        fields: dict[str, Any] = {"path": output["path"], "kind": output["kind"]}
        if shared:
            fields["owner"] = f"{output['pipeline_id']}/{output['destination_id']}"
        fields.update(size=output["size"], sha256=output["sha256"], updated_at=output["updated_at"])
        inv.out.record("Output", **fields)


COMMAND = Command(
    name="inspect",
    summary="Inspect bundles or distributor state",
    usage=(
        "inspect [--format text|json] <path>",
        "inspect --config <path> --pipeline <id> [--bundle <path>] [--format text|json]",
    ),
    description=(
        "Reports each manifest with its files: the recorded size and sha256, and the actual ones\n"
        "(every file is streamed and hashed, as validate does). A bundle whose files do not match\n"
        "is still reported, with valid=false, and makes the exit status 1. When <path> holds no\n"
        f"bundle but a {STATE_FILE_NAME}, the parsed destination state is reported instead.\n\n"
        + _bundles.SELECTION_HELP
    ),
    flags=_bundles.SELECTION_FLAGS,
    positional=Positional("<path>"),
    run=run,
)

"""``distributor validate`` (interfaces §2.9, resolutions C2): check manifests and every listed
file's size and sha256, streaming each file once."""

from __future__ import annotations

from distributor_core.cli.commands import _bundles
from distributor_core.cli.spec import Command, Invocation, Positional
from distributor_core.source import load_source_manifest, validate_source_bundle


def run(inv: Invocation) -> int:
    _bundles.check_selection(inv)
    outcome = _bundles.Outcome()
    with _bundles.open_selection(inv) as selection:
        for bundle in selection.bundles:
            path = selection.show(bundle)
            try:
                manifest = load_source_manifest(selection.storage, bundle)
                with inv.out.progress(f"validating {path}", manifest.total_size) as progress:
                    validate_source_bundle(selection.storage, bundle, manifest, progress=progress)
            except _bundles.BUNDLE_ERRORS as exc:
                _bundles.report_invalid(inv, outcome, path, exc)
                continue
            result = _bundles.summary(path, manifest)
            outcome.results.append(result)
            if not inv.out.json:
                inv.out.record("Valid", path=path, id=manifest.id, files=result["file_count"])
    return _bundles.finish(inv, outcome)


COMMAND = Command(
    name="validate",
    summary="Validate a source bundle or bundle tree",
    usage=(
        "validate [--format text|json] <path>",
        "validate --config <path> --pipeline <id> [--bundle <path>] [--format text|json]",
    ),
    description=(
        "Checks each manifest (schema, fields, paths, digests) and every listed file: it must be\n"
        "a regular file (no symlinks), with the recorded size and sha256. Unlisted files are\n"
        "ignored. On a terminal, progress is shown on stderr.\n\n" + _bundles.SELECTION_HELP
    ),
    flags=_bundles.SELECTION_FLAGS,
    positional=Positional("<path>"),
    run=run,
)

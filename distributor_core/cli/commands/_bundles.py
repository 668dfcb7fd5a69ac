"""Bundle selection shared by ``validate`` and ``inspect`` (interfaces §2.9, resolutions C2).

Either a local ``<path>`` (one bundle when ``<path>/manifest.json`` exists, otherwise every bundle
found below it) or ``--config <file> --pipeline <id> [--bundle <path>]`` (the configured source of
that pipeline). Each bundle's outcome is reported on its own: valid bundles on stdout, one
stderr line per invalid bundle, and an ``ok: false`` envelope in JSON when any is invalid.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from distributor_core import paths as lp
from distributor_core.bundle import MANIFEST_NAME, BundleError, Manifest
from distributor_core.cli.errors import CommandError, UsageError
from distributor_core.cli.spec import Flag, Invocation
from distributor_core.jsonfmt import go_json_string
from distributor_core.source import discover_bundles
from distributor_core.storage.base import Storage
from distributor_core.storage.errors import StorageError
from distributor_core.storage.local import LocalStorage
from distributor_core.timefmt import format_precise

SELECTION_FLAGS = (
    Flag("--config", "configuration file; selects the source of --pipeline", metavar="<path>"),
    Flag("--pipeline", "pipeline whose source holds the bundles (with --config)", metavar="<id>"),
    Flag("--bundle", "one source-root-relative bundle path (with --config; default: all)", metavar="<path>"),
)

SELECTION_HELP = """\
With <path>: if <path>/manifest.json exists, that one bundle; otherwise every directory
below <path> that holds a manifest.json (a bundle's own subtree is not searched further).
With --config and --pipeline: the same, in the pipeline's configured source (local, ssh or
s3); --bundle picks one bundle by its source-root-relative path ("." for the source root).

Each valid bundle is printed on stdout; each invalid bundle gets one stderr line
"distributor: invalid bundle <path>: <reason>". Any invalid bundle, or none found, exits 1.
With --format json the envelope is "ok": false when a bundle is invalid, and result.invalid
lists {path, error} for each."""


@dataclass
class Selection:
    """Where the bundles are and how to show their paths."""

    storage: Storage
    bundles: list[str]
    show: Callable[[str], str]
    root: Path | None = None


@dataclass
class Outcome:
    """Per-bundle results collected while a command runs."""

    results: list[dict[str, Any]] = field(default_factory=list)
    invalid: list[dict[str, str]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.invalid

    def error(self) -> str:
        count = len(self.invalid)
        noun = "bundle" if count == 1 else "bundles"
        details = "; ".join(f"{item['path']}: {item['error']}" for item in self.invalid)
        return f"{count} invalid {noun}: {details}"


def check_selection(inv: Invocation) -> None:
    """Usage rules: ``<path>`` xor ``--config`` with ``--pipeline``."""
    args = inv.args
    if inv.positional is not None:
        if args.config or args.pipeline or args.bundle:
            raise UsageError(f"{inv.command} accepts either <path> or --config with --pipeline")
        return
    if not args.config:
        raise UsageError(f"{inv.command} requires <path> or --config with --pipeline")
    if not args.pipeline:
        raise UsageError(f"{inv.command} requires --pipeline")
    if args.bundle:
        bundle = _bundle_flag(args.bundle)
        problem = lp.check_path(bundle) if bundle else None
        if problem:
            raise UsageError(f"{inv.command}: invalid --bundle {go_json_string(args.bundle)}: {problem}")


def _bundle_flag(value: str | None) -> str:
    if value in (None, "", "."):
        return ""
    return value.rstrip("/") if value != "/" else value


def _local_root(arg: str) -> Path:
    path = Path(arg)
    try:
        if path.name == MANIFEST_NAME and path.is_file():
            return path.parent
        if not path.exists():
            raise CommandError(f"path {arg} does not exist")
        if not path.is_dir():
            raise CommandError(f"path {arg} is not a directory")
    except OSError as exc:
        raise CommandError(f"path {arg}: {exc.strerror or exc}") from None
    return path


def local_label(arg: str, root: Path) -> Callable[[str], str]:
    base = os.fspath(root) if Path(arg).name == MANIFEST_NAME else arg

    def show(bundle: str) -> str:
        if bundle == "":
            return base
        return posixpath.join(base, bundle)

    return show


@contextmanager
def open_selection(inv: Invocation, *, state_fallback: bool = False) -> Iterator[Selection]:
    """Open the storage and list the selected bundles (raises ``CommandError`` when none).

    With ``state_fallback`` a local ``<path>`` that holds no bundle is returned with an empty
    bundle list instead of failing, so ``inspect`` can look for ``.distributor.json``.
    """
    if inv.positional is not None:
        root = _local_root(inv.positional)
        with LocalStorage(root, display=inv.positional) as storage:
            show = local_label(inv.positional, root)
            has_manifest = os.path.lexists(root / MANIFEST_NAME)
            bundles = [""] if has_manifest else discover_bundles(storage)
            if not bundles and not state_fallback:
                raise CommandError(f"no source bundles found under {inv.positional}")
            yield Selection(storage, bundles, show, root)
        return
    with _config_storage(inv) as storage:
        bundle = _bundle_flag(inv.args.bundle)
        bundles = [bundle] if inv.args.bundle else discover_bundles(storage)
        if not bundles:
            raise CommandError(
                f"no source bundles found in pipeline {inv.args.pipeline} source {storage.root_display}"
            )
        yield Selection(storage, bundles, lp.display_path)


@contextmanager
def _config_storage(inv: Invocation) -> Iterator[Storage]:
    from distributor_core.app.setup import SetupError, check_source_root, resolve_credentials
    from distributor_core.config import Environment, load_config
    from distributor_core.storage.factory import open_source_storage

    config = load_config(inv.args.config)
    pipeline = config.pipeline(inv.args.pipeline)
    if pipeline.is_upload:
        raise CommandError(
            f"pipeline {pipeline.id} has an http_upload source; "
            f"{inv.command} --config works with local, ssh and s3 sources"
        )
    env = Environment.from_config(config)
    try:
        resolve_credentials([(pipeline, ())], env)
    except SetupError as exc:
        raise CommandError(str(exc)) from None
    # validate and inspect never write: open as a dry run (an SSH dry run never writes known_hosts)
    storage = open_source_storage(pipeline.source, env, dry_run=True)
    with storage:
        try:
            check_source_root(pipeline, storage)
        except SetupError as exc:
            raise CommandError(str(exc)) from None
        yield storage


def summary(path: str, manifest: Manifest) -> dict[str, Any]:
    """The per-bundle result of ``validate`` (and the head of ``inspect``'s)."""
    return {
        "path": path,
        "id": manifest.id,
        "digest": manifest.digest,
        "created": format_precise(manifest.created),
        "file_count": len(manifest.files),
    }


BUNDLE_ERRORS = (BundleError, StorageError)


def report_invalid(inv: Invocation, outcome: Outcome, path: str, problem: Exception | str) -> None:
    message = str(problem)
    outcome.invalid.append({"path": path, "error": message})
    inv.out.diagnostic(f"invalid bundle {path}: {message}")


def finish(inv: Invocation, outcome: Outcome) -> int:
    """Write the JSON envelope (text lines were written as bundles were checked)."""
    if inv.out.json:
        result = {"bundles": outcome.results, "invalid": outcome.invalid}
        inv.out.emit_envelope(result, ok=outcome.ok, error=None if outcome.ok else outcome.error())
    return 0 if outcome.ok else 1

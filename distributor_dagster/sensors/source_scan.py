"""Comparing a source with the bundles a ``watch_<pipeline>`` sensor already requested (resolutions E3).

One tick walks the source once. A bundle's run key is ``<bundle path>@<digest>@<manifest mtime
or ETag>``; the cursor remembers the key last requested per bundle, so a manifest is only read
again when its mtime or ETag changed. A bundle whose listed files are missing or have the wrong
size (stat only, from the walk; nothing is hashed) is skipped until it is complete: the publish
run's ``validate`` step does the hashing.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from distributor_core import paths as lp
from distributor_core.bundle import MAX_MANIFEST_SIZE, BundleError, parse_manifest
from distributor_core.source import DISCOVERY_LIMIT, discover_bundles, manifest_path
from distributor_core.storage.base import Entry, Storage
from distributor_core.storage.errors import StorageError
from distributor_core.timefmt import format_precise

CURSOR_VERSION = 1
INVALID = "invalid"


class _Listing:
    """One finished walk, handed to ``discover_bundles`` so a tick lists the source only once."""

    def __init__(self, entries: Sequence[Entry]) -> None:
        self._entries = list(entries)

    def walk(self, prefix: str = "", **_: object) -> list[Entry]:
        return self._entries


def manifest_stamp(entry: Entry, backend: str) -> str:
    """ETag on S3, the modification time elsewhere (revision when a backend has no mtime)."""
    if backend == "s3" or entry.mtime is None:
        return entry.revision or ""
    return format_precise(entry.mtime)


def run_key(bundle_path: str, digest: str, stamp: str) -> str:
    return f"{bundle_path}@{digest}@{stamp}"


@dataclass
class Found:
    """A complete bundle whose key differs from the one last requested."""

    bundle_path: str
    bundle_id: str
    key: str


@dataclass
class Scan:
    found: list[Found] = field(default_factory=list)
    #: bundle path -> the key to remember (found ones are added when their run is requested)
    known: dict[str, str] = field(default_factory=dict)
    incomplete: list[str] = field(default_factory=list)
    invalid: list[str] = field(default_factory=list)


def scan_source(source: Storage, backend: str, known: dict[str, str], *, limit: int = DISCOVERY_LIMIT) -> Scan:
    """Compare the source with the remembered keys. Reads a manifest only when its stamp changed."""
    entries = source.walk("", limit=limit, include_dirs=False)
    by_path = {entry.path: entry for entry in entries}
    scan = Scan()
    for bundle_path in discover_bundles(_Listing(entries)):  # type: ignore[arg-type]
        entry = by_path.get(manifest_path(bundle_path))
        if entry is None:
            continue
        stamp = manifest_stamp(entry, backend)
        previous = known.get(bundle_path)
        if previous is not None and previous.endswith("@" + stamp):
            scan.known[bundle_path] = previous
            continue
        try:
            manifest = parse_manifest(source.read_bytes(manifest_path(bundle_path), max_size=MAX_MANIFEST_SIZE))
        except (BundleError, StorageError) as exc:
            # remembered with its stamp: reported once, read again only when the manifest changes
            scan.invalid.append(f"{lp.display_path(bundle_path)}: {exc}")
            scan.known[bundle_path] = run_key(bundle_path, INVALID, stamp)
            continue
        if not _complete(by_path, bundle_path, manifest.files):
            scan.incomplete.append(bundle_path)
            if previous is not None:
                scan.known[bundle_path] = previous
            continue
        key = run_key(bundle_path, manifest.digest, stamp)
        if key == previous:
            scan.known[bundle_path] = previous
            continue
        if previous is not None:
            scan.known[bundle_path] = previous
        scan.found.append(Found(bundle_path, manifest.id, key))
    return scan


def _complete(by_path: dict[str, Entry], bundle_path: str, files: Sequence[object]) -> bool:
    for record in files:
        entry = by_path.get(lp.join_prefix(bundle_path, record.path))  # type: ignore[attr-defined]
        if entry is None or entry.size != record.size:  # type: ignore[attr-defined]
            return False
    return True


def parse_cursor(cursor: str | None) -> dict[str, str]:
    if not cursor:
        return {}
    try:
        data = json.loads(cursor)
    except ValueError:
        return {}
    if not isinstance(data, dict) or data.get("v") != CURSOR_VERSION or not isinstance(data.get("bundles"), dict):
        return {}
    return {str(k): str(v) for k, v in data["bundles"].items()}


def format_cursor(known: dict[str, str]) -> str:
    return json.dumps({"v": CURSOR_VERSION, "bundles": dict(sorted(known.items()))}, separators=(",", ":"))



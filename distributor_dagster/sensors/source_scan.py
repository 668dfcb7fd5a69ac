"""Comparing a source with the bundles a ``watch_<pipeline>`` sensor already requested (resolutions E3).

One tick walks the source once. A bundle's run key is ``<bundle path>@<digest>@<manifest mtime
or ETag>``; the cursor remembers the key last requested per bundle and its manifest ``created``
time, so a manifest is only read again when its mtime or ETag changed, and the newest bundle of
the whole source (the source asset's data version) is known without reading every manifest. A
bundle whose listed files are missing or have the wrong size (stat only, from the walk; nothing
is hashed) is skipped until it is complete: the publish run's ``validate`` step does the hashing.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from distributor_core import paths as lp
from distributor_core.bundle import MAX_MANIFEST_SIZE, BundleError, parse_manifest
from distributor_core.source import DISCOVERY_LIMIT, bundles_in_listing, manifest_path
from distributor_core.storage.base import Entry, Storage
from distributor_core.storage.errors import StorageError
from distributor_core.timefmt import format_precise

CURSOR_VERSION = 2
INVALID = "invalid"


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
    created: str = ""

    @property
    def digest(self) -> str:
        return key_digest(self.key)


def key_digest(key: str) -> str:
    """The manifest digest inside a run key ``<path>@<digest>@<stamp>`` (paths may contain ``@``)."""
    parts = key.rsplit("@", 2)
    return parts[1] if len(parts) == 3 else ""


@dataclass
class Scan:
    found: list[Found] = field(default_factory=list)
    #: bundle path -> the key to remember (found ones are added when their run is requested)
    known: dict[str, str] = field(default_factory=dict)
    #: bundle path -> manifest ``created`` (``format_precise``) of every complete bundle seen
    created: dict[str, str] = field(default_factory=dict)
    #: bundle path -> manifest id of every complete bundle seen
    ids: dict[str, str] = field(default_factory=dict)
    incomplete: list[str] = field(default_factory=list)
    invalid: list[str] = field(default_factory=list)

    def complete_bundles(self) -> dict[str, tuple[str, str, str]]:
        """bundle path -> (digest, created, id) of every complete, readable bundle in the source."""
        keys = {**self.known, **{found.bundle_path: found.key for found in self.found}}
        return {
            path: (key_digest(key), self.created[path], self.ids.get(path, ""))
            for path, key in keys.items()
            if path in self.created and key_digest(key) not in ("", INVALID) and path not in self.incomplete
        }


def scan_source(
    source: Storage, backend: str, known: dict[str, str], *, created: dict[str, str] | None = None,
    ids: dict[str, str] | None = None, limit: int = DISCOVERY_LIMIT,
) -> Scan:
    """Compare the source with the remembered keys. Reads a manifest only when its stamp changed
    (``created`` and ``ids`` hold what earlier ticks read; a bundle without a time is read again)."""
    remembered = created or {}
    remembered_ids = ids or {}
    entries = source.walk("", limit=limit, include_dirs=False)
    by_path = {entry.path: entry for entry in entries}
    scan = Scan()
    for bundle_path in bundles_in_listing(entries):  # one walk per tick: it also checks completeness
        entry = by_path.get(manifest_path(bundle_path))
        if entry is None:
            continue
        stamp = manifest_stamp(entry, backend)
        previous = known.get(bundle_path)
        if previous is not None and previous.endswith("@" + stamp) and (
            bundle_path in remembered or key_digest(previous) == INVALID
        ):
            scan.known[bundle_path] = previous
            if bundle_path in remembered:
                scan.created[bundle_path] = remembered[bundle_path]
                scan.ids[bundle_path] = remembered_ids.get(bundle_path, "")
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
        scan.created[bundle_path] = format_precise(manifest.created)
        scan.ids[bundle_path] = manifest.id
        if key == previous:
            scan.known[bundle_path] = previous
            continue
        if previous is not None:
            scan.known[bundle_path] = previous
        scan.found.append(Found(bundle_path, manifest.id, key, scan.created[bundle_path]))
    return scan


def _complete(by_path: dict[str, Entry], bundle_path: str, files: Sequence[object]) -> bool:
    for record in files:
        entry = by_path.get(lp.join_prefix(bundle_path, record.path))  # type: ignore[attr-defined]
        if entry is None or entry.size != record.size:  # type: ignore[attr-defined]
            return False
    return True


@dataclass
class Cursor:
    """What a tick remembers: the run key per bundle, each bundle's manifest ``created`` and the
    source version last observed (``<digest> <count>``)."""

    known: dict[str, str] = field(default_factory=dict)
    created: dict[str, str] = field(default_factory=dict)
    ids: dict[str, str] = field(default_factory=dict)
    observed: str = ""


def parse_cursor(cursor: str | None) -> Cursor:
    """The cursor of a previous tick. An unreadable one, or one of version 1 (before ``created``
    was remembered), starts over: manifests are read again, and already requested run keys are
    skipped by Dagster."""
    if not cursor:
        return Cursor()
    try:
        data = json.loads(cursor)
    except ValueError:
        return Cursor()
    if not isinstance(data, dict) or data.get("v") != CURSOR_VERSION or not isinstance(data.get("bundles"), dict):
        return Cursor()
    def strings(name: str) -> dict[str, str]:
        value = data.get(name)
        return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}

    return Cursor(strings("bundles"), strings("created"), strings("ids"), str(data.get("observed", "")))


def format_cursor(scan: Scan | None = None, observed: str = "", *, known: dict[str, str] | None = None) -> str:
    """The cursor after ``scan`` (``known`` alone for a cursor without manifest times)."""
    known = dict(scan.known if scan is not None else known or {})
    kept = {"created": scan.created if scan is not None else {}, "ids": scan.ids if scan is not None else {}}
    document: dict[str, object] = {"v": CURSOR_VERSION, "bundles": dict(sorted(known.items()))}
    for name, values in kept.items():
        document[name] = dict(sorted((path, value) for path, value in values.items() if path in known))
    document["observed"] = observed
    return json.dumps(document, separators=(",", ":"))



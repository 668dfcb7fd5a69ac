"""Observations of a pipeline's source asset (issue 12 item 1, issue 24).

A partitioned source asset (one partition per bundle) is observed bundle by bundle: each
partition's observation carries that bundle's digest as data version, the manifest stamp it was
read at (mtime or ETag) and the bundle's identity. An unpartitioned source (only
``fixed`` destinations, or an upload staging area) and the "newest bundle" view of a mixed
pipeline are observed as a whole: the data version is the newest bundle's digest, with the bundle
count and the newest bundle's path, id, digest and ``created`` time. The watch and uploads
sensors, the publish runs' ``discover`` step and the source asset's own observe function (the
"Observe" button) all describe a source through :class:`Seen` and :class:`SourceSnapshot`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import dagster as dg

from distributor_core import paths as lp
from distributor_core.bundle import MAX_MANIFEST_SIZE, BundleError, Manifest, parse_manifest
from distributor_core.source import discover_bundles, manifest_path
from distributor_core.storage.base import Storage
from distributor_core.storage.errors import StorageError
from distributor_core.timefmt import format_precise, parse_rfc3339
from distributor_dagster.partitions import bundle_key
from distributor_dagster.versions import NO_BUNDLES, data_version_tags


@dataclass(frozen=True)
class Seen:
    """One bundle as an observation sees it (its manifest identity, no file contents)."""

    path: str
    bundle_id: str
    digest: str
    created: datetime
    #: the manifest's mtime or ETag when it was read ("" when unknown)
    stamp: str = ""

    def metadata(self) -> dict[str, Any]:
        metadata: dict[str, Any] = {
            "bundle_path": lp.display_path(self.path),
            "bundle_id": self.bundle_id,
            "digest": self.digest,
            "created": dg.MetadataValue.timestamp(self.created),
        }
        if self.stamp:
            metadata["manifest_stamp"] = self.stamp
        return metadata

    def observation(self, key: dg.AssetKey) -> dg.AssetObservation:
        """This bundle's partition of a partitioned source asset, with its digest as data version."""
        return dg.AssetObservation(
            asset_key=key, partition=bundle_key(self.path), tags=data_version_tags(self.digest),
            metadata=self.metadata(),
            description=f"bundle {lp.display_path(self.path)} id {self.bundle_id} "
            f"created {format_precise(self.created)}",
        )


def newest(bundles: Iterable[Seen]) -> Seen | None:
    """The newest bundle: latest ``created``, ties broken by ascending path (as ``fixed`` destinations pick)."""
    best: Seen | None = None
    for seen in bundles:
        if best is None or seen.created > best.created or (seen.created == best.created and seen.path < best.path):
            best = seen
    return best


@dataclass(frozen=True)
class SourceSnapshot:
    """What one observation says about a source."""

    #: bundles in the source; for an upload staging area, uploads admitted so far (highest ``seq``),
    #: ``None`` for a shared staging store, which keeps no count
    bundle_count: int | None
    newest: Seen | None
    #: what the bundles are called in metadata ("bundle" or "upload")
    noun: str = "bundle"

    @classmethod
    def of(cls, bundles: Sequence[Seen], noun: str = "bundle") -> SourceSnapshot:
        return cls(len(bundles), newest(bundles), noun)

    @property
    def data_version(self) -> str:
        return self.newest.digest if self.newest is not None else NO_BUNDLES

    def metadata(self) -> dict[str, Any]:
        count = "uploads_admitted" if self.noun == "upload" else "bundle_count"
        metadata: dict[str, Any] = {}
        if self.bundle_count is not None:
            metadata[count] = dg.MetadataValue.int(self.bundle_count)
        if self.newest is not None:
            # an upload is named by its run id, a bundle by its source-relative path
            metadata[f"newest_{self.noun}"] = self._where()
            metadata["newest_id"] = self.newest.bundle_id
            metadata["newest_digest"] = self.newest.digest
            metadata["newest_created"] = dg.MetadataValue.timestamp(self.newest.created)
        return metadata

    def _where(self) -> str:
        assert self.newest is not None
        return self.newest.path if self.noun == "upload" else lp.display_path(self.newest.path)

    def description(self) -> str:
        if self.newest is None:
            return f"no {self.noun}s"
        count = f"{self.bundle_count} upload(s) admitted" if self.noun == "upload" else f"{self.bundle_count} bundle(s)"
        if self.bundle_count is None:
            return f"newest {self._where()} (id {self.newest.bundle_id}, created {format_precise(self.newest.created)})"
        return (
            f"{count}; newest {self._where()} (id {self.newest.bundle_id}, "
            f"created {format_precise(self.newest.created)})"
        )

    def observation(self, key: dg.AssetKey) -> dg.AssetObservation:
        return dg.AssetObservation(
            asset_key=key, description=self.description(), metadata=self.metadata(),
            tags=data_version_tags(self.data_version),
        )

    def observe_result(self, key: dg.AssetKey) -> dg.ObserveResult:
        return dg.ObserveResult(asset_key=key, data_version=dg.DataVersion(self.data_version), metadata=self.metadata())


def seen_manifest(path: str, manifest: Manifest, stamp: str = "") -> Seen:
    return Seen(path, manifest.id, manifest.digest, manifest.created, stamp)


def seen_upload(run_id: str, manifest: dict[str, Any]) -> Seen | None:
    """An upload record's manifest identity; ``None`` when it lacks a digest or a valid ``created``."""
    try:
        created = parse_rfc3339(str(manifest.get("created", "")))
    except (ValueError, TypeError):
        return None
    digest = manifest.get("digest")
    if not isinstance(digest, str) or not digest:
        return None
    return Seen(run_id, str(manifest.get("id", "")), digest, created)


def read_bundles(source: Storage, paths: Iterable[str] | None = None) -> tuple[list[Seen], list[str]]:
    """The manifests of ``paths`` (every discovered bundle when ``None``), parsed but not
    validated against the files. Returns what was seen and one problem line per unreadable manifest."""
    seen: list[Seen] = []
    problems: list[str] = []
    for path in discover_bundles(source) if paths is None else paths:
        try:
            manifest = parse_manifest(source.read_bytes(manifest_path(path), max_size=MAX_MANIFEST_SIZE))
        except (BundleError, StorageError) as exc:
            problems.append(f"{lp.display_path(path)}: {exc}")
            continue
        seen.append(seen_manifest(path, manifest))
    return seen, problems

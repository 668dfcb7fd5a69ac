"""Comparing a source with what a ``watch_<pipeline>`` sensor already handled (resolutions E3,
issue 24, issue 28).

One tick walks the source once. Every bundle gets a **signature** from the walk alone: its
manifest's stamp (mtime, or ETag on S3) and the path and size of every file under it. Bundles
fall into :data:`BUCKETS` buckets by a hash of their path, and the cursor keeps one short hash per
non-empty bucket, so it stays small however many bundles the source holds (about 16 KB for
10,000 bundles). A bucket whose hash changed is **dirty**: only its bundles' manifests are read.

What was published is not in the cursor but in Dagster itself: a partitioned source asset's
partitions are the bundles seen so far, and each partition's latest observation carries the digest
seen (its data version). A bundle of a dirty bucket is **found** (new or changed) when it is
complete (every listed file present with its size; nothing is hashed: the run's ``validate`` step
does that) and its digest differs from the one last observed. Bundles whose manifest cannot be
read are reported. Unpartitioned pipelines (only ``fixed`` destinations) keep just the newest
bundle in the cursor.

Reading is bounded by a time budget and by the number of bundles one tick hands over; a bucket's
hash is only committed once all of its bundles were looked at, so a backlog drains over several
ticks, each one reading new manifests only.
"""

from __future__ import annotations

import hashlib
import json
import time
import zlib
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from distributor_core import paths as lp
from distributor_core.bundle import MAX_MANIFEST_SIZE, BundleError, Manifest, parse_manifest
from distributor_core.source import DISCOVERY_LIMIT, bundles_in_listing, manifest_path
from distributor_core.storage.base import Entry, Storage
from distributor_core.storage.errors import StorageError
from distributor_core.timefmt import format_precise, parse_rfc3339
from distributor_dagster.sources import Seen, seen_manifest

CURSOR_VERSION = 4
#: Buckets of bundle paths; the cursor holds one hash per non-empty bucket.
BUCKETS = 1024
#: Seconds a tick may spend reading manifests before it continues on the next tick.
READ_BUDGET = 2.0
#: New or changed bundles one tick hands over at most (each is an observation the daemon stores
#: and a partition it adds): a backlog drains over several ticks instead of one huge one.
FOUND_PER_TICK = 1000


def manifest_stamp(entry: Entry, backend: str) -> str:
    """ETag on S3, the modification time elsewhere (revision when a backend has no mtime)."""
    if backend == "s3" or entry.mtime is None:
        return entry.revision or ""
    return format_precise(entry.mtime)


def run_key(bundle_path: str, digest: str, stamp: str) -> str:
    return f"{bundle_path}@{digest}@{stamp}"


def bucket_of(bundle_path: str) -> int:
    return zlib.crc32(bundle_path.encode()) % BUCKETS


@dataclass
class Listed:
    """One bundle as the walk shows it: its manifest entry and the files under it."""

    path: str
    stamp: str
    files: dict[str, int] = field(default_factory=dict)

    def signature(self) -> str:
        files = ";".join(f"{name}:{size}" for name, size in sorted(self.files.items()))
        return f"{self.path}\0{self.stamp}\0{files}"


def listed_bundles(entries: Sequence[Entry], backend: str) -> dict[str, Listed]:
    """The bundles of a finished walk, with their manifest stamps and their files' sizes."""
    by_path = {entry.path: entry for entry in entries}
    bundles = {
        path: Listed(path, manifest_stamp(by_path[manifest_path(path)], backend))
        for path in bundles_in_listing(entries)
        if manifest_path(path) in by_path
    }
    for entry in entries:
        if entry.is_dir:
            continue
        directory = lp.parent(entry.path)
        while True:
            bundle = bundles.get(directory)
            if bundle is not None:
                bundle.files[lp.relative_to(entry.path, directory) if directory else entry.path] = entry.size
                break
            if directory == "":
                break
            directory = lp.parent(directory)
    return bundles


def bucket_hashes(bundles: Iterable[Listed]) -> dict[int, str]:
    members: dict[int, list[str]] = defaultdict(list)
    for bundle in bundles:
        members[bucket_of(bundle.path)].append(bundle.signature())
    return {
        index: hashlib.blake2b("\n".join(sorted(sigs)).encode(), digest_size=6).hexdigest()
        for index, sigs in members.items()
    }


@dataclass(frozen=True)
class Newest:
    """The newest complete bundle (latest ``created``, ties by ascending path, as ``fixed`` picks)."""

    path: str
    digest: str
    created: str
    bundle_id: str

    def seen(self) -> Seen:
        return Seen(self.path, self.bundle_id, self.digest, parse_rfc3339(self.created))

    def beats(self, other: Newest | None) -> bool:
        if other is None:
            return True
        mine, theirs = parse_rfc3339(self.created), parse_rfc3339(other.created)
        return mine > theirs or (mine == theirs and self.path < other.path)


@dataclass
class Cursor:
    """What a tick remembers: a hash per non-empty bucket, the newest complete bundle and the
    source version last observed as a whole (``<digest> <count>``)."""

    buckets: dict[int, str] = field(default_factory=dict)
    newest: Newest | None = None
    observed: str = ""

    @classmethod
    def parse(cls, text: str | None) -> Cursor:
        """A previous tick's cursor; anything unreadable (or of an older version) starts over:
        every bucket is dirty, manifests are read again and already observed digests skipped."""
        if not text:
            return cls()
        try:
            data = json.loads(text)
            if not isinstance(data, dict) or data.get("v") != CURSOR_VERSION:
                return cls()
            buckets = {int(k): str(v) for k, v in dict(data.get("b", {})).items()}
            newest = data.get("newest")
            return cls(buckets, Newest(*map(str, newest)) if isinstance(newest, list) and len(newest) == 4 else None,
                       str(data.get("observed", "")))
        except (ValueError, TypeError, AttributeError):
            return cls()

    def format(self) -> str:
        document: dict[str, object] = {"v": CURSOR_VERSION, "b": {str(k): v for k, v in sorted(self.buckets.items())}}
        if self.newest is not None:
            n = self.newest
            document["newest"] = [n.path, n.digest, n.created, n.bundle_id]
        document["observed"] = self.observed
        return json.dumps(document, separators=(",", ":"))


@dataclass
class Found:
    """A complete bundle whose digest differs from the one last observed (or never observed)."""

    seen: Seen
    key: str

    @property
    def bundle_path(self) -> str:
        return self.seen.path


@dataclass
class Scan:
    found: list[Found] = field(default_factory=list)
    incomplete: list[str] = field(default_factory=list)
    #: (bundle path, problem) of manifests that cannot be read or parsed
    invalid: list[tuple[str, str]] = field(default_factory=list)
    cursor: Cursor = field(default_factory=Cursor)
    #: every bundle path in the source, sorted
    paths: list[str] = field(default_factory=list)
    read: int = 0
    #: the budget ran out: some dirty buckets wait for the next tick
    partial: bool = False
    #: buckets whose bundles this tick compared with the last one it committed (their new hash
    #: is committed now, or they hold no bundle any more): a bundle seen before that is not in
    #: them now left the source. ``None``: every bucket (no earlier cursor to compare with).
    settled: set[int] | None = field(default_factory=set)

    def may_have_left(self, bundle_path: str) -> bool:
        """Whether this tick is the one that notices ``bundle_path`` left the source (when it did)."""
        return self.settled is None or bucket_of(bundle_path) in self.settled

    @property
    def count(self) -> int:
        return len(self.paths)


def _complete(listed: Listed, manifest: Manifest) -> bool:
    return all(listed.files.get(record.path) == record.size for record in manifest.files)


def scan_source(
    source: Storage,
    backend: str,
    cursor: Cursor,
    *,
    observed: Callable[[list[str]], Mapping[str, str]] | None,
    limit: int = DISCOVERY_LIMIT,
    budget: float = READ_BUDGET,
    max_found: int = FOUND_PER_TICK,
    clock: Callable[[], float] = time.monotonic,
) -> Scan:
    """Walk the source once and read the manifests of its dirty buckets (within ``budget``).

    ``observed`` maps bundle paths to the digest last observed for them (a partitioned source's
    latest observation per partition; it is asked once per tick, for the bundles of every dirty
    bucket); ``None`` for an unpartitioned source, whose bundles are compared with the newest
    bundle only.
    """
    entries = source.walk("", limit=limit, include_dirs=False)
    listed = listed_bundles(entries, backend)
    hashes = bucket_hashes(listed.values())
    scan = Scan(paths=sorted(listed))
    committed = {index: value for index, value in cursor.buckets.items() if hashes.get(index) == value}
    newest = cursor.newest
    if newest is not None and bucket_of(newest.path) not in committed:
        # the newest bundle changed or went away: which one is newest now is only known after
        # every bundle was looked at again (the cursor keeps the newest of committed buckets)
        newest, committed = None, {}
    dirty = sorted(index for index in hashes if index not in committed)
    members: dict[int, list[Listed]] = defaultdict(list)
    for bundle in listed.values():
        members[bucket_of(bundle.path)].append(bundle)
    # buckets that held bundles at the last committed tick and hold none now: their bundles left
    scan.settled = {index for index in cursor.buckets if index not in hashes} if cursor.buckets else None
    deadline = clock() + budget
    known: Mapping[str, str] = {}
    if observed is not None:
        known = observed([bundle.path for index in dirty for bundle in members[index]])
    for index in dirty:
        group = sorted(members[index], key=lambda b: b.path)
        if scan.read and (clock() > deadline or len(scan.found) >= max_found):
            scan.partial = True
            break
        for bundle in group:
            scan.read += 1
            try:
                manifest = parse_manifest(source.read_bytes(manifest_path(bundle.path), max_size=MAX_MANIFEST_SIZE))
            except (BundleError, StorageError) as exc:
                scan.invalid.append((bundle.path, str(exc)))
                continue
            if not _complete(bundle, manifest):
                scan.incomplete.append(bundle.path)
                continue
            seen = seen_manifest(bundle.path, manifest, bundle.stamp)
            candidate = Newest(bundle.path, manifest.digest, format_precise(manifest.created), manifest.id)
            if candidate.beats(newest):
                newest = candidate
            if observed is not None and known.get(bundle.path) != manifest.digest:
                scan.found.append(Found(seen, run_key(bundle.path, manifest.digest, bundle.stamp)))
        committed[index] = hashes[index]
        if scan.settled is not None and cursor.buckets.get(index) != hashes[index]:
            scan.settled.add(index)
    scan.found.sort(key=lambda found: found.bundle_path)  # partitions are added, and published, in path order
    scan.invalid.sort()
    scan.incomplete.sort()
    scan.cursor = Cursor(committed, newest, cursor.observed)
    return scan



"""Source bundles inside any storage backend (core-semantics §0.1, §1, §4.4.4).

A source bundle is a directory holding ``manifest.json``; its bundle path is that directory
relative to the backend root (``""`` at the root). Discovery walks the tree once, ignores
reserved names, and does not look for bundles inside a bundle. Loading and validation go through
the storage protocol only, streaming each listed file once.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from distributor_core import paths as lp
from distributor_core.bundle import (
    MANIFEST_NAME,
    MAX_MANIFEST_SIZE,
    BundleValidationError,
    Manifest,
    ProgressCallback,
    check_content,
    parse_manifest,
    validate_manifest,
    verify,
)
from distributor_core.storage.base import Storage, iter_chunks
from distributor_core.storage.errors import ErrorKind, StorageError

#: Bound on the entries a discovery walk may visit (resolutions B2 uses the same order of size).
DISCOVERY_LIMIT = 1_000_000

__all__ = [
    "DISCOVERY_LIMIT",
    "SourceBundle",
    "discover_bundles",
    "load_source_manifest",
    "manifest_path",
    "select_newest",
    "validate_source_bundle",
]


@dataclass(frozen=True, slots=True)
class SourceBundle:
    """A discovered bundle: its source-root-relative path and its parsed manifest."""

    path: str
    manifest: Manifest


def manifest_path(bundle_path: str) -> str:
    """Storage path of a bundle's ``manifest.json``."""
    return lp.join_prefix(bundle_path, MANIFEST_NAME)


def _file_path(bundle_path: str, rel: str) -> str:
    return lp.join_prefix(bundle_path, rel)


def discover_bundles(storage: Storage, prefix: str = "", *, limit: int = DISCOVERY_LIMIT) -> list[str]:
    """Bundle paths under ``prefix`` (relative to the backend root), sorted.

    A bundle path is a directory that holds an entry named ``manifest.json`` (a symlinked or
    special one is found too, so that loading reports it); directories below a
    bundle are part of it and are not searched for further bundles. Reserved names
    (``.distributor-tmp-*`` staging directories, state files, ...) are ignored. Walking more
    than ``limit`` entries raises ``StorageError`` (``limit_exceeded``).
    """
    lp.validate_prefix(prefix)
    entries = storage.walk(prefix, limit=limit, include_dirs=False)
    candidates = {lp.parent(e.path) for e in entries if lp.basename(e.path) == MANIFEST_NAME}
    bundles = [path for path in candidates if not _inside_another(path, candidates, prefix)]
    return sorted(bundles)


def _inside_another(path: str, candidates: set[str], prefix: str) -> bool:
    directory = path
    while directory != prefix and directory != "":
        directory = lp.parent(directory)
        if directory in candidates:
            return True
    return False


def _bundle_error(rel: str, exc: StorageError) -> BundleValidationError | None:
    """Translate storage errors that mean "this bundle is broken" into bundle errors."""
    cause = str(exc.cause) if exc.cause is not None else exc.kind.value
    if exc.kind == ErrorKind.NOT_FOUND:
        return verify.missing(rel)
    if exc.kind == ErrorKind.UNSUPPORTED:
        return BundleValidationError(f"file {rel} is not a regular file ({cause})")
    if exc.kind == ErrorKind.INVALID_PATH:
        return BundleValidationError(f"file {rel} is not a valid bundle file: {cause}")
    if exc.kind == ErrorKind.LIMIT_EXCEEDED:
        return BundleValidationError(f"file {rel} is too large: {cause}")
    return None


def load_source_manifest(storage: Storage, bundle_path: str) -> Manifest:
    """Read and parse ``<bundle_path>/manifest.json`` through the storage protocol.

    A missing, non-regular or oversized manifest raises ``BundleValidationError``; content
    problems raise ``ManifestError``; transport failures stay ``StorageError``.
    """
    try:
        data = storage.read_bytes(manifest_path(bundle_path), max_size=MAX_MANIFEST_SIZE)
    except StorageError as exc:
        error = _bundle_error(MANIFEST_NAME, exc)
        if error is None:
            raise
        raise BundleValidationError(str(error).replace(f"file {MANIFEST_NAME}", MANIFEST_NAME, 1)) from exc
    return parse_manifest(data)


def validate_source_bundle(
    storage: Storage,
    bundle_path: str,
    manifest: Manifest,
    *,
    progress: ProgressCallback | None = None,
) -> Manifest:
    """Validate ``manifest`` and every listed file of the bundle at ``bundle_path``.

    Each file must be a regular file (``storage.stat``), have the recorded size, and hash to the
    recorded sha256; its bytes are streamed once through ``storage.open_read``. Messages name
    the file relative to the bundle. ``progress`` is called with the bytes hashed per chunk.
    """
    validate_manifest(manifest)
    for record in manifest.files:
        target = _file_path(bundle_path, record.path)
        try:
            entry = storage.stat(target)
            if entry.type != "file":
                raise verify.not_regular(record.path, entry.type)
            verify.check_size(record, entry.size)
            with storage.open_read(target) as stream:
                check_content(record, iter_chunks(stream), progress)
        except StorageError as exc:
            error = _bundle_error(record.path, exc)
            if error is None:
                raise
            raise error from exc
    return manifest


def select_newest(bundles: Iterable[SourceBundle]) -> SourceBundle | None:
    """The bundle a ``fixed`` destination publishes: newest manifest ``created``, ties broken by
    ascending bundle path. ``None`` when there are no bundles."""
    newest: SourceBundle | None = None
    for candidate in bundles:
        if newest is None:
            newest = candidate
            continue
        if candidate.manifest.created > newest.manifest.created or (
            candidate.manifest.created == newest.manifest.created and candidate.path < newest.path
        ):
            newest = candidate
    return newest

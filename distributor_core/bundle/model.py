"""The manifest model: constants and frozen msgspec Structs (core-semantics §1.2, interfaces §4.1).

Copy one with changes through ``msgspec.structs.replace`` (they are not dataclasses)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import msgspec

from distributor_core import paths as lp
from distributor_core.bundle.errors import ManifestError
from distributor_core.timefmt import to_utc

MANIFEST_NAME = lp.MANIFEST_NAME
STATE_FILE_NAME = lp.STATE_FILE_NAME
SCHEMA_VERSION = 1


class ManifestFile(msgspec.Struct, frozen=True):
    """One listed file: its bundle path, ``sha256:<hex>`` digest and byte size."""

    path: str
    sha256: str
    size: int


class Manifest(msgspec.Struct, frozen=True):
    """A source bundle manifest.

    ``files`` accepts any sequence and is stored as a tuple; ``created`` must be timezone-aware
    and is stored in UTC. Construction does not validate; use ``validate_manifest``.
    """

    schema_version: int
    id: str
    digest: str
    created: datetime
    files: tuple[ManifestFile, ...] = ()

    def __post_init__(self) -> None:
        created = self.created
        if not isinstance(created, datetime):
            raise ManifestError("manifest created must be a datetime")
        if created.tzinfo is None or created.utcoffset() is None:
            raise ManifestError("manifest created must be timezone-aware")
        if created.tzinfo is not UTC:
            msgspec.structs.force_setattr(self, "created", to_utc(created))  # nanoseconds kept
        if not isinstance(self.files, tuple):
            msgspec.structs.force_setattr(self, "files", tuple(self.files))

    @property
    def file_count(self) -> int:
        return len(self.files)

    @property
    def total_size(self) -> int:
        return sum(f.size for f in self.files if isinstance(f.size, int))


def _identity(manifest: Manifest) -> tuple:
    return (manifest.schema_version, manifest.id, manifest.digest, manifest.created, manifest.files)


def _manifest_eq(self: Manifest, other: object) -> bool:
    if not isinstance(other, Manifest):
        return NotImplemented
    return self is other or _identity(self) == _identity(other)


def _manifest_ne(self: Manifest, other: object) -> bool:
    if not isinstance(other, Manifest):
        return NotImplemented
    return not _manifest_eq(self, other)


# a validated manifest (``bundle.validate.ValidManifest``, a subclass) equals the plain one with
# the same fields: equality and hash are over the fields, whichever of the two classes
Manifest.__eq__ = _manifest_eq  # type: ignore[method-assign,assignment]
Manifest.__ne__ = _manifest_ne  # type: ignore[method-assign,assignment]
Manifest.__hash__ = lambda self: hash(_identity(self))  # type: ignore[method-assign,assignment]


class BundleFile(msgspec.Struct, frozen=True):
    """A producer file to copy into a bundle: ``source_path`` on disk, ``path`` in the bundle."""

    source_path: str | Path
    path: str


__all__ = [
    "MANIFEST_NAME",
    "SCHEMA_VERSION",
    "STATE_FILE_NAME",
    "BundleFile",
    "Manifest",
    "ManifestFile",
]

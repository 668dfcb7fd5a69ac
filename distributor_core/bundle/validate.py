"""Manifest-only validation, the validated manifest type, equality and identity (core-semantics
§1.7, §1.9).

A :class:`ValidManifest` is a :class:`Manifest` that passed every rule below: the rules run when
one is constructed (``validate_manifest``, parsing, or ``msgspec.structs.replace`` of one), so
code that holds a ``ValidManifest`` never checks it again and never asks whether someone did.

Rules are checked in the documented order of concern: schema version; required fields (``id``,
``digest``, ``created``, non-empty ``files``); every file path; duplicate paths; digest syntax of
every file ``sha256`` and of ``digest``; non-negative sizes; and finally that ``digest`` equals the
recomputed bundle digest. The first broken rule is raised as a ``ManifestError``.
"""

from __future__ import annotations

import copy
from datetime import datetime

import msgspec

from distributor_core.bundle import columns
from distributor_core.bundle.digest import bundle_digest, digest_problem
from distributor_core.bundle.errors import ManifestError
from distributor_core.bundle.model import SCHEMA_VERSION, Manifest, ManifestFile
from distributor_core.bundle.paths import source_path_problem
from distributor_core.jsonfmt import go_json_string, is_json_int
from distributor_core.timefmt import is_zero, to_utc

ManifestIdentity = tuple[int, str, str, datetime, tuple[tuple[str, str, int], ...]]


class ValidManifest(Manifest, frozen=True):
    """A manifest known to pass every manifest-only rule (checked on construction). Equal to a
    plain :class:`Manifest` with the same fields."""

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_manifest(self)

    def with_identity(self, schema_version: int, manifest_id: str, digest: str, created: datetime) -> ValidManifest:
        """This manifest's files under the given identity fields (a newer build of the same
        content), as a valid manifest: the files are known valid, so when the identity fields
        pass their rules and ``digest`` is this manifest's (the digest of these files) nothing
        else is checked; otherwise the whole manifest is checked and the first broken rule raised."""
        if (
            is_json_int(schema_version)
            and schema_version == SCHEMA_VERSION
            and isinstance(manifest_id, str)
            and manifest_id != ""
            and digest == self.digest
            and isinstance(created, datetime)
            and created.utcoffset() is not None
            and not is_zero(created)
        ):
            same = copy.copy(self)  # a copy does not run __post_init__: the one trusted path
            msgspec.structs.force_setattr(same, "id", manifest_id)
            msgspec.structs.force_setattr(same, "created", to_utc(created))
            return same
        return ValidManifest(schema_version, manifest_id, digest, created, self.files)


def validate_manifest(manifest: Manifest) -> ValidManifest:
    """Check every manifest-only rule: the manifest as a :class:`ValidManifest` (itself when it
    already is one), or the first broken rule as a ``ManifestError``."""
    if isinstance(manifest, ValidManifest):
        return manifest
    if not isinstance(manifest, Manifest):
        raise ManifestError("manifest must be a manifest value")
    return ValidManifest(manifest.schema_version, manifest.id, manifest.digest, manifest.created, manifest.files)


def _check_manifest(manifest: Manifest) -> None:
    if columns.manifest_valid(manifest):  # the common case, a whole column at a time
        return
    if not is_json_int(manifest.schema_version) or manifest.schema_version != SCHEMA_VERSION:
        raise ManifestError(f"manifest schema_version must be {SCHEMA_VERSION}")
    if not isinstance(manifest.id, str) or manifest.id == "":
        raise ManifestError("manifest id is required")
    if not isinstance(manifest.digest, str) or manifest.digest == "":
        raise ManifestError("manifest digest is required")
    if is_zero(manifest.created):
        raise ManifestError("manifest created is required")
    files = manifest.files
    if not files:
        raise ManifestError("manifest files is required")
    for index, record in enumerate(files):
        if not isinstance(record, ManifestFile):
            raise ManifestError(f"manifest files[{index}] must be a file record")
        if record.path == "":
            raise ManifestError(f"manifest files[{index}].path is required")
        problem = source_path_problem(record.path)
        if problem:
            raise ManifestError(f"manifest files[{index}].path: {problem}")
    seen: set[str] = set()
    for index, record in enumerate(files):
        if record.path in seen:
            raise ManifestError(f"manifest files[{index}].path duplicates {go_json_string(record.path)}")
        seen.add(record.path)
    for index, record in enumerate(files):
        if record.sha256 == "":
            raise ManifestError(f"manifest files[{index}].sha256 is required")
        problem = digest_problem(record.sha256)
        if problem:
            raise ManifestError(f"manifest files[{index}].sha256: {problem}")
    problem = digest_problem(manifest.digest)
    if problem:
        raise ManifestError(f"manifest digest: {problem}")
    for index, record in enumerate(files):
        if not is_json_int(record.size):
            raise ManifestError(f"manifest files[{index}].size must be an integer")
        if record.size < 0:
            raise ManifestError(f"manifest files[{index}].size must be non-negative")
    if bundle_digest(files) != manifest.digest:
        raise ManifestError("manifest digest does not match files")


def manifests_equal(a: Manifest, b: Manifest) -> bool:
    """Equality used by destination comparison (core-semantics §1.9).

    Schema version, id and digest equal; ``created`` the same instant; the same files, pairwise
    equal in order.
    """
    if a is b:
        return True
    if (a.schema_version, a.id, a.digest, a.created, len(a.files)) != (
        b.schema_version,
        b.id,
        b.digest,
        b.created,
        len(b.files),
    ):
        return False
    return a.files == b.files


def manifest_identity(manifest: Manifest) -> ManifestIdentity:
    """Normalised identity (upload idempotency): schema version, id, digest, UTC ``created``
    (nanosecond precision) and the ordered ``(path, sha256, size)`` file records."""
    return (
        manifest.schema_version,
        manifest.id,
        manifest.digest,
        manifest.created,
        tuple((f.path, f.sha256, f.size) for f in manifest.files),
    )


__all__ = [
    "ManifestIdentity",
    "ValidManifest",
    "manifest_identity",
    "manifests_equal",
    "validate_manifest",
]

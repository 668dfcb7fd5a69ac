"""The source bundle contract: manifest model, canonical digest, parse/marshal, validation
(manifest-only and on disk), ``build_manifest``, ``write_manifest`` and ``write_bundle``.

See ``docs/integrations/source-bundle.md`` for the producer contract and
``docs/consumers/bundle.md`` for the Python producer API.

Owns: everything a producer and a consumer agree on about a bundle. ``digest`` and ``codec`` are
pure; ``disk`` / ``write`` / ``build`` touch only a local directory the caller names.

Must not know: destinations, state, storage backends, any shell.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from distributor_core.lazyexports import lazy_exports

if TYPE_CHECKING:
    from distributor_core.bundle.build import build_manifest, hash_bundle_file, scan_files
    from distributor_core.bundle.codec import manifest_from_obj, manifest_to_obj, marshal_manifest, parse_manifest
    from distributor_core.bundle.digest import (
        DIGEST_PREFIX,
        ProgressCallback,
        bundle_digest,
        canonical_file_payload,
        digest_chunks,
        digest_problem,
        file_digest,
        is_digest,
        validate_digest,
    )
    from distributor_core.bundle.disk import MAX_MANIFEST_SIZE, load_manifest, validate_bundle
    from distributor_core.bundle.errors import BundleError, BundlePathError, BundleValidationError, ManifestError
    from distributor_core.bundle.model import (
        MANIFEST_NAME,
        SCHEMA_VERSION,
        STATE_FILE_NAME,
        BundleFile,
        Manifest,
        ManifestFile,
    )
    from distributor_core.bundle.paths import source_path_problem, validate_source_path
    from distributor_core.bundle.validate import (
        ManifestIdentity,
        manifest_identity,
        manifests_equal,
        validate_manifest,
    )
    from distributor_core.bundle.verify import check_content
    from distributor_core.bundle.write import write_bundle, write_manifest

__all__ = [
    "DIGEST_PREFIX",
    "MANIFEST_NAME",
    "MAX_MANIFEST_SIZE",
    "SCHEMA_VERSION",
    "STATE_FILE_NAME",
    "BundleError",
    "BundleFile",
    "BundlePathError",
    "BundleValidationError",
    "Manifest",
    "ManifestError",
    "ManifestFile",
    "ManifestIdentity",
    "ProgressCallback",
    "build_manifest",
    "bundle_digest",
    "canonical_file_payload",
    "check_content",
    "digest_chunks",
    "digest_problem",
    "file_digest",
    "hash_bundle_file",
    "is_digest",
    "load_manifest",
    "manifest_from_obj",
    "manifest_identity",
    "manifest_to_obj",
    "manifests_equal",
    "marshal_manifest",
    "parse_manifest",
    "scan_files",
    "source_path_problem",
    "validate_bundle",
    "validate_digest",
    "validate_manifest",
    "validate_source_path",
    "write_bundle",
    "write_manifest",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "build": (
            "build_manifest",
            "hash_bundle_file",
            "scan_files",
        ),
        "codec": (
            "manifest_from_obj",
            "manifest_to_obj",
            "marshal_manifest",
            "parse_manifest",
        ),
        "digest": (
            "DIGEST_PREFIX",
            "ProgressCallback",
            "bundle_digest",
            "canonical_file_payload",
            "digest_chunks",
            "digest_problem",
            "file_digest",
            "is_digest",
            "validate_digest",
        ),
        "disk": (
            "MAX_MANIFEST_SIZE",
            "load_manifest",
            "validate_bundle",
        ),
        "errors": (
            "BundleError",
            "BundlePathError",
            "BundleValidationError",
            "ManifestError",
        ),
        "model": (
            "MANIFEST_NAME",
            "SCHEMA_VERSION",
            "STATE_FILE_NAME",
            "BundleFile",
            "Manifest",
            "ManifestFile",
        ),
        "paths": (
            "source_path_problem",
            "validate_source_path",
        ),
        "validate": (
            "ManifestIdentity",
            "manifest_identity",
            "manifests_equal",
            "validate_manifest",
        ),
        "verify": ("check_content",),
        "write": (
            "write_bundle",
            "write_manifest",
        ),
    },
)

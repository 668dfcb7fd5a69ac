"""The bundle error family (interfaces §4.1).

Every message is one line that names the offending field or path. Manifest messages start with
``manifest `` (core-semantics §1.7) so that embedding callers (state parsing reports
``state source.manifest: <manifest error>``) can prefix them unchanged.
"""

from __future__ import annotations


class BundleError(ValueError):
    """Base class of every bundle and manifest error."""


class ManifestError(BundleError):
    """``manifest.json`` content is malformed or breaks a manifest-only rule."""


class BundlePathError(BundleError):
    """A bundle file path breaks the bundle path rules (core-semantics §1.3, resolutions A1)."""


class BundleValidationError(BundleError):
    """Bundle files on disk or in storage do not match their manifest, or cannot be used.

    ``path`` names the bundle file at fault when there is one; a content mismatch also carries
    what the manifest says (``expected``) and what the bytes are (``actual``): sizes as decimal
    text, digests as hex.
    """

    def __init__(self, message: str, *, path: str = "", expected: str = "", actual: str = "") -> None:
        super().__init__(message)
        self.path = path
        self.expected = expected
        self.actual = actual


__all__ = [
    "BundleError",
    "BundlePathError",
    "BundleValidationError",
    "ManifestError",
]

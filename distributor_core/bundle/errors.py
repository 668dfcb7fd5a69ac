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
    """Bundle files on disk or in storage do not match their manifest, or cannot be used."""

"""The shipped example bundle stays valid (examples/source-bundle)."""

from __future__ import annotations

from pathlib import Path

from distributor_core.bundle import bundle_digest, load_manifest, validate_bundle
from distributor_core.source import discover_bundles, load_source_manifest, validate_source_bundle
from distributor_core.storage.local import LocalStorage

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "source-bundle"


def test_example_bundle_validates() -> None:
    manifest = load_manifest(EXAMPLE)
    assert manifest.id == "reports.example"
    assert [f.path for f in manifest.files] == ["report.md", "summary.txt"]
    assert manifest.created.isoformat() == "2026-06-07T15:00:00+00:00"
    assert manifest.digest == bundle_digest(manifest.files)
    validate_bundle(EXAMPLE, manifest)


def test_example_bundle_through_storage() -> None:
    storage = LocalStorage(EXAMPLE)
    assert discover_bundles(storage) == [""]
    validate_source_bundle(storage, "", load_source_manifest(storage, ""))

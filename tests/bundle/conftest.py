"""Fixtures for bundle tests: the default fixture bundle of interfaces §2.10 item 8."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from distributor_core.bundle import Manifest, build_manifest, write_manifest

REPORT = b"# Report\nSunny.\n"
SUMMARY = b"Summary\n"
CREATED = datetime(2026, 6, 7, 15, 0, tzinfo=UTC)


def make_bundle(
    root: Path, files: dict[str, bytes] | None = None, *, bundle_id: str = "reports.daily"
) -> Manifest:
    """Write ``files`` under ``root`` and a manifest listing them in the given order."""
    files = files if files is not None else {"report.md": REPORT, "summary.txt": SUMMARY}
    root.mkdir(parents=True, exist_ok=True)
    for rel, data in files.items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    manifest = build_manifest(root, id=bundle_id, files=list(files), created=CREATED)
    write_manifest(root, manifest)
    return manifest


@pytest.fixture
def bundle_root(tmp_path: Path) -> Path:
    root = tmp_path / "bundle"
    make_bundle(root)
    return root

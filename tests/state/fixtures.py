"""Shared fixtures mirroring the Go tests' state fixtures (internal/state/*_test.go).

Single-owner: ``reports/archive`` publishing ``report.md``. Shared root: owners
``reports/archive`` (link https://reports.example.com/archive/report.md) owning ``report.md`` and
``reports/html`` owning the generated ``report.html``. Every timestamp is 2026-05-30T11:12:00Z.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import msgspec

from distributor_core.bundle import Manifest, ManifestFile, bundle_digest, file_digest
from distributor_core.state import (
    OutputRecord,
    OwnerRecord,
    OwnerScope,
    SharedOutputRecord,
    SharedRootState,
    SingleOwnerState,
)

DATA = Path(__file__).parent / "data"

T = datetime(2026, 5, 30, 11, 12, tzinfo=UTC)
T_TEXT = "2026-05-30T11:12:00Z"
ARCHIVE = OwnerScope("reports", "archive")
HTML = OwnerScope("reports", "html")
OTHER_DIGEST = "sha256:" + "a" * 64

REPORT = ManifestFile("report.md", file_digest(b"# Report\n"), 9)
SUMMARY = ManifestFile("summary.txt", file_digest(b"Summary\n"), 8)


def make_manifest(
    manifest_id: str = "reports.daily",
    created: datetime = T,
    files: tuple[ManifestFile, ...] = (REPORT, SUMMARY),
) -> Manifest:
    return Manifest(1, manifest_id, bundle_digest(files), created, files)


MANIFEST = make_manifest()

SINGLE_OWNER_TEXT = (DATA / "single_owner_v2.json").read_text(encoding="utf-8")
SHARED_ROOT_TEXT = (DATA / "shared_root_v3.json").read_text(encoding="utf-8")


def legacy_text() -> str:
    """The v2 fixture rewritten as a schema 1 file (no created/updated/state/reconciliation)."""
    text = SINGLE_OWNER_TEXT.replace('"schema_version": 2', '"schema_version": 1', 1)
    text = text.replace(f'  "created_at": "{T_TEXT}",\n  "updated_at": "{T_TEXT}",\n', "", 1)
    text = text.replace('  "state": {\n    "mode": "single_owner"\n  },\n', "", 1)
    text = text.replace('  "reconciliation": {\n    "mode": "replace"\n  },\n', "", 1)
    text = text.replace(f',\n      "created_at": "{T_TEXT}",\n      "updated_at": "{T_TEXT}"', "", 1)
    assert "created_at" not in text and "reconciliation" not in text and '"state"' not in text
    return text


def output(path: str, updated_at: datetime = T, **changes: Any) -> OutputRecord:
    values: dict[str, Any] = {
        "path": path,
        "kind": "source",
        "source_path": path,
        "sha256": OTHER_DIGEST,
        "size": 10,
        "created_at": T,
        "updated_at": updated_at,
    }
    values.update(changes)
    return OutputRecord(**values)


def single_owner(**changes: Any) -> SingleOwnerState:
    state = SingleOwnerState(
        pipeline_id="reports",
        destination_id="archive",
        published_at=T,
        created_at=T,
        updated_at=T,
        reconciliation_mode="replace",
        manifest=MANIFEST,
        outputs=(OutputRecord("report.md", "source", "report.md", REPORT.sha256, 9, T, T),),
        distributor_version="dev",
    )
    return msgspec.structs.replace(state, **changes)


def shared_output(path: str, scope: OwnerScope, updated_at: datetime = T, **changes: Any) -> SharedOutputRecord:
    values: dict[str, Any] = {
        "path": path,
        "kind": "source",
        "source_path": path,
        "sha256": OTHER_DIGEST,
        "size": 10,
        "pipeline_id": scope.pipeline_id,
        "destination_id": scope.destination_id,
        "source_id": MANIFEST.id,
        "source_digest": MANIFEST.digest,
        "source_created": MANIFEST.created,
        "created_at": T,
        "updated_at": updated_at,
    }
    values.update(changes)
    return SharedOutputRecord(**values)


def shared_root(**changes: Any) -> SharedRootState:
    state = SharedRootState(
        created_at=T,
        updated_at=T,
        owners=(
            OwnerRecord("reports", "archive", "replace", MANIFEST, "https://reports.example.com/archive/report.md"),
            OwnerRecord("reports", "html", "merge", MANIFEST),
        ),
        outputs=(
            shared_output("report.md", ARCHIVE, sha256=REPORT.sha256, size=9),
            shared_output(
                "report.html",
                HTML,
                kind="generated",
                source_path="report.md",
                transform="markdown_to_html",
                url="https://reports.example.com/html/report.html",
                size=128,
            ),
        ),
        distributor_version="dev",
    )
    return msgspec.structs.replace(state, **changes)


def hours(n: float) -> timedelta:
    return timedelta(hours=n)

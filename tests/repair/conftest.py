"""Fixtures for ``reconcile-state`` and ``prune`` (core-semantics §7, interfaces §2.6–2.7, §2.10).

Everything runs on real local destinations under ``tmp_path``. Library tests pass a fixed
``now`` (``NOW`` = 2026-06-08T12:00:00Z, as in the Go tests); CLI tests use the real clock with
state timestamps far in the past (``PAST``).
"""

from __future__ import annotations

import hashlib
import subprocess
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from distributor_core import jsonfmt
from distributor_core import paths as lp
from distributor_core.bundle import Manifest, ManifestFile, bundle_digest
from distributor_core.config import Config, load_config
from distributor_core.state import (
    OutputRecord,
    OwnerRecord,
    OwnerScope,
    SharedOutputRecord,
    SharedRootState,
    SingleOwnerState,
    StateDocument,
    marshal_state,
    parse_state_document,
)
from distributor_core.storage.local import LocalStorage
from tests.cli.conftest import Result, Runner, cli  # noqa: F401 - the ``cli`` fixture

NOW = datetime(2026, 6, 8, 12, 0, tzinfo=UTC)
PAST = datetime(2020, 1, 1, tzinfo=UTC)
ARCHIVE = OwnerScope("reports", "archive")
HTML = OwnerScope("reports", "html")
REPORT = b"# Report\nSunny.\n"
SUMMARY = b"Summary\n"
DEFAULT_FILES = {"report.md": REPORT, "summary.txt": SUMMARY}

__all__ = [
    "ARCHIVE",
    "DEFAULT_FILES",
    "HTML",
    "NOW",
    "PAST",
    "REPORT",
    "SUMMARY",
    "Crash",
    "Dest",
    "Result",
    "Runner",
    "ago",
    "bury_lock",
    "config_file",
    "shared_root_state",
    "single_owner_state",
]


def ago(hours: float) -> datetime:
    return NOW - timedelta(hours=hours)


def _sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def manifest_for(files: dict[str, bytes], *, bundle_id: str = "reports.daily", created: datetime = PAST) -> Manifest:
    records = tuple(ManifestFile(path, _sha(data), len(data)) for path, data in files.items())
    return Manifest(1, bundle_id, bundle_digest(records), created, records)


MANIFEST = manifest_for(DEFAULT_FILES)


def single_owner_state(
    outputs: dict[str, datetime],
    *,
    scope: OwnerScope = ARCHIVE,
    published_at: datetime = PAST,
    updated_at: datetime | None = None,
    created_at: datetime = PAST,
) -> SingleOwnerState:
    """v2 state recording ``outputs`` (path → output ``updated_at``), 8 bytes each."""
    records = tuple(
        OutputRecord(path, "source", path, _sha(b"managed\n"), 8, min(created_at, stamp), stamp)
        for path, stamp in outputs.items()
    )
    return SingleOwnerState(
        pipeline_id=scope.pipeline_id,
        destination_id=scope.destination_id,
        published_at=published_at,
        created_at=created_at,
        updated_at=updated_at or published_at,
        reconciliation_mode="replace",
        manifest=MANIFEST,
        outputs=records,
        distributor_version="test",
    )


def shared_root_state(
    outputs: list[tuple[str, OwnerScope, datetime]],
    *,
    updated_at: datetime = PAST,
    owners: tuple[OwnerScope, ...] = (ARCHIVE, HTML),
) -> SharedRootState:
    """v3 state: ``(path, owner, updated_at)`` records; owners' manifest is ``MANIFEST``."""
    records = tuple(
        SharedOutputRecord(
            path=path,
            kind="source",
            source_path=path,
            sha256=_sha(b"managed\n"),
            size=8,
            pipeline_id=owner.pipeline_id,
            destination_id=owner.destination_id,
            source_id=MANIFEST.id,
            source_digest=MANIFEST.digest,
            source_created=MANIFEST.created,
            created_at=min(PAST, stamp),
            updated_at=stamp,
        )
        for path, owner, stamp in outputs
    )
    return SharedRootState(
        created_at=PAST,
        updated_at=updated_at,
        owners=tuple(OwnerRecord(o.pipeline_id, o.destination_id, "replace", MANIFEST) for o in owners),
        outputs=records,
        distributor_version="test",
    )


class Crash(BaseException):
    """The process died here."""


def dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def bury_lock(dest: Dest) -> None:
    """Make a lock the crashed writer left look like a real crash's: its pid is gone."""
    lock = dest.path(lp.LOCK_NAME)
    if lock.exists():
        info = jsonfmt.loads_object(lock.read_bytes())
        info["pid"] = dead_pid()
        lock.write_bytes(jsonfmt.dumps_indented_bytes(info))


@dataclass
class Dest:
    """A local destination root with helpers to seed and inspect it."""

    root: Path

    def path(self, rel: str) -> Path:
        return self.root.joinpath(*rel.split("/")) if rel else self.root

    def write(self, rel: str, data: bytes = b"managed\n") -> None:
        target = self.path(rel)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)

    def read(self, rel: str) -> bytes:
        return self.path(rel).read_bytes()

    def exists(self, rel: str) -> bool:
        return self.path(rel).exists() or self.path(rel).is_symlink()

    def put_state(self, doc: StateDocument, *, bundle: str = "", with_outputs: bool = True) -> bytes:
        data = marshal_state(doc)
        self.write(lp.state_path(bundle), data)
        if with_outputs:
            for output in doc.outputs:
                self.write(lp.join(bundle, output.path))
        return data

    def state_bytes(self, bundle: str = "") -> bytes:
        return self.read(lp.state_path(bundle))

    def state(self, bundle: str = "") -> StateDocument:
        return parse_state_document(self.state_bytes(bundle))

    def paths(self, bundle: str = "") -> list[str]:
        return [output.path for output in self.state(bundle).outputs]

    def storage(self) -> LocalStorage:
        return LocalStorage(self.root)

    def files(self) -> list[str]:
        """Every file under the root, root-relative, sorted (reserved names included)."""
        return sorted(p.relative_to(self.root).as_posix() for p in self.root.rglob("*") if not p.is_dir())


def _prune_yaml(prune: dict[str, Any] | None, indent: str) -> str:
    if prune is None:
        return ""
    lines = [f"{indent}retention:", f"{indent}  prune:"]
    for key, value in prune.items():
        lines.append(f"{indent}    {key}: {str(value).lower() if isinstance(value, bool) else value}")
    return "\n".join(lines) + "\n"


def config_file(
    directory: Path,
    dest_root: Path,
    *,
    prune: dict[str, Any] | None = None,
    shared_root: bool = False,
    backend_path: str | None = None,
) -> Path:
    """``reports`` pipeline (local source) with destinations ``archive`` and ``html`` on the same
    local root; ``prune`` is the ``retention.prune`` block of ``archive``."""
    source = directory / "source"
    source.mkdir(exist_ok=True)
    state = "        state:\n          mode: shared_root\n" if shared_root else ""
    path = backend_path if backend_path is not None else str(dest_root)
    text = (
        "pipelines:\n"
        "  - id: reports\n"
        "    source:\n"
        "      backend: local\n"
        f"      path: {source}\n"
        "    destinations:\n"
        "      - id: archive\n"
        "        backend: local\n"
        f"        path: {path}\n"
        + state
        + _prune_yaml(prune, "        ")
        + "      - id: html\n"
        "        backend: local\n"
        f"        path: {path}\n"
        + state
    )
    config = directory / "distributor.yml"
    config.write_text(text)
    return config


@pytest.fixture
def dest(tmp_path: Path) -> Dest:
    root = tmp_path / "dest"
    root.mkdir()
    return Dest(root)


def load(directory: Path, dest: Dest, **kwargs: Any) -> Config:
    return load_config(config_file(directory, dest.root, **kwargs))


# --------------------------------------------------------------------------- adoption fixtures

ADOPT_FILES = {"report.md": REPORT, "summary.txt": SUMMARY, "data/table.csv": b"a,b\n1,2\n"}


def adopt_config(directory: Path, dest_root: Path) -> Config:
    """Pipeline ``reports`` whose local source holds the bundle ``daily`` (``ADOPT_FILES``) and
    whose destination ``archive`` publishes it at the root of ``dest_root`` (``fixed`` mapping,
    so state lives at the root)."""
    from tests.bundle.conftest import make_bundle

    source = directory / "adopt-source"
    if not source.exists():
        make_bundle(source / "daily", ADOPT_FILES)
    path = directory / "adopt.yml"
    path.write_text(
        "pipelines:\n  - id: reports\n    source:\n      backend: local\n"
        f"      path: {source}\n    destinations:\n      - id: archive\n        backend: local\n"
        f"        path: {dest_root}\n        path_mapping:\n          mode: fixed\n"
    )
    return load_config(path)


def published_state(directory: Path) -> bytes:
    """The state ``run`` writes (at ``NOW``) for :func:`adopt_config`'s source, in a scratch root."""
    from distributor_core.app.run import RunOptions, run_config

    scratch = directory / "adopt-reference"
    if not (scratch / lp.STATE_FILE_NAME).exists():
        report = run_config(adopt_config(directory, scratch), RunOptions(clock=lambda: NOW))
        assert report.ok, report.error_message()
    return (scratch / lp.STATE_FILE_NAME).read_bytes()


def seed_restored_copy(dest: Dest, published: bytes) -> None:
    """The publication's state without the record of summary.txt (dropped by a repair after it
    was deleted), and summary.txt put back by hand: adoption records it again."""
    from distributor_core.state import remove_missing_outputs

    state, _ = remove_missing_outputs(parse_state_document(published), ["summary.txt"], now=NOW)
    dest.write(lp.STATE_FILE_NAME, marshal_state(state))
    for rel, data in ADOPT_FILES.items():
        dest.write(rel, data)


def seed_stateless_copy(dest: Dest) -> None:
    """A complete copy made by another tool, no state: adoption records the publication."""
    for rel, data in ADOPT_FILES.items():
        dest.write(rel, data)


def seed_damaged(dest: Dest, published: bytes) -> None:
    """The publication with report.md corrupted in place, data/table.csv truncated and
    summary.txt deleted: an audit repair drops the three records."""
    dest.write(lp.STATE_FILE_NAME, published)
    dest.write("report.md", REPORT.upper())
    dest.write("data/table.csv", b"a,b\n")

"""Fixtures for the publish engine tests (core-semantics §4–6, resolutions A1–A3, B3, C1).

Everything runs on real ``LocalStorage`` backends rooted in ``tmp_path``: a source root holding
source bundles and a destination root. Time is fixed: every publish reads ``NOW`` from an injected
clock, seeded destination state uses ``OLD``, source manifests default to ``CREATED``.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from distributor_core import jsonfmt
from distributor_core import paths as lp
from distributor_core.bundle import Manifest, ManifestFile, build_manifest, bundle_digest, write_manifest
from distributor_core.execute.facts import build_plan
from distributor_core.execute.publish import PublishOutcome, publish
from distributor_core.execute.request import PlanRequest
from distributor_core.plan.model import DestinationPolicy, LinkPolicy, Plan, TransferPolicy
from distributor_core.state import (
    OutputRecord,
    OwnerRecord,
    SharedOutputRecord,
    SharedRootState,
    SingleOwnerState,
    marshal_state,
    parse_state_document,
)
from distributor_core.storage.local import LocalStorage

NOW = datetime(2026, 6, 4, 12, 0, tzinfo=UTC)
LATER = NOW + timedelta(hours=2)
CREATED = datetime(2026, 6, 4, 11, 55, tzinfo=UTC)
HOUR = timedelta(hours=1)
OLD = datetime(2026, 6, 1, 8, 0, tzinfo=UTC)
OLDER = datetime(2026, 5, 30, 11, 12, tzinfo=UTC)
SOURCE_ID = "reports.example"
REPORT = b"# Report\nNew.\n"
SUMMARY = b"Summary\n"

__all__ = [
    "CREATED",
    "HOUR",
    "LATER",
    "NOW",
    "OLD",
    "OLDER",
    "REPORT",
    "SOURCE_ID",
    "SUMMARY",
    "Env",
    "HookedStorage",
    "LinkPolicy",
    "TransferPolicy",
    "clock_at",
    "digest",
    "manifest_for",
    "new_env",
]


def clock_at(at: datetime = NOW) -> Callable[[], datetime]:
    return lambda: at


def digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def manifest_for(files: dict[str, bytes], *, id: str = SOURCE_ID, created: datetime = CREATED) -> Manifest:
    """A valid manifest describing ``files`` (path → bytes), built without touching disk."""
    records = [ManifestFile(path=p, sha256=digest(d), size=len(d)) for p, d in files.items()]
    return Manifest(schema_version=1, id=id, digest=bundle_digest(records), created=created, files=records)


class HookedStorage(LocalStorage):
    """``LocalStorage`` that reports every primitive call to ``hook(op, path, **details)`` first.

    The hook may record calls (write order, lock presence) or raise to inject a failure at an
    exact step. ``op`` is one of ``write``, ``rename``, ``delete``, ``stat``, ``read``, ``list``.
    """

    def __init__(self, root: Path, hook: Callable[..., None] | None = None) -> None:
        super().__init__(root, create=True)
        self.hook: Callable[..., None] = hook or (lambda op, path, **kw: None)
        self.calls: list[tuple[str, str]] = []

    def _call(self, op: str, path: str, **details: Any) -> None:
        self.calls.append((op, path))
        self.hook(op, path, **details)

    def write_stream(self, path, chunks, **kwargs):  # type: ignore[override]
        self._call("write", path, **kwargs)
        return super().write_stream(path, chunks, **kwargs)

    def rename(self, src, dst, *, overwrite):  # type: ignore[override]
        self._call("rename", src, dst=dst, overwrite=overwrite)
        super().rename(src, dst, overwrite=overwrite)

    def delete_file(self, path):  # type: ignore[override]
        self._call("delete", path)
        super().delete_file(path)

    def stat(self, path):  # type: ignore[override]
        self._call("stat", path)
        return super().stat(path)

    def open_read(self, path):  # type: ignore[override]
        self._call("read", path)
        return super().open_read(path)

    def _iter_entries(self, prefix, recursive):  # type: ignore[override]
        self._call("list", prefix)
        return super()._iter_entries(prefix, recursive)


@dataclass
class Env:
    """A source root and a destination root on local disk, plus builders and readers."""

    tmp: Path
    src_root: Path
    dst_root: Path
    src: LocalStorage
    dst: LocalStorage
    version: str = "test"
    sources: dict[str, dict[str, bytes]] = field(default_factory=dict)

    # ---------------------------------------------------------------- source bundles

    def source(
        self,
        files: dict[str, bytes] | None = None,
        *,
        bundle: str = "bundle",
        id: str = SOURCE_ID,
        created: datetime = CREATED,
        root: Path | None = None,
    ) -> Manifest:
        """(Re)write the source bundle at ``bundle`` with ``files`` in the given order."""
        files = {"report.md": REPORT} if files is None else files
        base = (root or self.src_root) / bundle if bundle else (root or self.src_root)
        base.mkdir(parents=True, exist_ok=True)
        for rel, data in files.items():
            target = base.joinpath(*rel.split("/"))
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        manifest = build_manifest(base, id=id, files=list(files), created=created)
        write_manifest(base, manifest, overwrite=True)
        self.sources[bundle] = dict(files)
        return manifest

    # ---------------------------------------------------------------- requests

    def request(
        self,
        manifest: Manifest,
        *,
        bundle: str = "bundle",
        pipeline: str = "reports",
        destination: str = "archive",
        force: bool = False,
        republish: bool = False,
        renderer=None,
        source: LocalStorage | None = None,
        dst: LocalStorage | None = None,
        transfer: TransferPolicy | None = None,
        **policy: Any,
    ) -> PlanRequest:
        if transfer is not None:
            policy["transfer"] = transfer
        return PlanRequest(
            pipeline_id=pipeline,
            destination_id=destination,
            source=source or self.src,
            source_bundle_path=bundle,
            manifest=manifest,
            destination=dst or self.dst,
            policy=DestinationPolicy(**policy),
            distributor_version=self.version,
            force=force,
            republish=republish,
            renderer=renderer,
        )

    def plan(self, manifest: Manifest, **kwargs: Any) -> Plan:
        return build_plan(self.request(manifest, **kwargs))

    def publish(self, request: PlanRequest, *, now: datetime = NOW, **kwargs: Any) -> PublishOutcome:
        kwargs.setdefault("lock_wait", 2.0)
        return publish(request, clock=clock_at(now), version=self.version, **kwargs)

    def publish_ok(self, manifest: Manifest, *, now: datetime = NOW, expect: str | None = None, **kwargs: Any):
        outcome = self.publish(self.request(manifest, **kwargs), now=now)
        assert outcome.status == "completed", (outcome.status, outcome.error, outcome.plan and outcome.plan.reason)
        if expect is not None:
            assert outcome.plan is not None and outcome.plan.action == expect
        return outcome

    # ---------------------------------------------------------------- destination files

    def put(self, path: str, data: bytes) -> None:
        target = self.dst_root.joinpath(*path.split("/"))
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)

    def read(self, path: str) -> bytes:
        return self.dst_root.joinpath(*path.split("/")).read_bytes()

    def exists(self, path: str) -> bool:
        return os.path.lexists(self.dst_root.joinpath(*path.split("/")))

    def files(self, prefix: str = "") -> dict[str, bytes]:
        """Every regular file under ``prefix`` (reserved names included) → its bytes."""
        return {p: self.read(p) for p in _walk(self.dst_root, prefix)}

    def stats(self, prefix: str = "") -> dict[str, tuple[int, int, int]]:
        """Every file → (mtime_ns, inode, size), to prove a run wrote nothing."""
        result = {}
        for p in _walk(self.dst_root, prefix):
            info = os.lstat(self.dst_root.joinpath(*p.split("/")))
            result[p] = (info.st_mtime_ns, info.st_ino, info.st_size)
        return result

    def dirs(self, prefix: str = "") -> set[str]:
        base = self.dst_root / prefix if prefix else self.dst_root
        return {str(Path(d).relative_to(self.dst_root)).replace(os.sep, "/") for d, _, _ in os.walk(base)}

    def leftovers(self, prefix: str = "") -> list[str]:
        """Reserved working files that must not survive a settled write (journal, lock, temps, backups)."""
        return sorted(
            p
            for p in _walk(self.dst_root, prefix)
            if lp.basename(p) in (lp.JOURNAL_NAME, lp.LOCK_NAME) or lp.is_temp_or_backup_name(lp.basename(p))
        )

    # ---------------------------------------------------------------- state

    def state_bytes(self, bundle: str = "bundle") -> bytes:
        return self.read(lp.state_path(bundle))

    def state(self, bundle: str = "bundle") -> SingleOwnerState | SharedRootState:
        return parse_state_document(self.state_bytes(bundle))

    def state_obj(self, bundle: str = "bundle") -> dict[str, Any]:
        return jsonfmt.loads_object(self.state_bytes(bundle))

    def write_state(self, bundle: str, doc: SingleOwnerState | SharedRootState) -> bytes:
        data = marshal_state(doc)
        self.put(lp.state_path(bundle), data)
        return data

    def seed_single_owner(
        self,
        outputs: dict[str, bytes],
        *,
        bundle: str = "bundle",
        manifest: Manifest | None = None,
        pipeline: str = "reports",
        destination: str = "archive",
        mode: str = "replace",
        at: datetime = OLD,
        created_at: datetime | None = None,
        write_files: bool = True,
        primary_url: str = "",
    ) -> SingleOwnerState:
        """A previous single-owner publication: the files (unless ``write_files`` is false) and a
        v2 state recording them as source outputs with their real digests."""
        manifest = manifest or manifest_for(outputs, created=CREATED - HOUR)
        records = tuple(
            OutputRecord(
                path=p, kind="source", source_path=p, sha256=digest(d), size=len(d), created_at=at, updated_at=at
            )
            for p, d in outputs.items()
        )
        doc = SingleOwnerState(
            pipeline_id=pipeline,
            destination_id=destination,
            published_at=at,
            created_at=created_at or at,
            updated_at=at,
            reconciliation_mode=mode,
            manifest=manifest,
            outputs=records,
            primary_url=primary_url,
            distributor_version="old",
        )
        if write_files:
            for p, d in outputs.items():
                self.put(lp.join(bundle, p), d)
        self.write_state(bundle, doc)
        return doc

    def seed_shared_root(
        self,
        owners: Iterable[SharedOwner],
        *,
        bundle: str = "bundle",
        created_at: datetime = OLDER,
        at: datetime = OLD,
        write_files: bool = True,
    ) -> SharedRootState:
        owner_records = []
        output_records = []
        for owner in owners:
            owner_records.append(
                OwnerRecord(
                    pipeline_id=owner.pipeline,
                    destination_id=owner.destination,
                    reconciliation_mode=owner.mode,
                    manifest=owner.manifest,
                    primary_url=owner.primary_url,
                )
            )
            for p, d in owner.outputs.items():
                output_records.append(
                    SharedOutputRecord(
                        path=p,
                        kind="source",
                        source_path=p,
                        sha256=digest(d),
                        size=len(d),
                        pipeline_id=owner.pipeline,
                        destination_id=owner.destination,
                        source_id=owner.manifest.id,
                        source_digest=owner.manifest.digest,
                        source_created=owner.manifest.created,
                        created_at=at,
                        updated_at=at,
                    )
                )
                if write_files:
                    self.put(lp.join(bundle, p), d)
        doc = SharedRootState(
            created_at=created_at,
            updated_at=at,
            owners=tuple(owner_records),
            outputs=tuple(output_records),
            distributor_version="old",
        )
        self.write_state(bundle, doc)
        return doc

    # ---------------------------------------------------------------- invariants

    def assert_consistent(self, bundle: str = "bundle", *, unmanaged: Iterable[str] = ()) -> None:
        """State parses and describes exactly the files under ``bundle`` (besides ``unmanaged``),
        each recorded output holds its recorded bytes, and no working file is left over."""
        doc = self.state(bundle)
        recorded = {o.path: o for o in doc.outputs}
        for path, record in recorded.items():
            data = self.read(lp.join(bundle, path))
            assert digest(data) == record.sha256, f"{path} does not hold its recorded bytes"
            assert len(data) == record.size
        present = {
            lp.relative_to(p, bundle) if bundle else p
            for p in _walk(self.dst_root, bundle)
            if not lp.is_reserved_path(lp.relative_to(p, bundle) if bundle else p)
        }
        assert present == set(recorded) | set(unmanaged), (sorted(present), sorted(recorded))
        assert self.leftovers(bundle) == []


@dataclass
class SharedOwner:
    pipeline: str
    destination: str
    manifest: Manifest
    outputs: dict[str, bytes]
    mode: str = "replace"
    primary_url: str = ""


def _walk(root: Path, prefix: str = "") -> Iterator[str]:
    base = root.joinpath(*prefix.split("/")) if prefix else root
    if not base.exists():
        return
    for directory, _, names in os.walk(base):
        for name in names:
            full = Path(directory, name)
            yield str(full.relative_to(root)).replace(os.sep, "/")


def new_env(base: Path) -> Env:
    """A fresh source root and destination root under ``base``."""
    src_root = base / "src"
    dst_root = base / "dst"
    src_root.mkdir(parents=True)
    dst_root.mkdir()
    return Env(
        tmp=base,
        src_root=src_root,
        dst_root=dst_root,
        src=LocalStorage(src_root),
        dst=LocalStorage(dst_root),
    )


@pytest.fixture
def env(tmp_path: Path) -> Env:
    return new_env(tmp_path)


@pytest.fixture
def hooked(env: Env) -> HookedStorage:
    """A hookable destination storage over ``env``'s destination root."""
    return HookedStorage(env.dst_root)

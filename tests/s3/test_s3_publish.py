"""The write protocol of resolutions A1–A3 end to end on the S3 backend: a local source bundle
published to moto through ``execute.publish`` (lock with ``If-None-Match: *``, journal, backups by
server-side copy, state written last with ``If-Match``), then replaced, then refused while another
writer holds the lock."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from distributor_core.bundle import build_manifest, write_manifest
from distributor_core.execute.publish import publish
from distributor_core.execute.request import PlanRequest
from distributor_core.plan.model import DestinationPolicy
from distributor_core.storage.local import LocalStorage
from distributor_core.storage.s3 import S3Storage
from tests.lockholder import held_lock
from tests.peers.moto import MotoServer, make_s3_storage

pytestmark = pytest.mark.s3

NOW = datetime(2026, 6, 4, 12, 0, tzinfo=UTC)


def write_source(root: Path, files: dict[str, bytes], *, created: datetime) -> Any:
    bundle = root / "daily"
    bundle.mkdir(parents=True, exist_ok=True)
    for old in bundle.iterdir():
        old.unlink()
    for name, data in files.items():
        (bundle / name).write_bytes(data)
    manifest = build_manifest(bundle, id="reports.example", files=list(files), created=created)
    write_manifest(bundle, manifest, overwrite=True)
    return manifest


def raw_objects(server: MotoServer, bucket: str) -> dict[str, dict[str, Any]]:
    client = server.client()
    try:
        result: dict[str, dict[str, Any]] = {}
        for obj in client.list_objects_v2(Bucket=bucket).get("Contents", []):
            response = client.get_object(Bucket=bucket, Key=obj["Key"])
            result[obj["Key"]] = {"data": response["Body"].read(), "type": response["ContentType"]}
        return result
    finally:
        client.close()


@pytest.fixture(params=["precheck", "trusted"])
def destination(moto_server: MotoServer, request: pytest.FixtureRequest) -> Iterator[S3Storage]:
    storage = make_s3_storage(moto_server, prefix="site", conditional_writes=request.param)
    try:
        yield storage
    finally:
        storage.close()


def request_for(source: LocalStorage, destination: S3Storage, manifest: Any) -> PlanRequest:
    return PlanRequest(
        pipeline_id="reports",
        destination_id="bucket",
        source=source,
        source_bundle_path="daily",
        manifest=manifest,
        destination=destination,
        policy=DestinationPolicy(),
        distributor_version="test",
    )


def test_publish_replace_and_locked_out(moto_server: MotoServer, destination: S3Storage, tmp_path: Path) -> None:
    source = LocalStorage(tmp_path / "src", create=True)
    first = write_source(
        tmp_path / "src",
        {"report.md": b"# Report\n", "data.json": b"{}", "old.txt": b"gone soon\n"},
        created=NOW - timedelta(hours=2),
    )
    outcome = publish(request_for(source, destination, first), clock=lambda: NOW, version="test", lock_wait=2.0)
    assert outcome.status == "completed", outcome.error
    objects = raw_objects(moto_server, destination.bucket)
    assert sorted(objects) == [
        "site/daily/.distributor.json",
        "site/daily/data.json",
        "site/daily/old.txt",
        "site/daily/report.md",
    ]
    assert objects["site/daily/report.md"] == {"data": b"# Report\n", "type": "text/markdown; charset=utf-8"}
    assert objects["site/daily/data.json"]["type"] == "application/json"
    state = json.loads(objects["site/daily/.distributor.json"]["data"])
    assert [o["path"] for o in state["outputs"]] == ["report.md", "data.json", "old.txt"]

    # a newer bundle replaces the outputs (backups by copy, then deleted) and drops old.txt
    second = write_source(
        tmp_path / "src", {"report.md": b"# Report v2\n", "data.json": b"[1]"}, created=NOW - timedelta(hours=1)
    )
    outcome = publish(request_for(source, destination, second), clock=lambda: NOW, version="test", lock_wait=2.0)
    assert outcome.status == "completed", outcome.error
    assert outcome.plan is not None and outcome.plan.action.value == "replace_older"
    objects = raw_objects(moto_server, destination.bucket)
    assert sorted(objects) == ["site/daily/.distributor.json", "site/daily/data.json", "site/daily/report.md"]
    assert objects["site/daily/report.md"]["data"] == b"# Report v2\n"
    assert objects["site/daily/report.md"]["type"] == "text/markdown; charset=utf-8"
    state = json.loads(objects["site/daily/.distributor.json"]["data"])
    assert state["source"]["manifest"]["digest"] == second.digest

    # another writer (on another host, renewing its lock) holds it: the publish fails with a
    # conflict and writes nothing
    third = write_source(tmp_path / "src", {"report.md": b"# Report v3\n"}, created=NOW)
    with held_lock(destination, "daily", holder="other writer", clock=lambda: NOW):
        before = {key: value for key, value in raw_objects(moto_server, destination.bucket).items()
                  if not key.endswith(".distributor.lock")}
        outcome = publish(request_for(source, destination, third), clock=lambda: NOW, version="test", lock_wait=0.3)
        after = {key: value for key, value in raw_objects(moto_server, destination.bucket).items()
                 if not key.endswith(".distributor.lock")}
    assert outcome.status == "failed"
    assert "is locked by other writer since 2026-06-04T12:00:00Z" in outcome.error
    assert after == before

"""Fixtures for the Dagster integration tests: bundles and configs in a temporary directory, a
frozen clock, and a temporary Dagster instance."""

from __future__ import annotations

import os
import textwrap
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import pytest

from distributor_core import staging as sg
from distributor_core.bundle import build_manifest, write_manifest
from distributor_core.timefmt import compact_stamp

pytestmark = pytest.mark.dagster

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_BUNDLE = REPO / "examples" / "source-bundle"
FROZEN = datetime(2026, 6, 8, 12, 0, 0, tzinfo=UTC)


def frozen_clock() -> datetime:
    return FROZEN


def make_bundle(directory: Path, bundle_id: str, files: dict[str, str], *, created: datetime | None = None) -> Path:
    """Write ``files`` and a manifest listing them (``created`` defaults to a fixed time)."""
    directory.mkdir(parents=True, exist_ok=True)
    for rel, text in files.items():
        target = directory / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    manifest = build_manifest(directory, id=bundle_id, files=sorted(files), created=created or FROZEN)
    write_manifest(directory, manifest, overwrite=True)
    return directory


def write_config(directory: Path, body: str, name: str = "distributor.yml") -> Path:
    path = directory / name
    path.write_text(textwrap.dedent(body), encoding="utf-8")
    return path


def copy_example_bundle(target: Path) -> Path:
    target.mkdir(parents=True, exist_ok=True)
    for item in EXAMPLE_BUNDLE.iterdir():
        (target / item.name).write_bytes(item.read_bytes())
    return target


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    with dg.instance_for_test() as inst:
        yield inst


def events_of(result: dg.ExecuteInProcessResult, kind: str) -> list[dg.DagsterEvent]:
    return [event for event in result.all_events if event.event_type_value == kind]


def materializations(result: dg.ExecuteInProcessResult) -> list[dg.AssetMaterialization]:
    return [e.event_specific_data.materialization for e in events_of(result, "ASSET_MATERIALIZATION")]


def observations(result: dg.ExecuteInProcessResult) -> list[dg.AssetObservation]:
    return [e.event_specific_data.asset_observation for e in events_of(result, "ASSET_OBSERVATION")]


def meta(event: dg.AssetMaterialization | dg.AssetObservation, key: str) -> object:
    value = event.metadata[key]
    return getattr(value, "value", value)


def add_record(
    staging_path: Path, seq: int, when: datetime, status: str, *, dagster_run_id: str | None = None
) -> str:
    """An upload record as the server admits it (run id stamped ``when``, ``.seq`` raised)."""
    run_id = f"reports.daily.{compact_stamp(when)}.{seq:08x}"
    os.makedirs(staging_path / run_id / "bundle")
    record = sg.UploadRecord(
        run_id=run_id, seq=seq, pipeline_id="reports.daily", token_id="producer", idempotency_key=None,
        manifest={"schema_version": 1, "id": f"reports.b{seq}", "digest": "sha256:" + "0" * 64,
                  "created": "2026-06-01T00:00:00Z", "files": []},
        response={"run_id": run_id, "status": "accepted"}, status=status, accepted_at=when,
        dagster_run_id=dagster_run_id,
    )
    sg.write_record(staging_path, record, durable=False)
    (staging_path / sg.SEQ_NAME).write_text(f"{seq}\n")
    return run_id


def apply_tick(instance: dg.DagsterInstance, tick: dg.SensorResult) -> None:
    """What the sensor daemon does with a tick's result besides launching runs: store the tick's
    asset events (observations, check evaluations), then add and delete the requested partitions."""
    for event in tick.asset_events:
        instance.report_runless_asset_event(event)
    for request in tick.dynamic_partitions_requests or []:
        if isinstance(request, dg.AddDynamicPartitionsRequest):
            instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
        else:
            for key in request.partition_keys:
                instance.delete_dynamic_partition(request.partitions_def_name, key)

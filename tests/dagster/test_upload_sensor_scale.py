"""``uploads_<pipeline>`` over a staging area of 10,000 records: the first scan is spread over
budgeted ticks that resume where the last one stopped, and the pending uploads are requested
exactly once, in admission order (in batches). Tick times are printed, not asserted (the speed target is
bench P7)."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import dagster as dg
import pytest

from distributor_core.staging.accepted import UploadCursor
from distributor_dagster import build_definitions
from tests.dagster.conftest import add_record, write_config

pytestmark = [pytest.mark.dagster, pytest.mark.slow]

CONFIG = """\
server:
  http: {bind: "127.0.0.1:0", staging_root: staging}
upload_tokens:
  - {id: producer, token_env: TEST_UPLOAD_TOKEN, allow_pipelines: [reports.daily]}
pipelines:
  - id: reports.daily
    source: {backend: http_upload}
    destinations:
      - {id: archive, backend: local, path: out}
"""
BASE = datetime(2026, 6, 1, tzinfo=UTC)


def timed_tick(defs: dg.Definitions, cursor: str | None, instance: dg.DagsterInstance) -> tuple[dg.SensorResult, float]:
    sensor = defs.resolve_sensor_def("uploads_reports_daily")
    context = dg.build_sensor_context(cursor=cursor, instance=instance, definitions=defs)
    started = time.perf_counter()
    result = sensor(context)
    return result, time.perf_counter() - started


def test_first_scan_of_10000_records_requests_each_pending_upload_once(
    tmp_path: Path, instance: dg.DagsterInstance
) -> None:
    config = write_config(tmp_path, CONFIG)
    staging_path = tmp_path / "staging" / "reports.daily"
    staging_path.mkdir(parents=True)
    pending = []
    for seq in range(1, 10_001):
        status = "accepted" if seq % 1000 == 0 else "succeeded"
        run_id = add_record(staging_path, seq, BASE + timedelta(seconds=seq), status)
        if status == "accepted":
            pending.append(run_id)
    defs = build_definitions(config)

    requested: list[str] = []
    cursor = None
    timings = []
    # the first scan is spread over budgeted ticks; how many depends on the machine's speed and load
    for _ in range(200):
        result, seconds = timed_tick(defs, cursor, instance)
        timings.append(seconds)
        requested += [u for r in result.run_requests for u in r.run_config["resources"]["publish"]["config"]
                      ["upload_run_ids"]]
        cursor = result.cursor
        if not UploadCursor.parse(cursor).resume:
            break
    assert requested == pending

    idle, idle_seconds = timed_tick(defs, cursor, instance)
    assert idle.run_requests == []

    later = BASE + timedelta(seconds=20_000)
    new = [add_record(staging_path, 10_000 + i, later + timedelta(seconds=i), "accepted") for i in range(1, 6)]
    fresh, fresh_seconds = timed_tick(defs, idle.cursor, instance)
    # the five new ones in one run
    assert [r.run_config["resources"]["publish"]["config"]["upload_run_ids"] for r in fresh.run_requests] == [new]
    assert timed_tick(defs, fresh.cursor, instance)[0].run_requests == []
    print(f"\nuploads sensor over 10,000 records: first scan ticks {[round(t, 3) for t in timings]} s, "
          f"idle tick {idle_seconds:.4f} s, tick with 5 new uploads {fresh_seconds:.3f} s")

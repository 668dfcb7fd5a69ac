"""P7: the Dagster upload sensor's tick over 10,000 staged upload records.

A pipeline's durable staging area holds 10,000 upload records as ``distributor serve
--publisher dagster`` writes them (record JSON per upload directory, the ``.seq`` counter); one in
ten is still ``accepted`` (waiting for a publish run), the rest ``succeeded``. Ours: the
``uploads_<pipeline>`` sensor of ``build_definitions`` evaluated tick after tick (cursor carried
over, as the daemon does) until its scan is complete, then one idle tick, then a tick after 5
new uploads. Reference (no real peer exists): reading every record once with ``os.scandir`` +
``json.loads``, the I/O a naive sensor would repeat each tick.

Targets: every tick < 1 s; each accepted upload requested exactly once (no duplicate run key).
"""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench import common as c

RECORDS = 10_000
PENDING_EVERY = 10
BASE = datetime(2026, 6, 1, tzinfo=UTC)
CONFIG = """\
server:
  http: {bind: "127.0.0.1:0", staging_root: staging}
upload_tokens:
  - {id: producer, token_env: BENCH_UPLOAD_TOKEN, allow_pipelines: [reports.daily]}
pipelines:
  - id: reports.daily
    source: {backend: http_upload}
    destinations:
      - {id: archive, backend: local, path: out}
"""


def _add_record(staging_path: Path, seq: int, when: datetime, status: str) -> str:
    """An upload record as the server admits it (same layout as tests/dagster's helper)."""
    from distributor_core import staging as sg
    from distributor_core.timefmt import compact_stamp

    run_id = f"reports.daily.{compact_stamp(when)}.{seq:08x}"
    os.makedirs(staging_path / run_id / "bundle")
    record = sg.UploadRecord(
        run_id=run_id,
        seq=seq,
        pipeline_id="reports.daily",
        token_id="producer",
        idempotency_key=None,
        manifest={
            "schema_version": 1,
            "id": f"reports.b{seq}",
            "digest": "sha256:" + "0" * 64,
            "created": "2026-06-01T00:00:00Z",
            "files": [],
        },
        response={"run_id": run_id, "status": "accepted"},
        status=status,
        accepted_at=when,
    )
    sg.write_record(staging_path, record, durable=False)
    (staging_path / sg.SEQ_NAME).write_text(f"{seq}\n")
    return run_id


def _naive_scan(staging_path: Path) -> float:
    started = time.perf_counter()
    for entry in os.scandir(staging_path):
        if entry.is_dir():
            for name in os.listdir(entry.path):
                if name.endswith(".json"):
                    with open(os.path.join(entry.path, name), "rb") as handle:
                        json.loads(handle.read())
    return time.perf_counter() - started


def main() -> c.Report:
    import dagster as dg

    from distributor_core.staging.accepted import UploadCursor
    from distributor_dagster import build_definitions

    work = c.workdir("p7")
    try:
        (work / "distributor.yml").write_text(CONFIG)
        staging_path = work / "staging" / "reports.daily"
        staging_path.mkdir(parents=True)
        pending = []
        for seq in range(1, RECORDS + 1):
            status = "accepted" if seq % PENDING_EVERY == 0 else "succeeded"
            run_id = _add_record(staging_path, seq, BASE + timedelta(seconds=seq), status)
            if status == "accepted":
                pending.append(run_id)
        defs = build_definitions(work / "distributor.yml")
        sensor = defs.resolve_sensor_def("uploads_reports_daily")
        quiet = c.wait_for_quiet()

        with dg.instance_for_test() as instance:

            def tick(cursor: str | None) -> tuple[dg.SensorResult, float]:
                context = dg.build_sensor_context(cursor=cursor, instance=instance, definitions=defs)
                started = time.perf_counter()
                result = sensor(context)
                return result, time.perf_counter() - started

            requested: list[str] = []
            timings: list[float] = []
            cursor = None
            for _ in range(1000):  # as the daemon does: tick after tick until nothing is left
                result, seconds = tick(cursor)
                timings.append(seconds)
                requested += [r.run_key for r in result.run_requests]
                cursor = result.cursor
                if not result.run_requests and not UploadCursor.parse(cursor).resume:
                    break
            idle, idle_seconds = tick(cursor)
            later = BASE + timedelta(seconds=RECORDS * 2)
            new = [
                _add_record(staging_path, RECORDS + i, later + timedelta(seconds=i), "accepted") for i in range(1, 6)
            ]
            fresh, fresh_seconds = tick(idle.cursor)
            again, again_seconds = tick(fresh.cursor)
        requested += [r.run_key for r in idle.run_requests] + [r.run_key for r in fresh.run_requests]
        requested += [r.run_key for r in again.run_requests]
        expected = pending + new
        duplicates = len(requested) - len(set(requested))
        naive = min(_naive_scan(staging_path) for _ in range(3))

        slowest = max([*timings, idle_seconds, fresh_seconds, again_seconds])
        report = c.Report("P7", f"uploads sensor ticks over {RECORDS:,} staged records ({len(pending)} pending)")
        report.add("slowest tick", slowest, naive, "s", "< 1 s", slowest < 1.0, "scandir + json.loads of every record")
        report.add(
            "run requests: duplicates / missing",
            duplicates,
            None,
            "run keys",
            "0 duplicates, none missing",
            duplicates == 0 and requested == expected,
            None,
        )
        report.notes.append(
            f"draining: {len(timings)} ticks (the sensor requests at most max_runs_per_tick per tick), "
            f"slowest {max(timings):.3f} s, median {c.med(timings):.3f} s; idle tick {idle_seconds:.4f} s; "
            f"tick with 5 new uploads {fresh_seconds:.4f} s ({len(fresh.run_requests)} requested); "
            f"next {again_seconds:.4f} s"
        )
        report.notes.append(
            f"requested {len(requested)} of {len(expected)} pending uploads, in admission order: "
            f"{requested == expected}"
        )
        report.notes.append(quiet)
        c.save(report)
        return report
    finally:
        c.cleanup(work)


if __name__ == "__main__":
    main()

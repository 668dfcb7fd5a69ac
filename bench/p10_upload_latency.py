"""P10: upload to published, under the Dagster daemon, side by side with the inline publisher.

Ours: one host as docs/dagster.md "Deploying" sets it up: a throwaway PostgreSQL cluster
(tests/peers/postgres.py), ``examples/dagster/dagster.yaml`` as shipped in ``DAGSTER_HOME``, a
real ``dagster-daemon run`` and ``distributor serve --publisher dagster``; the uploads sensor at
the default interval (30 s) and at 5 s. Peer: ``distributor serve`` with the inline publisher (no
Dagster). Each sample uploads a new 64 KiB bundle and polls ``GET /runs/<id>`` every 50 ms: the
figure is 202 Accepted -> ``succeeded``. Uploads are spaced by a random pause of up to one sensor
interval, so they land at random points of the sensor's cycle.

Where the time goes is read from the events Dagster stored for each run: sensor (202 -> run
enqueued by the sensor tick), queue (enqueued -> dequeued, the run queue's pass), launch
(dequeued -> the run worker process is up: ``dagster api execute_run`` imports Dagster and loads
the code location), steps (run start -> report step done) and the rest (-> the client sees it).
``code location load`` times a fresh interpreter importing ``distributor_dagster.definitions`` on
the config against one importing ``dagster`` alone: the share of the launch that is ours.

Target: none set by the issue (reference figures); BENCH_P10_SAMPLES (default 5) per mode.
"""

from __future__ import annotations

import json
import os
import random
import secrets
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from bench import common as c
from tests.peers.process import stop_process

SAMPLES = int(os.environ.get("BENCH_P10_SAMPLES", "5"))
TOKEN_ENV = "BENCH_UPLOAD_TOKEN"
PIPELINE = "bench.latency"
SIZE = 64 * 1024
INSTANCE = c.ROOT / "examples" / "dagster" / "dagster.yaml"


def _config(work: Path, mode: str) -> Path:
    path = work / f"{mode}.yml"
    staging = work / f"staging-{mode}"
    staging.mkdir(mode=0o700)
    path.write_text(json.dumps({
        "server": {"http": {"bind": "127.0.0.1:0", "staging_root": str(staging), "queue_size": 16}},
        "upload_tokens": [{"id": "bench", "token_env": TOKEN_ENV, "allow_pipelines": [PIPELINE]}],
        "pipelines": [{
            "id": PIPELINE,
            "source": {"backend": "http_upload"},
            "destinations": [{"id": "www", "backend": "local", "path": str(work / f"www-{mode}")}],
        }],
    }, indent=2))
    return path


def _archive(work: Path, index: int) -> bytes:
    import io
    from datetime import UTC, datetime, timedelta

    from distributor_core.bundle import load_manifest
    from distributor_core.upload.archive import write_archive

    root = work / "bundles" / f"b{index:03d}"
    created = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(minutes=index)  # each newer: replaces
    c.make_bundle(root, [("data.bin", SIZE)], bundle_id="bench.latency", seed=index, created=created)
    buffer = io.BytesIO()
    write_archive(root, load_manifest(root), buffer)
    return buffer.getvalue()


def _start_serve(config: Path, env: dict[str, str], log: Path, *extra: str) -> tuple[subprocess.Popen, str]:
    handle = open(log, "ab")  # noqa: SIM115 - closed with the process
    proc = subprocess.Popen([c.DISTRIBUTOR, "serve", "--config", str(config), *extra], env=env,
                            stdout=handle, stderr=handle, stdin=subprocess.DEVNULL)
    handle.close()
    deadline = time.monotonic() + 60
    marker = "serving HTTP upload API on "
    while True:
        text = log.read_text(errors="replace")
        if marker in text:
            return proc, "http://" + text.split(marker, 1)[1].split()[0]
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"serve did not start: {text[-2000:]}")
        time.sleep(0.05)


def _sample(client, base: str, token: str, archive: bytes) -> tuple[str, float, float, float]:
    """Upload once; (run id, wall time of the 202, seconds to succeeded, wall time seen)."""
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/gzip"}
    response = client.post(f"{base}/v1/pipelines/{PIPELINE}/upload", content=archive, headers=headers)
    accepted = time.time()
    start = time.perf_counter()
    if response.status_code != 202:
        raise RuntimeError(f"upload refused: {response.status_code} {response.text}")
    run_id = response.json()["run_id"]
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        body = client.get(f"{base}/runs/{run_id}", headers={"Authorization": f"Bearer {token}"}).json()
        if body["status"] in ("succeeded", "failed"):
            if body["status"] != "succeeded":
                raise RuntimeError(f"upload {run_id} failed: {body.get('error')}")
            return run_id, accepted, time.perf_counter() - start, time.time()
        time.sleep(0.05)
    raise RuntimeError(f"upload {run_id} did not finish within 300 s")


def _phases(instance, run_id: str, accepted: float, seen: float) -> dict[str, float]:
    import dagster as dg

    [run] = instance.get_runs(filters=dg.RunsFilter(tags={"distributor/upload_run_id": run_id}))
    marks: dict[str, float] = {}
    last_step = 0.0
    for entry in instance.all_logs(run.run_id):
        event = entry.dagster_event
        if event is None:
            continue
        marks.setdefault(event.event_type_value, entry.timestamp)
        if event.event_type_value == "STEP_SUCCESS":
            last_step = entry.timestamp
    first_step = min(e.timestamp for e in instance.all_logs(run.run_id)
                     if e.dagster_event and e.dagster_event.event_type_value == "STEP_START")
    return {
        "sensor": marks["PIPELINE_ENQUEUED"] - accepted,
        "queue": marks["PIPELINE_STARTING"] - marks["PIPELINE_ENQUEUED"],
        "launch": marks["PIPELINE_START"] - marks["PIPELINE_STARTING"],
        "step start-up": first_step - marks["PIPELINE_START"],
        "steps": last_step - first_step,
        "rest": seen - last_step,
    }


def _inline(work: Path, token: str, archives: list[bytes]) -> list[float]:
    import httpx

    config = _config(work, "inline")
    env = {**os.environ, TOKEN_ENV: token}
    proc, base = _start_serve(config, env, work / "serve-inline.log")
    try:
        with httpx.Client(timeout=60) as client:
            return [_sample(client, base, token, archive)[2] for archive in archives]
    finally:
        stop_process(proc)


def _tick_seconds(instance, sensor: str) -> list[float]:
    """How long each recorded tick of ``sensor`` took (Dagster's tick records)."""
    states = [s for s in instance.all_instigator_state() if s.instigator_name == sensor]
    ticks = instance.get_ticks(states[0].instigator_origin_id, states[0].selector_id) if states else []
    return [t.end_timestamp - t.timestamp for t in ticks if t.end_timestamp]


def _sensor_body_seconds(instance, config: Path, sensor: str, repeat: int = 20) -> float:
    """Median time of our sensor function alone, evaluated in this process on the daemon's last
    cursor (nothing new: the steady state between uploads)."""
    import dagster as dg

    from distributor_dagster import build_definitions

    [state] = [s for s in instance.all_instigator_state() if s.instigator_name == sensor]
    cursor = state.instigator_data.cursor if state.instigator_data else None
    definition = build_definitions(config).resolve_sensor_def(sensor)
    times = []
    for _ in range(repeat):
        context = dg.build_sensor_context(instance=instance, cursor=cursor)
        start = time.perf_counter()
        result = definition(context)
        times.append(time.perf_counter() - start)
        if result.run_requests:
            raise RuntimeError("the in-process evaluation requested a run: the daemon's cursor was behind")
    return statistics.median(times)


def _dagster(
    work: Path, token: str, archives: list[bytes], interval: int, pg
) -> tuple[list[float], list[dict], list[float], float]:
    import dagster as dg
    import httpx

    from tests.peers.daemon import environment, make_dagster_home, run_daemon

    mode = f"dagster-{interval}s"
    config = _config(work, mode)
    home = make_dagster_home(work / f"home-{interval}", INSTANCE)
    env = {
        **pg.environment(pg.create_database()),
        TOKEN_ENV: token,
        "DISTRIBUTOR_CONFIG": str(config),
        "DISTRIBUTOR_DAGSTER_SENSOR_STATUS": "running",
        "DAGSTER_HOME": str(home),
    }
    if interval != 30:
        env["DISTRIBUTOR_DAGSTER_SENSOR_INTERVAL"] = str(interval)
    latencies, phases = [], []
    with environment(env), run_daemon(home, env, work / f"daemon-{interval}.log", cwd=work):
        proc, base = _start_serve(config, {**os.environ}, work / f"serve-{mode}.log", "--publisher", "dagster")
        try:
            with dg.DagsterInstance.from_config(str(home)) as instance, httpx.Client(timeout=60) as client:
                for archive in archives:
                    time.sleep(random.uniform(0, interval))
                    run_id, accepted, latency, seen = _sample(client, base, token, archive)
                    latencies.append(latency)
                    phases.append(_phases(instance, run_id, accepted, seen))
                sensor = "uploads_" + PIPELINE.replace(".", "_")
                ticks = _tick_seconds(instance, sensor)
                body = _sensor_body_seconds(instance, config, sensor)
        finally:
            stop_process(proc)
    return latencies, phases, ticks, body


def _load_time(config: Path, token: str) -> tuple[float, float]:
    """Best of 3: a fresh interpreter importing the code location vs importing dagster alone."""
    env = {**os.environ, "DISTRIBUTOR_CONFIG": str(config), TOKEN_ENV: token}
    python = str(c.VENV_BIN / "python")
    ours = min(c.run_timed([python, "-c", "import distributor_dagster.definitions"], env=env).wall for _ in range(3))
    peer = min(c.run_timed([python, "-c", "import dagster"], env=env).wall for _ in range(3))
    return ours, peer


def main() -> c.Report:
    from tests.peers.postgres import start_postgres, stop_postgres

    work = c.workdir("p10")
    pg_dir = Path(tempfile.mkdtemp(prefix="bench-p10-postgres-"))
    pg = pg_proc = None
    try:
        token = secrets.token_urlsafe(24)
        archives = [_archive(work, i) for i in range(3 * SAMPLES)]
        quiet = c.wait_for_quiet()
        pg, pg_proc = start_postgres(pg_dir)
        inline = _inline(work, token, archives[:SAMPLES])
        fast, fast_phases, fast_ticks, body = _dagster(work, token, archives[SAMPLES:2 * SAMPLES], 5, pg)
        default, default_phases, default_ticks, _ = _dagster(work, token, archives[2 * SAMPLES:], 30, pg)
        load, dagster_only = _load_time(work / "inline.yml", token)

        report = c.Report("P10", "upload 202 -> succeeded: Dagster daemon (PostgreSQL) vs inline publisher")
        report.add("202 -> succeeded, daemon, sensor 30 s (default)", c.med(default), c.med(inline), "s",
                   "(reference)", None, "inline publisher")
        report.add("202 -> succeeded, daemon, sensor 5 s", c.med(fast), c.med(inline), "s", "(reference)", None,
                   "inline publisher")
        ticks = fast_ticks + default_ticks
        report.add("uploads sensor: our function (nothing new) vs Dagster's whole tick", body, c.med(ticks), "s",
                   "(reference)", None, "tick record, median")
        report.add("code location load in a fresh process", load, dagster_only, "s", "(reference)", None,
                   "import dagster")
        report.notes.append(f"{len(ticks)} sensor ticks, slowest {max(ticks):.3f} s")
        for name, phases in (("5 s", fast_phases), ("30 s", default_phases)):
            parts = ", ".join(f"{k} {statistics.median(p[k] for p in phases):.2f}" for k in phases[0])
            report.notes.append(f"sensor {name}, median seconds per phase: {parts}")
        for name, values in (("inline", inline), ("daemon 5 s", fast), ("daemon 30 s", default)):
            report.notes.append(f"{name} samples (s): " + ", ".join(f"{v:.2f}" for v in values))
        report.notes.append(quiet)
        report.notes.append(f"load average at the end: {c.loadavg()}")
        c.save(report)
        return report
    finally:
        if pg_proc is not None:
            stop_postgres(pg_proc)
        shutil.rmtree(pg_dir, ignore_errors=True)
        c.cleanup(work)


if __name__ == "__main__":
    main()

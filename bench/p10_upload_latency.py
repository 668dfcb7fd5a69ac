"""P10: upload to published, under the Dagster daemon, side by side with the inline publisher.

Ours: one host as docs/dagster.md "Deploying" sets it up: a throwaway PostgreSQL cluster
(tests/peers/postgres.py), ``examples/dagster/dagster.yaml`` as shipped in ``DAGSTER_HOME``, a
real ``dagster-daemon run`` and ``distributor serve --publisher dagster``; the uploads sensor at
the default interval (30 s) and at 5 s. Peer: ``distributor serve`` with the inline publisher (no
Dagster). Each sample uploads a new 64 KiB bundle and polls ``GET /runs/<id>`` every 50 ms: the
figure is 202 Accepted -> ``succeeded``. Uploads are spaced by a random pause of up to one sensor
interval, so they land at random points of the sensor's cycle.

Where the time goes, per run, from the tick records and the events Dagster stored:

- wait for tick: 202 -> the start of the sensor tick that requested the run (the interval);
- tick: -> run enqueued (Dagster evaluates the sensor in the code server, creates the run);
- queue: -> dequeued (STARTING: the run queue's pass, ``dequeue_interval_seconds``);
- spawn: -> "Started process for run" (a fresh interpreter that imports Dagster);
- load: -> run start (the run worker loads the code location: our modules and config);
- step start-up: -> the first step starts (resources, log capture);
- steps: -> the upload record is final (the ``report`` step logs "upload <id>: succeeded");
- rest: -> the client's next ``GET /runs/<id>`` sees it.

What is ours in that, each measured on its own next to Dagster's part:

- sensor reads: the uploads sensor function alone, on an idle tick and on a tick that finds one
  new upload (the cursor the daemon had before it), against Dagster's whole tick;
- launch payload: the code location a run worker loads (``import distributor_dagster.definitions``
  in an interpreter that has imported Dagster: our modules, config and ``Definitions``), CPU
  seconds, with our bytecode compiled (as ``pip install`` leaves it) and compiled from source (an
  editable checkout under ``PYTHONDONTWRITEBYTECODE``), against ``import dagster`` alone;
- step start-up and steps: one more upload run executed in this process on the same instance under
  a profiler: the time spent in distributor code against the run's wall time, the events the run
  stored and the PostgreSQL connections it opened (dagster-postgres opens one per storage call).

The benchmark compiles distributor's bytecode first (``compileall``; ``pip install`` does the same
for a wheel), so the run workers it measures load it like a production install.

Target: none set by the issue (reference figures); BENCH_P10_SAMPLES (default 5) per mode.
"""

from __future__ import annotations

import collections
import cProfile
import io
import json
import os
import pstats
import random
import secrets
import shutil
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench import common as c
from tests.peers.process import stop_process

SAMPLES = int(os.environ.get("BENCH_P10_SAMPLES", "5"))
TOKEN_ENV = "BENCH_UPLOAD_TOKEN"
PIPELINE = "bench.latency"
SENSOR = "uploads_" + PIPELINE.replace(".", "_")
JOB = "publish_" + PIPELINE.replace(".", "_")
SIZE = 64 * 1024
INSTANCE = c.ROOT / "examples" / "dagster" / "dagster.yaml"
OUR_PACKAGES = ("distributor_core", "distributor_dagster")
PHASES = ("wait for tick", "tick", "queue", "spawn", "load", "step start-up", "steps", "rest")


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
    from datetime import UTC, datetime, timedelta

    from distributor_core.bundle import load_manifest
    from distributor_core.upload.archive import write_archive

    root = work / "bundles" / f"b{index:03d}"
    created = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(minutes=index)  # each newer: replaces
    c.make_bundle(root, [("data.bin", SIZE)], bundle_id="bench.latency", seed=index, created=created)
    buffer = io.BytesIO()
    write_archive(root, load_manifest(root), buffer)
    return buffer.getvalue()


def _compile_bytecode() -> None:
    """What ``pip install`` does for a wheel: our modules' bytecode, so that a run worker does
    not compile them (``py_compile`` writes even under ``PYTHONDONTWRITEBYTECODE``)."""
    packages = [str(c.ROOT / name) for name in OUR_PACKAGES]
    c.run_timed([str(c.VENV_BIN / "python"), "-m", "compileall", "-q", *packages])


def _start_serve(config: Path, env: dict[str, str], log: Path, *extra: str,
                 binary: str = c.DISTRIBUTOR) -> tuple[subprocess.Popen, str]:
    handle = open(log, "ab")  # noqa: SIM115 - closed with the process
    proc = subprocess.Popen([binary, "serve", "--config", str(config), *extra], env=env,
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


def _upload(client, base: str, token: str, archive: bytes) -> tuple[str, float]:
    """POST one upload; (run id, wall time of the 202)."""
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/gzip"}
    response = client.post(f"{base}/v1/pipelines/{PIPELINE}/upload", content=archive, headers=headers)
    accepted = time.time()
    if response.status_code != 202:
        raise RuntimeError(f"upload refused: {response.status_code} {response.text}")
    return response.json()["run_id"], accepted


def _sample(client, base: str, token: str, archive: bytes) -> tuple[str, float, float, float]:
    """Upload once; (run id, wall time of the 202, seconds to succeeded, wall time seen)."""
    run_id, accepted = _upload(client, base, token, archive)
    start = time.perf_counter()
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        body = client.get(f"{base}/runs/{run_id}", headers={"Authorization": f"Bearer {token}"}).json()
        if body["status"] in ("succeeded", "failed"):
            if body["status"] != "succeeded":
                raise RuntimeError(f"upload {run_id} failed: {body.get('error')}")
            return run_id, accepted, time.perf_counter() - start, time.time()
        time.sleep(0.05)
    raise RuntimeError(f"upload {run_id} did not finish within 300 s")


def _ticks(instance) -> list:
    """The uploads sensor's recorded ticks, oldest first."""
    states = [s for s in instance.all_instigator_state() if s.instigator_name == SENSOR]
    if not states:
        return []
    return list(reversed(instance.get_ticks(states[0].instigator_origin_id, states[0].selector_id)))


def _phases(instance, ticks: list, run_id: str, accepted: float, seen: float) -> dict[str, float]:
    import dagster as dg

    [run] = instance.get_runs(filters=dg.RunsFilter(tags={"distributor/upload_run_id": run_id}))
    [tick] = [t for t in ticks if run.run_id in t.run_ids]
    marks: dict[str, float] = {}
    spawned = final = None
    for entry in instance.all_logs(run.run_id):
        event = entry.dagster_event
        if event is None:
            if final is None and entry.user_message == f"upload {run_id}: succeeded":
                final = entry.timestamp
            continue
        marks.setdefault(event.event_type_value, entry.timestamp)
        if spawned is None and event.event_type_value == "ENGINE_EVENT" and "Started process for run" in (
            event.message or entry.user_message or ""
        ):
            spawned = entry.timestamp
    if spawned is None or final is None:
        raise RuntimeError(f"run {run.run_id}: no 'Started process' event or no final upload log line")
    return {
        "wait for tick": tick.timestamp - accepted,
        "tick": marks["PIPELINE_ENQUEUED"] - tick.timestamp,
        "queue": marks["PIPELINE_STARTING"] - marks["PIPELINE_ENQUEUED"],
        "spawn": spawned - marks["PIPELINE_STARTING"],
        "load": marks["PIPELINE_START"] - spawned,
        "step start-up": marks["STEP_START"] - marks["PIPELINE_START"],
        "steps": final - marks["STEP_START"],
        "rest": seen - final,
    }


def _sensor_seconds(instance, config: Path, cursor: str | None, *, expect_runs: int, repeat: int = 20) -> float:
    """Median time of our uploads sensor function alone on ``cursor``, evaluated in this process
    on the daemon's instance (the first evaluation, which may create the pools, is not counted)."""
    import dagster as dg

    from distributor_dagster import build_definitions

    definition = build_definitions(config).resolve_sensor_def(SENSOR)
    times = []
    for _ in range(repeat + 1):
        context = dg.build_sensor_context(instance=instance, cursor=cursor)
        start = time.perf_counter()
        result = definition(context)
        times.append(time.perf_counter() - start)
        if len(result.run_requests) != expect_runs:
            raise RuntimeError(f"the in-process evaluation requested {len(result.run_requests)} run(s), "
                               f"not {expect_runs}")
    return statistics.median(times[1:])


@dataclass
class DaemonMode:
    latencies: list[float] = field(default_factory=list)
    phases: list[dict[str, float]] = field(default_factory=list)
    #: Dagster's whole tick (start -> end), skipped ticks and ticks that requested a run
    idle_ticks: list[float] = field(default_factory=list)
    run_ticks: list[float] = field(default_factory=list)
    #: our sensor function: idle tick, tick that finds one upload
    sensor_idle: float = 0.0
    sensor_new: float = 0.0
    #: events stored per run, by type, for the last sample
    events: collections.Counter = field(default_factory=collections.Counter)
    profile: dict[str, float] = field(default_factory=dict)


def _profiled_run(instance, config: Path, upload_run_id: str) -> dict[str, float]:
    """One publish run of a staged upload in this process under cProfile: wall, seconds inside
    distributor code, events stored, PostgreSQL connections opened."""
    from distributor_dagster import build_definitions
    from tests.production.harness import publish_run_config

    job = build_definitions(config).resolve_job_def(JOB)

    profile = cProfile.Profile()
    start = time.perf_counter()
    profile.enable()
    run_config = {**publish_run_config(config, PIPELINE, upload_run_id=upload_run_id),
                  "loggers": {"console": {"config": {"log_level": "WARNING"}}}}  # events are stored all the same
    result = job.execute_in_process(run_config=run_config, instance=instance,
                                    tags={"distributor/upload_run_id": upload_run_id})
    profile.disable()
    wall = time.perf_counter() - start
    if not result.success:
        raise RuntimeError(f"the profiled run of {upload_run_id} failed")
    stats = pstats.Stats(profile, stream=io.StringIO())
    ours = connects = 0.0
    roots = tuple(str(c.ROOT / name) + os.sep for name in OUR_PACKAGES)
    for (filename, _, name), (_, calls, own, _, _) in stats.stats.items():  # type: ignore[attr-defined]
        if filename.startswith(roots):
            ours += own
        if name == "<built-in method psycopg2._psycopg._connect>":
            connects += calls
    events = len([e for e in instance.all_logs(result.run_id) if e.dagster_event is not None or e.user_message])
    return {"profiled wall": wall, "ours share": ours / stats.total_tt if stats.total_tt else 0.0,  # type: ignore[attr-defined]
            "events": events, "connections": connects}


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


def _dagster(work: Path, token: str, archives: list[bytes], interval: int, pg, *, dissect: bool) -> DaemonMode:
    import dagster as dg
    import httpx

    from tests.peers.daemon import Daemon, environment, make_dagster_home

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
    result = DaemonMode()
    with environment(env):
        daemon = Daemon.start(home, env, work / f"daemon-{interval}.log", cwd=work)
        proc = None
        try:
            daemon.wait_ready()
            proc, base = _start_serve(config, {**os.environ}, work / f"serve-{mode}.log", "--publisher", "dagster")
            with dg.DagsterInstance.from_config(str(home)) as instance, httpx.Client(timeout=60) as client:
                samples = []
                for archive in archives[:-1] if dissect else archives:  # the last one is dissected
                    time.sleep(random.uniform(0, interval))
                    samples.append(_sample(client, base, token, archive))
                    result.latencies.append(samples[-1][2])
                ticks = _ticks(instance)
                for run_id, accepted, _, seen in samples:
                    result.phases.append(_phases(instance, ticks, run_id, accepted, seen))
                for tick in ticks:
                    if tick.end_timestamp:
                        (result.run_ticks if tick.run_ids else result.idle_ticks).append(
                            tick.end_timestamp - tick.timestamp)
                [run] = instance.get_runs(filters=dg.RunsFilter(tags={"distributor/upload_run_id": samples[-1][0]}))
                for entry in instance.all_logs(run.run_id):
                    event = entry.dagster_event
                    result.events[event.event_type_value if event else "log message"] += 1
                daemon.stop()  # from here on nothing else picks up an upload
                if dissect:
                    cursor = _ticks(instance)[-1].cursor
                    result.sensor_idle = _sensor_seconds(instance, config, cursor, expect_runs=0)
                    upload_run_id, _ = _upload(client, base, token, archives[-1])
                    result.sensor_new = _sensor_seconds(instance, config, cursor, expect_runs=1)
                    result.profile = _profiled_run(instance, config, upload_run_id)
        finally:
            daemon.stop()
            if proc is not None:
                stop_process(proc)
    return result


def _load_cpu(config: Path, token: str, *, bytecode: bool) -> tuple[float, float]:
    """Best of 3 fresh interpreters: CPU seconds of ``import dagster``, then of loading the code
    location (our modules, config, Definitions); ``bytecode=False`` compiles our modules from
    source, as an editable checkout under ``PYTHONDONTWRITEBYTECODE`` does."""
    script = (
        "import sys, time\n"
        "c0 = time.process_time()\n"
        "import dagster\n"
        "c1 = time.process_time()\n"
        f"if {not bytecode!r}:\n"
        "    import tempfile\n"
        "    sys.pycache_prefix = tempfile.mkdtemp()\n"
        "    sys.dont_write_bytecode = True\n"
        "import distributor_dagster.definitions\n"
        "c2 = time.process_time()\n"
        "print(c1 - c0, c2 - c1)\n"
    )
    env = {"DISTRIBUTOR_CONFIG": str(config), TOKEN_ENV: token}
    runs = [c.run_timed([str(c.VENV_BIN / "python"), "-c", script], env=env).stdout.split() for _ in range(3)]
    return min(float(r[1]) for r in runs), min(float(r[0]) for r in runs)


def _median_phases(phases: list[dict[str, float]]) -> str:
    return ", ".join(f"{k} {statistics.median(p[k] for p in phases):.2f}" for k in PHASES)


def main() -> c.Report:
    from tests.peers.postgres import start_postgres, stop_postgres

    work = c.workdir("p10")
    pg_dir = Path(tempfile.mkdtemp(prefix="bench-p10-postgres-"))
    pg = pg_proc = None
    try:
        token = secrets.token_urlsafe(24)
        archives = [_archive(work, i) for i in range(3 * SAMPLES + 1)]
        _compile_bytecode()
        quiet = c.wait_for_quiet()
        pg, pg_proc = start_postgres(pg_dir)
        inline = _inline(work, token, archives[:SAMPLES])
        fast = _dagster(work, token, archives[SAMPLES:2 * SAMPLES + 1], 5, pg, dissect=True)
        default = _dagster(work, token, archives[2 * SAMPLES + 1:], 30, pg, dissect=False)
        load, dagster_only = _load_cpu(work / "inline.yml", token, bytecode=True)
        load_source, _ = _load_cpu(work / "inline.yml", token, bytecode=False)

        report = c.Report("P10", "upload 202 -> succeeded: Dagster daemon (PostgreSQL) vs inline publisher")
        report.add("202 -> succeeded, daemon, sensor 30 s (default)", c.med(default.latencies), c.med(inline), "s",
                   "(reference)", None, "inline publisher")
        report.add("202 -> succeeded, daemon, sensor 5 s", c.med(fast.latencies), c.med(inline), "s",
                   "(reference)", None, "inline publisher")
        idle_ticks = fast.idle_ticks + default.idle_ticks
        run_ticks = fast.run_ticks + default.run_ticks
        report.add("ours: uploads sensor function, idle tick", fast.sensor_idle, c.med(idle_ticks), "s",
                   "(reference)", None, "Dagster's whole skipped tick, median")
        report.add("ours: uploads sensor function, tick with 1 new upload", fast.sensor_new, c.med(run_ticks), "s",
                   "(reference)", None, "Dagster's whole tick that requested the run, median")
        report.add("ours: code location load in a run worker, CPU (bytecode compiled)", load, dagster_only, "s",
                   "(reference)", None, "import dagster, CPU")
        report.add("ours: same, our modules compiled from source", load_source, dagster_only, "s",
                   "(reference)", None, "import dagster, CPU")
        prof = fast.profile
        report.add("ours: share of a publish run's time in distributor code (profiled, in process)",
                   prof["ours share"] * 100, 100.0, "%", "(reference)", None, "whole run")
        report.notes.append(
            f"profiled in-process upload run: {prof['profiled wall']:.2f} s wall under the profiler, "
            f"{prof['events']:.0f} events stored, {prof['connections']:.0f} PostgreSQL connections opened")
        report.notes.append("events of the last daemon run by type: "
                            + ", ".join(f"{k} {n}" for k, n in fast.events.most_common()))
        report.notes.append(f"{len(idle_ticks)} skipped ticks (slowest {max(idle_ticks, default=0):.3f} s), "
                            f"{len(run_ticks)} ticks with a run (slowest {max(run_ticks, default=0):.3f} s)")
        for name, mode in (("5 s", fast), ("30 s", default)):
            report.notes.append(f"sensor {name}, median seconds per phase: {_median_phases(mode.phases)}")
        for name, values in (("inline", inline), ("daemon 5 s", fast.latencies), ("daemon 30 s", default.latencies)):
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

"""P14: many uploads for one pipeline under the Dagster daemon: batched runs vs one run per upload
(issue 28 item 3).

One host as docs/dagster.md "Deploying" sets it up (a throwaway PostgreSQL cluster, the shipped
``examples/dagster/dagster.yaml``, a real ``dagster-daemon run``, ``distributor serve --publisher
dagster``), the uploads sensor at 5 s. Each mode gets its own database and staging area: the
uploads (successive 64 KiB versions of one bundle) are staged while no daemon runs, then the daemon
starts and the figure is daemon ready -> every upload record final. Ours: this tree's batching
(``bundles_per_run`` default 100). Peer: the behaviour before it, one run per upload, which this
tree gives with ``DISTRIBUTOR_DAGSTER_BUNDLES_PER_RUN=1`` (same sensor, same runs of one upload).

Exactness, checked for both: every record ``succeeded``, its ``dagster_run_id`` is a run of the
pipeline that carries the upload's own tag, and the runs hold every upload once.

Target (issue 28): 100 uploads for one pipeline published in <= 5 runs, each record exact.
Knobs: ``BENCH_P14_UPLOADS`` (default 100), ``BENCH_P14_PEER_UPLOADS`` (default the same; fewer
keeps the one-run-per-upload side short: its figure is then also given per upload).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench import common as c
from bench.p10_upload_latency import INSTANCE, PIPELINE, TOKEN_ENV, _archive, _compile_bytecode, _start_serve
from tests.peers.process import stop_process

UPLOADS = int(os.environ.get("BENCH_P14_UPLOADS", "100"))
PEER_UPLOADS = int(os.environ.get("BENCH_P14_PEER_UPLOADS", str(UPLOADS)))
INTERVAL = 5
TARGET_RUNS = 5


@dataclass
class Mode:
    uploads: int
    runs: int
    seconds: float
    exact: bool
    problems: list[str]


def _config(work: Path, mode: str, uploads: int) -> Path:
    """P10's one-pipeline config, with room in the server's queue for every upload staged at once."""
    path = work / f"{mode}.yml"
    staging = work / f"staging-{mode}"
    staging.mkdir(mode=0o700)
    path.write_text(json.dumps({
        "server": {"http": {"bind": "127.0.0.1:0", "staging_root": str(staging), "queue_size": uploads + 16}},
        "upload_tokens": [{"id": "bench", "token_env": TOKEN_ENV, "allow_pipelines": [PIPELINE]}],
        "pipelines": [{
            "id": PIPELINE,
            "source": {"backend": "http_upload"},
            "destinations": [{"id": "www", "backend": "local", "path": str(work / f"www-{mode}")}],
        }],
    }, indent=2))
    return path


def _staging(config: Path) -> Path:
    from distributor_core.config import load_config

    return Path(load_config(config).pipeline(PIPELINE).source.staging_path)  # type: ignore[union-attr]


def _mode(work: Path, name: str, token: str, archives: list[bytes], pg, env_extra: dict[str, str]) -> Mode:
    import dagster as dg
    import httpx

    from distributor_core import staging as sg
    from distributor_dagster.upload_status import upload_tag
    from tests.peers.daemon import Daemon, environment, make_dagster_home

    config = _config(work, name, len(archives))
    home = make_dagster_home(work / f"home-{name}", INSTANCE)
    env = {
        **pg.environment(pg.create_database()),
        TOKEN_ENV: token,
        "DISTRIBUTOR_CONFIG": str(config),
        "DISTRIBUTOR_DAGSTER_SENSOR_STATUS": "running",
        "DISTRIBUTOR_DAGSTER_SENSOR_INTERVAL": str(INTERVAL),
        "DAGSTER_HOME": str(home),
        **env_extra,
    }
    staging = _staging(config)
    with environment(env):
        proc, base = _start_serve(config, {**os.environ}, work / f"serve-{name}.log", "--publisher", "dagster")
        try:
            run_ids = []
            with httpx.Client(timeout=60) as client:
                headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/gzip"}
                for archive in archives:
                    response = client.post(f"{base}/v1/pipelines/{PIPELINE}/upload", content=archive,
                                           headers=headers)
                    if response.status_code != 202:
                        raise RuntimeError(f"upload refused: {response.status_code} {response.text}")
                    run_ids.append(response.json()["run_id"])
        finally:
            stop_process(proc)
        daemon = Daemon.start(home, env, work / f"daemon-{name}.log", cwd=work)
        try:
            daemon.wait_ready()
            started = time.monotonic()
            while True:
                records = [sg.read_record(staging, run_id) for run_id in run_ids]
                if all(r.finished for r in records):
                    break
                if time.monotonic() - started > 120 + 60 * len(run_ids):
                    raise RuntimeError(f"{name}: uploads not finished: "
                                       f"{sum(not r.finished for r in records)} of {len(records)}")
                time.sleep(1)
            seconds = time.monotonic() - started
            with dg.DagsterInstance.from_config(str(home)) as instance:
                runs = instance.get_runs(filters=dg.RunsFilter(tags={"distributor/pipeline": PIPELINE}))
                by_id = {run.run_id: run for run in runs}
                problems = []
                for record in records:
                    run = by_id.get(record.dagster_run_id or "")
                    key, value = upload_tag(record.run_id)
                    if record.status != sg.SUCCEEDED:
                        problems.append(f"{record.run_id}: {record.status} {record.error}")
                    elif run is None or run.tags.get(key) != value:
                        problems.append(f"{record.run_id}: run {record.dagster_run_id} does not carry its tag")
                tagged = sum(1 for run in runs for key in run.tags if key.startswith("distributor/upload."))
                if tagged != len(records):
                    problems.append(f"{tagged} upload tags over the runs for {len(records)} uploads")
        finally:
            daemon.stop()
    return Mode(len(run_ids), len(runs), seconds, not problems, problems)


def main() -> c.Report:
    from tests.peers.postgres import start_postgres, stop_postgres

    work = c.workdir("p14")
    pg_dir = Path(tempfile.mkdtemp(prefix="bench-p14-postgres-"))
    pg_proc = None
    try:
        token = secrets.token_urlsafe(24)
        archives = [_archive(work, i) for i in range(max(UPLOADS, PEER_UPLOADS))]
        _compile_bytecode()
        quiet = c.wait_for_quiet()
        pg, pg_proc = start_postgres(pg_dir)
        load_before = c.loadavg()
        ours = _mode(work, "batched", token, archives[:UPLOADS], pg, {})
        load_between = c.loadavg()
        peer = _mode(work, "per-upload", token, archives[:PEER_UPLOADS], pg,
                     {"DISTRIBUTOR_DAGSTER_BUNDLES_PER_RUN": "1"})

        report = c.Report("P14", f"{UPLOADS} uploads for one pipeline under dagster-daemon (PostgreSQL): batched "
                                 "runs vs one run per upload")
        report.add(f"runs for {UPLOADS} uploads", ours.runs, peer.runs * UPLOADS / peer.uploads, "runs",
                   f"<= {TARGET_RUNS}", ours.runs <= TARGET_RUNS and ours.exact, "one run per upload")
        report.add(f"daemon ready -> {UPLOADS} upload records final", ours.seconds,
                   peer.seconds * UPLOADS / peer.uploads, "s", "(reference)", None,
                   "one run per upload" + ("" if peer.uploads == UPLOADS else
                                           f", {peer.uploads} uploads measured, scaled to {UPLOADS}"))
        report.add("seconds per upload", ours.seconds / ours.uploads, peer.seconds / peer.uploads, "s",
                   "(reference)", None, "one run per upload")
        report.add("records exact (1 = yes)", float(ours.exact), float(peer.exact), "", "1", ours.exact,
                   "one run per upload")
        report.notes.append(f"batched: {ours.uploads} uploads, {ours.runs} runs, {ours.seconds:.1f} s; "
                            f"one run per upload: {peer.uploads} uploads, {peer.runs} runs, {peer.seconds:.1f} s")
        for name, mode in (("batched", ours), ("one run per upload", peer)):
            if mode.problems:
                report.notes.append(f"{name}: " + "; ".join(mode.problems[:5]))
        report.notes.append(quiet)
        report.notes.append(f"load average before: {load_before}; between the modes: {load_between}; "
                            f"at the end: {c.loadavg()}")
        c.save(report)
        return report
    finally:
        if pg_proc is not None:
            stop_postgres(pg_proc)
        shutil.rmtree(pg_dir, ignore_errors=True)
        c.cleanup(work)


if __name__ == "__main__":
    main()

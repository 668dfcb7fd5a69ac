"""P13: the Dagster code location at 50, 200 and 1,000 pipelines (issues 28 and 37), this tree
against the code before the change measured (``BENCH_BASE_TREE`` / ``BENCH_BASE_REF``), in the same run.

Each site is generated: P pipelines, each over its own small local source holding one bundle,
each with the three destinations of the issue's layout (a per-bundle ``archive``, a ``fixed``
``latest``, an HTML ``site``) on roots of their own under the work directory (3 × P roots).
Every measurement runs in a fresh interpreter (``.venv/bin/python``, the same dependencies for
both) with ``PYTHONPATH`` set to one tree or the other, alternating which tree goes first:

- **build**: ``build_definitions(config)`` then ``Definitions.get_repository_def()`` and
  ``resolve_asset_graph()``, so the repository is really built (imports are paid before); wall
  and the child's CPU (``time.process_time``), steadier on a shared machine;
- **snapshot**: the bytes a code server sends the webserver and the daemon when they load the
  location (``dagster._grpc.server`` in 1.13): ``RepositorySnap.from_def(repo,
  defer_snapshots=True)`` serialised (the ``ExternalRepository`` reply), plus one
  ``JobDataSnap.from_job_def(job, include_parent_snapshot=True)`` serialised per job (the
  ``ExternalJob`` replies the client fetches next); size is the UTF-8 length, time is building and
  serialising all of it;
- **peak RSS**: the child's ``VmHWM`` after build and snapshot (``ru_maxrss`` would include the
  parent it was forked from; both are recorded);
- **counts**: assets, asset checks, jobs (the implicit asset job included) and sensors;
- **sensor round**: every sensor evaluated once as the code server does
  (``SensorDefinition.evaluate_tick`` with ``dg.build_sensor_context(instance=...,
  definitions=defs)``) on a SQLite instance, cursors carried over and the daemon's share applied
  (dynamic partitions added, observations stored); a first round (pools created, cursors set,
  each source's bundle found), then steady rounds, of which the best is the headline;
- **first tick on PostgreSQL** (``BENCH_P13_PG``, on by default): a fresh database of a throwaway
  cluster (tests/peers/postgres.py, as P10 does), ``examples/dagster/dagster.yaml`` as the
  instance, and the first round of every sensor of the largest site (3,000 roots at P = 1,000) in
  a fresh process: total and slowest single tick.

Knobs: ``BENCH_P13_SIZES`` (default ``50,200,1000``; ``BENCH_P13_QUICK=1`` drops 1,000),
``BENCH_P13_PG=0`` skips PostgreSQL, ``BENCH_P13_STEADY`` (steady rounds, default 3, fewer when a
round is slow), ``BENCH_BASE_TREE`` (a checkout of the code to compare with; by default
``git archive`` of ``BENCH_BASE_REF``, default ``13ffbb7``, under the work directory),
``BENCH_OURS_TREE`` (default: a copy of this repository's two packages taken when the run starts,
so commits landing during the run do not change the code measured half-way).

- **code location load** at the largest size (``--mode location``): what a code server pays for
  ``workspace.yaml``'s module, ``definitions_from_environment({"DISTRIBUTOR_CONFIG": ...})`` then
  ``get_repository_def()`` and ``resolve_asset_graph()`` (issue 37: that entry point builds the
  repository itself, with the cyclic collector paused as for the build).

Targets (at P = 1,000 × 3): build ≤ 5 s, snapshot ≤ 40 MB, peak RSS ≤ 400 MB (issue 37; issue 28's
were 8 s, 60 MB, 500 MB), one round of every sensor ≤ 1 s, first round on PostgreSQL ≤ 10 s.

The child side (``--child``) imports nothing from ``bench`` (which would put this repository on
``sys.path`` ahead of the tree under test) and checks that ``distributor_dagster`` came from the
tree it was given.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SIZES_DEFAULT = (50, 200, 1000)
BASE_REF_DEFAULT = "8f72f5f"  # main before issue 37
INSTANCE_YAML = ROOT / "examples" / "dagster" / "dagster.yaml"
MB = 1_000_000

PIPELINE = """\
  - id: site.p{index:04d}
    source: {{backend: local, path: {source}}}
    destinations:
      - {{id: archive, backend: local, path: {out}/archive}}
      - {{id: latest, backend: local, path: {out}/latest, path_mapping: {{mode: fixed}}}}
      - id: site
        backend: local
        path: {out}/site
        publish: {{source: false, html: true}}
        transform: {{markdown_to_html: {{enabled: true}}}}
"""


# ------------------------------------------------------------------------------- the child


def _vm_hwm_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def _evaluate_round(dg, defs, sensors, instance, cursors: dict, *, apply: bool) -> dict:
    """Every sensor once, as the code server evaluates a tick; what the daemon would store is
    applied when ``apply`` (outside the timings)."""
    ticks: dict[str, float] = {}
    requests = events = 0
    cpu = 0.0
    for sensor in sensors:
        # the instance's ref too, as the daemon hands the code server one (the dynamic-partition
        # loader needs it); the instance object is reused rather than reopened from the ref
        context = dg.build_sensor_context(
            instance=instance, instance_ref=instance.get_ref(), cursor=cursors.get(sensor.name), definitions=defs,
            sensor_name=sensor.name,
        )
        started, cpu_started = time.perf_counter(), time.process_time()
        with context:
            data = sensor.evaluate_tick(context)
        ticks[sensor.name] = time.perf_counter() - started
        cpu += time.process_time() - cpu_started
        cursors[sensor.name] = data.cursor
        requests += len(data.run_requests or [])
        events += len(data.asset_events or [])
        if apply:
            for request in data.dynamic_partitions_requests or []:
                if isinstance(request, dg.AddDynamicPartitionsRequest):
                    instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
            for event in data.asset_events or []:
                if not isinstance(event, dg.AssetCheckEvaluation):
                    instance.report_runless_asset_event(event)
    return {"total": sum(ticks.values()), "cpu": cpu, "ticks": ticks, "requests": requests, "events": events}


def _round_summary(result: dict) -> dict:
    ticks = sorted(result["ticks"].items(), key=lambda kv: kv[1])
    values = [v for _, v in ticks]
    return {
        "total": result["total"],
        "cpu": result["cpu"],
        "count": len(values),
        "mean": result["total"] / len(values) if values else 0.0,
        "median": values[len(values) // 2] if values else 0.0,
        "max": values[-1] if values else 0.0,
        "slowest": ticks[-1][0] if ticks else "",
        "requests": result["requests"],
        "events": result["events"],
    }


def child(argv: list[str]) -> dict:
    """Build, snapshot and tick the site of ``--config`` with whatever ``distributor_dagster`` is
    first on ``sys.path``; a JSON-able dict."""
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--config", required=True)
    parser.add_argument("--tree", required=True)
    parser.add_argument("--mode", choices=("sqlite", "postgres", "location"), default="sqlite")
    parser.add_argument("--steady", type=int, default=3)
    args = parser.parse_args(argv)
    out: dict = {}

    started = time.perf_counter()
    import dagster as dg
    from dagster._core.definitions.automation_condition_sensor_definition import (
        AutomationConditionSensorDefinition,
    )
    from dagster._core.definitions.run_status_sensor_definition import RunStatusSensorDefinition
    from dagster._core.remote_representation.external_data import JobDataSnap, RepositorySnap
    from dagster_shared.serdes import serialize_value

    import distributor_dagster
    from distributor_dagster import build_definitions

    out["import_s"] = time.perf_counter() - started
    module = Path(distributor_dagster.__file__).resolve()
    out["module"] = str(module)
    if not module.is_relative_to(Path(args.tree).resolve()):
        raise SystemExit(f"distributor_dagster came from {module}, not from the tree {args.tree}")

    started, cpu_started = time.perf_counter(), time.process_time()
    if args.mode == "location":  # the code server's path: workspace.yaml's module
        from distributor_dagster.location import definitions_from_environment

        defs = definitions_from_environment({"DISTRIBUTOR_CONFIG": args.config})
    else:
        defs = build_definitions(args.config)
    repo = defs.get_repository_def()
    graph = defs.resolve_asset_graph()
    out["build_s"] = time.perf_counter() - started
    out["build_cpu_s"] = time.process_time() - cpu_started
    if args.mode == "location":
        out["peak_rss_kib"] = _vm_hwm_kib()
        out["counts"] = {"assets": len(graph.get_all_asset_keys())}
        return out
    jobs = repo.get_all_jobs()
    sensors_all = list(repo.sensor_defs)
    out["counts"] = {
        "assets": len(graph.get_all_asset_keys()),
        "checks": len(graph.asset_check_keys),
        "jobs": len(jobs),
        "sensors": len(sensors_all),
    }

    if args.mode == "sqlite":
        started, cpu_started = time.perf_counter(), time.process_time()
        repository_bytes = len(serialize_value(RepositorySnap.from_def(repo, defer_snapshots=True)).encode())
        job_bytes = sum(
            len(serialize_value(JobDataSnap.from_job_def(job, include_parent_snapshot=True)).encode()) for job in jobs
        )
        out["snapshot_s"] = time.perf_counter() - started
        out["snapshot_cpu_s"] = time.process_time() - cpu_started
        out["snapshot_bytes"] = repository_bytes + job_bytes
        out["snapshot_repository_bytes"] = repository_bytes
        out["peak_rss_kib"] = _vm_hwm_kib()
        import resource

        out["ru_maxrss_kib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

    not_ticked = (AutomationConditionSensorDefinition, RunStatusSensorDefinition)  # the daemon's own machinery
    skipped = [s.name for s in sensors_all if isinstance(s, not_ticked)]
    sensors = [s for s in sensors_all if s.name not in set(skipped)]
    out["sensors_not_evaluated"] = skipped
    kinds: dict[str, int] = {}
    for sensor in sensors:
        kind = sensor.name.split("_", 1)[0]
        kinds[kind] = kinds.get(kind, 0) + 1
    out["sensor_kinds"] = kinds

    if args.mode == "sqlite":
        import yaml

        # SQLite in a temporary directory, with the run queue and pool settings of the shipped
        # production instance (examples/dagster/dagster.yaml): pools at default_limit 1
        shipped = yaml.safe_load(INSTANCE_YAML.read_text())
        overrides = {key: shipped[key] for key in ("run_coordinator", "concurrency", "telemetry")}
        with dg.instance_for_test(overrides=overrides) as instance:
            cursors: dict = {}
            first = _evaluate_round(dg, defs, sensors, instance, cursors, apply=True)
            out["first_round"] = _round_summary(first)
            steady = []
            for _ in range(max(1, args.steady)):
                steady.append(_round_summary(_evaluate_round(dg, defs, sensors, instance, cursors, apply=True)))
                if sum(s["total"] for s in steady) > 20:  # a slow round: one or two are enough
                    break
            out["steady_rounds"] = steady
            out["pools"] = len(instance.event_log_storage.get_concurrency_keys())
    else:
        with dg.DagsterInstance.get() as instance:  # DAGSTER_HOME: examples/dagster/dagster.yaml on PostgreSQL
            before = len(instance.event_log_storage.get_concurrency_keys())
            first = _evaluate_round(dg, defs, sensors, instance, {}, apply=False)
            out["first_round"] = _round_summary(first)
            out["pools_before"] = before
            out["pools"] = len(instance.event_log_storage.get_concurrency_keys())
            out["storage"] = type(instance.event_log_storage).__name__
    return out


# ------------------------------------------------------------------------------ the parent


def _sizes() -> list[int]:
    raw = os.environ.get("BENCH_P13_SIZES")
    sizes = [int(s) for s in raw.split(",") if s.strip()] if raw else list(SIZES_DEFAULT)
    if os.environ.get("BENCH_P13_QUICK") == "1":
        sizes = [s for s in sizes if s < 1000]
    return sizes


def _base_tree(work: Path) -> tuple[Path, str]:
    """The tree to compare with and how it was obtained."""
    given = os.environ.get("BENCH_BASE_TREE")
    if given:
        return Path(given), f"BENCH_BASE_TREE={given}"
    ref = os.environ.get("BENCH_BASE_REF", BASE_REF_DEFAULT)
    sha = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", f"{ref}^{{commit}}"],
                         capture_output=True, text=True, check=True).stdout.strip()
    tree = work.parent / f"p13-base-{sha}"
    if not (tree / "distributor_dagster").is_dir():
        tree.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", sha, "distributor_core", "distributor_dagster"],
                                 capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    return tree, f"git archive of {sha} ({ref}) in {tree}"


def _ours_tree(work: Path) -> tuple[Path, str]:
    """A copy of this repository's ``distributor_core`` and ``distributor_dagster`` as they are now
    (uncommitted changes included), so that commits landing during a long run do not change the
    code half-way; ``BENCH_OURS_TREE`` names another tree, used as it is."""
    import shutil

    given = os.environ.get("BENCH_OURS_TREE")
    if given:
        return Path(given), _tree_label(Path(given))
    label = _tree_label(ROOT)
    tree = work / "ours-tree"
    for package in ("distributor_core", "distributor_dagster"):
        shutil.copytree(ROOT / package, tree / package, ignore=shutil.ignore_patterns("__pycache__"))
    return tree, f"copy of {label}, taken when the run started"


def _tree_label(tree: Path) -> str:
    head = subprocess.run(["git", "-C", str(tree), "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                          check=False)
    if head.returncode != 0:
        return str(tree)
    dirty = subprocess.run(["git", "-C", str(tree), "status", "--porcelain", "--",
                            "distributor_core", "distributor_dagster"], capture_output=True, text=True, check=False)
    state = " + uncommitted changes in distributor_*" if dirty.stdout.strip() else ""
    return f"{tree} at {head.stdout.strip()}{state}"


def _make_site(work: Path, pipelines: int) -> Path:
    """``pipelines`` pipelines, each over its own source of one bundle, three roots each."""
    import shutil
    from datetime import UTC, datetime

    from distributor_core.bundle import build_manifest, write_manifest

    template = work / "bundle-template" / "2026-01-01"
    if not template.exists():
        template.mkdir(parents=True)
        (template / "report.md").write_text("# report\n\nA small bundle.\n")
        write_manifest(template, build_manifest(template, id="site.report", files=["report.md"],
                                                created=datetime(2026, 1, 1, tzinfo=UTC)), overwrite=True)
    site = work / f"site-{pipelines}"
    site.mkdir()
    lines = ["pipelines:"]
    for index in range(1, pipelines + 1):
        source = site / "sources" / f"p{index:04d}"
        shutil.copytree(template, source / template.name)
        lines.append(PIPELINE.format(index=index, source=source, out=site / "out" / f"p{index:04d}").rstrip("\n"))
    config = site / "distributor.yml"
    config.write_text("\n".join(lines) + "\n")
    return config


def _run_child(tree: Path, config: Path, mode: str, env: dict | None = None) -> dict:
    """One measurement in a fresh interpreter on ``tree``; its stderr (the sensors' log lines) goes
    to a file next to the config."""
    import resource

    from bench import common as c

    cmd = [str(c.VENV_BIN / "python"), str(Path(__file__).resolve()), "--child", "--config", str(config),
           "--tree", str(tree), "--mode", mode, "--steady", os.environ.get("BENCH_P13_STEADY", "3")]
    child_env = {**c.CHILD_DEFAULTS, **os.environ, "PYTHONPATH": str(tree), **(env or {})}
    if "DAGSTER_HOME" not in (env or {}):
        child_env.pop("DAGSTER_HOME", None)
    log = config.parent / f"child-{mode}-{tree.name}.log"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    with open(log, "ab") as stderr:
        proc = subprocess.run(cmd, env=child_env, cwd=config.parent, stdout=subprocess.PIPE, stderr=stderr,
                              check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        tail = log.read_text(errors="replace")[-1500:]
        return {"error": f"exit {proc.returncode}: {tail}"}
    data = json.loads(proc.stdout.decode().strip().splitlines()[-1])
    data["wall_s"] = wall
    data["cpu_s"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return data


def _value(data: dict, *path: str, scale: float = 1.0) -> float:
    node = data
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return math.nan
        node = node[key]
    return float(node) * scale


def _best_steady(data: dict) -> dict:
    rounds = data.get("steady_rounds") or []
    return min(rounds, key=lambda r: r["total"]) if rounds else {}


def _add_rows(report, p: int, ours: dict, base: dict) -> None:
    at_target = p >= 1000
    name = "base"

    def add(metric: str, o: float, b: float, unit: str, target: str, ok) -> None:
        met = (None if not at_target else (False if math.isnan(o) else ok(o))) if target else None
        report.add(f"P={p}: {metric}", o, None if math.isnan(b) else b, unit,
                   target if at_target and target else "(reference)", met, name)

    add("definitions build", _value(ours, "build_s"), _value(base, "build_s"), "s", "<= 5 s", lambda v: v <= 5)
    add("definitions build, CPU", _value(ours, "build_cpu_s"), _value(base, "build_cpu_s"), "s", "", None)
    add("snapshot: build + serialise", _value(ours, "snapshot_s"), _value(base, "snapshot_s"), "s", "", None)
    add("snapshot size", _value(ours, "snapshot_bytes", scale=1 / MB), _value(base, "snapshot_bytes", scale=1 / MB),
        "MB", "<= 40 MB", lambda v: v <= 40)
    add("peak RSS (VmHWM)", _value(ours, "peak_rss_kib", scale=1024 / MB),
        _value(base, "peak_rss_kib", scale=1024 / MB), "MB", "<= 400 MB", lambda v: v <= 400)
    for key in ("assets", "checks", "jobs", "sensors"):
        add(f"{key}", _value(ours, "counts", key), _value(base, "counts", key), "", "", None)
    o_round, b_round = _best_steady(ours), _best_steady(base)
    add("steady round of every sensor", _value(o_round, "total"), _value(b_round, "total"), "s", "<= 1 s",
        lambda v: v <= 1)
    add("steady round of every sensor, CPU", _value(o_round, "cpu"), _value(b_round, "cpu"), "s", "", None)
    add("steady tick, mean per sensor", _value(o_round, "mean", scale=1000), _value(b_round, "mean", scale=1000),
        "ms", "", None)
    add("first round of every sensor (SQLite)", _value(ours, "first_round", "total"),
        _value(base, "first_round", "total"), "s", "", None)


def _describe(label: str, data: dict) -> str:
    if "error" in data:
        return f"{label}: FAILED {data['error']}"
    steady = data.get("steady_rounds") or []
    first = data.get("first_round", {})
    rounds = ", ".join(f"{r['total']:.3f}" for r in steady)
    return (
        f"{label}: import {data['import_s']:.2f} s, build {data['build_s']:.2f} s (CPU {data['build_cpu_s']:.2f} s), "
        f"snapshot {data.get('snapshot_s', math.nan):.2f} s (CPU {data.get('snapshot_cpu_s', math.nan):.2f} s) / "
        f"{data.get('snapshot_bytes', 0) / MB:.1f} MB (repository reply "
        f"{data.get('snapshot_repository_bytes', 0) / MB:.2f} MB, the rest job snapshots), VmHWM "
        f"{data.get('peak_rss_kib', 0) / 1024:.0f} MiB (ru_maxrss {data.get('ru_maxrss_kib', 0) / 1024:.0f} MiB), "
        f"counts {data['counts']}, sensor kinds {data.get('sensor_kinds')}, not evaluated "
        f"{len(data.get('sensors_not_evaluated', []))}; first round {first.get('total', math.nan):.3f} s "
        f"(CPU {first.get('cpu', math.nan):.3f} s) "
        f"(slowest {first.get('slowest')} {first.get('max', math.nan) * 1000:.1f} ms, {first.get('requests')} run "
        f"requests, {first.get('events')} events); steady rounds (s) [{rounds}], best: median tick "
        f"{_best_steady(data).get('median', math.nan) * 1000:.2f} ms, max "
        f"{_best_steady(data).get('max', math.nan) * 1000:.2f} ms; pools {data.get('pools')}; child wall "
        f"{data.get('wall_s', math.nan):.1f} s, CPU {data.get('cpu_s', math.nan):.1f} s"
    )


def _postgres_round(work: Path, trees: dict[str, Path], config: Path) -> dict[str, dict]:
    """The first round of every sensor on a fresh PostgreSQL database per tree."""
    import shutil
    import tempfile

    from tests.peers.postgres import start_postgres, stop_postgres

    pg_dir = Path(tempfile.mkdtemp(prefix="bench-p13-postgres-"))
    proc = None
    results: dict[str, dict] = {}
    try:
        server, proc = start_postgres(pg_dir)
        for label, tree in trees.items():
            home = work / f"dagster-home-{label}"
            home.mkdir()
            shutil.copyfile(INSTANCE_YAML, home / "dagster.yaml")
            env = {**server.environment(server.create_database()), "DAGSTER_HOME": str(home)}
            results[label] = _run_child(tree, config, "postgres", env)
    finally:
        if proc is not None:
            stop_postgres(proc)
        shutil.rmtree(pg_dir, ignore_errors=True)
    return results


def main():
    from bench import common as c

    work = c.workdir("p13")
    try:
        base_tree, base_how = _base_tree(work)
        ours_tree, ours_how = _ours_tree(work)
        trees = {"ours": ours_tree, "base": base_tree}
        sizes = _sizes()
        configs = {p: _make_site(work, p) for p in sizes}
        quiet = c.wait_for_quiet()
        report = c.Report("P13", f"Dagster code location and sensor rounds at {', '.join(map(str, sizes))} pipelines "
                                 "x 3 local destinations, ours vs the base tree")
        results: dict[int, dict[str, dict]] = {}
        for turn, p in enumerate(sizes):
            order = list(trees) if turn % 2 == 0 else list(reversed(trees))
            results[p] = {}
            for label in order:
                print(f"P13: P={p} {label} ({trees[label]}) ...", flush=True)
                results[p][label] = _run_child(trees[label], configs[p], "sqlite")
            _add_rows(report, p, results[p]["ours"], results[p]["base"])
            for label in trees:
                report.notes.append(f"P={p} " + _describe(label, results[p][label]))
        if sizes:  # the code server's path, at the largest size
            p = max(sizes)
            loads = {}
            for label in reversed(list(trees)):
                print(f"P13: code location load (DISTRIBUTOR_CONFIG module) at P={p} {label} ...", flush=True)
                loads[label] = _run_child(trees[label], configs[p], "location")
            ours, base = loads["ours"], loads["base"]
            report.add(f"P={p}: code location load via DISTRIBUTOR_CONFIG (workspace.yaml's module)",
                       _value(ours, "build_s"), _value(base, "build_s"), "s", "<= 5 s" if p >= 1000 else "(reference)",
                       (_value(ours, "build_s") <= 5) if p >= 1000 else None, "base")
            report.add(f"P={p}: code location load, CPU", _value(ours, "build_cpu_s"), _value(base, "build_cpu_s"), "s",
                       "(reference)", None, "base")
            for label, data in loads.items():
                report.notes.append(f"P={p} code location load {label}: " + (
                    f"FAILED {data['error']}" if "error" in data else
                    f"{data['build_s']:.2f} s (CPU {data['build_cpu_s']:.2f} s), VmHWM "
                    f"{data.get('peak_rss_kib', 0) / 1024:.0f} MiB, {data['counts']['assets']} assets"))
        if os.environ.get("BENCH_P13_PG", "1") != "0" and sizes:
            p = max(sizes)
            print(f"P13: first round on PostgreSQL at P={p} ...", flush=True)
            pg = _postgres_round(work, trees, configs[p])
            ours, base = pg.get("ours", {}), pg.get("base", {})
            target = p >= 1000
            o_total = _value(ours, "first_round", "total")
            report.add(f"P={p} PostgreSQL: first round of every sensor ({3 * p:,} roots)", o_total,
                       _value(base, "first_round", "total"), "s", "<= 10 s" if target else "(reference)",
                       (not math.isnan(o_total) and o_total <= 10) if target else None, "base")
            report.add(f"P={p} PostgreSQL: slowest single first tick", _value(ours, "first_round", "max"),
                       _value(base, "first_round", "max"), "s", "(reference; Dagster's sensor timeout is 60 s)",
                       None, "base")
            for label, data in pg.items():
                if "error" in data:
                    report.notes.append(f"PostgreSQL P={p} {label}: FAILED {data['error']}")
                    continue
                first = data["first_round"]
                report.notes.append(
                    f"PostgreSQL P={p} {label}: {data['storage']}, build {data['build_s']:.1f} s, first round "
                    f"{first['total']:.2f} s (CPU of the process {first['cpu']:.2f} s) over {first['count']} sensors "
                    f"(mean {first['mean'] * 1000:.1f} ms, "
                    f"median {first['median'] * 1000:.1f} ms, slowest {first['slowest']} {first['max']:.2f} s), "
                    f"pools {data['pools_before']} -> {data['pools']}"
                )
        report.notes.append(f"ours: {ours_how}; base: {base_how}")
        report.notes.append(quiet)
        report.notes.append(f"load average at the end: {c.loadavg()}")
        c.save(report)
        (c.WORK / "results" / "P13-raw.json").write_text(json.dumps(
            {"sizes": sizes, "results": {str(k): v for k, v in results.items()}}, indent=1, default=str) + "\n")
        return report
    finally:
        c.cleanup(work)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        print(json.dumps(child(sys.argv[2:]), default=str))
    else:
        if str(ROOT) not in sys.path:
            sys.path.insert(0, str(ROOT))
        main()

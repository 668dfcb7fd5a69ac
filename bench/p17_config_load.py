"""P17: loading a large config (issue 39): ``load_config`` of a 1,000-pipeline config (the site of
P13: three destinations each, about 10,000 lines of YAML), this checkout vs ``BENCH_BEFORE``
(another checkout's python, e.g. a worktree of the commit before) in the same run, alternating.

Two figures per build, each in a fresh interpreter: the CPU seconds of a process that imports
``distributor_core.config`` and loads the config once (what ``distributor run`` and a code
location pay), and, inside one process, the best of ``BENCH_P17_LOADS`` further loads of the same
file (the loader alone: YAML through libyaml, the strict decode, defaults, validation and the
models). Also the JSON Schema generation (``distributor config schema``), once per process.

Target: ours <= 1.1x the build before on the two load figures (the declaration is read once per
process, in one ``msgspec.inspect`` pass; a load walks the same tree as before).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from bench import common as c
from bench.p13_dagster_scale import PIPELINE

BEFORE = os.environ.get("BENCH_BEFORE", "")  # the other build's python (its venv's bin/python)
PIPELINES = int(os.environ.get("BENCH_P17_PIPELINES", "1000"))
LOADS = int(os.environ.get("BENCH_P17_LOADS", "5"))

CHILD = """
import json, sys, time
t0 = time.process_time()
from distributor_core.config import config_json_schema, load_config
config = load_config(sys.argv[1])
first = time.process_time() - t0
loads = []
for _ in range(int(sys.argv[2])):
    t = time.perf_counter(); load_config(sys.argv[1]); loads.append(time.perf_counter() - t)
t = time.perf_counter(); config_json_schema(); schema = time.perf_counter() - t
print(json.dumps({"first_cpu": first, "load": min(loads), "schema": schema, "pipelines": len(config.pipelines)}))
"""


def _config(work: Path) -> Path:
    lines = ["pipelines:"]
    for index in range(1, PIPELINES + 1):
        source, out = work / "sources" / f"p{index:04d}", work / "out" / f"p{index:04d}"
        lines.append(PIPELINE.format(index=index, source=source, out=out).rstrip("\n"))
    path = work / "distributor.yml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _measure(python: str, config: Path) -> dict[str, float]:
    result = subprocess.run([python, "-c", CHILD, str(config), str(LOADS)], capture_output=True, text=True,
                            check=True, cwd=config.parent)
    data = json.loads(result.stdout)
    assert data["pipelines"] == PIPELINES
    return data


def main() -> c.Report:
    if not BEFORE:
        raise SystemExit("P17 compares two builds: set BENCH_BEFORE to the other build's python")
    work = c.workdir("p17")
    try:
        config = _config(work)
        quiet = c.wait_for_quiet()
        runs: dict[str, list[dict[str, float]]] = {"ours": [], "before": []}
        pythons = {"ours": str(c.VENV_BIN / "python"), "before": BEFORE}
        for round_ in range(c.REPEAT):
            for name in (("ours", "before") if round_ % 2 == 0 else ("before", "ours")):
                runs[name].append(_measure(pythons[name], config))
        lines = len(config.read_text().splitlines())
        title = f"load_config of {PIPELINES:,} pipelines ({lines:,} lines): this build vs BENCH_BEFORE"
        report = c.Report("P17", title)
        figures = (("first_cpu", "import + first load, CPU", True), ("load", "one more load, wall", True),
                   ("schema", "JSON Schema, wall (a millisecond: no target)", False))
        for key, label, target in figures:
            ours = c.best([r[key] for r in runs["ours"]])
            before = c.best([r[key] for r in runs["before"]])
            report.add(label, ours, before, "s", "<= 1.1x" if target else "-",
                       ours <= 1.1 * before if target else None, "before")
            c.add_samples(report, {f"{key} ours": [r[key] for r in runs["ours"]],
                                   f"{key} before": [r[key] for r in runs["before"]]})
        report.notes.append(quiet)
        c.save(report)
        return report
    finally:
        c.cleanup(work)


if __name__ == "__main__":
    main()

"""Run one or more benchmark scenarios: ``.venv/bin/python bench/run.py P1 [P2 ...]`` or ``all``.

Each scenario prints its figures, the peer's measured in the same run, the ratio and whether the
target of issue 8 is met; the latest JSON lands in ``bench/.work/results/<id>.json``.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

SCENARIOS = {
    "START-UP": "bench.startup",
    "P1": "bench.p1_large_local",
    "P2": "bench.p2_small_local",
    "P3": "bench.p3_rerun_skip",
    "P4": "bench.p4_plan_large_state",
    "P5": "bench.p5_peak_rss",
    "P6": "bench.p6_serve_uploads",
    "P6H": "bench.p6_hostile_archives",
    "P6L": "bench.p6_slow_loris",
    "P6R": "bench.p6_hostile_round2",
    "P6A": "bench.p6_attack_mix",
    "P7": "bench.p7_upload_sensor",
    "P8": "bench.p8_s3_parallel",
    "P9": "bench.p9_sftp",
    "P10": "bench.p10_upload_latency",
    "P11": "bench.p11_audit",
    "P12": "bench.p12_dagster_bundles",
    "P13": "bench.p13_dagster_scale",
    "P14": "bench.p14_upload_batches",
    "P15": "bench.p15_shared_staging",
    "P16": "bench.p16_lease_publish",
    "P17": "bench.p17_config_load",
    "P18": "bench.p18_text_flood",
}


def main(argv: list[str]) -> int:
    wanted = [a.upper() for a in argv] or ["ALL"]
    if "ALL" in wanted:
        wanted = list(SCENARIOS)
    unknown = [w for w in wanted if w not in SCENARIOS]
    if unknown:
        print(f"unknown scenario(s): {', '.join(unknown)}; choose from {', '.join(SCENARIOS)} or all")
        return 2
    from bench import common

    missed = []
    try:
        for name in wanted:
            module = importlib.import_module(SCENARIOS[name])
            report = module.main()
            if any(row.met is False for row in report.rows):
                missed.append(name)
    finally:
        common.empty_trash()  # deleted only now: see common.discard
    if missed:
        print(f"\ntargets missed: {', '.join(missed)}")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

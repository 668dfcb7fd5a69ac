"""start-up: the fixed cost of the ``distributor`` console script (issue 17).

Ours: ``distributor version`` (interpreter start, CLI dispatch, the one command module), and
``distributor run --dry-run`` over a config whose one pipeline has an empty local source (imports,
config load and validation, bundle discovery: a run's fixed cost). Peer: ``python -c pass`` with
the same interpreter. Targets: version <= 4x the peer; the run's cost beyond the peer <= 0.1 s.
"""

from __future__ import annotations

import sys

from bench import common as c

PYTHON = sys.executable


def main() -> c.Report:
    work = c.workdir("startup")
    try:
        quiet = c.wait_for_quiet()
        source = work / "src"
        source.mkdir(parents=True)
        config = c.write_config(
            work / "distributor.yml", source, [{"id": "local", "backend": "local", "path": str(work / "dst")}]
        )
        version = [c.DISTRIBUTOR, "version"]
        run = [c.DISTRIBUTOR, "run", "--config", str(config), "--dry-run"]
        c.run_timed(version)  # warm the page cache and the bytecode caches
        c.run_timed(run)
        repeat = max(c.REPEAT * 4, 20)
        samples = c.median_of(
            {
                "python -c pass": lambda: c.run_timed([PYTHON, "-c", "pass"]).wall,
                "distributor version": lambda: c.run_timed(version).wall,
                "distributor run (empty source)": lambda: c.run_timed(run).wall,
            },
            repeat=repeat,
        )
        peer = c.best(samples["python -c pass"])
        ours = c.best(samples["distributor version"])
        run_cost = c.best(samples["distributor run (empty source)"]) - peer
        report = c.Report("start-up", "fixed cost of the distributor console script")
        report.add("distributor version", ours, peer, "s", "<= 4x", ours <= 4 * peer, "python -c pass")
        report.add(
            "run fixed cost (run --dry-run, empty source, minus python -c pass)",
            run_cost,
            0.1,
            "s",
            "<= 0.1 s",
            run_cost <= 0.1,
            "0.1 s budget",
        )
        c.add_samples(report, samples)
        report.notes.append(quiet)
        c.save(report)
        return report
    finally:
        c.cleanup(work)


if __name__ == "__main__":
    main()

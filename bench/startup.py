"""start-up: the fixed cost of the ``distributor`` console script (issue 17).

Ours: ``distributor version`` (interpreter start, CLI dispatch, the one command module), and
``distributor run --dry-run`` over a config whose one pipeline has an empty local source (imports,
config load and validation, bundle discovery: a run's fixed cost). Peer: ``python -c pass`` with
the same interpreter. Targets: version <= 4x the peer; the run's cost beyond the peer <= 0.1 s.

Each figure is taken twice: wall clock, and the child's CPU time (user + sys, from ``wait4``),
which a neighbour's load disturbs far less on a shared machine. The children run with bytecode
caching on (``PYTHONDONTWRITEBYTECODE`` removed, as in a normal install): with it set and no
``__pycache__`` yet, every start would recompile the modules it imports and measure the compiler.
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
        commands = {
            "python -c pass": [PYTHON, "-c", "pass"],
            "distributor version": version,
            "distributor run (empty source)": run,
        }
        for cmd in commands.values():  # warm the page cache and write the bytecode caches
            _timed(cmd)
        repeat = max(c.REPEAT * 4, 20)
        cpu: dict[str, list[float]] = {name: [] for name in commands}

        def measure(name: str) -> float:
            timed = _timed(commands[name])
            cpu[name].append(timed.cpu)
            return timed.wall

        samples = c.median_of({name: (lambda n=name: measure(n)) for name in commands}, repeat=repeat)
        report = c.Report("start-up", "fixed cost of the distributor console script")
        for figures, kind in ((samples, "wall"), (cpu, "CPU")):
            peer = c.best(figures["python -c pass"])
            ours = c.best(figures["distributor version"])
            run_cost = c.best(figures["distributor run (empty source)"]) - peer
            report.add(f"distributor version ({kind})", ours, peer, "s", "<= 4x", ours <= 4 * peer, "python -c pass")
            report.add(
                f"run fixed cost ({kind}: run --dry-run, empty source, minus python -c pass)",
                run_cost,
                0.1,
                "s",
                "<= 0.1 s",
                run_cost <= 0.1,
                "0.1 s budget",
            )
        c.add_samples(report, samples)
        c.add_samples(report, cpu, unit="s CPU")
        report.notes.append(quiet)
        c.save(report)
        return report
    finally:
        c.cleanup(work)


def _timed(cmd: list[str]) -> c.Timed:
    return c.run_timed(cmd, env={"PYTHONDONTWRITEBYTECODE": None})


if __name__ == "__main__":
    main()

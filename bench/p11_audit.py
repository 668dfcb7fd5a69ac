"""P11: audit a 1 GiB destination of 8 x 128 MiB files (issue 18 item 5).

Ours: ``distributor audit`` of the bundle path ``distributor run`` published (every recorded
output re-read by ``Storage.sha256`` into a reused 1 MiB buffer and hashed, two files at a
time, state read, unmanaged walk) through the console script.
Peer: ``rclone check --download`` of the same 8 files (the source's and the destination's data
directories, byte-for-byte comparison of both sides), in the same run, alternating.

References, measured in the same rounds: one in-process read + sha256 pass over the 8 files on
one thread (1 MiB reads), and both commands over a bundle of one 1 KiB file (their fixed cost:
start-up, config, state). CPU seconds (user + system, from the children's rusage) are printed
next to the wall times: on a shared machine they move less than the wall.

Target: wall <= 1.0x rclone check --download.
"""

from __future__ import annotations

import compileall
import hashlib
import resource
import time
from collections.abc import Callable
from pathlib import Path

from bench import common as c

FILES = 8
SIZE = 128 * c.MIB


def _single_pass(paths: list) -> float:
    buffer = bytearray(c.MIB)
    view = memoryview(buffer)
    start = time.perf_counter()
    for path in paths:
        hasher = hashlib.sha256()
        with open(path, "rb", buffering=0) as handle:
            while True:
                count = handle.readinto(buffer)
                if not count:
                    break
                hasher.update(view[:count])
        hasher.hexdigest()
    return time.perf_counter() - start


def _byte_compile() -> str:
    """Write the package's bytecode caches, as installing it does. Where
    ``PYTHONDONTWRITEBYTECODE`` is set (this machine's environment), a source checkout otherwise
    compiles every imported module from source on every run: ~0.1-0.3 s of CPU per command."""
    import distributor_core

    package = Path(distributor_core.__file__).parent
    compileall.compile_dir(package, quiet=1)
    return f"bytecode caches written for {package} (as an installed package has them)"


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _with_cpu(cpu: list[float], command: Callable[[], c.Timed]) -> Callable[[], float]:
    """``command``'s wall time; its CPU seconds are appended to ``cpu``."""

    def measure() -> float:
        before = _children_cpu()
        wall = command().wall
        cpu.append(_children_cpu() - before)
        return wall

    return measure


def main() -> c.Report:
    work = c.workdir("p11")
    try:
        src = work / "src"
        bundle = src / "b1"
        c.make_bundle(bundle, [(f"data/part-{i:02d}.bin", SIZE) for i in range(FILES)])
        c.make_bundle(src / "b0", [("data/small.bin", 1024)], bundle_id="bench.small")
        dst = work / "dst"
        config = c.write_config(work / "distributor.yml", src, [{"id": "local", "backend": "local", "path": str(dst)}])
        compiled = _byte_compile()
        c.distributor_run(config)

        def audit(bundle_path: str) -> list[str]:
            return [
                c.DISTRIBUTOR,
                "audit",
                "--config",
                str(config),
                "--pipeline",
                "bench",
                "--destination",
                "local",
                "--bundle",
                bundle_path,
            ]

        def check(bundle_path: str) -> list[str]:
            return ["check", "--download", str(src / bundle_path / "data"), str(dst / bundle_path / "data")]

        first = c.run_timed(audit("b1"))  # warms the page cache for everyone alike
        if "status=ok checked=8 ok=8" not in first.stdout:
            raise RuntimeError(f"audit did not pass:\n{first.stdout}")
        c.rclone(*check("b1"))
        files = sorted((dst / "b1" / "data").iterdir())

        cpu: dict[str, list[float]] = {"ours": [], "rclone": [], "ours 1 KiB": [], "rclone 1 KiB": []}
        quiet = c.wait_for_quiet()
        samples = c.median_of(
            {
                "ours": _with_cpu(cpu["ours"], lambda: c.run_timed(audit("b1"))),
                "rclone": _with_cpu(cpu["rclone"], lambda: c.rclone(*check("b1"))),
                "single pass": lambda: _single_pass(files),
                "ours 1 KiB": _with_cpu(cpu["ours 1 KiB"], lambda: c.run_timed(audit("b0"))),
                "rclone 1 KiB": _with_cpu(cpu["rclone 1 KiB"], lambda: c.rclone(*check("b0"))),
            }
        )
        ours, rc, single, ours_small, rc_small = (
            c.best(samples[n]) for n in ("ours", "rclone", "single pass", "ours 1 KiB", "rclone 1 KiB")
        )
        total = FILES * SIZE
        report = c.Report("P11", "audit 1 GiB (8 x 128 MiB) local destination")
        report.add("wall vs rclone check --download", ours, rc, "s", "<= 1.0x", ours <= rc, "rclone")
        report.add(
            "CPU (user+sys) vs rclone", c.best(cpu["ours"]), c.best(cpu["rclone"]), "s", "(reference)", None, "rclone"
        )
        report.add(
            "throughput vs one-thread read+sha256 pass",
            total / ours / c.MIB,
            total / single / c.MIB,
            "MiB/s",
            "(reference)",
            None,
            "single pass",
        )
        report.add("fixed cost: wall for one 1 KiB file", ours_small, rc_small, "s", "(reference)", None, "rclone")
        report.add(
            "fixed cost: CPU for one 1 KiB file",
            c.best(cpu["ours 1 KiB"]),
            c.best(cpu["rclone 1 KiB"]),
            "s",
            "(reference)",
            None,
            "rclone",
        )
        c.add_samples(report, samples)
        c.add_samples(report, cpu, unit="CPU s")
        report.notes.append(quiet)
        report.notes.append(compiled)
        report.notes.append(
            "ours is the console script (startup, config, state, 8 files read into 1 MiB buffers and hashed "
            "on two threads, unmanaged walk); rclone compares the source and destination bytes (2 GiB read, "
            "no hashing); the single pass is an in-process loop on one thread"
        )
        c.save(report)
        return report
    finally:
        c.cleanup(work)


if __name__ == "__main__":
    main()

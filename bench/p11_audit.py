"""P11: audit a 1 GiB destination of 8 x 128 MiB files (issue 18 item 5).

Ours: ``distributor audit`` of the bundle path ``distributor run`` published (every recorded
output re-read and hashed with sha256, state read, unmanaged walk) through the console script.
Peer: ``rclone check --download`` of the same 8 files (the source's and the destination's data
directories, byte-for-byte comparison of both sides), in the same run, alternating. Reference:
one in-process read + sha256 pass over the 8 files on one thread (1 MiB reads).

Target: wall <= 1.0x rclone check --download.
"""

from __future__ import annotations

import hashlib
import time

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


def main() -> c.Report:
    work = c.workdir("p11")
    try:
        src = work / "src"
        bundle = src / "b1"
        c.make_bundle(bundle, [(f"data/part-{i:02d}.bin", SIZE) for i in range(FILES)])
        dst = work / "dst"
        config = c.write_config(work / "distributor.yml", src, [{"id": "local", "backend": "local", "path": str(dst)}])
        c.distributor_run(config)
        audit = [c.DISTRIBUTOR, "audit", "--config", str(config), "--pipeline", "bench", "--destination", "local",
                 "--bundle", "b1"]
        check = ["check", "--download", str(bundle / "data"), str(dst / "b1" / "data")]
        first = c.run_timed(audit)  # warms the page cache for everyone alike
        if "status=ok checked=8 ok=8" not in first.stdout:
            raise RuntimeError(f"audit did not pass:\n{first.stdout}")
        c.rclone(*check)
        files = sorted((dst / "b1" / "data").iterdir())

        quiet = c.wait_for_quiet()
        samples = c.median_of(
            {
                "ours": lambda: c.run_timed(audit).wall,
                "rclone": lambda: c.rclone(*check).wall,
                "single pass": lambda: _single_pass(files),
            }
        )
        ours, rc, single = (c.best(samples[n]) for n in ("ours", "rclone", "single pass"))
        total = FILES * SIZE
        report = c.Report("P11", "audit 1 GiB (8 x 128 MiB) local destination")
        report.add("wall vs rclone check --download", ours, rc, "s", "<= 1.0x", ours <= rc, "rclone")
        report.add(
            "throughput vs one-thread read+sha256 pass",
            total / ours / c.MIB,
            total / single / c.MIB,
            "MiB/s",
            "(reference)",
            None,
            "single pass",
        )
        c.add_samples(report, samples)
        report.notes.append(quiet)
        report.notes.append(
            "ours is the console script (startup, config, state, 8 files hashed on two threads, unmanaged "
            "walk); rclone compares the source and destination bytes (2 GiB read); the single pass is an "
            "in-process loop on one thread"
        )
        c.save(report)
        return report
    finally:
        c.cleanup(work)


if __name__ == "__main__":
    main()

"""P1: publish a 1 GiB bundle of 8 x 128 MiB files local -> local.

Ours: ``distributor run`` (validation of every file, planning, lock, journal, staged verified
writes, renames, state) into an empty destination. Peers: ``rclone copy --checksum`` and
``cp -r`` of the same bundle directory into an empty directory. The physical ceiling is one pass
read + sha256 + write over the same files, measured in the same run.

Targets: wall <= 1.0x rclone; throughput >= 75% of the single-pass rate.
"""

from __future__ import annotations

from bench import common as c

FILES = 8
SIZE = 128 * c.MIB


def main() -> c.Report:
    work = c.workdir("p1")
    try:
        src = work / "src"
        bundle = src / "b1"
        c.make_bundle(bundle, [(f"data/part-{i:02d}.bin", SIZE) for i in range(FILES)])
        total = FILES * SIZE
        targets = c.Targets(work)
        # warm the page cache for everyone alike
        c.rclone("copy", "--checksum", str(bundle), str(targets.fresh("warm")))

        def ours() -> float:
            dst = targets.fresh("ours")
            config = c.write_config(
                work / "distributor.yml", src, [{"id": "local", "backend": "local", "path": str(dst)}]
            )
            return c.distributor_run(config).wall

        quiet = c.wait_for_quiet()
        samples = c.median_of(
            {
                "ours": ours,
                "rclone": lambda: c.rclone("copy", "--checksum", str(bundle), str(targets.fresh("rclone") / "b1")).wall,
                "cp": lambda: c.run_timed(["cp", "-r", str(bundle), str(targets.fresh("cp") / "b1")]).wall,
                "single pass": lambda: (
                    total / c.single_pass_rate(sorted((bundle / "data").iterdir()), targets.fresh("pass"))
                ),
            }
        )
        ours_s, rc, cp, single_s = (c.best(samples[n]) for n in ("ours", "rclone", "cp", "single pass"))
        ours_rate, single = total / ours_s, total / single_s

        report = c.Report("P1", "publish 1 GiB (8 x 128 MiB) local -> local")
        report.add("wall vs rclone copy --checksum", ours_s, rc, "s", "<= 1.0x", ours_s <= rc, "rclone")
        report.add("wall vs cp -r", ours_s, cp, "s", "(reference)", None, "cp -r")
        report.add(
            "throughput vs single-pass read+sha256+write",
            ours_rate / c.MIB,
            single / c.MIB,
            "MiB/s",
            ">= 0.75x",
            ours_rate >= 0.75 * single,
            "single pass",
        )
        c.add_samples(report, samples)
        report.notes.append(quiet)
        report.notes.append("the single pass is a Python loop (readv, sha256, write; 4 MiB buffer) over the same files")
        c.save(report)
        return report
    finally:
        c.cleanup(work)


if __name__ == "__main__":
    main()

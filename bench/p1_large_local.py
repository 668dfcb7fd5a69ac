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
        dst = work / "dst"
        config = c.write_config(work / "distributor.yml", src, [{"id": "local", "backend": "local", "path": str(dst)}])
        peer_rclone = work / "rclone"
        peer_cp = work / "cp"
        # warm the page cache for everyone alike
        c.rclone("copy", "--checksum", str(bundle), str(work / "warm"))
        c.drop_dir_async(work / "warm")

        targets = {"ours": dst, "rclone": peer_rclone, "cp": peer_cp}

        def before(name: str) -> None:
            c.drop_dir_async(targets[name])
            targets[name].mkdir(parents=True)

        quiet = c.wait_for_quiet()
        samples = c.median_of(
            {
                "ours": lambda: c.distributor_run(config).wall,
                "rclone": lambda: c.rclone("copy", "--checksum", str(bundle), str(peer_rclone / "b1")).wall,
                "cp": lambda: c.run_timed(["cp", "-r", str(bundle), str(peer_cp / "b1")]).wall,
            },
            before=before,
        )
        rates = []
        for _ in range(c.REPEAT):
            c.drop_dir_async(work / "pass")
            rates.append(c.single_pass_rate(sorted((bundle / "data").iterdir()), work / "pass"))
        single = max(rates)
        ours, rc, cp = (c.best(samples[n]) for n in ("ours", "rclone", "cp"))
        ours_rate = total / ours

        report = c.Report("P1", "publish 1 GiB (8 x 128 MiB) local -> local")
        report.add("wall vs rclone copy --checksum", ours, rc, "s", "<= 1.0x", ours <= rc, "rclone")
        report.add("wall vs cp -r", ours, cp, "s", "(reference)", None, "cp -r")
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
        report.notes.append("single-pass MiB/s samples: " + ",".join(f"{r / c.MIB:.0f}" for r in rates))
        c.save(report)
        return report
    finally:
        c.cleanup(work)


if __name__ == "__main__":
    main()

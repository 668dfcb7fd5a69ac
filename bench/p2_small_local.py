"""P2: publish 10,000 files of 1 KiB local -> local.

Ours: ``distributor run`` into an empty destination. Peer: ``rclone copy --checksum`` of the
same bundle directory into an empty directory (``cp -r`` shown for reference).

Targets: wall <= 1.0x rclone; >= 6,000 files/s.
"""

from __future__ import annotations

from pathlib import Path

from bench import common as c

FILES = 10_000
SIZE = 1024
PER_DIR = 100


def small_bundle(bundle: Path) -> None:
    c.make_bundle(bundle, [(f"d{i // PER_DIR:03d}/f{i:05d}.txt", SIZE) for i in range(FILES)])


def main() -> c.Report:
    work = c.workdir("p2")
    try:
        src = work / "src"
        bundle = src / "b1"
        small_bundle(bundle)
        targets = c.Targets(work)

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
            }
        )
        ours_s, rc, cp = (c.best(samples[n]) for n in ("ours", "rclone", "cp"))
        report = c.Report("P2", "publish 10,000 x 1 KiB local -> local")
        report.add("wall vs rclone copy --checksum", ours_s, rc, "s", "<= 1.0x", ours_s <= rc, "rclone")
        report.add("wall vs cp -r", ours_s, cp, "s", "(reference)", None, "cp -r")
        report.add("files/s", FILES / ours_s, FILES / rc, "files/s", ">= 6000", FILES / ours_s >= 6000, "rclone")
        c.add_samples(report, samples)
        report.notes.append(quiet)
        c.save(report)
        return report
    finally:
        c.cleanup(work)


if __name__ == "__main__":
    main()

"""P3: re-run over an unchanged 10,000-file destination.

Both tools first publish the same 10,000 x 1 KiB bundle (not timed). Then, timed: ours re-runs
``distributor run`` (the bundle is validated again, every file hashed; the destination plan is
``skip_same``, nothing is written); the peer re-runs the same ``rclone copy --checksum`` it used
to publish (it compares checksums of both sides and copies nothing). ``rclone copy`` without
``--checksum`` (size and modification time only, no hashing) is shown for reference.

Target: <= 0.2x the rclone re-run.
"""

from __future__ import annotations

from bench import common as c
from bench.p2_small_local import FILES, small_bundle


def main() -> c.Report:
    work = c.workdir("p3")
    try:
        src = work / "src"
        bundle = src / "b1"
        small_bundle(bundle)
        dst = work / "dst"
        config = c.write_config(work / "distributor.yml", src, [{"id": "local", "backend": "local", "path": str(dst)}])
        peer = work / "rclone" / "b1"
        c.distributor_run(config)
        c.rclone("copy", "--checksum", str(bundle), str(peer))
        os_sync()

        def ours() -> float:
            result = c.distributor_run(config, expect="skipped")
            assert "action=skip_same" in result.stdout, result.stdout
            return result.wall

        quiet = c.wait_for_quiet()
        samples = c.median_of(
            {
                "ours": ours,
                "rclone --checksum": lambda: c.rclone("copy", "--checksum", str(bundle), str(peer)).wall,
                "rclone (size+mtime)": lambda: c.rclone("copy", str(bundle), str(peer)).wall,
            }
        )
        ours_best = c.best(samples["ours"])
        rc = c.best(samples["rclone --checksum"])
        rc_plain = c.best(samples["rclone (size+mtime)"])
        report = c.Report("P3", f"re-run over an unchanged {FILES:,}-file destination (skip_same)")
        report.add(
            "wall vs rclone copy --checksum re-run", ours_best, rc, "s", "<= 0.2x", ours_best <= 0.2 * rc, "rclone"
        )
        report.add("wall vs rclone copy re-run (size+mtime)", ours_best, rc_plain, "s", "(reference)", None, "rclone")
        c.add_samples(report, samples)
        report.notes.append(quiet)
        c.save(report)
        return report
    finally:
        c.cleanup(work)


def os_sync() -> None:
    import os

    os.sync()


if __name__ == "__main__":
    main()

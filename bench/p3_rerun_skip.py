"""P3: re-run over an unchanged 10,000-file destination.

Both tools first publish the same 10,000 x 1 KiB bundle (not timed). Ours then runs once more,
untimed, once the files are older than the validation cache's safety margin: the first run
recorded only the files already settled, this one fills the local source's validation cache
(``distributor_core/validation_cache.py``; kept under this scenario's work directory through
``DISTRIBUTOR_CACHE_DIR``, and checked to hold every file). Then, timed: ours re-runs
``distributor run`` (the manifest is parsed and checked, every listed file ``lstat``-ed and found
unchanged in the cache, so none is read; the destination plan is ``skip_same``, nothing is
written); the peer re-runs ``rclone copy`` without ``--checksum`` (size and modification time
only, no hashing) and the ``rclone copy --checksum`` it used to publish (checksums of both sides,
shown for reference). With ``DISTRIBUTOR_VALIDATION_CACHE=off`` in the environment ours hashes
every file again (the figure before the cache).

Target (issue 17 P3): <= 1.0x the rclone size+mtime re-run.
"""

from __future__ import annotations

import os
import time

from bench import common as c
from bench.p2_small_local import FILES, small_bundle
from distributor_core.validation_cache import CACHE_DIR_ENV, SUBSECOND_MARGIN_NS, ValidationCache, enabled_by_env


def main() -> c.Report:
    work = c.workdir("p3")
    previous = os.environ.get(CACHE_DIR_ENV)
    os.environ[CACHE_DIR_ENV] = str(work / "cache")
    try:
        src = work / "src"
        bundle = src / "b1"
        small_bundle(bundle)
        dst = work / "dst"
        config = c.write_config(work / "distributor.yml", src, [{"id": "local", "backend": "local", "path": str(dst)}])
        peer = work / "rclone" / "b1"
        c.distributor_run(config)
        c.rclone("copy", "--checksum", str(bundle), str(peer))
        time.sleep(SUBSECOND_MARGIN_NS / 1e9 + 0.2)
        c.distributor_run(config, expect="skipped")  # fills the validation cache
        cached = len(ValidationCache.load(str(src)))
        if enabled_by_env() and cached != FILES:
            raise RuntimeError(f"the validation cache holds {cached} of {FILES} files")
        os_sync()

        cpu: dict[str, list[float]] = {"ours": [], "rclone (size+mtime)": []}

        def ours() -> float:
            result = c.distributor_run(config, expect="skipped")
            assert "action=skip_same" in result.stdout, result.stdout
            cpu["ours"].append(result.cpu)
            return result.wall

        def rclone_plain() -> float:
            result = c.rclone("copy", str(bundle), str(peer))
            cpu["rclone (size+mtime)"].append(result.cpu)
            return result.wall

        quiet = c.wait_for_quiet()
        samples = c.median_of(
            {
                "ours": ours,
                "rclone --checksum": lambda: c.rclone("copy", "--checksum", str(bundle), str(peer)).wall,
                "rclone (size+mtime)": rclone_plain,
            }
        )
        ours_best = c.best(samples["ours"])
        rc = c.best(samples["rclone --checksum"])
        rc_plain = c.best(samples["rclone (size+mtime)"])
        report = c.Report("P3", f"re-run over an unchanged {FILES:,}-file destination (skip_same)")
        report.add(
            "wall vs rclone copy re-run (size+mtime)", ours_best, rc_plain, "s", "<= 1.0x", ours_best <= rc_plain,
            "rclone",
        )
        report.add("wall vs rclone copy --checksum re-run", ours_best, rc, "s", "(reference)", None, "rclone")
        # CPU (user + sys) is far less disturbed than wall time on a shared machine
        report.add(
            "cpu vs rclone copy re-run (size+mtime)", c.best(cpu["ours"]), c.best(cpu["rclone (size+mtime)"]), "s",
            "(reference)", None, "rclone",
        )
        c.add_samples(report, samples)
        report.notes.append(
            "cpu samples (s, user + sys): "
            + "; ".join(f"{name} [{','.join(f'{v:.3f}' for v in values)}]" for name, values in cpu.items())
        )
        report.notes.append(
            f"validation cache: {cached} entries" if enabled_by_env() else "validation cache off (every file hashed)"
        )
        report.notes.append(quiet)
        c.save(report)
        return report
    finally:
        if previous is None:
            os.environ.pop(CACHE_DIR_ENV, None)
        else:
            os.environ[CACHE_DIR_ENV] = previous
        c.cleanup(work)


def os_sync() -> None:
    import os

    os.sync()


if __name__ == "__main__":
    main()

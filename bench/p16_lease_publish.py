"""P16: what the one lease and its fences cost a publication (issue 34): 10,000 files of 1 KiB
published into an empty destination on local disk, SFTP (OpenSSH sshd on 127.0.0.1) and S3 (moto
on 127.0.0.1, auth enforced), this checkout and ``BENCH_BEFORE`` (another build's
``distributor``, e.g. a worktree of the commit before) alternating in one run, plus how often a
holder renews its destination lock.

Both builds run ``distributor run`` end to end on the same bundle into a fresh root each sample.
The lease adds, per publication: the lock created (one conditional write), a lock re-read right
before the state write, the lock read before its release, and a renewal every quarter of
``lock_lease``; every write under the lock checks in memory that the lease is still safe.

Renewals: one ``distributor run`` to SFTP with ``lock_lease: 2s`` under the trace hook of
``tests/reliability/hook`` (its writes to ``.distributor.lock`` counted), so a publication of a
few seconds renews several times; the rate per minute is the count over the wall time.

Target: ours <= 1.1x the build before on each backend (the fences are memory checks; the lock
costs a few requests per publication, not per file).
"""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
from pathlib import Path

from bench import common as c
from bench.p2_small_local import FILES, small_bundle

BEFORE = os.environ.get("BENCH_BEFORE", "")
KEY_ENV, SECRET_ENV = "BENCH_S3_KEY_ID", "BENCH_S3_SECRET"
HOOK = c.ROOT / "tests" / "reliability" / "hook"


def _run(binary: str, config: Path, env: dict[str, str]) -> float:
    result = c.run_timed([binary, "run", "--config", str(config)], env=env)
    if "status=completed" not in result.stdout:
        raise RuntimeError(f"{binary} run did not complete:\n{result.stdout[-2000:]}")
    return result.wall


def main() -> c.Report:
    from tests.peers.moto import start_moto
    from tests.peers.sshd import start_sshd

    if not BEFORE:
        raise SystemExit("P16 compares two builds: set BENCH_BEFORE to the other build's distributor")
    work = c.workdir("p16")
    peers = Path(tempfile.mkdtemp(prefix="distributor-bench-peers-"))
    peers.chmod(0o755)
    procs = []
    try:
        src = work / "src"
        small_bundle(src / "b1")
        (peers / "sshd").mkdir()
        sshd, sshd_proc = start_sshd(peers / "sshd")
        procs.append(sshd_proc)
        (peers / "moto").mkdir()
        moto, moto_proc = start_moto(peers / "moto")
        procs.append(moto_proc)
        bucket = moto.create_bucket(f"bench-{secrets.token_hex(4)}")
        env = {KEY_ENV: moto.access_key_id, SECRET_ENV: moto.secret_access_key}
        counter, targets = iter(range(10_000)), c.Targets(work)

        def destination(backend: str, lease: str | None = None) -> dict[str, object]:
            name = f"r{next(counter)}-{secrets.token_hex(3)}"
            extra = {"lock_lease": lease} if lease else {}
            if backend == "local":
                return {"id": "d", "backend": "local", "path": str(targets.fresh("local")), **extra}
            if backend == "sftp":
                return {"id": "d", "backend": "ssh", "host": sshd.host, "port": sshd.port, "user": sshd.user,
                        "path": str(sshd.make_sftp_root(name)), "private_key_file": str(sshd.client_key_path),
                        "known_hosts_file": str(sshd.known_hosts_path), **extra}
            return {"id": "d", "backend": "s3", "bucket": bucket, "prefix": name, "region": moto.region,
                    "endpoint": moto.endpoint_url, "force_path_style": True, "conditional_writes": "trusted",
                    "credentials": {"access_key_id_env": KEY_ENV, "secret_access_key_env": SECRET_ENV}, **extra}

        def measure(binary: str, backend: str):  # type: ignore[no-untyped-def]
            return lambda: _run(binary, c.write_config(work / f"{next(counter)}.yml", src,
                                                       [destination(backend)]), env)

        quiet = c.wait_for_quiet()
        report = c.Report("P16", f"publish {FILES:,} x 1 KiB to local, SFTP, S3 (moto): this build vs BENCH_BEFORE")
        for backend in ("local", "sftp", "s3"):
            samples = c.median_of({"ours": measure(c.DISTRIBUTOR, backend), "before": measure(BEFORE, backend)})
            ours, before = c.best(samples["ours"]), c.best(samples["before"])
            report.add(f"{backend}: wall", ours, before, "s", "<= 1.1x", ours <= 1.1 * before, "before")
            c.add_samples(report, samples)
        trace = work / "trace.tsv"
        config = c.write_config(work / "renewals.yml", src, [destination("sftp", "2s")])
        wall = c.run_timed([c.DISTRIBUTOR, "run", "--config", str(config)], env={
            "PYTHONPATH": os.pathsep.join([str(HOOK), os.environ.get("PYTHONPATH", "")]),
            "DISTRIBUTOR_TEST_TRACE": str(trace)}).wall
        lock_writes = [line for line in trace.read_text().splitlines()
                       if line.startswith("write\t") and line.split("\t")[1].endswith(".distributor.lock")]
        renewals = len(lock_writes) - 1
        report.add("lock renewals per minute, lock_lease 2s (SFTP, traced)", renewals * 60 / wall, None, "/min",
                   "(reference: 4 per minute per holder at the default 60 s)", None)
        report.notes.append(f"renewals: {renewals} lock writes after the first in {wall:.1f} s")
        report.notes.append(quiet)
        c.save(report)
        return report
    finally:
        for proc in procs:
            from tests.peers.process import stop_process

            stop_process(proc)
        shutil.rmtree(peers, ignore_errors=True)
        c.cleanup(work)


if __name__ == "__main__":
    main()

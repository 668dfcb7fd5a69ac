"""P8: publish 1,000 files to S3 (moto on 127.0.0.1 behind a 20 ms round trip) with parallel transfers.

Every client reaches moto through ``bench/latency_proxy.py``, which delays each direction by
``BENCH_S3_DELAY_MS`` (default 10 ms), so each request/response pair costs a realistic ~20 ms
round trip, as a client in the same continent as its S3 region sees (this kernel has no netem).
Ours: ``distributor run`` of a bundle of 1,000 x 4 KiB files into an empty prefix of a moto
bucket (validation, planning, the S3 lock and journal written with conditional PUTs, the objects
written ``max_parallel_writes`` at a time, state, cleanup). Peer: a plain boto3 loop putting the
same 1,000 files one after the other (its own process, same client settings). Both include
interpreter start-up. moto runs in its own process with authentication enforced (tests/peers).

Targets (issue 17): ours >= 4x faster than the sequential loop, and >= 0.8x the speed of the same
boto3 puts from 8 threads (the ceiling of this moto server behind the proxy), in the same run.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from bench import common as c

FILES = 1000
SIZE = 4096
DELAY_MS = float(os.environ.get("BENCH_S3_DELAY_MS", "10"))
#: moto enforces If-None-Match/If-Match on PutObject, as AWS S3 does; BENCH_S3_CONDITIONAL_WRITES=precheck
#: measures the HeadObject pre-check of services that do not
CONDITIONAL_WRITES = os.environ.get("BENCH_S3_CONDITIONAL_WRITES", "trusted")
KEY_ENV, SECRET_ENV = "BENCH_S3_ACCESS_KEY_ID", "BENCH_S3_SECRET_ACCESS_KEY"

_BOTO3_LOOP = """
import os, sys, boto3
from botocore.config import Config
endpoint, key, secret, bucket, prefix, root = sys.argv[1:7]
client = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=key, aws_secret_access_key=secret,
                      region_name="us-east-1", config=Config(s3={"addressing_style": "path"},
                      request_checksum_calculation="when_required", response_checksum_validation="when_required"))
threads = int(sys.argv[7]) if len(sys.argv) > 7 else 1
paths = [os.path.join(d, n) for d, _, names in sorted(os.walk(root)) for n in sorted(names)]

def put(path):
    with open(path, "rb") as handle:
        client.put_object(Bucket=bucket, Key=prefix + "/" + os.path.relpath(path, root), Body=handle.read())

if threads == 1:
    for path in paths:
        put(path)
else:  # the ceiling of this moto server: the same puts from several threads
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(put, paths))
"""


def start_proxy(endpoint_url: str, delay_ms: float) -> tuple[str, subprocess.Popen[str]]:
    """Start the latency proxy in front of ``endpoint_url``; return its URL and process."""
    host, port = endpoint_url.split("://", 1)[1].rstrip("/").rsplit(":", 1)
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.latency_proxy", host, port, "--delay-ms", str(delay_ms)],
        cwd=c.ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,  # asyncio's notes about connections cut at the end of a run
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if not line.startswith("port="):
        proc.kill()
        raise RuntimeError(f"latency proxy did not start: {line!r}")
    return f"http://127.0.0.1:{line.removeprefix('port=')}", proc


def main() -> c.Report:
    from tests.peers.moto import start_moto
    from tests.peers.process import stop_process

    work = c.workdir("p8")
    moto_dir = Path(tempfile.mkdtemp(prefix="distributor-bench-moto-"))
    moto_proc = proxy_proc = None
    try:
        src = work / "src"
        bundle = src / "b1"
        c.make_bundle(bundle, [(f"d{i // 100:02d}/f{i:04d}.dat", SIZE) for i in range(FILES)])
        moto, moto_proc = start_moto(moto_dir)
        bucket = moto.create_bucket(f"bench-{secrets.token_hex(4)}")
        endpoint, proxy_proc = start_proxy(moto.endpoint_url, DELAY_MS)
        env = {KEY_ENV: moto.access_key_id, SECRET_ENV: moto.secret_access_key}
        rounds = {"n": 0}

        def ours() -> float:
            rounds["n"] += 1
            destination = {
                "id": "s3",
                "backend": "s3",
                "bucket": bucket,
                "prefix": f"ours-{rounds['n']}",
                "region": moto.region,
                "endpoint": endpoint,
                "force_path_style": True,
                "conditional_writes": CONDITIONAL_WRITES,
                "credentials": {"access_key_id_env": KEY_ENV, "secret_access_key_env": SECRET_ENV},
            }
            config = c.write_config(work / "distributor.yml", src, [destination])
            result = c.run_timed([c.DISTRIBUTOR, "run", "--config", str(config)], env=env)
            if "status=completed" not in result.stdout:
                raise RuntimeError(f"distributor run did not complete:\n{result.stdout}")
            return result.wall

        def peer(threads: int = 1) -> float:
            rounds["n"] += 1
            return c.run_timed(
                [
                    sys.executable,
                    "-c",
                    _BOTO3_LOOP,
                    endpoint,
                    moto.access_key_id,
                    moto.secret_access_key,
                    bucket,
                    f"boto3-{rounds['n']}/b1",
                    str(bundle),
                    str(threads),
                ]
            ).wall

        quiet = c.wait_for_quiet()
        samples = c.median_of(
            {"ours": ours, "boto3 loop": peer, "boto3 8 threads": lambda: peer(8)}, repeat=max(2, min(c.REPEAT, 3))
        )
        ours_best, peer_best = c.best(samples["ours"]), c.best(samples["boto3 loop"])
        ceiling = c.best(samples["boto3 8 threads"])
        report = c.Report(
            "P8",
            f"publish {FILES:,} x {SIZE // 1024} KiB to S3 (moto, {2 * DELAY_MS:g} ms round trip) "
            "vs sequential and 8-thread boto3 put loops",
        )
        report.add(
            "wall", ours_best, peer_best, "s", "<= 0.25x (>= 4x faster)", ours_best * 4 <= peer_best, "boto3 loop"
        )
        report.add("objects/s", FILES / ours_best, FILES / peer_best, "objects/s", "(reference)", None, "boto3 loop")
        report.add(
            "wall vs the 8-thread ceiling",
            ours_best,
            ceiling,
            "s",
            "<= 1.25x (>= 0.8x its speed)",
            ours_best * 0.8 <= ceiling,
            "boto3 8 threads",
        )
        report.notes.append(
            f"conditional_writes: {CONDITIONAL_WRITES}: per object distributor sends "
            + (
                "one PutObject with If-None-Match: *"
                if CONDITIONAL_WRITES == "trusted"
                else "HeadObject, then PutObject with If-None-Match: *"
            )
            + "; the loops send one PutObject"
        )
        report.notes.append(
            f"every client goes through bench/latency_proxy.py ({DELAY_MS:g} ms each way); the sequential loop "
            f"takes {peer_best / FILES * 1000:.1f} ms per PutObject"
        )
        c.add_samples(report, samples)
        report.notes.append(quiet)
        c.save(report)
        return report
    finally:
        if proxy_proc is not None:
            proxy_proc.kill()
            proxy_proc.wait()
        if moto_proc is not None:
            stop_process(moto_proc)
        shutil.rmtree(moto_dir, ignore_errors=True)
        c.cleanup(work)


if __name__ == "__main__":
    main()

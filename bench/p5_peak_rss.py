"""P5: peak RSS publishing one 2 GiB file to local, SFTP and S3.

Ours: ``distributor run`` of a bundle holding one 2 GiB file into a local directory, an SFTP root
on a real OpenSSH sshd on 127.0.0.1 and a bucket of a moto S3 server on 127.0.0.1 (the
``tests/peers`` recipes). The peak resident set of the ``distributor`` process is read from
``wait4`` (``ru_maxrss``); page cache is not resident set. Peers, the same way: ``rclone copy`` to
the same three kinds of destination, and for S3 also a plain boto3 ``upload_file``.

Target: < 150 MiB for each destination.
"""

from __future__ import annotations

import os
import secrets
import sys
import tempfile
from pathlib import Path

from bench import common as c

SIZE = 2 * c.GIB
LIMIT_MIB = 150
KEY_ENV, SECRET_ENV = "BENCH_S3_ACCESS_KEY_ID", "BENCH_S3_SECRET_ACCESS_KEY"

_BOTO3_UPLOAD = """
import sys, boto3
from boto3.s3.transfer import TransferConfig
from botocore.config import Config
endpoint, key, secret, bucket, name, path = sys.argv[1:7]
client = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=key, aws_secret_access_key=secret,
                      region_name="us-east-1", config=Config(s3={"addressing_style": "path"},
                      request_checksum_calculation="when_required"))
client.upload_file(path, bucket, name, Config=TransferConfig())
"""


def _mib(kib: int) -> float:
    return kib / 1024


def main() -> c.Report:
    from tests.peers.moto import start_moto
    from tests.peers.process import stop_process
    from tests.peers.sshd import start_sshd

    work = c.workdir("p5")
    peers_dir = Path(tempfile.mkdtemp(prefix="distributor-bench-peers-"))
    peers_dir.chmod(0o755)  # sshd reads authorized_keys below it as the SFTP user
    sshd_proc = moto_proc = None
    try:
        src = work / "src"
        c.make_bundle(src / "b1", [("big.bin", SIZE)])
        (sshd_dir := peers_dir / "sshd").mkdir()
        (moto_dir := peers_dir / "moto").mkdir()
        sshd, sshd_proc = start_sshd(sshd_dir)
        moto, moto_proc = start_moto(moto_dir)
        bucket = moto.create_bucket(f"bench-{secrets.token_hex(4)}")
        env = {KEY_ENV: moto.access_key_id, SECRET_ENV: moto.secret_access_key}

        def sftp_root(name: str) -> Path:
            return sshd.make_sftp_root(f"{name}-{secrets.token_hex(3)}")

        destinations = {
            "local": {"id": "local", "backend": "local", "path": str(work / "dst")},
            "sftp": {
                "id": "sftp",
                "backend": "ssh",
                "host": sshd.host,
                "port": sshd.port,
                "user": sshd.user,
                "path": str(sftp_root("ours")),
                "private_key_file": str(sshd.client_key_path),
                "known_hosts_file": str(sshd.known_hosts_path),
            },
            "s3": {
                "id": "s3",
                "backend": "s3",
                "bucket": bucket,
                "prefix": "ours",
                "region": moto.region,
                "endpoint": moto.endpoint_url,
                "force_path_style": True,
                "credentials": {"access_key_id_env": KEY_ENV, "secret_access_key_env": SECRET_ENV},
            },
        }
        rclone_env = {
            **c.rclone_sftp_env(sshd),
            "RCLONE_CONFIG_BS3_TYPE": "s3",
            "RCLONE_CONFIG_BS3_PROVIDER": "Other",
            "RCLONE_CONFIG_BS3_ACCESS_KEY_ID": moto.access_key_id,
            "RCLONE_CONFIG_BS3_SECRET_ACCESS_KEY": moto.secret_access_key,
            "RCLONE_CONFIG_BS3_ENDPOINT": moto.endpoint_url,
            "RCLONE_CONFIG_BS3_FORCE_PATH_STYLE": "true",
            "RCLONE_CONFIG_BS3_REGION": moto.region,
            # rclone's S3 client cannot combine a custom CA bundle with its own transport, and
            # the endpoint is plain http on 127.0.0.1 anyway
            "AWS_CA_BUNDLE": None,
        }
        rclone_targets = {
            "local": lambda: str(work / "rclone-local" / "b1"),
            "sftp": lambda: f"bsftp:{sftp_root('rclone')}/b1",
            "s3": lambda: f"bs3:{bucket}/rclone/b1",
        }

        report = c.Report("P5", "peak RSS publishing one 2 GiB file (distributor run vs rclone copy, boto3)")
        report.notes.append(c.wait_for_quiet())
        for name, destination in destinations.items():
            config = c.write_config(work / f"{name}.yml", src, [destination])
            ours = c.run_timed([c.DISTRIBUTOR, "run", "--config", str(config)], env=env, rss=True)
            if "status=completed" not in ours.stdout:
                raise RuntimeError(f"distributor run to {name} did not complete:\n{ours.stdout}")
            peer = c.run_timed(
                [c.RCLONE, "--config", "/dev/null", "copy", str(src / "b1"), rclone_targets[name]()],
                env=rclone_env,
                rss=True,
            )
            ours_mib, peer_mib = _mib(ours.maxrss_kib), _mib(peer.maxrss_kib)
            report.add(
                f"{name}: peak RSS",
                ours_mib,
                peer_mib,
                "MiB",
                f"< {LIMIT_MIB} MiB",
                ours_mib < LIMIT_MIB,
                "rclone copy",
            )
            report.notes.append(
                f"{name}: ours {ours.wall:.1f} s ({SIZE / c.MIB / ours.wall:.0f} MiB/s), rclone {peer.wall:.1f} s"
            )
            if name == "s3":
                boto = c.run_timed(
                    [
                        sys.executable,
                        "-c",
                        _BOTO3_UPLOAD,
                        moto.endpoint_url,
                        moto.access_key_id,
                        moto.secret_access_key,
                        bucket,
                        "boto3/b1/big.bin",
                        str(src / "b1" / "big.bin"),
                    ],
                    rss=True,
                )
                report.add(
                    "s3: peak RSS vs boto3 upload_file",
                    ours_mib,
                    _mib(boto.maxrss_kib),
                    "MiB",
                    f"< {LIMIT_MIB} MiB",
                    ours_mib < LIMIT_MIB,
                    "boto3 upload_file",
                )
                report.notes.append(f"s3: boto3 upload_file {boto.wall:.1f} s")
        c.save(report)
        return report
    finally:
        if moto_proc is not None:
            stop_process(moto_proc)
        if sshd_proc is not None:
            stop_process(sshd_proc)
        c.discard(peers_dir)
        c.cleanup(work)
        os.sync()


if __name__ == "__main__":
    main()

"""P9: publish a 1 GiB bundle of 8 x 128 MiB files to SFTP (OpenSSH sshd on 127.0.0.1).

Ours: ``distributor run`` (validation of every source file, planning, lock, journal, staged
writes hashed and verified while they stream, renames, state) into a never-used SFTP root. Peer:
``rclone copy`` of the same bundle directory to an sftp remote on the same sshd with the same
client key and known_hosts file (rclone's defaults otherwise: ``--transfers 4``, 32 KiB
``chunk_size``, ``concurrency`` 64 requests in flight per file), alternating, each sample into
a never-used directory. Peak RSS of both comes from GNU ``time -f %M``, CPU seconds (user + sys)
from the rusage of the same child. The window and packet size sshd grants a session channel are
read from paramiko after connecting, before the samples.

sshd runs with ``LogLevel DEBUG1`` here, so the negotiated cipher and the channel window and
packet size each client asked for are read from its log (``kex: client->server cipher`` and
``server_input_channel_open ... win ... max``) and printed for both sides.

Targets: throughput >= 1.0x rclone's in the same run; our peak RSS < 150 MiB.
"""

from __future__ import annotations

import os
import re
import secrets
import tempfile
from collections import Counter
from pathlib import Path

from bench import common as c

FILES = 8
SIZE = 128 * c.MIB
LIMIT_MIB = 150

_CIPHER = re.compile(r"kex: client->server cipher: (\S+)")
_CHANNEL = re.compile(r"server_input_channel_open: ctype session rchan \d+ win (\d+) max (\d+)")


def _log_since(log: Path, offset: int) -> tuple[str, int]:
    with open(log, "rb") as handle:
        handle.seek(offset)
        text = handle.read().decode(errors="replace")
    return text, offset + len(text.encode())


def _wire_summary(text: str) -> str:
    """``N connection(s) cipher X; M channel(s) window W max P`` from a slice of sshd's log."""
    ciphers = Counter(_CIPHER.findall(text))
    channels = Counter((int(w), int(m)) for w, m in _CHANNEL.findall(text))
    cipher_text = ", ".join(f"{n} x {name}" for name, n in ciphers.items()) or "?"
    channel_text = (
        ", ".join(f"{n} x window {w // 1024} KiB / packet {m // 1024} KiB" for (w, m), n in channels.items()) or "?"
    )
    return f"connections: {cipher_text}; sftp channels: {channel_text}"


def _server_side(sshd) -> str:
    """The window and packet size sshd grants a session channel, and our write request size."""
    from distributor_core.storage import sftp_wire
    from tests.peers.sshd import make_sftp_storage

    storage = make_sftp_storage(sshd, sshd.make_sftp_root(f"probe-{secrets.token_hex(3)}"))
    try:
        channel = storage.connection.lease()
        try:
            ssh = channel.sftp.get_channel()
            window, packet = ssh.out_window_size, ssh.out_max_packet_size
            request = sftp_wire.write_request_size(channel.sftp, b"\0" * 4, channel.write_size)
            cipher = ssh.get_transport().local_cipher
        finally:
            storage.connection.release(channel, True)
    finally:
        storage.close()
    return (
        f"sshd grants each session channel a window of {window / c.MIB:.1f} MiB (left after the SFTP "
        f"handshake) and packets of {packet // 1024} KiB; "
        f"ours (paramiko, cipher {cipher}) sends write requests of {request:,} data bytes (4-byte handle), "
        f"up to {sftp_wire.WRITE_BYTES_IN_FLIGHT // c.MIB} MiB in flight per file; rclone copy runs --transfers 4 "
        "files at once with its defaults (chunk_size 32 KiB, concurrency 64 requests in flight per file)"
    )


def main() -> c.Report:
    from tests.peers.process import stop_process
    from tests.peers.sshd import start_sshd

    work = c.workdir("p9")
    peers_dir = Path(tempfile.mkdtemp(prefix="distributor-bench-peers-", dir=work))
    peers_dir.chmod(0o755)  # sshd reads authorized_keys below it as the SFTP user
    sshd_proc = None
    try:
        src = work / "src"
        bundle = src / "b1"
        c.make_bundle(bundle, [(f"data/part-{i:02d}.bin", SIZE) for i in range(FILES)])
        total = FILES * SIZE
        (sshd_dir := peers_dir / "sshd").mkdir()
        sshd, sshd_proc = start_sshd(sshd_dir, log_level="DEBUG1")
        log = sshd_dir / "sshd.log"
        server_side = _server_side(sshd)
        rclone_env = c.rclone_sftp_env(sshd)
        counter = iter(range(1_000_000))
        rss: dict[str, list[float]] = {"ours": [], "rclone": []}
        cpu: dict[str, list[float]] = {"ours": [], "rclone": []}
        wire: dict[str, str] = {}
        offset = log.stat().st_size

        def fresh_root(name: str) -> Path:
            root = sshd.make_sftp_root(f"{name}-{next(counter)}-{secrets.token_hex(3)}")
            os.sync()  # the previous sample's writeback does not run into this one
            return root

        def ours() -> float:
            nonlocal offset
            destination = {
                "id": "sftp",
                "backend": "ssh",
                "host": sshd.host,
                "port": sshd.port,
                "user": sshd.user,
                "path": str(fresh_root("ours")),
                "private_key_file": str(sshd.client_key_path),
                "known_hosts_file": str(sshd.known_hosts_path),
            }
            config = c.write_config(work / "distributor.yml", src, [destination])
            result = c.run_timed([c.DISTRIBUTOR, "run", "--config", str(config)], rss=True)
            if "status=completed" not in result.stdout:
                raise RuntimeError(f"distributor run did not complete:\n{result.stdout[-2000:]}")
            rss["ours"].append(result.maxrss_kib / 1024)
            cpu["ours"].append(result.cpu)
            wire["ours"], offset = _log_since(log, offset)
            return result.wall

        def rclone() -> float:
            nonlocal offset
            target = f"bsftp:{fresh_root('rclone')}/b1"
            result = c.run_timed(
                [c.RCLONE, "--config", "/dev/null", "copy", str(bundle), target], env=rclone_env, rss=True
            )
            rss["rclone"].append(result.maxrss_kib / 1024)
            cpu["rclone"].append(result.cpu)
            wire["rclone"], offset = _log_since(log, offset)
            return result.wall

        # warm the page cache and both code paths alike (not measured)
        ours()
        rclone()
        rss = {name: [] for name in rss}
        cpu = {name: [] for name in cpu}
        quiet = c.wait_for_quiet()
        samples = c.median_of({"ours": ours, "rclone": rclone})
        ours_s, rc = c.best(samples["ours"]), c.best(samples["rclone"])
        ours_rate, rc_rate = total / ours_s / c.MIB, total / rc / c.MIB
        peak = max(rss["ours"])

        report = c.Report("P9", "publish 1 GiB (8 x 128 MiB) to SFTP (sshd on 127.0.0.1) vs rclone copy")
        report.add(
            "throughput vs rclone copy (sftp)", ours_rate, rc_rate, "MiB/s", ">= 1.0x", ours_rate >= rc_rate, "rclone"
        )
        report.add("wall vs rclone copy (sftp)", ours_s, rc, "s", "(reference)", None, "rclone")
        report.add(
            "peak RSS (largest sample)",
            peak,
            max(rss["rclone"]),
            "MiB",
            f"< {LIMIT_MIB} MiB",
            peak < LIMIT_MIB,
            "rclone",
        )
        c.add_samples(report, samples)
        report.add(
            "CPU (user+sys, client)", c.best(cpu["ours"]), c.best(cpu["rclone"]), "s", "(reference)", None, "rclone"
        )
        c.add_samples(report, rss, unit="peak RSS MiB")
        c.add_samples(report, cpu, unit="CPU s")
        report.notes.append(quiet)
        report.notes.append(f"ours, last sample: {_wire_summary(wire['ours'])}")
        report.notes.append(f"rclone, last sample: {_wire_summary(wire['rclone'])}")
        report.notes.append(server_side)
        c.save(report)
        return report
    finally:
        if sshd_proc is not None:
            stop_process(sshd_proc)
        c.cleanup(work)
        os.sync()


if __name__ == "__main__":
    main()

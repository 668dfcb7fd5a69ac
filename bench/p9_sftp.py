"""P9: publish a 1 GiB bundle of 8 x 128 MiB files to SFTP (OpenSSH sshd on 127.0.0.1).

Ours, over both SSH transports in one run: ``transport: paramiko`` (SSH in our process) and
``transport: openssh`` (the system ``ssh`` client, one ``ssh -s sftp`` child per SFTP channel;
its CPU is counted with ours: the children are reaped by ``distributor run``, so their rusage is
part of the run's). Each: ``distributor run`` (validation of every source file, planning, lock, journal, staged
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

Targets (issue 30, ``transport: openssh``): throughput >= 1.0x rclone's in the same run, client
CPU (ours plus the ssh children) <= 1.6x rclone's, peak RSS < 150 MiB. The paramiko rows are
the reference the openssh transport is measured against (same targets, reported, not required).
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
CPU_LIMIT = 1.6
TRANSPORTS = ("paramiko", "openssh")

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
        names = [*(f"ours-{t}" for t in TRANSPORTS), "rclone"]
        rss: dict[str, list[float]] = {name: [] for name in names}
        cpu: dict[str, list[float]] = {name: [] for name in names}
        wire: dict[str, str] = {}
        offset = log.stat().st_size

        def fresh_root(name: str) -> Path:
            root = sshd.make_sftp_root(f"{name}-{next(counter)}-{secrets.token_hex(3)}")
            os.sync()  # the previous sample's writeback does not run into this one
            return root

        def ours(transport: str) -> float:
            nonlocal offset
            name = f"ours-{transport}"
            destination = {
                "id": "sftp",
                "backend": "ssh",
                "host": sshd.host,
                "port": sshd.port,
                "user": sshd.user,
                "path": str(fresh_root(name)),
                "private_key_file": str(sshd.client_key_path),
                "known_hosts_file": str(sshd.known_hosts_path),
                "transport": transport,
            }
            config = c.write_config(work / "distributor.yml", src, [destination])
            result = c.run_timed([c.DISTRIBUTOR, "run", "--config", str(config)], rss=True)
            if "status=completed" not in result.stdout:
                raise RuntimeError(f"distributor run did not complete:\n{result.stdout[-2000:]}")
            rss[name].append(result.maxrss_kib / 1024)
            cpu[name].append(result.cpu)
            wire[name], offset = _log_since(log, offset)
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

        runs = {f"ours-{t}": (lambda t=t: ours(t)) for t in TRANSPORTS} | {"rclone": rclone}
        # warm the page cache and every code path alike (not measured)
        for run in runs.values():
            run()
        rss = {name: [] for name in rss}
        cpu = {name: [] for name in cpu}
        quiet = c.wait_for_quiet()
        samples = c.median_of(runs)
        rc = c.best(samples["rclone"])
        rc_rate, rc_cpu = total / rc / c.MIB, c.best(cpu["rclone"])

        report = c.Report("P9", "publish 1 GiB (8 x 128 MiB) to SFTP (sshd on 127.0.0.1) vs rclone copy")
        for transport in reversed(TRANSPORTS):  # openssh (the targets) first
            name = f"ours-{transport}"
            ours_s = c.best(samples[name])
            ours_rate = total / ours_s / c.MIB
            peak = max(rss[name])
            ours_cpu = c.best(cpu[name])
            required = transport == "openssh"
            report.add(
                f"{transport}: throughput vs rclone copy (sftp)", ours_rate, rc_rate, "MiB/s", ">= 1.0x",
                ours_rate >= rc_rate if required else None, "rclone",
            )
            report.add(f"{transport}: wall vs rclone copy (sftp)", ours_s, rc, "s", "(reference)", None, "rclone")
            report.add(
                f"{transport}: CPU (user+sys, client{' + ssh children' if required else ''})", ours_cpu, rc_cpu,
                "s", f"<= {CPU_LIMIT}x", ours_cpu <= CPU_LIMIT * rc_cpu if required else None, "rclone",
            )
            report.add(
                f"{transport}: peak RSS (largest sample)", peak, max(rss["rclone"]), "MiB", f"< {LIMIT_MIB} MiB",
                peak < LIMIT_MIB if required else None, "rclone",
            )
        c.add_samples(report, samples)
        c.add_samples(report, rss, unit="peak RSS MiB")
        c.add_samples(report, cpu, unit="CPU s")
        report.notes.append(quiet)
        for transport in TRANSPORTS:
            report.notes.append(f"ours ({transport}), last sample: {_wire_summary(wire[f'ours-{transport}'])}")
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

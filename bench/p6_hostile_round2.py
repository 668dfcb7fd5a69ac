"""P6R: server peak RSS, CPU and log volume for the hostile shapes of issue 26, before and after,
side by side in one run.

Ours: a fresh ``distributor serve --publisher dagster`` (it only admits: streams, extracts,
validates, records) of this checkout per shape; peer: the same with ``BENCH_BEFORE``, another
build's ``distributor`` (e.g. ``<checkout of main>/.venv/bin/distributor``), on the same archive,
the two alternating which goes first. Both get the same config: every knob at its default (the
old build knows them all) but ``queue_size: 64``. Before the requests the process's peak RSS is
reset (``/proc/<pid>/clear_refs``); after them we read the peak (``VmHWM``), the CPU time the
server spent (``utime + stime``) and how many bytes it wrote to its log (stderr).

Shapes (issue 26):

- item 1: 3,900 directory entries, each 64 levels deep with a 4,031-byte path in its own chain
  (the issue's shape: +517 MB; four at once +1.5 GB), alone and 4 at once;
- item 2: 600 chained empty PAX headers in front of one entry (a 500 and a 172 KB traceback each),
  alone and 16 at once; 600 chained empty GNU long-name headers;
- item 5: 74 MB of one request header, sent as fast as the server reads it (+138 MB).

Targets: no shape raises the server's peak RSS by more than 64 MiB over idle, costs more than
1 s of CPU (16 at once included), answers a 5xx or writes more than 1 KiB to the log per request.
"""

from __future__ import annotations

import gzip
import io
import os
import secrets
import select
import socket
import tarfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench import common as c
from bench.p6_serve_process import DISTRIBUTOR, ServeProcess, proc_cpu, proc_mib, reset_peak
from tests.peers.process import free_port

TOKEN_ENV = "BENCH_UPLOAD_TOKEN"
PIPELINE = "bench.round2"
#: the build to compare with (its ``distributor`` executable); without it only ours is measured
BEFORE = os.environ.get("BENCH_BEFORE") or None
RSS_TARGET_MIB = 64.0
CPU_TARGET_S = 1.0
LOG_TARGET = 1024


# ---------------------------------------------------------------------------- archive shapes


def _manifest_entries() -> list[tuple[tarfile.TarInfo, bytes]]:
    import json

    from distributor_core.bundle import ManifestFile, bundle_digest, file_digest, marshal_manifest, parse_manifest

    data = b"report\n"
    records = [ManifestFile("report.md", file_digest(data), len(data))]
    draft = {"schema_version": 1, "id": "bench.round2", "digest": bundle_digest(records),
             "created": "2026-06-03T12:00:00Z",
             "files": [{"path": "report.md", "sha256": records[0].sha256, "size": len(data)}]}
    manifest = marshal_manifest(parse_manifest(json.dumps(draft).encode()))
    out = []
    for name, body in (("manifest.json", manifest), ("report.md", data)):
        info = tarfile.TarInfo(name)
        info.size = len(body)
        info.mode = 0o644
        out.append((info, body))
    return out


def _directory_bomb(path: Path) -> None:
    """A valid bundle, then 3,900 directory entries 64 levels deep, each in its own chain."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, body in _manifest_entries():
            tar.addfile(info, io.BytesIO(body))
        for index in range(3900):
            name = "/".join([f"{index:06d}" + "d" * 56] + ["d" * 62] * 63)
            info = tarfile.TarInfo(name)
            info.type = tarfile.DIRTYPE
            info.mode = 0o755
            tar.addfile(info)
    path.write_bytes(gzip.compress(raw.getvalue(), mtime=0))


def _chain(kind: bytes) -> Callable[[Path], None]:
    def build(path: Path) -> None:
        entries = _manifest_entries()
        header = tarfile.TarInfo("././@PaxHeader" if kind == tarfile.XHDTYPE else "././@LongLink")
        header.type = kind
        header.size = 0
        body = entries[0][0].tobuf(tarfile.USTAR_FORMAT) + entries[0][1] + b"\0" * (-len(entries[0][1]) % 512)
        body += header.tobuf(tarfile.USTAR_FORMAT) * 600
        body += entries[1][0].tobuf(tarfile.USTAR_FORMAT) + entries[1][1] + b"\0" * (-len(entries[1][1]) % 512)
        path.write_bytes(gzip.compress(body + b"\0" * 1024, mtime=0))

    return build


@dataclass(frozen=True)
class Shape:
    name: str
    build: Callable[[Path], None] | None
    at_once: int = 1


HEAD_BYTES = 74 * 1000 * 1000

SHAPES = [
    Shape("item 1: 3,900 directory entries 64 deep", _directory_bomb),
    Shape("item 1: 4 x 3,900 directory entries 64 deep", _directory_bomb, at_once=4),
    Shape("item 2: 600 chained empty PAX headers", _chain(tarfile.XHDTYPE)),
    Shape("item 2: 16 x 600 chained empty PAX headers", _chain(tarfile.XHDTYPE), at_once=16),
    Shape("item 2: 600 chained empty GNU long-name headers", _chain(tarfile.GNUTYPE_LONGNAME)),
    Shape("item 5: 74 MB of one request header", None),
]


# ---------------------------------------------------------------------------- measuring


def _server(work: Path, name: str, executable: str) -> ServeProcess:
    token = secrets.token_urlsafe(24)
    directory = work / name
    (directory / "staging").mkdir(parents=True, mode=0o700)
    config = {
        "server": {"http": {"bind": f"127.0.0.1:{free_port()}", "staging_root": str(directory / "staging"),
                            "queue_size": 64}},
        "upload_tokens": [{"id": "bench", "token_env": TOKEN_ENV, "allow_pipelines": [PIPELINE]}],
        "pipelines": [{"id": PIPELINE, "source": {"backend": "http_upload"},
                       "destinations": [{"id": "local", "backend": "local", "path": str(directory / "out")}]}],
    }
    server = ServeProcess(directory, config, {TOKEN_ENV: token}, "--publisher", "dagster", executable=executable)
    server.token = token  # type: ignore[attr-defined]
    return server


def _send_archive(server: ServeProcess, archive: Path, at_once: int) -> list[int | str]:
    import httpx

    codes: list[int | str] = [0] * at_once
    barrier = threading.Barrier(at_once)
    body = archive.read_bytes()

    def one(index: int) -> None:
        barrier.wait()
        try:
            with httpx.Client(timeout=600) as http:
                answer = http.post(f"{server.base}/v1/pipelines/{PIPELINE}/upload", content=body,
                                   headers={"Authorization": f"Bearer {server.token}",  # type: ignore[attr-defined]
                                            "Content-Type": "application/gzip"})
                codes[index] = answer.status_code
        except httpx.HTTPError as exc:
            codes[index] = type(exc).__name__

    threads = [threading.Thread(target=one, args=(i,)) for i in range(at_once)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return codes


def _send_huge_header(server: ServeProcess) -> list[int | str]:
    """``GET /healthz`` with one header of 74 MB, sent as fast as the server takes it; the answer's
    status (or what ended the exchange)."""
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=60)
    answer = b""
    try:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Padding: ")
        chunk = b"p" * (1 << 20)
        sent = 0
        while sent < HEAD_BYTES:
            if select.select([sock], [], [], 0)[0]:
                break
            try:
                sock.sendall(chunk[: min(len(chunk), HEAD_BYTES - sent)])
            except OSError:
                break
            sent += len(chunk)
        else:
            sock.sendall(b"\r\n\r\n")
        sock.settimeout(60)
        while b"\r\n" not in answer:
            try:
                data = sock.recv(65536)
            except OSError:
                break
            if not data:
                break
            answer += data
    finally:
        sock.close()
    line = answer.split(b"\r\n", 1)[0].split()
    return [int(line[1]) if len(line) > 1 else "closed"]


@dataclass
class Measured:
    codes: list[int | str]
    growth: float
    cpu: float
    log_bytes: int
    idle: float


def _measure(work: Path, name: str, executable: str, shape: Shape, archive: Path | None) -> Measured:
    server = _server(work, name, executable)
    try:
        time.sleep(0.5)
        pid = server.pid
        idle = proc_mib(pid, "VmRSS")
        log = server.dir / "serve.log"
        log_before = log.stat().st_size
        reset_peak(pid)
        cpu_before = proc_cpu(pid)
        codes = _send_archive(server, archive, shape.at_once) if archive is not None else _send_huge_header(server)
        time.sleep(0.2)
        cpu = proc_cpu(pid) - cpu_before
        peak = proc_mib(pid, "VmHWM")
        log_bytes = log.stat().st_size - log_before
    finally:
        server.stop()
        c.discard(server.dir)
    return Measured(codes, peak - idle, cpu, log_bytes, idle)


def main() -> c.Report:
    work = c.workdir("p6r")
    report = c.Report("P6R", "server peak RSS, CPU and log volume for the hostile shapes of issue 26, before and after")
    try:
        wanted = os.environ.get("BENCH_SHAPES")
        shapes = [SHAPES[int(i)] for i in wanted.split(",")] if wanted else SHAPES
        archives: dict[str, Path] = {}
        for shape in shapes:
            if shape.build is not None and shape.build not in [s.build for s in shapes[: shapes.index(shape)]]:
                path = work / "archives" / f"a{len(archives):02d}.tar.gz"
                path.parent.mkdir(parents=True, exist_ok=True)
                shape.build(path)
                archives[shape.name] = path
            elif shape.build is not None:
                first = next(s for s in shapes if s.build is shape.build)
                archives[shape.name] = archives[first.name]
        quiet = c.wait_for_quiet()
        report.notes.append(f"ours: {DISTRIBUTOR}; before: {BEFORE or '(BENCH_BEFORE not set)'}")
        for number, shape in enumerate(shapes):
            archive = archives.get(shape.name)
            builds = [("ours", DISTRIBUTOR)] + ([("before", BEFORE)] if BEFORE else [])
            if number % 2:
                builds.reverse()  # alternate which goes first
            results = {label: _measure(work, f"s{number:02d}-{label}", exe, shape, archive) for label, exe in builds}
            ours, before = results["ours"], results.get("before")
            ok = all(isinstance(code, int) and 400 <= code < 500 for code in ours.codes)
            per_request_log = ours.log_bytes / shape.at_once
            report.add(f"{shape.name}: peak RSS over idle", ours.growth, before.growth if before else None, "MiB",
                       f"< {RSS_TARGET_MIB:.0f} MiB", ok and ours.growth < RSS_TARGET_MIB, "before")
            report.add(f"{shape.name}: server CPU", ours.cpu, before.cpu if before else None, "s",
                       f"< {CPU_TARGET_S:.0f} s", ok and ours.cpu < CPU_TARGET_S, "before")
            report.add(f"{shape.name}: log bytes per request", per_request_log,
                       before.log_bytes / shape.at_once if before else None, "B", f"< {LOG_TARGET} B",
                       per_request_log < LOG_TARGET, "before")
            size = f"body {archive.stat().st_size / 1e3:.1f} KB" if archive is not None else "74 MB header"
            report.notes.append(
                f"{shape.name} ({size}): answers ours {sorted(set(map(str, ours.codes)))}"
                + (f", before {sorted(set(map(str, before.codes)))}" if before else "")
                + f"; idle RSS ours {ours.idle:.1f} MiB" + (f", before {before.idle:.1f} MiB" if before else ""))
        report.notes.append(quiet)
        c.save(report)
        return report
    finally:
        c.cleanup(work)


if __name__ == "__main__":
    main()

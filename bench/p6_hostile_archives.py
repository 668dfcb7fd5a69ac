"""P6H: server memory and CPU for the worst archives ``distributor serve`` accepts and refuses
(issue 14), with every limit at its default.

Ours: a fresh ``distributor serve --publisher dagster`` (so the server only admits: streams,
extracts, validates, records; nothing is published) per shape, on 127.0.0.1 and a fresh staging
root. Before the uploads the process's peak RSS is reset (``/proc/<pid>/clear_refs``); after them
we read the peak (``VmHWM``) and the CPU time the server spent (``utime + stime`` from
``/proc/<pid>/stat``). Peer: GNU ``tar -x`` unpacking the same archive once (``/usr/bin/time``:
peak RSS and CPU), the cost of merely unpacking it without any check.

Shapes (``server.http.max_upload_size`` 100 MB and ``server.http.limits`` at their defaults):

- accepted: 10,000 entries (9,999 one-byte files 64 levels deep in 9,954 directories, a 15 MB
  ``manifest.json``); one 99 MB file; 99 MB of zeros in a 97 KB body; 1,700 files each carrying
  64,000 bytes of PAX records (the per-entry header limit; 110 MB of decompressed tar in a small
  gzip body), alone and 16 at once.
- refused: the issue's PAX bomb (20 MB of PAX records on one entry, 20 KB gzipped) alone and 16 at
  once (was 110 → 830 MB RSS); 3,000 entries 900 levels deep (was 43 s of CPU), alone and 16 at
  once; a gzip bomb (1 GB of zeros in one file, about 1 MB gzipped); the 10,000-entry archive and the 99 MB file with a
  wrong digest in their last file (refused only after everything was extracted and hashed).

``BENCH_DISTRIBUTOR`` runs another build's ``distributor`` (e.g. a checkout of an older commit,
for the figures before the limits) and ``BENCH_SHAPES`` (comma-separated indexes into the list
above, from 0) runs only those shapes.

Targets: a refused archive whose limit is breached early costs < 1 s of CPU even 16 at once, and
no shape raises the server's peak RSS by more than 64 MiB over its idle RSS.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import secrets
import subprocess
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
PIPELINE = "bench.hostile"
CREATED = "2026-06-03T12:00:00Z"
RSS_TARGET_MIB = 64.0
CPU_TARGET_S = 1.0


# ---------------------------------------------------------------------------- archive shapes


def _sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _manifest(files: list[tuple[str, str, int]]) -> bytes:
    from distributor_core.bundle import ManifestFile, bundle_digest, marshal_manifest, parse_manifest

    records = [ManifestFile(path, sha, size) for path, sha, size in files]
    draft = {"schema_version": 1, "id": "bench.hostile", "digest": bundle_digest(records), "created": CREATED,
             "files": [{"path": p, "sha256": s, "size": n} for p, s, n in files]}
    return marshal_manifest(parse_manifest(json.dumps(draft).encode()))


def _member(tar: tarfile.TarFile, name: str, data: bytes | None = None, *, size: int | None = None,
            source=None, pax: dict[str, str] | None = None) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data) if data is not None else int(size or 0)
    info.mode = 0o644
    if pax:
        info.pax_headers = pax
    if data is not None:
        import io

        source = io.BytesIO(data)
    tar.addfile(info, source)


def _open(path: Path, level: int = 6) -> tuple[tarfile.TarFile, object]:
    raw = gzip.GzipFile(path, "wb", compresslevel=level, mtime=0)
    return tarfile.open(fileobj=raw, mode="w|", format=tarfile.PAX_FORMAT), raw


def _close(tar: tarfile.TarFile, raw: object) -> None:
    tar.close()
    raw.close()  # type: ignore[attr-defined]


def _ten_thousand_entries(path: Path, *, wrong_last: bool = False) -> None:
    """9,999 one-byte files 64 levels deep: 158 chains of 63 directories (9,954 in all), paths of
    about 1,400 bytes, so the manifest stays under its 16 MiB limit."""
    files: list[tuple[str, str, int]] = []
    names: list[str] = []
    for index in range(9_999):
        chain = index % 158
        dirs = "/".join(f"c{chain:03d}-level-{level:02d}-pad-pad" for level in range(63))
        names.append(f"{dirs}/file-{index:05d}")
        files.append((names[-1], _sha(b"x"), 1))
    manifest = _manifest(files)
    tar, raw = _open(path)
    _member(tar, "manifest.json", manifest)
    for index, name in enumerate(names):
        _member(tar, name, b"y" if wrong_last and index == len(names) - 1 else b"x")
    _close(tar, raw)


class _Random:
    """A deterministic stream of ``size`` pseudo-random bytes (hashed as it is read): a 1 MiB + 7
    random block repeated, so the bytes depend on their offset only, never on how they are read,
    and gzip (32 KiB window) cannot shrink them."""

    BLOCK = 1024 * 1024 + 7

    def __init__(self, size: int, seed: int, *, flip_last: bool = False) -> None:
        self.size = size
        self.offset = 0
        stream = bytearray()
        counter = 0
        while len(stream) < self.BLOCK:
            stream += hashlib.sha256(f"{seed}:{counter}".encode()).digest()
            counter += 1
        self.block = bytes(stream[: self.BLOCK])
        self.flip_last = flip_last
        self.sha = hashlib.sha256()

    def read(self, n: int = -1) -> bytes:
        n = self.size - self.offset if n < 0 else min(n, self.size - self.offset)
        out = bytearray()
        while len(out) < n:
            at = (self.offset + len(out)) % self.BLOCK
            out += self.block[at: at + n - len(out)]
        self.offset += n
        if self.flip_last and self.offset == self.size and out:
            out[-1] ^= 0xFF
        data = bytes(out)
        self.sha.update(data)
        return data


BIG = 99_000_000


def _one_big_file(path: Path, *, wrong: bool = False) -> None:
    probe = _Random(BIG, 1)
    while probe.read(1 << 20):
        pass
    manifest = _manifest([("data.bin", "sha256:" + probe.sha.hexdigest(), BIG)])
    tar, raw = _open(path, level=1)
    _member(tar, "manifest.json", manifest)
    _member(tar, "data.bin", size=BIG, source=_Random(BIG, 1, flip_last=wrong))
    _close(tar, raw)


PAX_FILES = 1_700
PAX_VALUE = 64_000 - 40  # one record of about 64,000 bytes, under the 65,536-byte limit


def _pax_at_the_limit(path: Path) -> None:
    files = [(f"f{index:04d}.txt", _sha(b"x"), 1) for index in range(PAX_FILES)]
    tar, raw = _open(path)
    _member(tar, "manifest.json", _manifest(files))
    for name, _, _ in files:
        _member(tar, name, b"x", pax={"comment": "p" * PAX_VALUE})
    _close(tar, raw)


def _pax_bomb(path: Path) -> None:
    """The issue's shape: 20 MB of PAX records on one listed file."""
    files = [("report.md", _sha(b"report\n"), 7)]
    tar, raw = _open(path, level=9)
    _member(tar, "manifest.json", _manifest(files))
    _member(tar, "report.md", b"report\n", pax={"comment": "x" * 20_000_000})
    _close(tar, raw)


def _deep_entries(path: Path) -> None:
    files = [("report.md", _sha(b"report\n"), 7)]
    tar, raw = _open(path, level=9)
    _member(tar, "manifest.json", _manifest(files))
    _member(tar, "report.md", b"report\n")
    for index in range(3000):
        _member(tar, "d/" * 899 + f"f{index}", b"")
    _close(tar, raw)


class _Zeros:
    def __init__(self, size: int) -> None:
        self.left = size

    def read(self, n: int = -1) -> bytes:
        n = self.left if n < 0 else min(n, self.left)
        self.left -= n
        return bytes(n)


def _zeros(path: Path, size: int) -> None:
    digest = hashlib.sha256()
    zeros = _Zeros(size)
    while chunk := zeros.read(1 << 20):
        digest.update(chunk)
    tar, raw = _open(path, level=9)
    _member(tar, "manifest.json", _manifest([("zeros.bin", "sha256:" + digest.hexdigest(), size)]))
    _member(tar, "zeros.bin", size=size, source=_Zeros(size))
    _close(tar, raw)


@dataclass(frozen=True)
class Shape:
    name: str
    build: Callable[[Path], None]
    status: int
    at_once: int = 1
    #: the CPU target applies (a limit breached early)
    early: bool = False


SHAPES = [
    Shape("accepted: 10,000 entries, 64 deep, 9,954 dirs, 15 MB manifest", _ten_thousand_entries, 202),
    Shape("accepted: one 99 MB file", _one_big_file, 202),
    Shape("accepted: 99 MB of zeros in a 97 KB body", lambda p: _zeros(p, BIG), 202),
    Shape("accepted: 1,700 files with 64 KB of PAX records each", _pax_at_the_limit, 202),
    Shape("accepted: 16 x 1,700 files with 64 KB of PAX records", _pax_at_the_limit, 202, at_once=16),
    Shape("refused: 20 MB of PAX records on one entry", _pax_bomb, 400, early=True),
    Shape("refused: 16 x 20 MB of PAX records on one entry", _pax_bomb, 400, at_once=16, early=True),
    Shape("refused: 3,000 entries 900 levels deep", _deep_entries, 400, early=True),
    Shape("refused: 16 x 3,000 entries 900 levels deep", _deep_entries, 400, at_once=16, early=True),
    Shape("refused: gzip bomb, 1 GB of zeros in a 1 MB body", lambda p: _zeros(p, 1_000_000_000), 413, early=True),
    Shape("refused: 10,000 entries, last digest wrong", lambda p: _ten_thousand_entries(p, wrong_last=True), 400),
    Shape("refused: one 99 MB file, digest wrong", lambda p: _one_big_file(p, wrong=True), 400),
]


# ---------------------------------------------------------------------------- measuring


def _server(work: Path, name: str) -> ServeProcess:
    """A fresh ``serve --publisher dagster`` (it only admits) with its own staging root."""
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
    server = ServeProcess(directory, config, {TOKEN_ENV: token}, "--publisher", "dagster")
    server.token = token  # type: ignore[attr-defined]
    return server


def _send(base: str, token: str, archive: Path, at_once: int) -> tuple[list[int | str], float]:
    import httpx

    codes: list[int | str] = [0] * at_once
    barrier = threading.Barrier(at_once)

    def one(index: int) -> None:
        def body():
            with archive.open("rb") as stream:
                while chunk := stream.read(1 << 20):
                    yield chunk

        barrier.wait()
        try:
            with httpx.Client(timeout=600) as http:
                answer = http.post(f"{base}/v1/pipelines/{PIPELINE}/upload", content=body(),
                                   headers={"Authorization": f"Bearer {token}", "Content-Type": "application/gzip",
                                            "Content-Length": str(archive.stat().st_size)})
                codes[index] = answer.status_code
        except httpx.HTTPError as exc:
            codes[index] = type(exc).__name__

    started = time.perf_counter()
    threads = [threading.Thread(target=one, args=(i,)) for i in range(at_once)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return codes, time.perf_counter() - started


def _peer(archive: Path, target: Path) -> tuple[float, float] | None:
    """GNU tar unpacking the archive once: (peak RSS MiB, CPU s), or None when tar fails."""
    target.mkdir(parents=True)
    result = subprocess.run(
        ["/usr/bin/time", "-f", "%M %U %S", "tar", "-xzf", str(archive), "-C", str(target)],
        capture_output=True, text=True,
    )
    try:
        rss, user, system = result.stderr.strip().splitlines()[-1].split()
        return int(rss) / 1024, float(user) + float(system)
    except (ValueError, IndexError):
        return None
    finally:
        c.discard(target)


def main() -> c.Report:
    work = c.workdir("p6h")
    report = c.Report("P6H", "server peak RSS and CPU for the worst archives accepted and refused (issue 14)")
    try:
        wanted = os.environ.get("BENCH_SHAPES")
        shapes = [SHAPES[int(i)] for i in wanted.split(",")] if wanted else SHAPES
        built: dict[str, Path] = {}
        for shape in shapes:
            key = shape.name.split(": ", 1)[1].removeprefix("16 x ")
            if key not in built:
                built[key] = work / "archives" / f"a{len(built):02d}.tar.gz"
                built[key].parent.mkdir(parents=True, exist_ok=True)
                shape.build(built[key])
        quiet = c.wait_for_quiet()
        peers: dict[Path, tuple[float, float] | None] = {}
        report.notes.append(f"server: {DISTRIBUTOR}")
        for number, shape in enumerate(shapes):
            archive = built[shape.name.split(": ", 1)[1].removeprefix("16 x ")]
            server = _server(work, f"s{number:02d}")
            try:
                time.sleep(0.5)
                pid = server.pid
                idle = proc_mib(pid, "VmRSS")
                reset_peak(pid)
                cpu_before = proc_cpu(pid)
                codes, wall = _send(server.base, server.token, archive, shape.at_once)
                cpu = proc_cpu(pid) - cpu_before
                peak = proc_mib(pid, "VmHWM")
            finally:
                server.stop()
                c.discard(server.dir)
            if archive not in peers:
                peers[archive] = _peer(archive, work / "peer" / archive.stem)
            peer = peers[archive]
            ok = all(code == shape.status for code in codes)
            size = archive.stat().st_size
            growth = peak - idle
            report.add(f"{shape.name}: peak RSS over idle", growth, peer[0] if peer else None, "MiB",
                       f"< {RSS_TARGET_MIB:.0f} MiB", ok and growth < RSS_TARGET_MIB, "GNU tar -x peak RSS")
            report.add(f"{shape.name}: server CPU", cpu, peer[1] if peer else None, "s",
                       f"< {CPU_TARGET_S:.0f} s" if shape.early else "(reference)",
                       (ok and cpu < CPU_TARGET_S) if shape.early else None, "GNU tar -x CPU")
            report.notes.append(
                f"{shape.name}: body {size / 1e6:.2f} MB x {shape.at_once}, answers {sorted(set(map(str, codes)))} "
                f"(expected {shape.status}), wall {wall:.2f} s, idle RSS {idle:.1f} MiB, peak {peak:.1f} MiB")
        report.notes.append(quiet)
        c.save(report)
        return report
    finally:
        c.cleanup(work)


if __name__ == "__main__":
    main()

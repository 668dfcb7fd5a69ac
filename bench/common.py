"""Shared helpers of the benchmark scripts (not tests).

Every scenario measures what a user runs (the ``distributor`` console script as a subprocess, or
``run_config`` where the scenario says so) and its peer in the same process run, on the same
data, alternating the order, and prints ours, the peer's and the ratio. Work happens under
``bench/.work/`` (gitignored) and is removed at the end unless ``BENCH_KEEP=1``.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import random
import resource
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
#: where scenarios put their files; BENCH_WORK moves them (e.g. to a tmpfs, away from other
#: processes' journal commits on a shared disk)
WORK = Path(os.environ.get("BENCH_WORK") or BENCH / ".work")
VENV_BIN = Path(sys.executable).parent
DISTRIBUTOR = str(VENV_BIN / "distributor")
RCLONE = shutil.which("rclone") or "rclone"

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

#: repetitions of each timed command (the median is reported); BENCH_REPEAT overrides
REPEAT = int(os.environ.get("BENCH_REPEAT", "5"))
MIB = 1024 * 1024
GIB = 1024 * MIB


# ---------------------------------------------------------------------------- machine


def machine() -> str:
    """One line naming the machine the figures were taken on."""
    model = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / GIB
    fs = "?"
    try:
        out = subprocess.run(["df", "-T", str(ROOT)], capture_output=True, text=True, check=False).stdout
        fs = out.splitlines()[1].split()[1]
    except (OSError, IndexError):
        pass
    return (
        f"{os.cpu_count()} cores ({model}), {mem:.0f} GiB RAM, {platform.system()} {platform.release()}, "
        f"{fs} under {ROOT}, Python {platform.python_version()}, {rclone_version()}"
    )


def rclone_version() -> str:
    try:
        out = subprocess.run([RCLONE, "version"], capture_output=True, text=True, check=False).stdout
        return out.splitlines()[0].strip()
    except (OSError, IndexError):
        return "rclone missing (apt-get install -y rclone)"


# ---------------------------------------------------------------------------- workspace


def workdir(name: str) -> Path:
    """A fresh ``<WORK>/<name>`` directory (an old one is moved to the trash, not deleted)."""
    path = WORK / name
    if path.exists():
        discard(path)
    path.mkdir(parents=True)
    return path


#: Deleting many files on a filesystem mounted with online ``discard`` (this machine's ext4)
#: makes file creation slow for seconds afterwards (measured: 10,000 creates 0.5 s in a quiet
#: filesystem, 2.7-7 s right after deleting 10,000 files). So nothing is deleted while anything
#: is measured: finished trees are renamed into the trash and removed by ``empty_trash`` after
#: the last measurement (bench/run.py does it at exit).
TRASH = WORK / ".trash"
_trash_count = 0


def _online_discard(path: Path) -> bool:
    """True when the filesystem holding ``path`` is mounted with ``discard``."""
    best, options = "", ""
    try:
        for line in Path("/proc/mounts").read_text().splitlines():
            fields = line.split()
            mount = fields[1]
            if str(path.resolve()).startswith(mount.rstrip("/") + "/") and len(mount) > len(best):
                best, options = mount, fields[3]
    except OSError:
        return True
    return "discard" in options.split(",")


def discard(path: Path) -> None:
    """Move ``path`` out of the way without deleting anything now (deleted at once where that
    costs nothing later, e.g. on a tmpfs, whose memory is better given back)."""
    global _trash_count
    if not path.exists():
        return
    if not _online_discard(path):
        shutil.rmtree(path, ignore_errors=True)
        return
    TRASH.mkdir(parents=True, exist_ok=True)
    _trash_count += 1
    try:
        path.rename(TRASH / f"{os.getpid()}-{_trash_count}-{path.name}")
    except OSError:  # another filesystem: nothing to protect there
        shutil.rmtree(path, ignore_errors=True)


def empty_trash() -> None:
    if os.environ.get("BENCH_KEEP") == "1":
        print(f"(kept {TRASH})")
        return
    shutil.rmtree(TRASH, ignore_errors=True)


def cleanup(path: Path) -> None:
    if os.environ.get("BENCH_KEEP") == "1":
        print(f"(kept {path})")
        return
    discard(path)


class Targets:
    """A never-used destination directory for every sample of every tool (see ``discard``)."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.count = 0

    def fresh(self, name: str) -> Path:
        self.count += 1
        for old in (self.work / "targets").glob(f"{name}-*"):
            discard(old)  # deleted now only where deleting costs nothing later
        path = self.work / "targets" / f"{name}-{self.count}"
        path.mkdir(parents=True)
        os.sync()  # the previous sample's writeback does not run into this one
        return path


# ---------------------------------------------------------------------------- bundles


def write_random_file(path: Path, size: int, seed: int) -> None:
    rng = random.Random(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as handle:
        left = size
        while left > 0:
            n = min(left, 16 * MIB)
            handle.write(rng.randbytes(n))
            left -= n


def make_bundle(
    root: Path, files: Sequence[tuple[str, int]], *, bundle_id: str = "bench", seed: int = 1, created=None
) -> None:
    """Write ``files`` (path, size) with pseudo-random content and a valid ``manifest.json``."""
    from distributor_core.bundle import build_manifest, write_manifest

    root.mkdir(parents=True, exist_ok=True)
    for index, (name, size) in enumerate(files):
        write_random_file(root / name, size, seed * 1_000_003 + index)
    manifest = build_manifest(root, id=bundle_id, files=[name for name, _ in files], created=created)
    write_manifest(root, manifest, overwrite=True)


def write_config(path: Path, source: Path, destinations: Sequence[dict], *, pipeline: str = "bench") -> Path:
    """A distributor YAML config with one local-source pipeline (JSON is valid YAML)."""
    config = {
        "pipelines": [
            {
                "id": pipeline,
                "source": {"backend": "local", "path": str(source)},
                "destinations": list(destinations),
            }
        ]
    }
    path.write_text(json.dumps(config, indent=2) + "\n")
    return path


# ---------------------------------------------------------------------------- timing


@dataclass
class Timed:
    wall: float
    maxrss_kib: int = 0
    stdout: str = ""
    #: the child's CPU seconds (user + sys, from wait4): steadier than wall on a shared machine
    cpu: float = 0.0


#: GNU time, used to read a command's peak RSS: a child's own ru_maxrss also counts the memory
#: of this (large) process it was forked from before exec
GNU_TIME = "/usr/bin/time"


def run_timed(
    cmd: Sequence[str], *, env: dict | None = None, check: bool = True, cwd: Path | None = None, rss: bool = False
) -> Timed:
    """Run ``cmd``; wall-clock seconds and, with ``rss``, its peak RSS (through GNU time, so the
    figure is the command's alone). ``env`` adds to the environment; ``None`` removes a variable."""
    environment = {**os.environ, **(env or {})}
    environment = {k: v for k, v in environment.items() if v is not None}
    rss_file = None
    if rss:
        import tempfile

        handle, rss_file = tempfile.mkstemp(prefix="bench-rss-")
        os.close(handle)
        cmd = [GNU_TIME, "-f", "%M", "-o", rss_file, *cmd]
    start = time.perf_counter()
    proc = subprocess.Popen(
        list(cmd),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=environment,
        cwd=cwd,
    )
    out, err = b"", b""
    # read pipes without deadlock, then reap with wait4 for the rusage of this child alone
    out, err = proc.stdout.read(), proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if check and proc.returncode != 0:
        raise RuntimeError(
            f"{' '.join(cmd)} exited {proc.returncode}\nstdout: {out.decode(errors='replace')[-2000:]}\n"
            f"stderr: {err.decode(errors='replace')[-2000:]}"
        )
    maxrss = usage.ru_maxrss
    if rss_file is not None:
        try:
            maxrss = int(Path(rss_file).read_text().split()[-1])
        finally:
            os.unlink(rss_file)
    cpu = usage.ru_utime + usage.ru_stime
    return Timed(wall=wall, maxrss_kib=maxrss, stdout=out.decode(errors="replace"), cpu=cpu)


def median_of(
    runs: dict[str, Callable[[], float]], *, repeat: int = REPEAT, before: Callable[[str], None] | None = None
) -> dict[str, list[float]]:
    """Call each named measurement ``repeat`` times, alternating (A B, B A, A B ...)."""
    names = list(runs)
    samples: dict[str, list[float]] = {n: [] for n in names}
    for round_ in range(repeat):
        order = names if round_ % 2 == 0 else list(reversed(names))
        for name in order:
            if before is not None:
                before(name)
            samples[name].append(runs[name]())
    return samples


def med(values: Sequence[float]) -> float:
    return statistics.median(values)


def best(values: Sequence[float]) -> float:
    """The headline figure: the least-disturbed sample (the machine may be shared)."""
    return min(values)


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def add_samples(report: Report, samples: dict[str, list[float]], unit: str = "s") -> None:
    """Record every sample, the median and the load average next to the headline (best) figures."""
    parts = []
    for name, values in samples.items():
        shown = ",".join(f"{v:.3f}" for v in values)
        parts.append(f"{name} best {min(values):.3f} median {med(values):.3f} [{shown}]")
    report.notes.append(
        f"samples ({unit}, best of {len(next(iter(samples.values())))} alternating): " + "; ".join(parts)
    )
    report.notes.append(f"load average at the end: {loadavg()}")


def distributor_run(config: Path, *extra: str, expect: str | None = "completed") -> Timed:
    """``distributor run`` as a user runs it (text report); every action must end ``expect``."""
    result = run_timed([DISTRIBUTOR, "run", "--config", str(config), *extra])
    if expect is not None:
        actions = [line for line in result.stdout.splitlines() if line.startswith("Action:")]
        if not actions or any(f"status={expect}" not in line for line in actions):
            raise RuntimeError(f"distributor run did not end {expect}:\n{result.stdout[-2000:]}")
    return result


def rclone_sftp_env(sshd, remote: str = "BSFTP") -> dict[str, str]:
    """Environment configuring the rclone remote ``remote`` (lower case in paths: ``bsftp:``) as
    an sftp remote on the test sshd, with its client key and strict known_hosts file. Hash checks
    are off: rclone would run md5sum/sha1sum over ssh after each file, a shell command the sshd
    account (nologin) cannot run; ours hashes while it writes."""
    prefix = f"RCLONE_CONFIG_{remote}_"
    return {
        f"{prefix}TYPE": "sftp",
        f"{prefix}HOST": sshd.host,
        f"{prefix}PORT": str(sshd.port),
        f"{prefix}USER": sshd.user,
        f"{prefix}KEY_FILE": str(sshd.client_key_path),
        f"{prefix}KNOWN_HOSTS_FILE": str(sshd.known_hosts_path),
        f"{prefix}DISABLE_HASHCHECK": "true",
    }


def rclone(*args: str) -> Timed:
    return run_timed([RCLONE, "--config", "/dev/null", *args])


def self_maxrss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# ---------------------------------------------------------------------------- physical limit


def single_pass_rate(sources: Sequence[Path], target_dir: Path, buffer: int = 4 * MIB) -> float:
    """Bytes/s of one pass read + sha256 + write over ``sources`` into the new directory
    ``target_dir`` (no fsync), as in shared/notes/test-peers.md: the physical ceiling of a
    verified copy on this machine."""
    target_dir.mkdir(parents=True, exist_ok=True)
    os.sync()
    total = 0
    buf = bytearray(buffer)
    view = memoryview(buf)
    start = time.perf_counter()
    for index, src in enumerate(sources):
        hasher = hashlib.sha256()
        fd_in = os.open(src, os.O_RDONLY)
        fd_out = os.open(target_dir / f"f{index}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            while True:
                n = os.readv(fd_in, [buf])
                if not n:
                    break
                hasher.update(view[:n])
                os.write(fd_out, view[:n])
                total += n
        finally:
            os.close(fd_in)
            os.close(fd_out)
        hasher.hexdigest()
    return total / (time.perf_counter() - start)


# ---------------------------------------------------------------------------- report


@dataclass
class Row:
    metric: str
    ours: float
    peer: float | None
    unit: str
    target: str
    met: bool | None
    peer_name: str = ""

    @property
    def ratio(self) -> float | None:
        if self.peer in (None, 0):
            return None
        return self.ours / self.peer


@dataclass
class Report:
    scenario: str
    title: str
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, *args, **kwargs) -> Row:
        row = Row(*args, **kwargs)
        self.rows.append(row)
        return row

    def print(self) -> None:
        print()
        print(f"== {self.scenario}: {self.title}")
        print(f"   machine: {machine()}")
        for row in self.rows:
            peer = f"{row.peer:.3f} {row.unit} ({row.peer_name})" if row.peer is not None else "-"
            ratio = f"{row.ratio:.2f}x" if row.ratio is not None else "-"
            met = {True: "MET", False: "MISSED", None: "n/a"}[row.met]
            print(
                f"   {row.metric}: ours {row.ours:.3f} {row.unit} | peer {peer} | ratio {ratio} | "
                f"target {row.target} | {met}"
            )
        for note in self.notes:
            print(f"   note: {note}")
        sys.stdout.flush()

    def to_dict(self) -> dict:
        return {
            "scenario": self.scenario,
            "title": self.title,
            "machine": machine(),
            "rows": [
                {
                    "metric": r.metric,
                    "ours": r.ours,
                    "peer": r.peer,
                    "peer_name": r.peer_name,
                    "ratio": r.ratio,
                    "unit": r.unit,
                    "target": r.target,
                    "met": r.met,
                }
                for r in self.rows
            ],
            "notes": self.notes,
        }


def save(report: Report) -> None:
    """Print the report and keep the latest JSON under bench/.work/results/."""
    report.print()
    results = WORK / "results"
    results.mkdir(parents=True, exist_ok=True)
    (results / f"{report.scenario}.json").write_text(json.dumps(report.to_dict(), indent=2) + "\n")


# ---------------------------------------------------------------------------- a shared machine


def cpu_busy(interval: float = 1.0) -> float:
    """Fraction of all CPU time spent busy over ``interval`` seconds (from /proc/stat)."""

    def sample() -> tuple[int, int]:
        fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
        idle = fields[3] + fields[4]
        return idle, sum(fields)

    idle0, total0 = sample()
    time.sleep(interval)
    idle1, total1 = sample()
    total = total1 - total0
    return 0.0 if total <= 0 else 1.0 - (idle1 - idle0) / total


def wait_for_quiet(threshold: float = 0.25, max_wait: float = float(os.environ.get("BENCH_QUIET_WAIT", "300"))) -> str:
    """Wait (up to ``max_wait`` s) until other processes leave the CPUs mostly idle, so the
    figures measure us and the peer rather than a neighbour's test run. Returns a note."""
    deadline = time.monotonic() + max_wait
    busy = cpu_busy()
    waited = 0.0
    while busy > threshold and time.monotonic() < deadline:
        busy = cpu_busy(2.0)
        waited += 2.0
    return f"CPU busy before measuring: {busy:.0%} (waited {waited:.0f} s for < {threshold:.0%})"

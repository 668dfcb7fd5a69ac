"""P6A: honest producers' uploads next to a token that attacks with issue 26's items 1, 3 and 4 at
once, before and after, side by side in one run.

The server: ``distributor serve`` (inline publisher) with three ``http_upload`` pipelines, one
token each (``honest-a``, ``honest-b``, ``attacker``), ``queue_size: 16``, every other knob at its
default (the old build knows them all). The attacker, started a second before the honest uploads
and kept up until they are done:

- item 1: two threads post the 3,900-directory-entry archive of P6R with the attacker's token,
  again and again;
- item 3: 300 connections without a token from another loopback address (127.0.0.10), each
  sending half a request head, reopened at once whenever the server closes one (a tight reconnect
  loop), more than ``max_connections`` (256);
- item 4: one thread posts 4 MB bundles whose publication fails (the attacker's pipeline holds a
  published bundle with the same ``created`` and another id: ``fail_conflict``), each keeping its
  staged bundle after the failure.

Item 4 is also run alone, so its disk use is not hidden by the flood (which keeps even the
attacker's own uploads out of the old build): two threads post 400 such bundles (1.6 GB) to a fresh
server of each build, and the bytes of failed bundles left on the staging disk are counted.

The honest producers: 34 uploads of 256 KiB bundles (two tokens, ``UploadClient`` with 40
attempts, 0.1-0.5 s back-off), all released at once; for each, the time to its ``202``
(admission) and to its run's ``succeeded`` (publication, polled every 0.1 s).

Ours: this checkout under attack; peer: ``BENCH_BEFORE`` (another build's ``distributor``) under
the same attack, and this checkout with nobody attacking ("alone"). Figures: honest uploads
admitted and published, p99 of admission and of publication, the attacker's failed bundles left on
the staging disk, the server's peak RSS over idle and CPU. Targets: all 34 admitted and
published; p99 publication < 30 s; failed bundles on disk within ``max_failed_bytes_per_token``
(1 GB).
"""

from __future__ import annotations

import math
import os
import secrets
import selectors
import socket
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench import common as c
from bench.p6_hostile_round2 import BEFORE, _directory_bomb
from bench.p6_serve_process import DISTRIBUTOR, ServeProcess, proc_cpu, proc_mib, reset_peak
from tests.peers.process import free_port

HONEST = 34
SIZE = 256 * 1024
FAILING_SIZE = 4 * 1024 * 1024
FAILING_MAX = 400
FLOOD = 300
FLOOD_SOURCE = "127.0.0.10"
TOKENS = {"honest-a": "BENCH_TOKEN_A", "honest-b": "BENCH_TOKEN_B", "attacker": "BENCH_TOKEN_X"}
CREATED = datetime(2026, 6, 3, 12, tzinfo=UTC)
PER_TOKEN_QUOTA = 1024**3


def _server(work: Path, executable: str) -> ServeProcess:
    tokens = {name: secrets.token_urlsafe(24) for name in TOKENS}
    (work / "staging").mkdir(parents=True, mode=0o700)
    config = {
        "server": {"http": {"bind": f"127.0.0.1:{free_port()}", "staging_root": str(work / "staging"),
                            "queue_size": 16}},
        "upload_tokens": [{"id": name, "token_env": env, "allow_pipelines": [name]} for name, env in TOKENS.items()],
        "pipelines": [{"id": name, "source": {"backend": "http_upload"},
                       "destinations": [{"id": "local", "backend": "local", "path": str(work / "out" / name)}]}
                      for name in TOKENS],
    }
    server = ServeProcess(work, config, {TOKENS[name]: value for name, value in tokens.items()}, executable=executable)
    server.secrets = tokens  # type: ignore[attr-defined]
    return server


# ---------------------------------------------------------------------------- the attacker


@dataclass
class Attack:
    stop: threading.Event = field(default_factory=threading.Event)
    bomb_answers: dict[str, int] = field(default_factory=dict)
    failing_answers: dict[str, int] = field(default_factory=dict)
    flood_connects: int = 0
    flood_closed: int = 0
    threads: list[threading.Thread] = field(default_factory=list)

    def count(self, table: dict[str, int], key: object) -> None:
        table[str(key)] = table.get(str(key), 0) + 1


def _post(server: ServeProcess, body: bytes, token: str) -> int | str:
    import httpx

    try:
        with httpx.Client(timeout=120) as http:
            answer = http.post(f"{server.base}/v1/pipelines/attacker/upload", content=body,
                               headers={"Authorization": f"Bearer {token}", "Content-Type": "application/gzip"})
            return answer.status_code
    except httpx.HTTPError as exc:
        return type(exc).__name__


def _bombs(server: ServeProcess, attack: Attack, archive: bytes) -> None:
    token = server.secrets["attacker"]  # type: ignore[attr-defined]
    while not attack.stop.is_set():
        attack.count(attack.bomb_answers, _post(server, archive, token))


def _failing(server: ServeProcess, attack: Attack, archives: list[Path]) -> None:
    token = server.secrets["attacker"]  # type: ignore[attr-defined]
    for archive in archives:
        if attack.stop.is_set():
            return
        attack.count(attack.failing_answers, _post(server, archive.read_bytes(), token))


def _flood(server: ServeProcess, attack: Attack) -> None:
    selector = selectors.DefaultSelector()

    def open_one() -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.bind((FLOOD_SOURCE, 0))
            sock.connect(("127.0.0.1", server.port))
            sock.sendall(b"POST /v1/pipelines/honest-a/upload HTTP/1.1\r\nHost: x\r\n")
        except OSError:
            sock.close()
            return
        attack.flood_connects += 1
        sock.setblocking(False)
        selector.register(sock, selectors.EVENT_READ)

    for _ in range(FLOOD):
        open_one()
    while not attack.stop.is_set():
        for key, _ in selector.select(0.05):
            sock: socket.socket = key.fileobj  # type: ignore[assignment]
            try:
                data = sock.recv(65536)
            except OSError:
                data = b""
            if data:
                continue
            selector.unregister(sock)
            sock.close()
            attack.flood_closed += 1
            open_one()
        while len(selector.get_map()) < FLOOD and not attack.stop.is_set():
            open_one()
    for key in list(selector.get_map().values()):
        key.fileobj.close()  # type: ignore[union-attr]
    selector.close()


def _start_attack(
    server: ServeProcess, bomb: bytes, failing: list[Path], base: bytes, *, failing_only: bool = False
) -> Attack:
    attack = Attack()
    _post(server, base, server.secrets["attacker"])  # type: ignore[attr-defined]  # what the failures conflict with
    if failing_only:
        half = len(failing) // 2
        attack.threads = [threading.Thread(target=_failing, args=(server, attack, part))
                          for part in (failing[:half], failing[half:])]
    else:
        attack.threads = [threading.Thread(target=_bombs, args=(server, attack, bomb)) for _ in range(2)]
        attack.threads.append(threading.Thread(target=_failing, args=(server, attack, failing)))
        attack.threads.append(threading.Thread(target=_flood, args=(server, attack)))
    for thread in attack.threads:
        thread.start()
    return attack


# ---------------------------------------------------------------------------- honest producers


def _honest(server: ServeProcess, roots: list[Path]) -> tuple[list[float], list[float], list[str]]:
    """Per upload: seconds to its 202, seconds to its run's ``succeeded``, and its outcome."""
    from distributor_core.upload import RetryOptions, UploadClient

    admitted = [math.inf] * HONEST
    published = [math.inf] * HONEST
    outcomes = ["?"] * HONEST
    barrier = threading.Barrier(HONEST)

    def one(index: int) -> None:
        name = "honest-a" if index % 2 else "honest-b"
        barrier.wait()
        started = time.monotonic()
        try:
            with UploadClient(server.base, server.secrets[name],  # type: ignore[attr-defined]
                              retry=RetryOptions(max_attempts=40, base_delay=0.1, max_delay=0.5)) as client:
                result = client.upload_bundle(pipeline_id=name, root=roots[index], idempotency_key=f"honest-{index}")
                admitted[index] = time.monotonic() - started
                deadline = time.monotonic() + 240
                while time.monotonic() < deadline:
                    status = client.status(result.run_id).status
                    if status in ("succeeded", "failed"):
                        break
                    time.sleep(0.1)
                if status == "succeeded":
                    published[index] = time.monotonic() - started
                outcomes[index] = status
        except Exception as exc:  # reported: not admitted
            outcomes[index] = type(exc).__name__ + ": " + str(exc)[:80]

    threads = [threading.Thread(target=one, args=(i,)) for i in range(HONEST)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(400)
    return admitted, published, outcomes


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(0.99 * len(ordered)) - 1)]


def _bytes_below(path: Path) -> int:
    total = 0
    for directory, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(directory, name)).st_size
            except OSError:
                pass
    return total


def _failed_bytes(work: Path) -> int:
    staging = work / "staging" / "attacker"
    if not staging.is_dir():
        return 0
    return sum(_bytes_below(entry / "bundle") for entry in staging.iterdir()
               if entry.is_dir() and not entry.name.startswith("."))


def _failing_alone(work: Path, executable: str, attack_data: AttackData) -> tuple[int, dict[str, int]]:
    """Item 4 alone: the failed bundles' bytes left on disk after 400 failing 4 MB uploads."""
    server = _server(work, executable)
    try:
        attack = _start_attack(server, *attack_data, failing_only=True)
        for thread in attack.threads:
            thread.join(1800)
        time.sleep(2.0)  # the last publications fail and their quotas apply
        return _failed_bytes(work), attack.failing_answers
    finally:
        server.stop()


@dataclass
class Outcome:
    admitted: list[float]
    published: list[float]
    outcomes: list[str]
    attack: Attack | None = None
    failed_bytes: int = 0
    growth: float = 0.0
    cpu: float = 0.0


AttackData = tuple[bytes, list[Path], bytes]


def _run(work: Path, executable: str, roots: list[Path], attack_data: AttackData | None) -> Outcome:
    server = _server(work, executable)
    attack = None
    try:
        time.sleep(0.5)
        pid = server.pid
        idle = proc_mib(pid, "VmRSS")
        reset_peak(pid)
        cpu_before = proc_cpu(pid)
        if attack_data is not None:
            attack = _start_attack(server, *attack_data)
            time.sleep(1.0)
        admitted, published, outcomes = _honest(server, roots)
        if attack is not None:
            attack.stop.set()
            for thread in attack.threads:
                thread.join(300)
        time.sleep(1.0)  # the last failures' quotas
        cpu = proc_cpu(pid) - cpu_before
        peak = proc_mib(pid, "VmHWM")
        failed = _failed_bytes(work)
    finally:
        if attack is not None:
            attack.stop.set()
        server.stop()
    return Outcome(admitted, published, outcomes, attack, failed, peak - idle, cpu)


def _bundles(work: Path) -> list[Path]:
    roots = []
    start = datetime.now(UTC).replace(microsecond=0)
    for index in range(HONEST):
        root = work / "bundles" / f"h{index:02d}"
        c.make_bundle(root, [("data.bin", SIZE)], bundle_id=f"bench.honest.{index:02d}", seed=700 + index,
                      created=start + timedelta(seconds=index))
        roots.append(root)
    return roots


def _archive(root: Path) -> Path:
    from distributor_core.bundle import load_manifest
    from distributor_core.upload.archive import write_archive

    target = root.with_suffix(".tar.gz")
    with open(target, "wb") as out:
        write_archive(root, load_manifest(root), out)
    return target


def _attack_data(work: Path) -> AttackData:
    bomb_path = work / "bomb.tar.gz"
    _directory_bomb(bomb_path)
    base_root = work / "attacker" / "base"
    c.make_bundle(base_root, [("data.bin", 1024)], bundle_id="attacker.base", seed=1, created=CREATED)
    failing = []
    for index in range(FAILING_MAX):
        root = work / "attacker" / f"f{index:03d}"
        c.make_bundle(root, [("data.bin", FAILING_SIZE)], bundle_id=f"attacker.other.{index:03d}", seed=2,
                      created=CREATED)
        failing.append(_archive(root))
        c.discard(root)
    return bomb_path.read_bytes(), failing, _archive(base_root).read_bytes()


def main() -> c.Report:
    work = c.workdir("p6a")
    report = c.Report("P6A", f"{HONEST} honest uploads next to a token attacking with directory bombs, a tokenless "
                             "reconnect flood and failing uploads at once (issue 26, items 1, 3, 4)")
    try:
        roots = _bundles(work)
        attack_data = _attack_data(work)
        quiet = c.wait_for_quiet()
        alone = _run(work / "alone", DISTRIBUTOR, roots, None)
        runs = [("ours", DISTRIBUTOR)] + ([("before", BEFORE)] if BEFORE else [])
        measured = {label: _run(work / label, exe, roots, attack_data) for label, exe in reversed(runs)}
        ours, before = measured["ours"], measured.get("before")
        kept = {label: _failing_alone(work / f"failing-{label}", exe, attack_data) for label, exe in runs}

        def admitted(o: Outcome) -> int:
            return sum(1 for value in o.admitted if math.isfinite(value))

        def published(o: Outcome) -> int:
            return sum(1 for value in o.published if math.isfinite(value))

        report.add("honest uploads admitted under attack", admitted(ours), admitted(before) if before else None,
                   "uploads", f"{HONEST}", admitted(ours) == HONEST, "before")
        report.add("honest uploads published under attack", published(ours), published(before) if before else None,
                   "uploads", f"{HONEST}", published(ours) == HONEST, "before")
        report.add("honest p99 admission (to 202) under attack", _p99(ours.admitted),
                   _p99(before.admitted) if before else None, "s", "(reference)", None, "before")
        report.add("honest p99 admission, no attack", _p99(alone.admitted), None, "s", "(reference)", None)
        report.add("honest p99 publication (to succeeded) under attack", _p99(ours.published),
                   _p99(before.published) if before else None, "s", "< 30 s",
                   math.isfinite(_p99(ours.published)) and _p99(ours.published) < 30, "before")
        report.add("honest p99 publication, no attack", _p99(alone.published), None, "s", "(reference)", None)
        report.add("attacker's failed bundles on the staging disk, under the combined attack",
                   ours.failed_bytes / c.MIB, before.failed_bytes / c.MIB if before else None, "MiB", "<= 1024 MiB",
                   ours.failed_bytes <= PER_TOKEN_QUOTA, "before")
        report.add(f"failed bundles on the staging disk after {FAILING_MAX} failing 4 MB uploads (item 4 alone)",
                   kept["ours"][0] / c.MIB, kept["before"][0] / c.MIB if "before" in kept else None, "MiB",
                   "<= 1024 MiB", kept["ours"][0] <= PER_TOKEN_QUOTA, "before")
        report.add("server peak RSS over idle", ours.growth, before.growth if before else None, "MiB",
                   "(reference)", None, "before")
        report.add("server CPU, whole run", ours.cpu, before.cpu if before else None, "s", "(reference)", None,
                   "before")
        for label, o in (("ours", ours), ("before", before), ("alone", alone)):
            if o is None:
                continue
            failures = sorted({out for out in o.outcomes if out != "succeeded"})
            attack = o.attack
            report.notes.append(
                f"{label}: admitted {admitted(o)}, published {published(o)}, median admission "
                f"{sorted(o.admitted)[HONEST // 2]:.2f} s, median publication {sorted(o.published)[HONEST // 2]:.2f} s"
                + (f"; bombs answered {dict(sorted(attack.bomb_answers.items()))}, failing uploads answered "
                   f"{dict(sorted(attack.failing_answers.items()))}, flood connects {attack.flood_connects}, "
                   f"closed by the server {attack.flood_closed}" if attack else "")
                + (f"; honest failures: {'; '.join(failures)[:300]}" if failures else ""))
        for label, (_, answers) in kept.items():
            report.notes.append(f"item 4 alone, {label}: failing uploads answered {dict(sorted(answers.items()))}")
        report.notes += [f"ours: {DISTRIBUTOR}; before: {BEFORE or '(BENCH_BEFORE not set)'}", quiet]
        c.save(report)
        return report
    finally:
        c.cleanup(work)


if __name__ == "__main__":
    main()

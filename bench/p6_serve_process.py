"""A ``distributor serve`` subprocess for the P6 scenarios, and what /proc says about it: its CPU
time, its RSS and the peak RSS since a reset."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

from bench import common as c

#: ``BENCH_DISTRIBUTOR`` serves with another build (e.g. a checkout of an older commit)
DISTRIBUTOR = os.environ.get("BENCH_DISTRIBUTOR") or c.DISTRIBUTOR
CLK_TCK = os.sysconf("SC_CLK_TCK")


def proc_cpu(pid: int) -> float:
    """CPU seconds (``utime + stime``) the process has used."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def proc_mib(pid: int, key: str) -> float:
    """A ``/proc/<pid>/status`` figure (``VmRSS``, ``VmHWM``) in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
    raise KeyError(key)


def reset_peak(pid: int) -> None:
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # resets VmHWM to the current RSS


class ServeProcess:
    """``<executable> serve --config <dir>/distributor.yml [extra]`` with ``config`` written as JSON,
    started and answering ``/healthz`` (``executable``: :data:`DISTRIBUTOR` by default)."""

    def __init__(
        self, directory: Path, config: dict, env: dict[str, str], *extra: str, executable: str | None = None
    ) -> None:
        self.dir = directory
        (directory / "distributor.yml").write_text(json.dumps(config))
        self.proc = subprocess.Popen(
            [executable or DISTRIBUTOR, "serve", "--config", str(directory / "distributor.yml"), *extra],
            env={**os.environ, **env}, stdout=subprocess.DEVNULL,
            stderr=open(directory / "serve.log", "wb"),  # noqa: SIM115 - closed with the process
        )
        self.pid = self.proc.pid
        bind = config["server"]["http"]["bind"]
        self.port = int(bind.rsplit(":", 1)[1])
        self.base = f"http://{bind}"
        import httpx

        deadline = time.monotonic() + 60
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"serve exited {self.proc.returncode}: {(directory / 'serve.log').read_text()}")
            try:
                httpx.get(self.base + "/healthz", timeout=1.0)
                return
            except httpx.HTTPError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()

"""A real ``dagster-daemon run`` on a ``DAGSTER_HOME`` (test peer, started per test).

``make_dagster_home`` copies ``examples/dagster/dagster.yaml`` verbatim into a fresh
``DAGSTER_HOME``; the ``DAGSTER_PG_*`` variables of :mod:`tests.peers.postgres` point it at a
database of the session's PostgreSQL cluster. ``Daemon.start`` runs ``dagster-daemon run -m
distributor_dagster.definitions`` as a child process in its own process group (its code server and
the run workers Dagster's default launcher starts live in that group), waits until the sensor and
run-queue daemons have sent a heartbeat, and stops the group by its id at the end
(:func:`tests.peers.webserver.stop_group`);
``Webserver`` does the same for ``dagster-webserver`` (ready once its code location loaded).
``start`` and ``wait_ready`` are separate so that several peers boot at the same time.

The distributor config and options reach the daemon, its code server and every run worker through
the environment (``DISTRIBUTOR_CONFIG``, ``DISTRIBUTOR_DAGSTER_SENSOR_INTERVAL``,
``DISTRIBUTOR_DAGSTER_SENSOR_STATUS``), as on a production host.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.peers.webserver import stop_group

REPO = Path(__file__).resolve().parents[2]
INSTANCE_EXAMPLE = REPO / "examples" / "dagster" / "dagster.yaml"
BIN = Path(sys.executable).parent
_READY_TIMEOUT = 120.0
#: daemons a distributor deployment relies on: sensors (watch/uploads) and the run queue
REQUIRED_DAEMONS = ("SENSOR", "QUEUED_RUN_COORDINATOR")


def make_dagster_home(directory: Path, instance_yaml: Path = INSTANCE_EXAMPLE) -> Path:
    """A fresh ``DAGSTER_HOME`` holding ``instance_yaml`` (the shipped example by default)."""
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(instance_yaml, directory / "dagster.yaml")
    return directory


def _heartbeats_since(home: Path, env: Mapping[str, str], started: float) -> set[str]:
    """Daemon types with a heartbeat newer than ``started`` in the instance of ``home``."""
    import dagster as dg

    with environment(env), dg.DagsterInstance.from_config(str(home)) as instance:
        beats = instance.get_daemon_heartbeats()
    return {name for name, beat in beats.items() if beat.timestamp >= started}


@contextmanager
def environment(env: Mapping[str, str]) -> Iterator[None]:
    """``env`` in ``os.environ`` for the block (Dagster reads ``{env: ...}`` from there)."""
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _spawn(command: list[str], home: Path, env: Mapping[str, str], log_path: Path,
           cwd: Path | None) -> subprocess.Popen[bytes]:
    log = open(log_path, "ab")  # noqa: SIM115 - kept open for the child
    try:
        return subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            env={**os.environ, **env, "DAGSTER_HOME": str(home)},
            cwd=cwd,
            start_new_session=True,
        )
    finally:
        log.close()


@dataclass
class _Peer:
    proc: subprocess.Popen[bytes]
    log_path: Path
    name: str

    @property
    def pid(self) -> int:
        return self.proc.pid

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def _check(self, deadline: float, what: str) -> None:
        if self.proc.poll() is not None:
            pytest.fail(f"{self.name} exited {self.proc.returncode}; its log:\n{self.log_text()[-4000:]}",
                        pytrace=False)
        if time.monotonic() > deadline:
            pytest.fail(f"{self.name}: {what} within {_READY_TIMEOUT:.0f} s; its log:\n{self.log_text()[-4000:]}",
                        pytrace=False)

    def stop(self) -> None:
        stop_group(self.proc)


@dataclass
class Daemon(_Peer):
    """A running ``dagster-daemon run``."""

    home: Path = Path()
    env: Mapping[str, str] = field(default_factory=dict)
    started: float = 0.0

    @classmethod
    def start(cls, home: Path, env: Mapping[str, str], log_path: Path, *,
              module: str = "distributor_dagster.definitions", cwd: Path | None = None) -> Daemon:
        started = time.time()
        proc = _spawn([str(BIN / "dagster-daemon"), "run", "-m", module], home, env, log_path, cwd)
        return cls(proc=proc, log_path=log_path, name="dagster-daemon", home=home, env=dict(env), started=started)

    def wait_ready(self) -> None:
        """Until the sensor and run-queue daemons have sent a heartbeat."""
        deadline = time.monotonic() + _READY_TIMEOUT
        while not set(REQUIRED_DAEMONS) <= _heartbeats_since(self.home, self.env, self.started):
            self._check(deadline, "no heartbeat")
            time.sleep(0.5)


@dataclass
class Webserver(_Peer):
    """A running ``dagster-webserver`` on 127.0.0.1."""

    url: str = ""

    @classmethod
    def start(cls, home: Path, env: Mapping[str, str], log_path: Path, *,
              module: str = "distributor_dagster.definitions", cwd: Path | None = None) -> Webserver:
        from tests.peers.process import free_port

        port = free_port()
        proc = _spawn([str(BIN / "dagster-webserver"), "-h", "127.0.0.1", "-p", str(port), "-m", module],
                      home, env, log_path, cwd)
        return cls(proc=proc, log_path=log_path, name="dagster-webserver", url=f"http://127.0.0.1:{port}")

    def wait_ready(self) -> None:
        """Until the GraphQL API answers and the code location has loaded."""
        import httpx

        query = "{ workspaceOrError { __typename ... on Workspace { locationEntries { loadStatus } } } }"
        deadline = time.monotonic() + _READY_TIMEOUT
        while True:
            try:
                body = httpx.post(f"{self.url}/graphql", json={"query": query}, timeout=10).json()
                entries = body["data"]["workspaceOrError"].get("locationEntries", [])
                if entries and all(e["loadStatus"] == "LOADED" for e in entries):
                    return
            except (httpx.HTTPError, KeyError, TypeError, ValueError):
                pass
            self._check(deadline, "the code location did not load")
            time.sleep(0.5)


@contextmanager
def run_daemon(home: Path, env: Mapping[str, str], log_path: Path, **kwargs: object) -> Iterator[Daemon]:
    """``dagster-daemon run -m <module>`` with ``DAGSTER_HOME=home`` and ``env`` added to the
    environment, ready once the sensor and run-queue daemons have sent a heartbeat."""
    daemon = Daemon.start(home, env, log_path, **kwargs)  # type: ignore[arg-type]
    try:
        daemon.wait_ready()
        yield daemon
    finally:
        daemon.stop()


@contextmanager
def run_webserver(home: Path, env: Mapping[str, str], log_path: Path, **kwargs: object) -> Iterator[Webserver]:
    """``dagster-webserver -m <module>`` on a free port of 127.0.0.1, ready once its code location
    has loaded."""
    web = Webserver.start(home, env, log_path, **kwargs)  # type: ignore[arg-type]
    try:
        web.wait_ready()
        yield web
    finally:
        web.stop()

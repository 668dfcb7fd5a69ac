"""PostgreSQL test peer (session fixture): a throwaway cluster from Debian's PostgreSQL.

Per test session ``initdb`` creates a cluster in a temporary directory and ``postgres`` serves it
on a free port of 127.0.0.1 (Unix socket in the same directory), as a child process stopped by
its PID at the end, as described in ``shared/notes/test-peers.md``. As root both run as the
``postgres`` system user the Debian package creates (PostgreSQL refuses to run as root);
otherwise as the current user. Local socket connections are trusted, TCP connections need the
password of the ``dagster`` role, like a production host.

The cluster runs with ``fsync=off``: it is thrown away after the session, and durability of
Dagster's storage is PostgreSQL's business, not what these tests check.

Use the ``postgres_server`` fixture, then ``server.create_database()`` for a fresh database (one
per test keeps Dagster instances apart) and ``server.environment(db)`` for the ``DAGSTER_PG_*``
variables that ``examples/dagster/dagster.yaml`` reads. PostgreSQL missing is a hard failure
(``scripts/install-test-peers.sh`` installs it), never a skip.
"""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.peers.process import free_port, stop_process

_START_TIMEOUT = 30.0
ROLE = "dagster"
#: the Debian package's system user, used when the tests run as root
SYSTEM_USER = "postgres"


def postgres_bindir() -> Path:
    """The newest ``/usr/lib/postgresql/<version>/bin`` holding ``initdb`` (Debian's layout), or
    the directory of ``initdb`` on ``PATH``."""
    versions = []
    base = Path("/usr/lib/postgresql")
    if base.is_dir():
        for entry in base.iterdir():
            if (entry / "bin" / "initdb").is_file() and entry.name.split(".")[0].isdigit():
                versions.append((int(entry.name.split(".")[0]), entry / "bin"))
    if versions:
        return max(versions)[1]
    found = shutil.which("initdb")
    if found:
        return Path(found).parent
    pytest.fail(
        "PostgreSQL is not installed (no initdb under /usr/lib/postgresql/*/bin or on PATH): "
        "run scripts/install-test-peers.sh",
        pytrace=False,
    )


@dataclass(frozen=True)
class PostgresServer:
    """A running throwaway PostgreSQL cluster and the password role tests connect as."""

    host: str
    port: int
    user: str
    password: str = field(repr=False)
    #: the cluster's directory (data, socket, log); removed at the end of the session
    workdir: Path
    bindir: Path
    pid: int

    def psql(self, sql: str, database: str = "postgres") -> str:
        """Run ``sql`` through ``psql`` over TCP as the password role; its output."""
        proc = subprocess.run(
            [str(self.bindir / "psql"), "-X", "-q", "-t", "-A", "-v", "ON_ERROR_STOP=1",
             "-h", self.host, "-p", str(self.port), "-U", self.user, "-d", database, "-c", sql],
            env={**os.environ, "PGPASSWORD": self.password},
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"psql {sql!r} failed: {proc.stderr.strip()}")
        return proc.stdout

    def create_database(self, name: str | None = None) -> str:
        """A fresh empty database owned by the role (a random name unless ``name``)."""
        database = name or f"dagster_{secrets.token_hex(5)}"
        self.psql(f'CREATE DATABASE "{database}"')
        return database

    def environment(self, database: str) -> dict[str, str]:
        """The ``DAGSTER_PG_*`` variables of ``examples/dagster/dagster.yaml`` for ``database``."""
        return {
            "DAGSTER_PG_HOST": self.host,
            "DAGSTER_PG_PORT": str(self.port),
            "DAGSTER_PG_USER": self.user,
            "DAGSTER_PG_PASSWORD": self.password,
            "DAGSTER_PG_DB": database,
        }

    def log_text(self) -> str:
        try:
            return (self.workdir / "postgres.log").read_text(errors="replace")
        except OSError:
            return ""


def _run_as() -> dict[str, object]:
    """``subprocess`` arguments that drop root to the ``postgres`` user (nothing otherwise)."""
    if os.geteuid() != 0:
        return {}
    try:
        entry = pwd.getpwnam(SYSTEM_USER)
    except KeyError:
        pytest.fail(f"running as root needs the {SYSTEM_USER} user of Debian's postgresql package", pytrace=False)
    return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": [], "env": {
        "PATH": "/usr/bin:/bin", "HOME": str(Path(entry.pw_dir)), "LC_ALL": "C.UTF-8"}}


def stop_postgres(proc: subprocess.Popen[bytes]) -> None:
    """PostgreSQL's fast shutdown (SIGINT: clients are disconnected, unlike SIGTERM's smart
    shutdown that waits for them), then immediate shutdown and a kill if it hangs."""
    for sig, wait in ((signal.SIGINT, 15), (signal.SIGQUIT, 5)):
        if proc.poll() is not None:
            return
        proc.send_signal(sig)
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue
    stop_process(proc)


def _wait_ready(server: PostgresServer, proc: subprocess.Popen[bytes], deadline: float) -> bool:
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        probe = subprocess.run(
            [str(server.bindir / "pg_isready"), "-q", "-h", server.host, "-p", str(server.port)],
            capture_output=True,
            check=False,
        )
        if probe.returncode == 0:
            return True
        time.sleep(0.1)
    return False


def start_postgres(workdir: Path) -> tuple[PostgresServer, subprocess.Popen[bytes]]:
    """``initdb`` a cluster under ``workdir`` and start ``postgres`` on a free loopback port with
    a password role :data:`ROLE` that may create databases."""
    bindir = postgres_bindir()
    as_owner = _run_as()
    password = secrets.token_urlsafe(18)
    data = workdir / "data"
    pwfile = workdir / "superuser.pw"
    pwfile.write_text(secrets.token_urlsafe(18) + "\n")
    if as_owner:
        os.chown(workdir, as_owner["user"], as_owner["group"])  # type: ignore[arg-type]
        os.chown(pwfile, as_owner["user"], as_owner["group"])  # type: ignore[arg-type]
    init = subprocess.run(
        [str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "--pwfile", str(pwfile),
         "--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8", "--no-instructions"],
        capture_output=True,
        text=True,
        check=False,
        **as_owner,  # type: ignore[arg-type]
    )
    if init.returncode != 0:
        pytest.fail(f"initdb failed: {init.stderr.strip() or init.stdout.strip()}", pytrace=False)
    last_log = ""
    for _attempt in range(3):
        port = free_port()
        log = open(workdir / "postgres.log", "ab")  # noqa: SIM115 - kept open for the child
        try:
            proc = subprocess.Popen(
                [str(bindir / "postgres"), "-D", str(data), "-p", str(port), "-k", str(workdir),
                 "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off",
                 "-c", "full_page_writes=off", "-c", "max_connections=200"],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                **as_owner,  # type: ignore[arg-type]
            )
        finally:
            log.close()
        server = PostgresServer(host="127.0.0.1", port=port, user=ROLE, password=password, workdir=workdir,
                                bindir=bindir, pid=proc.pid)
        if _wait_ready(server, proc, time.monotonic() + _START_TIMEOUT):
            # the role is created over the trusted socket as the superuser
            sql = f"CREATE ROLE {ROLE} LOGIN CREATEDB PASSWORD '{password}'"
            created = subprocess.run(
                [str(bindir / "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", str(workdir), "-p", str(port),
                 "-U", "postgres", "-d", "postgres", "-c", sql],
                capture_output=True,
                text=True,
                check=False,
                **as_owner,  # type: ignore[arg-type]
            )
            if created.returncode != 0:
                stop_postgres(proc)
                pytest.fail(f"creating the {ROLE} role failed: {created.stderr.strip()}", pytrace=False)
            return server, proc
        stop_postgres(proc)
        last_log = server.log_text()
    pytest.fail(f"postgres did not start on 127.0.0.1; its log:\n{last_log[-4000:]}", pytrace=False)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A running throwaway PostgreSQL cluster on 127.0.0.1 for the session."""
    workdir = Path(tempfile.mkdtemp(prefix="distributor-postgres-"))
    proc: subprocess.Popen[bytes] | None = None
    try:
        server, proc = start_postgres(workdir)
        yield server
    finally:
        if proc is not None:
            stop_postgres(proc)
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture
def postgres_database(postgres_server: PostgresServer) -> str:
    """A fresh database on the session's cluster for one test."""
    return postgres_server.create_database()

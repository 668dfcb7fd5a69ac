"""Fixtures of the production-deployment tests: a ``Deployment`` per test on its own database of
the session's PostgreSQL cluster (tests/peers/postgres.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.peers.daemon import make_dagster_home
from tests.peers.postgres import PostgresServer
from tests.production.harness import SENSOR_INTERVAL, Deployment


@pytest.fixture
def deployment(
    tmp_path: Path, postgres_server: PostgresServer, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Deployment]:
    database = postgres_server.create_database()
    home = make_dagster_home(tmp_path / "dagster-home")
    env = {
        **postgres_server.environment(database),
        "DAGSTER_HOME": str(home),
        "DISTRIBUTOR_DAGSTER_SENSOR_INTERVAL": SENSOR_INTERVAL,
        "DISTRIBUTOR_DAGSTER_SENSOR_STATUS": "running",
    }
    # the test process opens the same instance: dagster.yaml reads DAGSTER_PG_* from os.environ
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    yield Deployment(root=tmp_path, home=home, postgres=postgres_server, database=database, env=env)

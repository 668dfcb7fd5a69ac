"""``examples/dagster/dagster.yaml`` as shipped: copied into ``DAGSTER_HOME`` with the
``DAGSTER_PG_*`` variables set, Dagster loads it on the real PostgreSQL (issue 13, item 1)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import dagster as dg
import pytest

from tests.peers.daemon import INSTANCE_EXAMPLE, make_dagster_home
from tests.production.harness import BIN, Deployment

pytestmark = pytest.mark.dagster

PG_VARIABLES = ("DAGSTER_PG_HOST", "DAGSTER_PG_PORT", "DAGSTER_PG_USER", "DAGSTER_PG_PASSWORD", "DAGSTER_PG_DB")


def test_dagster_instance_info_loads_the_shipped_file_on_postgres(deployment: Deployment) -> None:
    assert (deployment.home / "dagster.yaml").read_bytes() == INSTANCE_EXAMPLE.read_bytes()
    info = subprocess.run([str(BIN / "dagster"), "instance", "info"], env={**os.environ, **deployment.env},
                          capture_output=True, text=True, timeout=120, check=False)
    assert info.returncode == 0, info.stderr
    for storage in ("PostgresRunStorage", "PostgresEventLogStorage", "PostgresScheduleStorage"):
        assert storage in info.stdout
    assert "class: DefaultRunLauncher" in info.stdout and "granularity: op" in info.stdout
    # the schema was created on the empty database and is current
    assert "Storage schema state" in info.stdout and info.stdout.count("current: ") == 3
    assert deployment.env["DAGSTER_PG_PASSWORD"] not in info.stdout + info.stderr


def test_queue_limits_and_pools_are_the_documented_ones(deployment: Deployment) -> None:
    with deployment.instance() as instance:
        assert type(instance.run_storage).__name__ == "PostgresRunStorage"
        assert type(instance.event_log_storage).__name__ == "PostgresEventLogStorage"
        assert type(instance.schedule_storage).__name__ == "PostgresScheduleStorage"
        assert type(instance.run_coordinator).__name__ == "QueuedRunCoordinator"
        assert instance.run_coordinator.dequeue_interval_seconds == 1
        assert type(instance.run_launcher).__name__ == "DefaultRunLauncher"
        config = instance.get_concurrency_config()
        assert config.pool_config.default_pool_limit == 1
        assert config.pool_config.pool_granularity.value == "op"
        queue = config.run_queue_config
        assert queue.should_block_op_concurrency_limited_runs
        assert queue.tag_concurrency_limits == [
            {"key": "distributor/pipeline", "limit": 1, "value": {"applyLimitPerUniqueValue": True}}
        ]
        # the database really is PostgreSQL: a run written here is read back by a second instance
        run = instance.add_run(dg.DagsterRun(job_name="probe", run_id="0" * 8 + "-0000-0000-0000-" + "0" * 12))
    with deployment.instance() as again:
        assert again.get_run_by_id(run.run_id) is not None
    tables = deployment.postgres.psql("SELECT count(*) FROM runs", database=deployment.database)
    assert tables.strip() == "1"


@pytest.mark.parametrize("missing", PG_VARIABLES)
def test_a_missing_connection_variable_is_named(
    tmp_path: Path, missing: str, deployment: Deployment, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(missing)
    with pytest.raises(dg.DagsterInvalidConfigError, match=f'environment variable "{missing}" which is not set'):
        dg.DagsterInstance.from_config(str(make_dagster_home(tmp_path / "other-home")))

"""examples/dagster: the scaling-out instance config and the dg project with DistributorComponent."""

from __future__ import annotations

import sys
from pathlib import Path

import dagster as dg
import pytest
import yaml

from tests.dagster.conftest import REPO

pytestmark = pytest.mark.dagster

EXAMPLE = REPO / "examples" / "dagster"


def test_scaling_out_instance_sets_run_queue_limits_and_pool_limits(tmp_path: Path) -> None:
    data = yaml.safe_load((EXAMPLE / "dagster.yaml").read_text())
    assert data["storage"]["postgres"]["postgres_db"]["hostname"] == {"env": "DAGSTER_PG_HOST"}
    assert data["run_launcher"]["class"] == "DockerRunLauncher"
    # the parts this Dagster version can load without the optional postgres/docker packages
    del data["storage"], data["run_launcher"]
    (tmp_path / "dagster.yaml").write_text(yaml.safe_dump(data))
    with dg.DagsterInstance.from_config(str(tmp_path)) as instance:
        config = instance.get_concurrency_config()
        assert config.pool_config.default_pool_limit == 1
        assert config.run_queue_config.tag_concurrency_limits == [
            {"key": "distributor/pipeline", "limit": 1, "value": {"applyLimitPerUniqueValue": True}}
        ]
        assert type(instance.run_coordinator).__name__ == "QueuedRunCoordinator"


def test_dg_project_example_builds_its_definitions_from_the_component(monkeypatch: pytest.MonkeyPatch) -> None:
    project = EXAMPLE / "dg-project"
    monkeypatch.syspath_prepend(str(project / "src"))
    try:
        defs = dg.load_from_defs_folder(path_within_project=project / "src" / "distributor_site")
        dg.Definitions.validate_loadable(defs)
        assert {job.name for job in defs.resolve_all_job_defs()} - {"__ASSET_JOB"} == {
            "publish_site_reports",
            "prune_site_reports__archive", "prune_site_reports__html",
            "reconcile_state_site_reports__archive", "reconcile_state_site_reports__html",
        }
        assert [sensor.name for sensor in defs.sensors] == ["watch_site_reports"]
        specs = {tuple(spec.key.path): spec for spec in defs.resolve_all_asset_specs()}
        assert set(specs) == {("site_reports",), ("site_reports", "archive"), ("site_reports", "html")}
    finally:
        for name in [m for m in sys.modules if m == "distributor_site" or m.startswith("distributor_site.")]:
            del sys.modules[name]

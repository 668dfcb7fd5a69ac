"""examples/dagster: the dg project with DistributorComponent (the instance files are tested on a real
PostgreSQL in tests/production)."""

from __future__ import annotations

import sys

import dagster as dg
import pytest

from tests.dagster.conftest import REPO

pytestmark = pytest.mark.dagster

EXAMPLE = REPO / "examples" / "dagster"


def test_dg_project_example_builds_its_definitions_from_the_component(monkeypatch: pytest.MonkeyPatch) -> None:
    project = EXAMPLE / "dg-project"
    monkeypatch.syspath_prepend(str(project / "src"))
    try:
        defs = dg.load_from_defs_folder(path_within_project=project / "src" / "distributor_site")
        dg.Definitions.validate_loadable(defs)
        assert {job.name for job in defs.resolve_all_job_defs()} - {"__ASSET_JOB"} == {
            "publish_site_reports", "prune", "reconcile_state", "audit",
        }
        assert [sensor.name for sensor in defs.sensors] == ["watch_site_reports"]
        specs = {tuple(spec.key.path): spec for spec in defs.resolve_all_asset_specs()}
        assert set(specs) == {
            ("site_reports",), ("site_reports", "archive"), ("site_reports", "html"), ("finance", "daily_report"),
        }
        # the producer's plain @asset feeds the pipeline's source
        assert [dep.asset_key for dep in specs[("site_reports",)].deps] == [dg.AssetKey(["finance", "daily_report"])]
    finally:
        for name in [m for m in sys.modules if m == "distributor_site" or m.startswith("distributor_site.")]:
            del sys.modules[name]

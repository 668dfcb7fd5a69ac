"""The ``watch_<p>`` sensor under a real daemon on PostgreSQL (issue 13, item 3): a new bundle in
the source becomes one run; an unchanged source, tick after tick, none."""

from __future__ import annotations

import time

import dagster as dg
import pytest

from tests.dagster.conftest import make_bundle
from tests.production.harness import Deployment, runs_tagged, wait_finished, wait_for, wait_ticks_after

pytestmark = pytest.mark.dagster

SENSOR = "watch_site"


def test_a_new_bundle_is_one_run_and_an_unchanged_source_none(deployment: Deployment) -> None:
    source, out = deployment.root / "source", deployment.root / "out"
    make_bundle(source / "first", "site.first", {"index.txt": "first\n"})
    deployment.write_config({"pipelines": [{
        "id": "site",
        "source": {"backend": "local", "path": str(source)},
        "destinations": [{"id": "web", "backend": "local", "path": str(out)}],
    }]})
    with deployment.instance() as instance, deployment.running():
        [first] = wait_for(lambda: runs_tagged(instance, pipeline="site"), message="a run for the first bundle")
        [record] = wait_finished(instance, [first.run_id])
        assert record.dagster_run.status == dg.DagsterRunStatus.SUCCESS
        assert first.tags["distributor/bundle_path"] == "first" and first.tags["dagster/sensor_name"] == SENSOR
        assert (out / "first" / "index.txt").read_text() == "first\n"

        # unchanged: the next tick is skipped and requests nothing
        settled = time.time()
        ticks = wait_ticks_after(instance, SENSOR, settled, count=1)
        assert {t.status.value for t in ticks} == {"SKIPPED"}
        assert {t.skip_reason for t in ticks} == {"no new or changed bundles"}
        assert [r.run_id for r in runs_tagged(instance, pipeline="site")] == [first.run_id]

        # a second bundle: exactly one more run, for it alone
        make_bundle(source / "second", "site.second", {"index.txt": "second\n"})
        runs = wait_for(lambda: (found := runs_tagged(instance, pipeline="site")) and len(found) > 1 and found,
                        message="a run for the second bundle")
        [second] = [r for r in runs if r.run_id != first.run_id]
        assert wait_finished(instance, [second.run_id])[0].dagster_run.status == dg.DagsterRunStatus.SUCCESS
        assert second.tags["distributor/bundle_path"] == "second"
        assert (out / "second" / "index.txt").read_text() == "second\n"
        wait_ticks_after(instance, SENSOR, time.time(), count=1)
        assert len(runs_tagged(instance, pipeline="site")) == 2

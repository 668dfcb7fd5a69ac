"""Batched upload runs under the real daemon on PostgreSQL (issue 28 item 3): twelve uploads staged
by ``distributor serve --publisher dagster`` while no daemon runs are published, once the daemon
starts, by ``ceil(12 / bundles_per_run)`` runs of the ``uploads_<p>`` sensor, in admission order;
``GET /runs/<id>`` and every upload record carry that upload's own outcome and the id of the run
that published it, and the one upload the destinations refuse fails only itself."""

from __future__ import annotations

import math
from datetime import timedelta

import dagster as dg
import httpx
import pytest

from distributor_core import staging as sg
from distributor_dagster.site import pool_name
from tests.bundle.conftest import CREATED
from tests.production.harness import RUN_TIMEOUT, Deployment, runs_tagged, wait_finished, wait_for
from tests.server.harness import TOKEN, bundle_archive, published, upload, write_setup

pytestmark = pytest.mark.dagster

AUTH = {"Authorization": f"Bearer {TOKEN}"}
BATCH = 5
UPLOADS = 12
#: the upload whose bundle id differs from the others': the destinations refuse it (fail_conflict)
ODD = 6


def test_twelve_uploads_are_published_by_three_runs_each_record_exact(deployment: Deployment) -> None:
    setup = write_setup(deployment.root / "site", pipelines={"reports": 2})
    deployment.use_config(setup.config_path, setup.environ)
    deployment.env["DISTRIBUTOR_DAGSTER_BUNDLES_PER_RUN"] = str(BATCH)
    bundles = [("reports.other" if index == ODD else "reports.daily", index) for index in range(UPLOADS)]
    # the odd bundle has another id and the same created time as the bundle the destinations hold
    # by then: neither newer nor older, so they refuse it (fail_conflict)
    created = [CREATED + timedelta(minutes=index if index != ODD else ODD - 1) for index in range(UPLOADS)]

    # staged while nothing launches runs: the first tick of the daemon finds all twelve
    run_ids = []
    with deployment.running(serve=True, daemon=False) as up, httpx.Client(base_url=up.serve_url, timeout=30) as http:
        for bundle_id, version in bundles:
            archive = bundle_archive(deployment.root, {"report.md": f"{bundle_id} {version}\n".encode()},
                                     bundle_id=bundle_id, created=created[version])
            response = upload(http, "reports", archive)
            assert response.status_code == 202, response.text
            run_ids.append(response.json()["run_id"])

    runs_expected = math.ceil(UPLOADS / BATCH)
    with deployment.instance() as instance, deployment.running(serve=True) as up, \
            httpx.Client(base_url=up.serve_url, timeout=30) as http:

        def views() -> dict[str, dict] | None:
            found = {run_id: http.get(f"/runs/{run_id}", headers=AUTH).json() for run_id in run_ids}
            return found if all(v["status"] in ("succeeded", "failed") for v in found.values()) else None

        final = wait_for(views, timeout=RUN_TIMEOUT * runs_expected, message="every upload to finish", poll=2)
        runs = runs_tagged(instance, pipeline="reports")
        records = wait_finished(instance, [r.run_id for r in runs])
        assert len(runs) == runs_expected
        assert all(r.dagster_run.tags["dagster/sensor_name"] == "uploads_reports" for r in records)
        # in admission order, at most BATCH uploads per run
        batches = [run_ids[start:start + BATCH] for start in range(0, UPLOADS, BATCH)]
        published_by = {run.run_id: [u for u in run_ids if final[u]["dagster_run_id"] == run.run_id] for run in runs}
        assert [published_by[run.run_id] for run in runs] == batches
        # each upload's own outcome, in GET /runs and in its record
        odd = run_ids[ODD]
        for index, run_id in enumerate(run_ids):
            record = sg.read_record(setup.staging("reports"), run_id)
            view = final[run_id]
            assert (record.status, record.dagster_run_id) == (view["status"], view["dagster_run_id"])
            expected = "failed" if run_id == odd else "succeeded"
            assert record.status == expected, (index, record.error)
            actions = [(a["destination_id"], a["action"]) for a in record.report["actions"]]
            if run_id == odd:
                assert actions == [("dest1", "fail_conflict"), ("dest2", "fail_conflict")]
                assert "fail_conflict" in view["error"] and str(deployment.root) not in view["error"]
                assert sg.bundle_dir(setup.staging("reports"), run_id).is_dir()  # kept for a re-run
            else:
                assert record.error == "" and not view.get("error")
                assert len(actions) == 2 and all(action.startswith(("publish_", "replace")) for _, action in actions)
                assert not sg.bundle_dir(setup.staging("reports"), run_id).exists()
        # the batch holding the refused upload fails (it shows in Dagster); the others succeed
        statuses = [r.dagster_run.status for r in records]
        assert statuses == [dg.DagsterRunStatus.FAILURE if odd in batch else dg.DagsterRunStatus.SUCCESS
                            for batch in batches]
        # the runs need only the destination roots' pools, which their publish steps claim
        pools = {pool_name(f"local:{setup.destinations[f'reports/dest{i}']}") for i in (1, 2)}
        assert all(r.dagster_run.run_op_concurrency.all_pools == pools for r in records)
    for name in ("dest1", "dest2"):
        last = bundles[-1]
        assert published(setup.destinations[f"reports/{name}"]) == {"report.md": f"{last[0]} {last[1]}\n".encode()}

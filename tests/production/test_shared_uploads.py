"""``distributor serve --publisher dagster`` on shared S3 staging under the real daemon on
PostgreSQL (issue 29 items 2 and 3): two ``serve`` replicas (separate processes) admit into one
``s3://`` staging root of a moto server with authentication enforced; the daemon's ``uploads_<p>``
sensor lists the store's pending markers and its run workers publish each bundle from the bucket,
with the staging credentials from the environment as for S3 destinations. Every upload is
published exactly once, each record carries its own outcome and run, and the bucket keeps no
published bundle."""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

import dagster as dg
import httpx
import pytest

from distributor_core import staging as sg
from distributor_core.staging.objectstore import ObjectStagingStore
from distributor_core.staging.status import FINISHED_STATUSES
from tests.bundle.conftest import CREATED
from tests.peers.moto import MotoServer, make_s3_storage
from tests.peers.process import stop_process
from tests.production.harness import RUN_TIMEOUT, Deployment, runs_tagged, wait_finished, wait_for
from tests.server.harness import bundle_archive, published, upload, write_setup

pytestmark = pytest.mark.dagster

BATCH = 3
#: uploads sent, alternating between the replicas; the last one's key is sent to both
UPLOADS = 7


@contextmanager
def replicas(deployment: Deployment, count: int) -> Iterator[list[str]]:
    """``count`` ``distributor serve --publisher dagster`` processes on the deployment's config;
    their base URLs."""
    procs = []
    try:
        urls = []
        for _ in range(count):
            procs.append(deployment._start_serve())
            urls.append(deployment._wait_serve(procs[-1]))
        yield urls
    finally:
        for proc in procs:
            stop_process(proc)


def test_uploads_to_two_replicas_are_published_once_from_the_bucket_by_daemon_runs(
    deployment: Deployment, moto_serial_server: MotoServer
) -> None:
    server = moto_serial_server  # atomic conditional writes, as on S3, for replicas racing one key
    bucket = server.create_bucket()
    setup = write_setup(deployment.root / "site", pipelines={"reports": 2}, http={
        "staging_root": f"s3://{bucket}/staging",
        "staging_s3": {"endpoint": server.endpoint_url, "force_path_style": True, "conditional_writes": "trusted",
                       "credentials": {"access_key_id_env": "STAGING_KEY_ID",
                                       "secret_access_key_env": "STAGING_SECRET"}},
    })
    deployment.use_config(setup.config_path, {
        **setup.environ, "STAGING_KEY_ID": server.access_key_id, "STAGING_SECRET": server.secret_access_key,
    })
    scratch = deployment.root / "tmp"
    scratch.mkdir()
    deployment.env["TMPDIR"] = str(scratch)  # serve's scratch directory; run workers use none
    deployment.env["DISTRIBUTOR_DAGSTER_BUNDLES_PER_RUN"] = str(BATCH)

    # staged while nothing launches runs, alternately on each replica
    run_ids: list[str] = []
    with replicas(deployment, 2) as urls:
        clients = [httpx.Client(base_url=url, timeout=30) for url in urls]
        try:
            for index in range(UPLOADS):
                archive = bundle_archive(deployment.root, {"report.md": f"version {index}\n".encode()},
                                         created=CREATED + timedelta(minutes=index))
                key = "nightly" if index == UPLOADS - 1 else None
                response = upload(clients[index % 2], "reports", archive, key=key)
                assert response.status_code == 202, response.text
                run_ids.append(response.json()["run_id"])
            # the same key on the other replica: the same upload, not a second one
            again = upload(clients[UPLOADS % 2], "reports", archive, key="nightly")
            assert (again.status_code, again.json()["run_id"]) == (202, run_ids[-1])
        finally:
            for client in clients:
                client.close()

    storage = make_s3_storage(server, bucket=bucket, prefix="staging/reports", conditional_writes="trusted")
    store = ObjectStagingStore(storage, "reports")
    try:
        assert [r.run_id for r in store.records()] == run_ids  # admission order across the replicas
        runs_expected = math.ceil(UPLOADS / BATCH)
        with deployment.instance() as instance, deployment.running(serve=False):

            def finished() -> list[sg.UploadRecord] | None:
                found = store.records()
                return found if all(r.status in FINISHED_STATUSES for r in found) else None

            records = wait_for(finished, timeout=RUN_TIMEOUT * runs_expected, message="every upload to finish",
                               poll=2)
            runs = runs_tagged(instance, pipeline="reports")
            run_records = wait_finished(instance, [r.run_id for r in runs])
        assert all(r.dagster_run.tags["dagster/sensor_name"] == "uploads_reports" for r in run_records)
        assert all(r.dagster_run.status == dg.DagsterRunStatus.SUCCESS for r in run_records)
        assert len(runs) == runs_expected
        # each upload published once, by one run, in admission order, at most BATCH per run
        batches = [run_ids[start:start + BATCH] for start in range(0, UPLOADS, BATCH)]
        by_run = {run.run_id: [r.run_id for r in records if r.dagster_run_id == run.run_id] for run in runs}
        assert [by_run[run.run_id] for run in runs] == batches
        for record in records:
            assert record.status == sg.SUCCEEDED and record.error == "", record.error
            assert [a["status"] for a in record.report["actions"]] == ["completed", "completed"]
        # the bucket keeps no published bundle and no pending marker
        assert storage.scan("bundles", limit=10).entries == []
        assert storage.scan("pending", limit=10).entries == []
    finally:
        storage.close()
    for name in ("dest1", "dest2"):
        assert published(setup.destinations[f"reports/{name}"]) == {"report.md": f"version {UPLOADS - 1}\n".encode()}
    assert not setup.staging("reports").exists()  # no local staging directory on the host

"""Run queue and destination-root pools of the shipped instance file under a real daemon on
PostgreSQL (issue 13, item 3; resolutions B1).

Two pipelines publish into one destination root; each source holds two bundles when the daemon
starts, so each watch sensor requests a backfill of both bundles, which the daemon splits into
runs of one bundle each (``DISTRIBUTOR_DAGSTER_BUNDLES_PER_RUN=1``): four publish runs at
once. Every claim is read from the run
events Dagster stored (enqueued, dequeued = STARTING, step start/end, end of run), never from
how long something took: the root's pool lets one run at a time write it, the pipeline tag lets
one run per pipeline run at a time, and a run waiting for the root stays QUEUED (no process, no
step) until the run holding it has ended. The runs are of ``publish_<p>``, the asset job of the
pipeline's graph-backed multi-asset; its steps are ``<p>.publish_www`` and so on.
"""

from __future__ import annotations

import itertools

import dagster as dg
import pytest

from distributor_dagster.site import pool_name
from tests.dagster.conftest import make_bundle
from tests.production.harness import (
    RUN_TIMEOUT,
    Deployment,
    Lifecycle,
    lifecycle,
    runs_tagged,
    wait_finished,
    wait_for,
)

pytestmark = pytest.mark.dagster

PIPELINES = ("alpha", "beta")
#: the events Dagster stores with a new run of an asset job, before it is enqueued
CREATED = {"ASSET_MATERIALIZATION_PLANNED", "ASSET_CHECK_EVALUATION_PLANNED"}


def _overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def test_four_runs_over_two_pipelines_sharing_a_root(deployment: Deployment) -> None:
    shared = deployment.root / "www"
    pipelines = []
    for pipeline in PIPELINES:
        for index in (1, 2):
            make_bundle(deployment.root / pipeline / f"{pipeline}{index}", f"{pipeline}.{index}",
                        {"page.txt": f"{pipeline} {index}\n"})
        pipelines.append({
            "id": pipeline,
            "source": {"backend": "local", "path": str(deployment.root / pipeline)},
            "destinations": [{"id": "www", "backend": "local", "path": str(shared)}],
        })
    deployment.write_config({"pipelines": pipelines})
    deployment.env["DISTRIBUTOR_DAGSTER_BUNDLES_PER_RUN"] = "1"

    with deployment.instance() as instance, deployment.running() as up:
        runs = wait_for(lambda: (found := runs_tagged(instance)) and len(found) >= 4 and found,
                        message="four publish runs")
        # they run one after another: each may take up to RUN_TIMEOUT on a loaded machine
        records = wait_finished(instance, [r.run_id for r in runs], timeout=RUN_TIMEOUT * len(runs))
        assert [r.dagster_run.status for r in records] == [dg.DagsterRunStatus.SUCCESS] * 4
        assert len(runs_tagged(instance)) == 4
        lives = [lifecycle(instance, r.dagster_run) for r in records]
        pool = pool_name(f"local:{shared}")
        assert all(r.dagster_run.run_op_concurrency.all_pools == {pool} for r in records)
        log = up.daemon.log_text()

    for pipeline in PIPELINES:
        for index in (1, 2):
            assert (shared / f"{pipeline}{index}" / "page.txt").read_text() == f"{pipeline} {index}\n"
    assert sorted(life.pipeline for life in lives) == ["alpha", "alpha", "beta", "beta"]
    assert all(f"{life.pipeline}.publish_www" in life.steps for life in lives)

    def held(life: Lifecycle) -> tuple[float, float]:
        return (life.dequeued, life.finished)

    # the pool: no two runs writing the root were in progress at once, so neither were their
    # execute steps
    for a, b in itertools.combinations(lives, 2):
        assert not _overlap(held(a), held(b)), (a, b)
        assert not _overlap(a.step("publish_www"), b.step("publish_www")), (a, b)
    # the tag limit: one run per pipeline at a time
    for a, b in itertools.combinations(lives, 2):
        if a.pipeline == b.pipeline:
            assert not _overlap(held(a), held(b))

    # blocked on the pool: a run of the other pipeline, enqueued while the root was held, stayed
    # QUEUED (no event after its enqueue) until the holder's run had ended; the daemon names
    # it as blocked by the pool, not by the tag limit
    blocked = [
        (holder, waiter) for holder, waiter in itertools.permutations(lives, 2)
        if holder.pipeline != waiter.pipeline and waiter.enqueued < holder.dequeued < holder.finished
        and waiter.dequeued > holder.dequeued
    ]
    assert blocked, f"no run waited for the root: {lives}"
    for holder, waiter in blocked:
        assert waiter.dequeued >= holder.finished
        before = [kind for kind, at in waiter.timeline if at < holder.finished]
        # what Dagster stores when it creates an asset run (its planned materialization and check
        # evaluations), then the enqueue, and nothing else
        assert set(before[:-1]) <= CREATED and before[-1] == "PIPELINE_ENQUEUED", before
    assert any(f"Run {waiter.run_id} is blocked by global concurrency limits" in log for _, waiter in blocked)


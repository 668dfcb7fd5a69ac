"""Run queue and destination-root pools of the shipped instance file under a real daemon on
PostgreSQL (issue 13, item 3; resolutions B1; issue 28: pools per step).

Two pipelines publish into one destination root; each source holds two bundles when the daemon
starts, so each watch sensor requests a backfill of both bundles, which the daemon splits into
runs of one bundle each (``DISTRIBUTOR_DAGSTER_BUNDLES_PER_RUN=1``): four publish runs at
once. Every claim is read from the run events Dagster stored (enqueued, dequeued = STARTING, step
start/end, end of run), never from how long something took: the root's pool lets one step at a
time write it (pools are granted per step: ``granularity: op``), the pipeline tag lets one run per
pipeline run at a time, and a run of the other pipeline, started while the root was taken, waits
inside its run and publishes only after the holder's step has ended. The runs are of the
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

    with deployment.instance() as instance, deployment.running():
        runs = wait_for(lambda: (found := runs_tagged(instance)) and len(found) >= 4 and found,
                        message="four publish runs")
        # they run one after another: each may take up to RUN_TIMEOUT on a loaded machine
        records = wait_finished(instance, [r.run_id for r in runs], timeout=RUN_TIMEOUT * len(runs))
        assert [r.dagster_run.status for r in records] == [dg.DagsterRunStatus.SUCCESS] * 4
        assert len(runs_tagged(instance)) == 4
        lives = [lifecycle(instance, r.dagster_run) for r in records]
        pool = pool_name(f"local:{shared}")
        assert all(r.dagster_run.run_op_concurrency.all_pools == {pool} for r in records)

    for pipeline in PIPELINES:
        for index in (1, 2):
            assert (shared / f"{pipeline}{index}" / "page.txt").read_text() == f"{pipeline} {index}\n"
    assert sorted(life.pipeline for life in lives) == ["alpha", "alpha", "beta", "beta"]
    assert all(f"{life.pipeline}.publish_www" in life.steps for life in lives)

    def held(life: Lifecycle) -> tuple[float, float]:
        return (life.dequeued, life.finished)

    # the pool: no two steps writing the root ran at once
    for a, b in itertools.combinations(lives, 2):
        assert not _overlap(a.step("publish_www"), b.step("publish_www")), (a, b)
    # the tag limit: one run per pipeline at a time
    for a, b in itertools.combinations(lives, 2):
        if a.pipeline == b.pipeline:
            assert not _overlap(held(a), held(b))

    # blocked on the pool, per step: a run of the other pipeline was in progress while the holder
    # wrote the root, and its own step started only after the holder's step had ended
    blocked = [
        (holder, waiter) for holder, waiter in itertools.permutations(lives, 2)
        if holder.pipeline != waiter.pipeline and _overlap(held(waiter), holder.step("publish_www"))
    ]
    assert blocked, f"no two runs of the two pipelines were in progress at once: {lives}"
    for holder, waiter in blocked:
        assert waiter.step("publish_www")[0] >= holder.step("publish_www")[1] or \
            holder.step("publish_www")[0] >= waiter.step("publish_www")[1], (holder, waiter)

"""A large site (issue 28) at a size CI can afford: the code location grows with destinations,
not with jobs, and a sensor's tick costs the same whatever the number of pipelines beside it."""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import dagster as dg
import pytest

from distributor_dagster import build_definitions
from tests.dagster.conftest import apply_tick, make_bundle, write_config

pytestmark = pytest.mark.dagster


def site(tmp_path: Path, count: int) -> Path:
    """``count`` pipelines, each over its own source holding one bundle, with the issue's three
    destinations (a per-bundle archive, a fixed latest, an HTML site) on roots of their own."""
    work = tmp_path / f"site{count}"
    pipelines = []
    for n in range(count):
        make_bundle(work / "src" / f"p{n}" / "2026-06-07", f"p{n}", {"report.md": f"# report {n}\n"})
        pipelines.append(
            f"""
  - id: p{n}
    source: {{backend: local, path: src/p{n}}}
    destinations:
      - {{id: archive, backend: local, path: out/p{n}/archive}}
      - {{id: latest, backend: local, path: out/p{n}/latest, path_mapping: {{mode: fixed}}}}
      - id: site
        backend: local
        path: out/p{n}/site
        publish: {{source: false, html: true}}
        transform: {{markdown_to_html: {{enabled: true}}}}"""
        )
    work.mkdir(parents=True, exist_ok=True)
    return write_config(work, "pipelines:" + "".join(pipelines) + "\n")


def counts(defs: dg.Definitions) -> dict[str, int]:
    repository = defs.get_repository_def()
    return {
        "jobs": len([job for job in repository.get_all_jobs() if not job.name.startswith("__")]),
        "sensors": len(repository.sensor_defs),
        "destination assets": len(
            [
                key
                for key in defs.resolve_asset_graph().get_all_asset_keys()
                if len(key.path) == 2 and key.path[1] != "newest"
            ]
        ),
    }


def test_the_location_grows_with_destinations_not_with_jobs(tmp_path: Path) -> None:
    small, large = counts(build_definitions(site(tmp_path, 5))), counts(build_definitions(site(tmp_path, 40)))
    # one publish job and one watch sensor per pipeline; prune, reconcile_state and audit once for the site
    assert small == {"jobs": 5 + 3, "sensors": 5, "destination assets": 15}
    assert large == {"jobs": 40 + 3, "sensors": 40, "destination assets": 120}


def tick_seconds(config: Path, instance: dg.DagsterInstance, rounds: int) -> float:
    """CPU seconds of one steady tick of the first pipeline's watch sensor (median of ``rounds``),
    after a first tick that found the bundle and created the pipeline's pools."""
    defs = build_definitions(config)
    sensor = defs.resolve_sensor_def("watch_p0")
    first = sensor(dg.build_sensor_context(instance=instance, definitions=defs))
    apply_tick(instance, first)
    samples = []
    for _ in range(rounds):
        context = dg.build_sensor_context(cursor=first.cursor, instance=instance, definitions=defs)
        started = time.process_time()
        steady = sensor(context)
        samples.append(time.process_time() - started)
        assert not steady.run_requests
    return statistics.median(samples)


def test_a_sensor_tick_costs_the_same_whatever_the_number_of_pipelines(tmp_path: Path) -> None:
    """Before issue 28 each tick recomputed the whole site's pools: a tick cost 22x more for 5x the
    pipelines. A ratio of CPU time (not a duration): 12x the pipelines may cost at most 3x."""
    small, large = site(tmp_path, 10), site(tmp_path, 120)
    with dg.instance_for_test(overrides={"concurrency": {"pools": {"default_limit": 1}}}) as instance:
        tick_seconds(small, instance, 3)  # imports and caches warmed
        ratio = tick_seconds(large, instance, 15) / tick_seconds(small, instance, 15)
        # a tick created only its own pipeline's root pools, not the site's
        pools = instance.event_log_storage.get_concurrency_keys()
    assert ratio < 3, f"a tick at 120 pipelines cost {ratio:.1f}x a tick at 10"
    assert len(pools) == 6 and all("/p0/" in pool for pool in pools), sorted(pools)  # p0 of each site

"""The sensors create the destination-root pools at the instance's default limit before they
request a run (distributor_dagster/pools.py): Dagster's run queue enforces a new pool only from
its second pass (tests/production/test_queue.py fails without this)."""

from __future__ import annotations

import dagster as dg
import pytest

from distributor_dagster import build_definitions
from distributor_dagster.pools import ensure_pools
from distributor_dagster.site import pool_name
from tests.dagster.conftest import make_bundle
from tests.production.harness import Deployment

pytestmark = pytest.mark.dagster


def _config(deployment: Deployment) -> tuple[str, str]:
    source = deployment.root / "source"
    make_bundle(source / "b", "site.b", {"a.txt": "a\n"})
    deployment.write_config({"pipelines": [{
        "id": "site",
        "source": {"backend": "local", "path": str(source)},
        "destinations": [
            {"id": "web", "backend": "local", "path": str(deployment.root / "web")},
            {"id": "archive", "backend": "local", "path": str(deployment.root / "archive")},
        ],
    }]})
    return pool_name(f"local:{deployment.root / 'web'}"), pool_name(f"local:{deployment.root / 'archive'}")


def test_a_sensor_tick_creates_the_pools_at_the_default_limit(deployment: Deployment) -> None:
    web, archive = _config(deployment)
    defs = build_definitions(deployment.config_path)
    sensor = defs.resolve_sensor_def("watch_site")
    with deployment.instance() as instance:
        instance.event_log_storage.set_concurrency_slots(archive, 3)  # an operator's own limit
        result = sensor(dg.build_sensor_context(instance=instance))
        assert len(result.run_requests) == 1
        limits = {p.name: p for p in instance.event_log_storage.get_pool_limits()}
        assert limits[web].limit == 1 and limits[web].from_default
        assert limits[archive].limit == 3 and not limits[archive].from_default


def test_nothing_is_created_without_a_default_limit(deployment: Deployment) -> None:
    web, _ = _config(deployment)
    with dg.instance_for_test() as instance:
        assert ensure_pools(instance, [web]) == set()
        assert instance.event_log_storage.get_concurrency_keys() == set()


def test_later_ticks_on_the_same_instance_do_not_ask_the_storage(
    deployment: Deployment, monkeypatch: pytest.MonkeyPatch
) -> None:
    web, archive = _config(deployment)
    sensor = build_definitions(deployment.config_path).resolve_sensor_def("watch_site")
    with deployment.instance() as instance:
        sensor(dg.build_sensor_context(instance=instance))
        assert {web, archive} <= instance.event_log_storage.get_concurrency_keys()
    asked: list[str] = []
    with deployment.instance() as instance:  # another instance object on the same database
        storage = instance.event_log_storage
        original = storage.get_concurrency_keys
        monkeypatch.setattr(storage, "get_concurrency_keys", lambda: asked.append("keys") or original())
        result = sensor(dg.build_sensor_context(instance=instance, cursor=None))
        assert len(result.run_requests) == 1
        assert asked == []
    # another database behind the same dagster.yaml (DAGSTER_PG_DB differs): asked and created
    other = deployment.postgres.create_database()
    monkeypatch.setenv("DAGSTER_PG_DB", other)
    with deployment.instance() as instance:
        sensor(dg.build_sensor_context(instance=instance))
        assert {web, archive} <= instance.event_log_storage.get_concurrency_keys()

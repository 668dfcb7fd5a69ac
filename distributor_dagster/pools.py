"""Create the destination-root pools before the run queue first meets them (resolutions B1).

Dagster 1.13's run queue gives a pool its ``concurrency.pools.default_limit`` the first time a
queued run needs it, but enforces the limit only from its next pass: every run that needs the new
pool and is queued at that first pass is launched together (measured: the first runs of two
pipelines sharing a root started at once on a fresh PostgreSQL instance). So each sensor creates
the pools of its own pipeline's destination roots (computed once, when the code location loads),
at the default limit, on its first tick in a process, before it requests any run: the runs it
requests need no other pool. A site's pools are thus created a pipeline at a time, a few per
tick, never all of them inside one tick. An existing pool (an operator's own limit included) is
left alone; a deployment without ``default_limit`` gets nothing.

Later ticks cost nothing: the pools are remembered per instance (its event-log storage config
with the environment variables it reads), and the daemon's ticks, which carry an instance ref, do
not even open the instance when there is nothing to create.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Hashable, Iterable
from typing import Any

import dagster as dg

from distributor_core.config import Pipeline
from distributor_dagster.site import pool_name

_lock = threading.Lock()
#: pools known to exist, per instance (:func:`_storage_key`)
_known: dict[Hashable, set[str]] = {}
_ENV_REFERENCE = re.compile(r"\benv:\s*['\"]?([A-Za-z_][A-Za-z0-9_]*)")


def pipeline_pools(pipeline: Pipeline) -> frozenset[str]:
    """The pool of every destination root of one pipeline."""
    return frozenset(pool_name(destination.storage.root_key) for destination in pipeline.destinations)


def ensure_pools(instance: dg.DagsterInstance, pools: Iterable[str]) -> set[str]:
    """Create the missing ones of ``pools`` at the instance's default pool limit (none without a
    default limit); the pools it created."""
    storage = instance.event_log_storage
    if instance.global_op_concurrency_default_limit is None or not storage.supports_global_concurrency_limits:
        return set()
    missing = set(pools) - storage.get_concurrency_keys()
    for pool in sorted(missing):
        storage.initialize_concurrency_limit_to_default(pool)
    return missing


def _storage_key(data: Any) -> Hashable:
    """An event-log storage's identity: its config as written (``ConfigurableClassData``) and the
    values of the environment variables it reads (``DAGSTER_PG_DB`` ...), which the written config
    only names."""
    names = sorted(set(_ENV_REFERENCE.findall(data.config_yaml or "")))
    return (data, tuple((name, os.environ.get(name)) for name in names))


def _instance_key(instance: dg.DagsterInstance) -> Hashable | None:
    """:func:`_storage_key` of ``instance`` (``None`` for an ephemeral one, whose in-memory storage
    is cheap to ask)."""
    if not instance.is_persistent:
        return None
    return _storage_key(instance.get_ref().event_storage_data)


def ensure_pipeline_pools(context: dg.SensorEvaluationContext, pools: frozenset[str]) -> None:
    """:func:`ensure_pools` of one pipeline's ``pools``, once per instance and process, from a
    sensor tick (nothing without an instance, as under ``build_sensor_context()`` without one).
    The daemon's ticks carry an instance ref, which identifies the instance without opening it; a
    context built around an instance object (``build_sensor_context(instance=...)``) is identified
    by that instance's ref."""
    ref = context.instance_ref
    key = _storage_key(ref.event_storage_data) if ref is not None else None
    with _lock:
        if key is not None and pools <= _known.get(key, set()):
            return
        try:
            instance = context.instance
        except dg.DagsterInvariantViolationError:
            return
        if key is None:
            key = _instance_key(instance)
            if key is not None and pools <= _known.get(key, set()):
                return
        created = ensure_pools(instance, pools)
        if key is not None:
            _known.setdefault(key, set()).update(pools)
    if created:
        context.log.info("created concurrency pool(s) at the default limit: " + ", ".join(sorted(created)))

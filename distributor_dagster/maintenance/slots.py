"""A destination root's concurrency pool, claimed by a maintenance step while it writes (issue 28).

A publish step claims its root's pool as a step (``pool=`` on the op). A site-wide maintenance
step works on many destinations one after another, so it claims each root's pool itself, for the
time it writes that root, through the instance's concurrency slots: the same slots the executor
claims for publish steps when pools are granted per step (``concurrency.pools.granularity: op``,
the shipped ``examples/dagster/dagster.yaml``), so a prune and a publication of one root never
overlap. Without a limit for the pool (no ``default_limit``, no pool set), there is nothing to
claim. Dry runs and audits read only and claim nothing.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import dagster as dg

#: Longest pause between two claims of a slot that is taken.
MAX_INTERVAL = 5.0


@contextmanager
def root_slot(context: dg.OpExecutionContext, pool: str) -> Iterator[None]:
    """Hold one slot of ``pool`` for the block (waiting, with a log line, while it is taken)."""
    instance = context.instance
    storage = instance.event_log_storage
    if not storage.supports_global_concurrency_limits:
        yield
        return
    limits = {limit.name for limit in storage.get_pool_limits()}
    if pool not in limits:
        if instance.global_op_concurrency_default_limit is None:
            yield  # an unlimited pool: nothing to claim
            return
        storage.initialize_concurrency_limit_to_default(pool)
    step_key = f"{context.op_handle}[{pool}]"
    waited = False
    while True:
        status = storage.claim_concurrency_slot(pool, context.run_id, step_key, 0)
        if status.is_claimed:
            break
        if not waited:
            context.log.info(f"waiting for the concurrency pool {pool} (another step writes that root)")
            waited = True
        time.sleep(min(status.sleep_interval or 1.0, MAX_INTERVAL))
    try:
        yield
    finally:
        storage.free_concurrency_slot_for_step(context.run_id, step_key)

"""Partitions follow the files (issue 37 item 3): after a prune, a state repair or an audit of a
per-bundle destination, the partitions of the bundles it no longer holds are deleted.

A destination no longer holds a bundle when the operation's report says so (``holds`` false: the
bundle path was removed, or its recorded outputs were pruned, found missing or dropped, and the
bundle had outputs to publish) or, when the run looked at every bundle path with state, when the
destination materialized the bundle's partition once and no state records it any more (removed
by the CLI, a lifecycle rule or by hand). Deleting the partition is what makes it stop reading
Materialized: Dagster 1.13 cannot wipe one partition of an asset on SQLite or PostgreSQL, and a
failed materialization would call a retention policy doing its job a failure. Its history stays
in the event log (the observation of the operation that ended it last). The per-bundle
destinations of a pipeline share their partitions (:mod:`distributor_dagster.partitions`), so
the bundle leaves every one of them.
"""

from __future__ import annotations

from typing import Any

import dagster as dg

from distributor_dagster.maintenance.record import sections
from distributor_dagster.maintenance.selection import SelectedDestination
from distributor_dagster.partitions import bundle_key, bundle_path, key_problem


def no_longer_held(
    instance: dg.DagsterInstance, target: SelectedDestination, partitions: str, report: Any, *, every: bool
) -> list[str]:
    """The partitions of the bundles this destination no longer holds, by the operation's
    ``report``; ``every``: the run looked at every bundle path that holds state."""
    found = sections(report)
    gone = {
        bundle_key(section.bundle_path)
        for section in found
        if section.report is not None and getattr(section.report, "holds", None) is False
        and key_problem(section.bundle_path) is None
    }
    current = set(instance.get_dynamic_partitions(partitions))
    if every:
        with_state = {section.bundle_path for section in found}
        materialized = instance.get_materialized_partitions(target.asset_key)
        gone |= {key for key in materialized & current if bundle_path(key) not in with_state}
    return sorted(gone & current)


def end_partitions(context: dg.OpExecutionContext, partitions: str, keys: list[str], label: str) -> None:
    """Delete the partitions (the bundles' event history stays)."""
    for key in keys:
        context.instance.delete_dynamic_partition(partitions, key)
    if keys:
        shown = ", ".join(keys[:20]) + (" ..." if len(keys) > 20 else "")
        context.log.info(f"{label}: {len(keys)} bundle(s) no longer published there, their partitions deleted: "
                         f"{shown}")

"""A partition per bundle (issue 24 item 1).

Destinations that give each bundle its own destination path (``preserve_relative`` over a
``local``, ``ssh`` or ``s3`` source) are partitioned by bundle: one dynamic partition per bundle,
keyed by its source-relative path (``daily/2026-06-08``). The bundle at the source root is the
partition ``.``. The pipeline's source asset is partitioned the same way (identity mapping).

Partitions are added by the watch sensor and by a publish run's ``discover`` step, never at load:
loading a code location touches no storage and its cost does not depend on how many bundles the
sources hold. Dagster refuses ``...`` and control characters in partition keys; a bundle whose path
contains ``...`` cannot be a partition (the sensor and ``discover`` say so, the CLI still publishes
it).
"""

from __future__ import annotations

from collections.abc import Iterable

import dagster as dg

#: The partition key of the bundle at the source root (bundle path ``""``).
ROOT_KEY = "."
#: What Dagster refuses inside a partition key that a bundle path may contain.
_REFUSED = "..."
#: Up to this many keys are looked up one by one; more read the whole partition set once.
_FEW = 8


def partitions_def(name: str) -> dg.DynamicPartitionsDefinition:
    return dg.DynamicPartitionsDefinition(name=name)


def bundle_key(bundle_path: str) -> str:
    """The partition key of the bundle at ``bundle_path``."""
    return bundle_path or ROOT_KEY


def bundle_path(key: str) -> str:
    """The bundle path of partition ``key``."""
    return "" if key == ROOT_KEY else key


def key_problem(bundle_path: str) -> str | None:
    """Why ``bundle_path`` cannot be a partition key, or ``None``."""
    if _REFUSED in bundle_path:
        return (
            f"bundle path {bundle_path} contains '...', which Dagster does not allow in partition keys: "
            "rename the bundle directory to publish it from Dagster (distributor run still publishes it)"
        )
    return None


def keyed(bundle_paths: Iterable[str]) -> tuple[list[str], list[str]]:
    """Partition keys of ``bundle_paths`` (in order), and one problem line per path that cannot be one."""
    keys: list[str] = []
    problems: list[str] = []
    for path in bundle_paths:
        problem = key_problem(path)
        if problem:
            problems.append(problem)
        else:
            keys.append(bundle_key(path))
    return keys, problems


def add_partitions(instance: dg.DagsterInstance, name: str, keys: Iterable[str]) -> list[str]:
    """Add the partitions among ``keys`` that ``name`` lacks; the keys added."""
    wanted = list(dict.fromkeys(keys))
    if not wanted:
        return []
    if len(wanted) <= _FEW:
        missing = [key for key in wanted if not instance.has_dynamic_partition(name, key)]
    else:  # one read of the whole set beats a query per key
        known = set(instance.get_dynamic_partitions(name))
        missing = [key for key in wanted if key not in known]
    if missing:
        instance.add_dynamic_partitions(name, missing)
    return missing

"""A partition per bundle (issue 24 item 1), for as long as an asset holds the bundle (issue 37).

Destinations that give each bundle its own destination path (``preserve_relative`` over a
``local``, ``ssh`` or ``s3`` source) are partitioned by bundle: one dynamic partition per bundle,
keyed by its source-relative path (``daily/2026-06-08``). The bundle at the source root is the
partition ``.``. A pipeline has two sets of such partitions, mapped one to one:

- ``<source key>__bundles``, the source asset's: the bundles the source holds, and those it no
  longer holds while a destination still does (their latest observation says ``in_source:
  false``);
- ``<source key>__published``, the per-bundle destinations': the bundles they hold, or are about
  to get (a bundle is added when it is found, and when a run publishes it). A prune or state
  repair after which a destination no longer holds a bundle deletes that partition, so it stops
  reading Materialized: Dagster 1.13 cannot wipe one partition of an asset on its SQL storages,
  and a partition that does not exist has no status to lie about. The destinations of one
  pipeline share the set (Dagster runs the assets of one run, and one asset job, over one
  partitions definition), so a bundle leaves all of them once one of them no longer holds it.

The watch sensor deletes a source partition that no asset holds any more, and keeps each set
within the pipeline's ``dagster.max_partitions`` (the partitions seen first go).

Partitions are added by the watch sensor and by a publish run's ``discover`` step, never at load:
loading a code location touches no storage and its cost does not depend on how many bundles the
sources hold. Dagster refuses ``...`` and control characters in partition keys; a bundle whose path
contains ``...`` cannot be a partition (the sensor and ``discover`` say so, the CLI still publishes
it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import dagster as dg

#: The partition key of the bundle at the source root (bundle path ``""``).
ROOT_KEY = "."
#: What Dagster refuses inside a partition key that a bundle path may contain.
_REFUSED = "..."
#: Up to this many keys are looked up one by one; more read the whole partition set once.
_FEW = 8
#: Bundles one sensor tick records as gone from the source at most (each is an observation).
DEPARTURES_PER_TICK = 1000


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


def _shown(keys: Sequence[str], limit: int = 10) -> str:
    return ", ".join(keys[:limit]) + (f" and {len(keys) - limit} more" if len(keys) > limit else "")


@dataclass
class PartitionChanges:
    """What one sensor tick does to a pipeline's two partition sets."""

    add_source: list[str] = field(default_factory=list)
    add_published: list[str] = field(default_factory=list)
    drop_source: list[str] = field(default_factory=list)
    drop_published: list[str] = field(default_factory=list)
    #: bundles this tick saw leave the source (recorded on their source partition)
    departed: list[str] = field(default_factory=list)
    #: partitions deleted to stay within ``max_partitions`` (and the bound)
    trimmed: list[str] = field(default_factory=list)
    bound: int = 0

    def requests(self, source: str, published: str) -> Iterator[dg.AddDynamicPartitionsRequest |
                                                              dg.DeleteDynamicPartitionsRequest]:
        if self.add_source:
            yield dg.AddDynamicPartitionsRequest(source, self.add_source)
        if self.add_published:
            yield dg.AddDynamicPartitionsRequest(published, self.add_published)
        if self.drop_published:
            yield dg.DeleteDynamicPartitionsRequest(published, self.drop_published)
        if self.drop_source:
            yield dg.DeleteDynamicPartitionsRequest(source, self.drop_source)

    def log_lines(self) -> list[str]:
        lines = []
        if self.departed:
            lines.append(f"{len(self.departed)} bundle(s) left the source: {_shown(self.departed)}")
        orphans = [k for k in self.drop_source if k not in set(self.trimmed)]
        if orphans:
            lines.append(f"deleted {len(orphans)} bundle partition(s) no asset holds any more: {_shown(orphans)}")
        if self.trimmed:
            lines.append(f"deleted the {len(self.trimmed)} oldest bundle partition(s) beyond dagster.max_partitions "
                         f"{self.bound}: {_shown(self.trimmed)} (their files stay)")
        return lines


@dataclass
class PartitionSets:
    """A pipeline's two partition sets as one sensor tick reads them (the source's in the order
    its partitions were added)."""

    source: list[str]
    published: set[str]

    @classmethod
    def read(cls, instance: dg.DagsterInstance, source: str, published: str) -> PartitionSets:
        return cls(list(instance.get_dynamic_partitions(source)), set(instance.get_dynamic_partitions(published)))

    def materialized(self, instance: dg.DagsterInstance, assets: Sequence[dg.AssetKey]) -> list[str]:
        """The source partitions some of ``assets`` materialized (a destination set rebuilt after
        an upgrade, or a reset cursor: a bundle one of them no longer holds leaves again at the
        next prune, state repair or audit)."""
        done: set[str] = set()
        for asset in assets:
            done |= instance.get_materialized_partitions(asset)
        return [key for key in self.source if key in done]

    def follow_source(
        self, *, wanted: Iterable[str], published: Iterable[str], present: set[str],
        departed: Callable[[str], bool], max_partitions: int,
    ) -> PartitionChanges:
        """The changes that make the sets follow the source: ``wanted`` bundles become source
        partitions and ``published`` ones destination partitions; of the source partitions whose
        bundle is not ``present`` any more, those ``departed`` this tick are recorded and those no
        destination holds are deleted; then the partitions seen first go until at most
        ``max_partitions`` remain (never one this tick adds: a run may be requested for it)."""
        known = set(self.source)
        changes = PartitionChanges(bound=max_partitions)
        changes.add_source = sorted(k for k in set(wanted) if k not in known)
        changes.add_published = sorted(k for k in set(published) if k not in self.published)
        gone = [k for k in self.source if k not in present]
        changes.departed = [k for k in gone if departed(k)][:DEPARTURES_PER_TICK]
        about_to = set(changes.add_published)
        changes.drop_source = [k for k in gone if k not in self.published and k not in about_to]
        dropped = set(changes.drop_source)
        kept = [k for k in self.source if k not in dropped]
        excess = len(kept) + len(changes.add_source) - max_partitions
        if excess > 0:
            changes.trimmed = [k for k in kept if k not in about_to][:excess]
            changes.drop_source += changes.trimmed
            changes.drop_published = [k for k in changes.trimmed if k in self.published]
        return changes

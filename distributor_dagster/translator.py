"""``DistributorTranslator``: how a pipeline's assets look in Dagster (issue 25 item 2).

Like dagster-dbt's and dagster-sling's translators: one method per attribute of an asset, each
taking :class:`DistributorAssetProps` (which asset: the source, the newest-bundle view or a
destination; its pipeline and destination as configured). The default methods apply the config's
``dagster`` blocks (docs/config.md#dagster) over the generated values; a subclass overrides any of
them (or :meth:`DistributorTranslator.get_asset_spec` as a whole) and is passed as
``build_definitions(..., translator=MyTranslator())`` or returned by
``DistributorComponent.get_translator``.

What the translator does not decide, because the publication depends on it: partitions, code
versions, checks, the edge from the source to its destinations, and the ``distributor/*`` tags
(the sensors, the maintenance jobs and the UI filters read them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import dagster as dg

from distributor_core.config import ConfigError, DagsterAssets, Destination, Pipeline
from distributor_dagster.describe import (
    destination_description,
    newest_description,
    source_description,
)

Role = Literal["source", "newest", "destination"]

#: The kind shown for each backend: the names Dagster draws an icon for where one exists (``file``,
#: ``s3``, ``source``); Dagster has no icon for SFTP, so ``sftp`` shows as text.
BACKEND_KINDS: Mapping[str, str] = {"local": "file", "s3": "s3", "ssh": "sftp", "http_upload": "source"}

#: The tag keys distributor sets itself; a ``dagster.tags`` entry cannot replace them.
PIPELINE_TAG = "distributor/pipeline"
DESTINATION_TAG = "distributor/destination"
BACKEND_TAG = "distributor/backend"
ROLE_TAG = "distributor/asset"


@dataclass(frozen=True)
class DistributorAssetProps:
    """What one generated asset is. ``default_key`` and ``default_group`` follow the build
    options (``asset_key_prefix``, ``name_prefix``); ``partitioned``: one partition per bundle."""

    role: Role
    pipeline: Pipeline
    destination: Destination | None
    default_key: dg.AssetKey
    default_group: str
    publish_job: str
    automation: str
    partitioned: bool

    @property
    def backend(self) -> str:
        """The backend of the storage this asset stands for (the source's, or the destination's)."""
        return self.destination.backend if self.destination is not None else self.pipeline.source.backend

    @property
    def own_settings(self) -> DagsterAssets:
        """The ``dagster`` block written for this asset itself: the destination's for a
        destination, the pipeline's for the source, nothing for the newest-bundle view."""
        if self.destination is not None:
            return self.destination.dagster
        return self.pipeline.dagster if self.role == "source" else DagsterAssets()


def _unique(values: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(values))


def dep_key(text: str) -> dg.AssetKey:
    """An asset key written as ``a/b/c``."""
    return dg.AssetKey.from_user_string(text)


class DistributorTranslator:
    """The default presentation of distributor's assets; subclass to change it."""

    def get_asset_spec(self, props: DistributorAssetProps) -> dg.AssetSpec:
        return dg.AssetSpec(
            key=self.get_asset_key(props),
            group_name=self.get_group_name(props),
            description=self.get_description(props),
            owners=list(self.get_owners(props)),
            tags=dict(self.get_tags(props)),
            kinds=set(self.get_kinds(props)),
            metadata=dict(self.get_metadata(props)),
            automation_condition=self.get_automation_condition(props),
            deps=list(self.get_deps(props)),
        )

    def get_asset_key(self, props: DistributorAssetProps) -> dg.AssetKey:
        """``[<pipeline>]``, ``[<pipeline>, newest]`` or ``[<pipeline>, <destination>]`` (ids with
        characters Dagster refuses replaced by ``_``), after ``asset_key_prefix``."""
        return props.default_key

    def get_group_name(self, props: DistributorAssetProps) -> str:
        """The destination's ``dagster.group``, else the pipeline's, else the pipeline id."""
        destination = props.destination.dagster.group if props.destination is not None else None
        return destination or props.pipeline.dagster.group or props.default_group

    def get_description(self, props: DistributorAssetProps) -> str:
        """The asset's own ``dagster.description``, else what it is: the destination or source,
        its absolute root URI, how it is published."""
        written = props.own_settings.description
        if written:
            return written
        if props.role == "destination":
            assert props.destination is not None
            return destination_description(props.pipeline, props.destination)
        if props.role == "newest":
            return newest_description(props.pipeline)
        return source_description(props.pipeline, partitioned=props.partitioned)

    def get_owners(self, props: DistributorAssetProps) -> Sequence[str]:
        """The pipeline's ``dagster.owners``, then the destination's."""
        owners = list(props.pipeline.dagster.owners)
        if props.destination is not None:
            owners.extend(props.destination.dagster.owners)
        return _unique(owners)

    def get_tags(self, props: DistributorAssetProps) -> Mapping[str, str]:
        """The pipeline's ``dagster.tags``, the destination's over them, then distributor's own:
        ``distributor/pipeline``, ``distributor/destination``, ``distributor/backend`` (ids
        Dagster's tag rules refuse stay in metadata only) and ``distributor/asset`` (the role)."""
        tags = dict(props.pipeline.dagster.tags)
        if props.destination is not None:
            tags.update(props.destination.dagster.tags)
        own = {PIPELINE_TAG: props.pipeline.id, BACKEND_TAG: props.backend, ROLE_TAG: props.role}
        if props.destination is not None:
            own[DESTINATION_TAG] = props.destination.id
        tags.update({key: value for key, value in own.items() if _tag_value_ok(value)})
        return tags

    def get_kinds(self, props: DistributorAssetProps) -> set[str]:
        """The backend's kind (:data:`BACKEND_KINDS`) and the asset's own ``dagster.kinds``."""
        return {BACKEND_KINDS[props.backend], *props.own_settings.kinds}

    def get_metadata(self, props: DistributorAssetProps) -> Mapping[str, Any]:
        """``dagster/uri`` (the absolute root), the ids, the backend, the modes and the publish job."""
        pipeline, destination = props.pipeline, props.destination
        if destination is None:
            return {
                "dagster/uri": pipeline.source.uri(),
                "pipeline_id": pipeline.id,
                "source_backend": pipeline.source.backend,
                "source_root": pipeline.source.uri(),
                "publish_job": props.publish_job,
            }
        storage = destination.storage
        return {
            "dagster/uri": storage.uri(),
            "pipeline_id": pipeline.id,
            "destination_id": destination.id,
            "backend": destination.backend,
            "destination_root": storage.uri(),
            "configured_root": storage.root_path,
            "source_backend": pipeline.source.backend,
            "state_mode": destination.state.mode,
            "reconciliation_mode": destination.reconciliation.mode,
            "path_mapping": destination.path_mapping.mode,
            "takeover_mode": destination.takeover.mode,
            "publish_job": props.publish_job,
        }

    def get_automation_condition(self, props: DistributorAssetProps) -> dg.AutomationCondition | None:
        """``AutomationCondition.eager()`` on the destinations of a ``local``/``ssh``/``s3``
        pipeline when the build option ``automation`` is ``eager``; else none."""
        if props.role == "destination" and props.automation == "eager" and not props.pipeline.is_upload:
            return dg.AutomationCondition.eager()
        return None

    def get_deps(self, props: DistributorAssetProps) -> Sequence[dg.AssetKey | dg.AssetDep]:
        """The asset's own ``dagster.deps``: for the source, the asset producing its bundles."""
        return [dep_key(text) for text in props.own_settings.deps]


_TAG_VALUE_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")


def _tag_value_ok(value: str) -> bool:
    return len(value) <= 63 and all(ch in _TAG_VALUE_CHARS for ch in value)


# --- the config's ``dagster`` blocks, checked against Dagster's own rules ---------------------


def check_settings(pipelines: Sequence[Pipeline]) -> None:
    """Refuse ``dagster`` blocks Dagster would refuse, each message naming the key at fault
    (``pipelines[0].destinations[1].dagster.owners[0]: ...``); :class:`ConfigError` lists them all."""
    messages: list[str] = []
    for index, pipeline in enumerate(pipelines):
        where = f"pipelines[{index}]"
        messages.extend(_block_messages(f"{where}.dagster", pipeline.dagster))
        for position, destination in enumerate(pipeline.destinations):
            messages.extend(_block_messages(f"{where}.destinations[{position}].dagster", destination.dagster))
    if messages:
        raise ConfigError(messages)


def _refusal(**attributes: Any) -> str | None:
    try:
        dg.AssetSpec(key="distributor_check", **attributes)
    except (dg.DagsterInvalidDefinitionError, dg.DagsterInvariantViolationError) as exc:
        return str(exc).split("\n")[0]
    return None


def _block_messages(where: str, block: DagsterAssets) -> list[str]:
    messages = []
    if block.group is not None and (problem := _refusal(group_name=block.group)):
        messages.append(f"{where}.group: {problem}")
    for index, owner in enumerate(block.owners):
        if _refusal(owners=[owner]):
            messages.append(f"{where}.owners[{index}]: {owner!r} is not an owner Dagster accepts "
                            "(an email address, or a team name written team:<name>)")
    for key, value in block.tags:
        if key.startswith("distributor/"):
            messages.append(f"{where}.tags.{key}: the distributor/ tags are set by distributor")
        elif problem := _refusal(tags={key: value}):
            messages.append(f"{where}.tags.{key}: {problem}")
    if block.kinds and (problem := _refusal(kinds={"kind", *block.kinds})):
        messages.append(f"{where}.kinds: {problem} (one of them is the backend's)")
    for index, text in enumerate(block.deps):
        if not text or any(part == "" for part in text.split("/")):
            messages.append(f"{where}.deps[{index}]: {text!r} is not an asset key: write its components "
                            "joined by / (e.g. analytics/daily_report)")
    return messages

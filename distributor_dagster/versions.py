"""Data and code versions of the generated assets (issue 12 item 4, issue 24).

- A partitioned source asset's partition has the digest of its bundle as data version; an
  unpartitioned source (and the "newest bundle" view of a mixed pipeline) the digest of its newest
  bundle (manifest ``created``, ties by path; for an upload staging area the newest upload by
  admission order).
- A destination materialization's data version is the digest of the bundle it holds. Its
  provenance names the source version it was published from: for a partition, that bundle's
  partition of the source (its digest, and a pointer to the observation that carried it); for an
  unpartitioned destination, the newest bundle, the one it would take. So Dagster shows exactly the
  partitions (or destinations) whose bundle was re-issued since as stale, and nothing else.
- A destination's code version changes with its publication policy (mode, paths, transforms,
  links, state, reconciliation, takeover, transfer), its root and the distributor version.
"""

from __future__ import annotations

import hashlib
import json

import dagster as dg
import msgspec

from distributor_core import __version__
from distributor_core.app.policy import destination_policy
from distributor_core.config import Destination

#: Dagster's tag names for data provenance (``dagster._core.definitions.data_version``).
DATA_VERSION_TAG = "dagster/data_version"
USER_PROVIDED_TAG = "dagster/data_version_is_user_provided"
CODE_VERSION_TAG = "dagster/code_version"
INPUT_DATA_VERSION_PREFIX = "dagster/input_data_version/"
INPUT_EVENT_POINTER_PREFIX = "dagster/input_event_pointer/"
#: The data version of a source without any bundle.
NO_BUNDLES = "no-bundles"


def code_version(destination: Destination, version: str = __version__) -> str:
    """``<distributor version>-<12 hex>`` of the destination's policy and root."""
    policy = msgspec.to_builtins(destination_policy(destination))
    document = {"policy": policy, "root": destination.storage.root_key, "distributor": version}
    digest = hashlib.sha256(json.dumps(document, sort_keys=True, default=str).encode()).hexdigest()
    return f"{version}-{digest[:12]}"


def input_version_tags(source_key: dg.AssetKey, digest: str) -> dict[str, str]:
    """Tags of a materialization that record ``digest`` as the source version it is in sync with."""
    return {INPUT_DATA_VERSION_PREFIX + source_key.to_user_string(): digest}


def data_version_tags(digest: str) -> dict[str, str]:
    """Tags giving an observation (or a logged materialization) the data version ``digest``."""
    return {DATA_VERSION_TAG: digest, USER_PROVIDED_TAG: "true"}


def materialization_tags(
    digest: str, code: str, source_key: dg.AssetKey, input_digest: str, pointer: int | None
) -> dict[str, str]:
    """The complete provenance of a materialization logged by a step (what Dagster writes for an
    asset output): data and code version, and the source version it was published from."""
    name = source_key.to_user_string()
    return {
        **data_version_tags(digest),
        CODE_VERSION_TAG: code,
        INPUT_DATA_VERSION_PREFIX + name: input_digest,
        INPUT_EVENT_POINTER_PREFIX + name: str(pointer) if pointer else "NULL",
    }


#: How many recent observations of a source partition are searched for the one a step published.
_RECENT = 5


def input_pointer(
    instance: dg.DagsterInstance, source_key: dg.AssetKey, partition: str | None, digest: str
) -> int | None:
    """The storage id of the source observation a publication of ``digest`` answers: the latest
    one carrying ``digest``. When a newer observation with another digest exists already (the
    bundle was re-issued while the step ran), a pointer just below that one keeps the
    re-issue visible as an update, so the published partition shows stale, as it is."""
    records = instance.fetch_observations(
        dg.AssetRecordsFilter(asset_key=source_key, asset_partitions=[partition] if partition is not None else None),
        limit=_RECENT,
    ).records
    if not records:
        return None
    for record in records:
        observation = record.asset_observation
        if observation is not None and observation.tags.get(DATA_VERSION_TAG) == digest:
            return record.storage_id if record is records[0] else records[0].storage_id - 1
    return records[0].storage_id - 1

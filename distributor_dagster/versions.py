"""Data and code versions of the generated assets (issue 12 item 4).

- A source asset's data version is the digest of its newest bundle (manifest ``created``, ties by
  path; for an upload staging area the newest upload by admission order).
- A destination materialization's data version is the digest of the bundle it published; its
  recorded input version of the source is the digest of the newest bundle the destination holds
  after the step, so Dagster shows the destination *unsynced* exactly when the source has been
  observed with a bundle the destination has not published.
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
INPUT_DATA_VERSION_PREFIX = "dagster/input_data_version/"
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
    return {DATA_VERSION_TAG: digest}

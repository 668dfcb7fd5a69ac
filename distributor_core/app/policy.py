"""Map a configured destination to the policy values planning consumes."""

from __future__ import annotations

from distributor_core.config import Destination
from distributor_core.plan.model import DestinationPolicy, LinkPolicy, TransferPolicy
from distributor_core.state.bundle_retention import BundlePolicy


def destination_policy(destination: Destination) -> DestinationPolicy:
    markdown = destination.transform.markdown_to_html
    transfer = destination.transfer
    links = destination.links
    return DestinationPolicy(
        path_mapping=destination.path_mapping.mode,
        publish_source=destination.publish.source,
        publish_html=destination.publish.html,
        markdown_enabled=bool(markdown is not None and markdown.enabled),
        markdown_mode=markdown.mode if markdown is not None else "sidecar",
        links=LinkPolicy(base_url=links.base_url, primary=links.primary) if links is not None else None,
        state_mode=destination.state.mode,
        reconciliation_mode=destination.reconciliation.mode,
        transfer=TransferPolicy(
            on_destination_same=transfer.on_destination_same,
            on_destination_older=transfer.on_destination_older,
            on_destination_newer=transfer.on_destination_newer,
            on_conflict=transfer.on_conflict,
        ),
        takeover_mode=destination.takeover.mode,
    )


def bundle_policy(destination: Destination) -> BundlePolicy | None:
    """The destination's ``retention.prune.bundles`` when pruning is enabled, else ``None``
    (issue 37: ``prune`` removes whole bundle paths, and a run of every bundle publishes only
    those the policy keeps)."""
    prune = destination.retention.prune
    if not prune.enabled or prune.bundles is None:
        return None
    return BundlePolicy(keep_latest=prune.bundles.keep_latest, older_than=prune.bundles.older_than)

"""Map a configured destination to the policy values planning consumes."""

from __future__ import annotations

from distributor_core.bundle import Manifest
from distributor_core.config import Destination
from distributor_core.plan.model import DestinationPolicy, LinkPolicy, TransferPolicy
from distributor_core.plan.outputs import is_markdown
from distributor_core.state.bundle_retention import BundlePolicy
from distributor_core.state.model import OwnerScope, SharedRootState, SingleOwnerState, StateDocument


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


def publishes_outputs(manifest: Manifest, destination: Destination) -> bool:
    """Whether publishing ``manifest`` to ``destination`` plans any output: its files
    (``publish.source``), or HTML of a Markdown file (``publish.html``). A bundle without Markdown
    published to an HTML-only destination records no output, and that is not a loss."""
    if destination.publish.source and manifest.files:
        return True
    return destination.markdown_mode is not None and any(is_markdown(f.path) for f in manifest.files)


def holds_bundle(doc: StateDocument | None, scope: OwnerScope, destination: Destination, remaining: int) -> bool:
    """Whether a bundle path whose state is ``doc`` still holds ``scope``'s publication, with
    ``remaining`` of its recorded outputs there (issue 37: what a Dagster partition of the
    destination stands for). No outputs left counts only when the recorded bundle had some to
    publish; a bundle path without this owner's record holds nothing of it."""
    if remaining > 0:
        return True
    manifest = None
    if isinstance(doc, SingleOwnerState) and doc.scope == scope:
        manifest = doc.manifest
    elif isinstance(doc, SharedRootState):
        manifest = next((owner.manifest for owner in doc.owners if owner.scope == scope), None)
    return manifest is not None and not publishes_outputs(manifest, destination)

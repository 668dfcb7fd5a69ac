"""The staging area as the uploads sensor and the source asset see it (resolutions D1).

Which uploads a tick requests is the upload store's answer
(:meth:`~distributor_core.staging.store.UploadStore.scan_accepted`): the cheap scan of a local
staging path and its cursor live in :mod:`distributor_core.staging.accepted`; a shared ``s3://``
store lists its pending markers instead. This module holds the observation of the staging area
(:func:`uploads_view`).
"""

from __future__ import annotations

from collections.abc import Sequence

from distributor_core import staging
from distributor_dagster.sources import Seen, SourceSnapshot, seen_upload


def uploads_view(
    records: Sequence[staging.UploadRecord], admitted: int | None = None, *, counted: bool = True
) -> SourceSnapshot:
    """The staging area as observed through ``records`` (admission order): the newest upload is
    the last one with a readable manifest identity; ``admitted`` defaults to the highest ``seq``.
    Without ``counted`` (a shared store, whose ``seq`` numbers are times, not a count) the view
    carries no count."""
    seen = [s for s in (seen_upload(r.run_id, r.manifest) for r in records) if s is not None]
    last: Seen | None = seen[-1] if seen else None
    if not counted:
        return SourceSnapshot(None, last, noun="upload")
    count = admitted if admitted is not None else max((r.seq for r in records), default=0)
    return SourceSnapshot(count, last, noun="upload")


__all__ = ["uploads_view"]

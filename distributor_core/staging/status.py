"""Upload statuses and the table of the changes allowed between them (resolutions D1).

:data:`TRANSITIONS` is the whole life cycle of an upload record: every status change written to
``upload.json`` goes through :func:`check_transition`, which refuses any pair the table does not
list, and the tests iterate the table.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType

from distributor_core.staging.layout import RecordError


class UploadStatus(enum.StrEnum):
    ACCEPTED = "accepted"
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


ACCEPTED = UploadStatus.ACCEPTED
QUEUED = UploadStatus.QUEUED
RUNNING = UploadStatus.RUNNING
SUCCEEDED = UploadStatus.SUCCEEDED
FAILED = UploadStatus.FAILED

STATUSES: tuple[UploadStatus, ...] = tuple(UploadStatus)
PENDING_STATUSES = frozenset({ACCEPTED, QUEUED})
FINISHED_STATUSES = frozenset({SUCCEEDED, FAILED})

#: (from, to) -> the event that makes the change. Anything else is refused.
TRANSITIONS: Mapping[tuple[UploadStatus, UploadStatus], str] = MappingProxyType({
    (ACCEPTED, QUEUED): "the inline publisher placed the upload in its queue",
    (ACCEPTED, RUNNING): "a publication started (a Dagster publish run)",
    (ACCEPTED, FAILED): "the publication failed before it started",
    (QUEUED, RUNNING): "an inline worker started the publication",
    (QUEUED, ACCEPTED): "serve restarted with the Dagster publisher and handed the upload to the sensor",
    (QUEUED, FAILED): "the publication failed before it started",
    (RUNNING, SUCCEEDED): "the publication succeeded",
    (RUNNING, FAILED): "the publication failed",
    (RUNNING, QUEUED): "serve restarted and re-queued a publication it had interrupted",
    (RUNNING, ACCEPTED): "serve restarted with the Dagster publisher and handed an interrupted inline "
                         "publication to the sensor",
    (RUNNING, RUNNING): "a new run took over an interrupted publication",
    (FAILED, RUNNING): "a re-execution of the failed run started",
    (FAILED, SUCCEEDED): "a re-execution of the failed run succeeded",
    (FAILED, FAILED): "a re-execution of the failed run failed again",
})


class StatusTransitionError(RecordError):
    """A status change the table does not allow."""


def check_transition(run_id: str, current: str, new: str) -> str:
    """The event of ``current`` → ``new``; :class:`StatusTransitionError` when it is not allowed."""
    try:
        pair = (UploadStatus(current), UploadStatus(new))
    except ValueError:
        raise StatusTransitionError(f"upload {run_id}: unknown status {current!r} or {new!r}") from None
    event = TRANSITIONS.get(pair)
    if event is None:
        raise StatusTransitionError(f"upload {run_id} cannot change from {current} to {new}")
    return event

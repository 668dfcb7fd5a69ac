"""Dagster run overlay for ``GET /runs/<id>`` with ``--publisher dagster`` (resolutions D1).

The upload server asks this run status source (registered for ``dagster`` under the entry point
group ``distributor.run_status``, see :mod:`distributor_core.server.runstatus`) for the newest
publish run carrying the upload's tag (:func:`upload_tag`, one per upload of a batch run; runs of
older releases: ``distributor/upload_run_id``) and maps its status: queued/not started/starting/managed
→ ``queued``; started/canceling/suspended → ``running``; success → ``succeeded``; failure/canceled
→ ``failed`` with the first step error. Dagster is imported on first use, so starting ``serve``
stays fast.
"""

from __future__ import annotations

import threading
from typing import Any

from distributor_dagster.tags import tag_value

UPLOAD_RUN_ID_TAG = "distributor/upload_run_id"
#: prefix of the per-upload tag key: ``distributor/upload.<stamp>.<hex>``
UPLOAD_TAG_PREFIX = "distributor/upload."


def upload_tag(upload_run_id: str) -> tuple[str, str]:
    """The run tag naming one upload a run publishes: key ``distributor/upload.<stamp>.<hex>``
    (the upload run id ``<pipeline>.<stamp>.<hex>`` without its pipeline id, so the key keeps to
    Dagster's tag key rules whatever the pipeline id's length), value the pipeline id (shortened
    with a hash when it is longer than a tag value may be, :func:`~distributor_dagster.tags.tag_value`).
    A batch run carries one per upload, so ``GET /runs/<id>`` and the UI's tag filter find it."""
    pipeline_id, _, rest = upload_run_id[:-26], upload_run_id[-26:-25], upload_run_id[-25:]
    return f"{UPLOAD_TAG_PREFIX}{rest}", tag_value(pipeline_id)

_STATUS_MAP = {
    "QUEUED": "queued",
    "NOT_STARTED": "queued",
    "STARTING": "queued",
    "MANAGED": "queued",
    "STARTED": "running",
    "CANCELING": "running",
    "SUSPENDED": "running",
    "SUCCESS": "succeeded",
    "FAILURE": "failed",
    "CANCELED": "failed",
}


def map_dagster_status(name: str) -> str | None:
    """The upload status for a ``DagsterRunStatus`` name, or ``None`` when unknown."""
    return _STATUS_MAP.get(name)


class DagsterRunLookup:
    """``lookup(run_id) -> (status, dagster_run_id, error) | None`` against a Dagster instance.

    ``instance`` defaults to ``DagsterInstance.get()`` (``DAGSTER_HOME``), opened on first use.
    """

    def __init__(self, instance: Any = None) -> None:
        self._instance = instance
        self._lock = threading.Lock()

    def _get_instance(self) -> Any:
        with self._lock:
            if self._instance is None:
                from dagster import DagsterInstance

                self._instance = DagsterInstance.get()
            return self._instance

    def __call__(self, run_id: str) -> tuple[str, str | None, str] | None:
        from dagster import RunsFilter

        instance = self._get_instance()
        key, value = upload_tag(run_id)
        runs = instance.get_runs(filters=RunsFilter(tags={key: value}), limit=1)
        if not runs:  # a run of an older release, tagged with its one upload
            runs = instance.get_runs(filters=RunsFilter(tags={UPLOAD_RUN_ID_TAG: run_id}), limit=1)
        if not runs:
            return None
        run = runs[0]
        status = map_dagster_status(run.status.value)
        if status is None:
            return None
        error = ""
        if run.status.value == "CANCELED":
            error = "dagster run was canceled"
        elif status == "failed":
            error = _failure_message(instance, run.run_id)
        return status, run.run_id, error


def _failure_message(instance: Any, dagster_run_id: str) -> str:
    from dagster import DagsterEventType

    for event_type in (DagsterEventType.STEP_FAILURE, DagsterEventType.RUN_FAILURE):
        for entry in instance.all_logs(dagster_run_id, of_type=event_type):
            event = entry.dagster_event
            data = getattr(event, "event_specific_data", None) if event is not None else None
            message = _innermost_message(getattr(data, "error", None)) or (
                event.message if event is not None else None)
            if message:
                step = f"step {event.step_key}: " if event is not None and event.step_key else ""
                return f"{step}{message.strip().splitlines()[0]}"
    return "dagster run failed"


def _innermost_message(error: Any) -> str:
    """The user error inside Dagster's step-execution wrapper, without its class name."""
    while error is not None and getattr(error, "cause", None) is not None:
        error = error.cause
    if error is None:
        return ""
    message = str(getattr(error, "message", "") or "")
    prefix = f"{getattr(error, 'cls_name', '')}: "
    return message[len(prefix):] if prefix != ": " and message.startswith(prefix) else message

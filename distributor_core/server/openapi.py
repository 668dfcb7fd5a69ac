"""What ``/openapi.json`` says about the upload API: response models and route descriptions.

The handlers read the raw request (headers and a streamed body) themselves, so the request side
is described here by hand: the bearer scheme, the ``Idempotency-Key`` header and the archive
body in its three media types.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

BEARER_SCHEME = "bearerAuth"


class ErrorBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    error: str = Field(description="what went wrong; never contains a token, host path or run id")
    retryable: bool | None = Field(
        default=None, description="present (true) only for the in-flight 409 and the 503 queue-full answer"
    )


class AcceptedBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    run_id: str = Field(description="<pipeline id>.<YYYYMMDDTHHMMSSZ>.<8 hex>")
    pipeline_id: str
    status: str = Field(description='always "accepted" (a replay returns the original body verbatim)')
    status_url: str = Field(description="/runs/<run_id>")


class HealthBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    status: str
    #: upload records this process set aside as unreadable since it started (absent when none)
    quarantined_records: int | None = None


class RunStatusBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    run_id: str
    pipeline_id: str
    status: str = Field(description="accepted, queued, running, succeeded or failed")
    accepted_at: str
    started_at: str | None = Field(default=None, description="omitted until the run started")
    finished_at: str | None = Field(default=None, description="omitted until the run finished")
    error: str | None = Field(default=None, description="omitted unless the run failed")
    dagster_run_id: str | None = Field(default=None, description="the Dagster run (dagster publisher)")
    published: bool | None = Field(
        default=None, description="a succeeded run: whether a destination holds the bundle now (false: it succeeded "
        "and published nothing, every destination holding a newer bundle of its id)")
    note: str | None = Field(default=None, description="what was not published, and why (skip_destination_newer)")
    report: dict[str, Any] | None = Field(default=None, description="the run report (as `distributor run`)")


def _error(description: str) -> dict[str, Any]:
    return {"model": ErrorBody, "description": description}


UPLOAD_RESPONSES: dict[int | str, dict[str, Any]] = {
    202: {
        "model": AcceptedBody,
        "description": "staged and validated; publication is asynchronous",
        "headers": {"Location": {"description": "/runs/<run_id>", "schema": {"type": "string"}}},
    },
    400: _error("pipeline query parameter, invalid pipeline id, invalid idempotency key, invalid archive or bundle"),
    401: _error("missing, malformed or unknown bearer token"),
    403: _error("the token is not allowed for this pipeline"),
    404: _error("unknown upload pipeline"),
    409: _error("idempotency key in flight (retryable) or used for a different manifest"),
    413: _error("body or extracted content over the pipeline's max_upload_size"),
    415: _error("Content-Type is not application/x-tar, application/gzip or application/x-gzip"),
    500: _error("unexpected internal error"),
    503: _error("upload queue is full (retryable)"),
}

RUN_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"model": RunStatusBody, "description": "the upload record"},
    401: _error("missing, malformed or unknown bearer token"),
    404: _error("unknown or expired run id, or a run of a pipeline the token may not see"),
}

HEALTH_RESPONSES: dict[int | str, dict[str, Any]] = {200: {"model": HealthBody, "description": "the server is up"}}

_ARCHIVE_SCHEMA = {"type": "string", "format": "binary"}

UPLOAD_EXTRA: dict[str, Any] = {
    "security": [{BEARER_SCHEME: []}],
    "parameters": [
        {
            "name": "Idempotency-Key",
            "in": "header",
            "required": False,
            "description": "1-128 of A-Z a-z 0-9 . _ - : ; scoped to (token id, pipeline id, key)",
            "schema": {"type": "string", "pattern": "^[A-Za-z0-9._:-]{1,128}$"},
        },
    ],
    "requestBody": {
        "required": True,
        "description": "one source bundle as a tar or gzip-compressed tar: a root-level manifest.json and "
        "exactly the files it lists",
        "content": {
            "application/gzip": {"schema": _ARCHIVE_SCHEMA},
            "application/x-gzip": {"schema": _ARCHIVE_SCHEMA},
            "application/x-tar": {"schema": _ARCHIVE_SCHEMA},
        },
    },
}

RUN_EXTRA: dict[str, Any] = {"security": [{BEARER_SCHEME: []}]}

SECURITY_SCHEMES = {BEARER_SCHEME: {"type": "http", "scheme": "bearer"}}

"""Upload API errors and their HTTP mapping (interfaces §3.3–3.6, resolutions D3).

Every error body is ``{"error": "<message>"}``; ``"retryable": true`` is added only for the
in-flight idempotency conflict, a full queue (or a full per-token share of it), an unavailable
staging store, an admission another replica raced and the connection cap; each ``503`` also
carries ``Retry-After`` (seconds). Messages never contain a token, a host path, a store location or
a run id: what went wrong in detail is the server log's (issue 35, item 7).
"""

from __future__ import annotations

from typing import Any


class ServerSetupError(Exception):
    """``serve`` cannot start; the message is printed as ``distributor: <message>`` (exit 1)."""


class UploadRejected(Exception):
    """Refuse a request with ``status_code`` and a fixed, safe ``message``."""

    def __init__(self, status_code: int, message: str, *, retryable: bool = False,
                 retry_after: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.message = message
        self.retryable = retryable
        #: seconds for the ``Retry-After`` header (``None``: no header)
        self.retry_after = retry_after

    def body(self) -> dict[str, Any]:
        return error_body(self.message, retryable=self.retryable)


def error_body(message: str, *, retryable: bool = False) -> dict[str, Any]:
    body: dict[str, Any] = {"error": message}
    if retryable:
        body["retryable"] = True
    return body


NOT_FOUND = "not found"
PIPELINE_QUERY = "pipeline id is not accepted"
INVALID_PIPELINE_ID = "invalid pipeline id"
UNAUTHORIZED = "unauthorized"
UPLOAD_PIPELINE_NOT_FOUND = "upload pipeline not found"
FORBIDDEN = "forbidden"
UNSUPPORTED_CONTENT_TYPE = "unsupported content type"
INVALID_IDEMPOTENCY_KEY = "invalid idempotency key"
TOO_LARGE = "upload exceeds maximum size"
KEY_IN_FLIGHT = "upload idempotency key is already being processed"
KEY_CONFLICT = "upload idempotency key was already used for a different source manifest"
QUEUE_FULL = "upload queue is full"
TOKEN_SHARE_FULL = "upload queue share of this token is full"
RUN_NOT_FOUND = "run not found"
INTERNAL = "internal error"
STAGING_UNAVAILABLE = "upload staging is unavailable"
NOT_ADMITTED = "upload was not admitted this time (the staging store changed meanwhile)"

#: ``Retry-After`` of a full queue and of a raced admission: a publication or a replica's write ends soon
RETRY_SOON = 1
#: ``Retry-After`` while the staging store (or disk) does not answer
RETRY_STORE = 2


def too_large() -> UploadRejected:
    return UploadRejected(413, TOO_LARGE)


def key_in_flight() -> UploadRejected:
    return UploadRejected(409, KEY_IN_FLIGHT, retryable=True)


def key_conflict() -> UploadRejected:
    return UploadRejected(409, KEY_CONFLICT)


def queue_full() -> UploadRejected:
    return UploadRejected(503, QUEUE_FULL, retryable=True, retry_after=RETRY_SOON)


def token_share_full() -> UploadRejected:
    return UploadRejected(503, TOKEN_SHARE_FULL, retryable=True, retry_after=RETRY_SOON)


def staging_unavailable() -> UploadRejected:
    """The staging store (S3) or the staging disk failed: a ``503`` to retry, never a ``500`` nor
    a ``404`` for a run that exists (issue 35, item 5)."""
    return UploadRejected(503, STAGING_UNAVAILABLE, retryable=True, retry_after=RETRY_STORE)


def not_admitted() -> UploadRejected:
    """An admission that lost a race in the shared store (its key claim or marker taken over, a
    record written meanwhile): retry with the same key."""
    return UploadRejected(503, NOT_ADMITTED, retryable=True, retry_after=RETRY_SOON)

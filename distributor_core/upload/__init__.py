"""The producer HTTP client for ``distributor serve`` (interfaces §4.2).

Example::

    from distributor_core.bundle import BundleFile
    from distributor_core.upload import UploadClient

    with UploadClient("https://distributor.example.com", token) as client:
        result = client.upload_files(
            pipeline_id="weather-hourly",
            id="weather.hourly.brentwood",
            idempotency_key="weather.hourly.brentwood.20260607T150000Z",
            files=[BundleFile("out/report.md", "report.md")],
        )
        status = client.status(result.run_id)

See ``docs/consumers/client.md``.

Owns: the producer side of the upload API (requests, retries, errors). Must not know: the
server's internals, destinations, state, Dagster.
"""

from distributor_core.upload.client import RunStatus, UploadClient, UploadResult
from distributor_core.upload.errors import (
    HTTPError,
    IdempotencyConflictError,
    UploadCancelledError,
    UploadError,
    UploadTransportError,
)
from distributor_core.upload.options import RetryOptions

__all__ = [
    "HTTPError",
    "IdempotencyConflictError",
    "RetryOptions",
    "RunStatus",
    "UploadCancelledError",
    "UploadClient",
    "UploadError",
    "UploadResult",
    "UploadTransportError",
]

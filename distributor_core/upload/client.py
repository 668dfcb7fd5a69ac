"""``UploadClient``: submit source bundles to ``distributor serve`` (interfaces §4.2).

Each upload builds and (by default) validates the bundle, writes the gzip tar once to a
temporary file, and sends it with ``Authorization: Bearer``, ``Content-Type: application/gzip``
and an ``Idempotency-Key`` (the caller's, or a random 128-bit hex key generated once per call and
reused for that call's retries). Only 503, connection failures, timeouts and ambiguous
mid-upload failures are retried, with the same key and byte-identical body; a 4xx never is.
"""

from __future__ import annotations

import http
import logging
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

import httpx

from distributor_core import jsonfmt
from distributor_core.bundle import (
    BundleError,
    BundleFile,
    Manifest,
    check_upload_id,
    load_manifest,
    validate_bundle,
    write_bundle,
)
from distributor_core.timefmt import parse_rfc3339
from distributor_core.upload.archive import iter_file, write_archive
from distributor_core.upload.errors import (
    HTTPError,
    IdempotencyConflictError,
    Redactor,
    UploadCancelledError,
    UploadError,
    UploadTransportError,
)
from distributor_core.upload.options import (
    RetryOptions,
    check_pipeline_id,
    check_validation_flags,
    clean_endpoint,
    idempotency_key_or_new,
)

_LOG = logging.getLogger("distributor.upload")
#: the statuses a run ends in
FINISHED_STATUSES = ("succeeded", "failed")

DEFAULT_TIMEOUT = 30.0
MAX_ERROR_TEXT = 1024
MAX_UPLOAD_RESPONSE = 1024 * 1024
MAX_STATUS_RESPONSE = 64 * 1024 * 1024

_T = TypeVar("_T")

#: transport failures worth another attempt: the request may not have reached the server, or
#: the answer was lost (connection reset or closed mid-exchange, incomplete response)
_RETRYABLE_TRANSPORT = (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError)


class _RedactedRepr:
    """``repr`` of a result type, with the client's token redacted from every field shown."""

    _redact: Redactor | None

    def __repr__(self) -> str:
        shown = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in fields(self) if f.repr)  # type: ignore[arg-type]
        text = f"{type(self).__name__}({shown})"
        return self._redact(text) if self._redact is not None else text


@dataclass(frozen=True, repr=False)
class UploadResult(_RedactedRepr):
    """An accepted upload (202): admission, not publication. Server text in it (and in
    ``raw``) has the token redacted."""

    run_id: str
    pipeline_id: str
    status: str
    status_url: str
    raw: dict[str, Any] = field(repr=False)
    _redact: Redactor | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True, repr=False)
class RunStatus(_RedactedRepr):
    """``GET /runs/<id>``: the run's status; ``report`` is the run report once known. Server text
    in it (``error``, ``report``, ``raw``) has the token redacted."""

    run_id: str
    pipeline_id: str
    status: str
    error: str
    accepted_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    report: dict[str, Any] | None
    raw: dict[str, Any] = field(repr=False)
    dagster_run_id: str | None = None
    #: a succeeded run: whether any destination holds the bundle now (``None`` until known); a
    #: run can succeed and publish nothing, every destination holding a newer bundle of its id
    published: bool | None = None
    #: what was not published, and why (``nothing was published: ... (skip_destination_newer)``)
    note: str = ""
    _redact: Redactor | None = field(default=None, repr=False, compare=False)

    @property
    def finished(self) -> bool:
        return self.status in FINISHED_STATUSES


#: the longest ``Retry-After`` the client waits (a larger value waits this long)
MAX_RETRY_AFTER = 60.0


class _Retry(Exception):
    """An attempt failed in a way that may be retried; ``error`` is raised after the last one.
    ``retry_after``: the seconds the server asked for (``Retry-After``), if any."""

    def __init__(self, error: UploadError, retry_after: float | None = None) -> None:
        super().__init__(str(error))
        self.error = error
        self.retry_after = retry_after


class UploadClient:
    """A synchronous client for one distributor server and one bearer token.

    ``http_client`` (an ``httpx.Client``) is used as given and never closed here; without it the
    client owns one with ``timeout`` seconds. Use as a context manager or call :meth:`close`.
    """

    def __init__(
        self,
        endpoint: str,
        token: str,
        http_client: httpx.Client | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        retry: RetryOptions | None = None,
    ) -> None:
        self.endpoint = clean_endpoint(endpoint)
        if not token:
            raise ValueError("token is required")
        self._token = token
        self._redact = Redactor(token)
        self.retry = (retry or RetryOptions()).validate()
        self._owns_client = http_client is None
        self.http_client = http_client if http_client is not None else httpx.Client(timeout=timeout)

    def __repr__(self) -> str:
        return f"UploadClient(endpoint={self.endpoint!r}, token='[redacted]')"

    def __enter__(self) -> UploadClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._owns_client:
            self.http_client.close()

    # ------------------------------------------------------------------ URLs

    def upload_url(self, pipeline_id: str) -> str:
        return f"{self.endpoint}/v1/pipelines/{pipeline_id}/upload"

    def status_url(self, run_id: str) -> str:
        return f"{self.endpoint}/runs/{quote(run_id, safe='')}"

    # ------------------------------------------------------------------ uploads

    def upload_bundle(
        self,
        *,
        pipeline_id: str,
        root: str | os.PathLike[str],
        idempotency_key: str | None = None,
        validate: bool = False,
        disable_validation: bool = False,
        cancel_event: threading.Event | None = None,
    ) -> UploadResult:
        """Upload the existing bundle at ``root``: ``manifest.json`` plus exactly the listed files."""
        check_validation_flags(validate, disable_validation)
        check_pipeline_id(pipeline_id)
        if not root:
            raise ValueError("root is required")
        key = idempotency_key_or_new(idempotency_key)
        manifest = self._local(lambda: load_manifest(root))
        self._local(lambda: check_upload_id(manifest.id))
        if not disable_validation:
            self._local(lambda: validate_bundle(root, manifest))
        with tempfile.TemporaryDirectory(prefix="distributor-upload-") as scratch:
            archive = self._archive(Path(root), manifest, Path(scratch))
            return self._upload(pipeline_id, archive, key, cancel_event)

    def upload_files(
        self,
        *,
        pipeline_id: str,
        id: str,
        files: Sequence[BundleFile],
        created: datetime | None = None,
        idempotency_key: str | None = None,
        temp_dir: str | os.PathLike[str] | None = None,
        validate: bool = False,
        disable_validation: bool = False,
        cancel_event: threading.Event | None = None,
    ) -> UploadResult:
        """Build a bundle from producer files in a temporary directory, upload it, delete it.

        Source files are only read. ``temp_dir`` chooses where the temporary directory goes.
        """
        check_validation_flags(validate, disable_validation)
        check_pipeline_id(pipeline_id)
        if not id:
            raise ValueError("id is required")
        if not files:
            raise ValueError("files is required")
        key = idempotency_key_or_new(idempotency_key)
        scratch = Path(tempfile.mkdtemp(prefix="distributor-upload-", dir=temp_dir))
        try:
            root = scratch / "bundle"
            self._local(lambda: check_upload_id(id))
            manifest = self._local(lambda: write_bundle(root, id=id, files=list(files), created=created))
            if not disable_validation:
                self._local(lambda: validate_bundle(root, manifest))
            archive = self._archive(root, manifest, scratch)
            return self._upload(pipeline_id, archive, key, cancel_event)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def _local(self, action: Any) -> Any:
        """Run local bundle work; its errors keep their type, with the token redacted."""
        try:
            return action()
        except BundleError as exc:
            text = self._redact(str(exc))
            if text != str(exc):
                raise type(exc)(text) from None
            raise

    def _archive(self, root: Path, manifest: Manifest, scratch: Path) -> Path:
        path = scratch / "upload.tar.gz"
        try:
            with open(path, "xb") as out:
                write_archive(root, manifest, out)
        except BundleError:
            raise
        except OSError as exc:
            raise UploadError(self._redact(f"cannot build upload archive: {exc.strerror or exc}")) from None
        return path

    def _upload(
        self, pipeline_id: str, archive: Path, key: str, cancel_event: threading.Event | None
    ) -> UploadResult:
        return self._retrying(lambda: self._attempt(pipeline_id, archive, key), cancel_event, "upload cancelled")

    def _retrying(self, attempt: Callable[[], _T], cancel_event: threading.Event | None, cancelled: str) -> _T:
        """``attempt`` until it does not raise :class:`_Retry`, at most ``retry.attempts`` times;
        the wait before retry *n* is the policy's delay, or the server's ``Retry-After`` when
        that is longer (at most :data:`MAX_RETRY_AFTER`)."""
        last: _Retry | None = None
        for number in range(1, self.retry.attempts + 1):
            if last is not None:
                delay = max(self.retry.delay(number - 1), min(last.retry_after or 0.0, MAX_RETRY_AFTER))
                if self._wait(delay, cancel_event):
                    raise UploadCancelledError(cancelled)
            if cancel_event is not None and cancel_event.is_set():
                raise UploadCancelledError(cancelled)
            try:
                return attempt()
            except _Retry as retry:
                last = retry
        assert last is not None
        raise last.error

    @staticmethod
    def _wait(delay: float, cancel_event: threading.Event | None) -> bool:
        """Sleep ``delay`` seconds; True when ``cancel_event`` was set meanwhile."""
        if cancel_event is None:
            time.sleep(delay)
            return False
        return cancel_event.wait(delay)

    def _attempt(self, pipeline_id: str, archive: Path, key: str) -> UploadResult:
        headers = {
            "Authorization": f"Bearer {self._token}",
            "Content-Type": "application/gzip",
            "Idempotency-Key": key,
            "Content-Length": str(archive.stat().st_size),
            "Accept": "application/json",
        }
        request = self.http_client.build_request(
            "POST", self.upload_url(pipeline_id), headers=headers, content=iter_file(archive)
        )
        code, reason, body, retry_after = self._send(request, MAX_UPLOAD_RESPONSE, retry_transport=True)
        if code == 202:
            data = _json_object(body)
            run_id = data.get("run_id") if data is not None else None
            if not isinstance(run_id, str) or not run_id:
                raise UploadError("upload was accepted but the response has no run_id")
            assert data is not None
            return UploadResult(
                run_id=run_id,
                pipeline_id=self._redact(str(data.get("pipeline_id", pipeline_id))),
                status=self._redact(str(data.get("status", "accepted"))),
                status_url=self._redact(str(data.get("status_url", f"/runs/{run_id}"))),
                raw=self._redact.deep(data),  # type: ignore[arg-type]
                _redact=self._redact,
            )
        if 200 <= code < 300:
            raise UploadError(self._redact(f"unexpected upload response {code} {reason}"))
        error = self._http_error(code, reason, body)
        if code == 503:
            raise _Retry(error, retry_after)
        raise error

    def _send(
        self, request: httpx.Request, limit: int, *, retry_transport: bool
    ) -> tuple[int, str, bytes, float | None]:
        """``(status, reason, body, Retry-After seconds)`` of one exchange."""
        failure: httpx.HTTPError | None = None
        try:
            response = self.http_client.send(request, stream=True)
            try:
                body = _read_limited(response, limit)
            finally:
                response.close()
        except httpx.HTTPError as exc:
            failure = exc
        if failure is not None:  # raised outside the handler: no unredacted cause or context is attached
            error = UploadTransportError(
                self._redact(f"{request.method} {request.url.path}: {type(failure).__name__}: {failure}"),
                cause_type=type(failure).__name__,
            )
            if retry_transport and isinstance(failure, _RETRYABLE_TRANSPORT):
                raise _Retry(error)
            raise error
        reason = response.reason_phrase or _phrase(response.status_code)
        return response.status_code, reason, body, _retry_after(response.headers.get("retry-after"))

    def _http_error(self, code: int, reason: str, body: bytes) -> HTTPError:
        data = _json_object(body)
        message: str
        retryable: bool | None = {409: False, 503: True}.get(code)
        if data is not None and isinstance(data.get("error"), str):
            message = self._redact(data["error"])
            if isinstance(data.get("retryable"), bool):
                retryable = data["retryable"]
        else:
            # redacted before it is cut (a cut never leaves the token's first characters), then trimmed
            message = self._redact.cut(body.decode("utf-8", "replace"), MAX_ERROR_TEXT).strip()
        cls = IdempotencyConflictError if code == 409 else HTTPError
        return cls(code, self._redact(f"{code} {reason}"), message, retryable)

    # ------------------------------------------------------------------ status

    def status(self, run_id: str, cancel_event: threading.Event | None = None) -> RunStatus:
        """``GET /runs/<id>``; 404 once the record expired or is not visible. A ``503`` (the
        server's staging store does not answer) and network failures are retried as uploads are
        (a status read changes nothing)."""
        if not run_id:
            raise ValueError("run id is required")
        return self._retrying(lambda: self._status_attempt(run_id), cancel_event, "status request cancelled")

    def _status_attempt(self, run_id: str) -> RunStatus:
        request = self.http_client.build_request(
            "GET", self.status_url(run_id),
            headers={"Authorization": f"Bearer {self._token}", "Accept": "application/json"},
        )
        code, reason, body, retry_after = self._send(request, MAX_STATUS_RESPONSE, retry_transport=True)
        if code == 503:
            raise _Retry(self._http_error(code, reason, body), retry_after)
        if code != 200:
            raise self._http_error(code, reason, body)
        data = _json_object(body)
        if data is None or not isinstance(data.get("status"), str):
            raise UploadError("run status response is not a status object")
        report = data.get("report")
        dagster_run_id = data.get("dagster_run_id")
        return RunStatus(
            run_id=str(data.get("run_id", run_id)),
            pipeline_id=self._redact(str(data.get("pipeline_id", ""))),
            status=self._redact(data["status"]),
            error=self._redact(str(data.get("error") or "")),
            accepted_at=_time(data.get("accepted_at")),
            started_at=_time(data.get("started_at")),
            finished_at=_time(data.get("finished_at")),
            report=self._redact.deep(report) if isinstance(report, dict) else None,  # type: ignore[arg-type]
            raw=self._redact.deep(data),  # type: ignore[arg-type]
            dagster_run_id=self._redact(str(dagster_run_id)) if dagster_run_id else None,
            published=data["published"] if isinstance(data.get("published"), bool) else None,
            note=self._redact(str(data.get("note") or "")),
            _redact=self._redact,
        )

    def wait(
        self, run_id: str, *, timeout: float = 600.0, interval: float = 2.0,
        cancel_event: threading.Event | None = None,
    ) -> RunStatus:
        """Poll :meth:`status` every ``interval`` seconds until the run has finished; return its
        last status (``succeeded`` or ``failed``: check ``status``, and for a succeeded run
        ``published``). A run that succeeded without publishing anything is logged as a warning
        on the ``distributor.upload`` logger with the status's ``note``. Raises ``TimeoutError``
        after ``timeout`` seconds, :class:`UploadCancelledError` when ``cancel_event`` is set."""
        deadline = time.monotonic() + timeout
        while True:
            status = self.status(run_id, cancel_event)
            if status.finished:
                if status.status == "succeeded" and status.published is False:
                    _LOG.warning("distributor run %s %s", status.run_id, status.note or "published nothing")
                return status
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"distributor run {run_id} did not finish in {timeout:g} s (last status "
                                   f"{status.status})")
            if self._wait(min(interval, remaining), cancel_event):
                raise UploadCancelledError("wait cancelled")


def _read_limited(response: httpx.Response, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_bytes():
        size += len(chunk)
        if size > limit:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def _retry_after(value: str | None) -> float | None:
    """Seconds of a ``Retry-After`` header in its seconds form (an HTTP date is not used)."""
    if value is None or not value.strip().isdigit():
        return None
    return float(value.strip())


def _json_object(body: bytes) -> dict[str, Any] | None:
    try:
        return jsonfmt.loads_object(body)
    except (jsonfmt.JSONFormatError, UnicodeDecodeError):
        return None


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return parse_rfc3339(value)
    except ValueError:
        return None


def _phrase(code: int) -> str:
    try:
        return http.HTTPStatus(code).phrase
    except ValueError:
        return ""

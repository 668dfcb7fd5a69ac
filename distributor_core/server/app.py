"""The FastAPI app of ``distributor serve`` (interfaces §3, resolutions D1–D3).

Routes: ``GET /healthz``, ``POST /v1/pipelines/{pipeline_id}/upload``, ``GET /runs/{run_id}``,
plus ``/openapi.json`` and ``/docs`` (Swagger UI from packaged assets, ``server/apidocs.py``) without
authentication. Every other method or path answers
404 ``{"error":"not found"}`` (never 405, never FastAPI's ``{"detail": ...}``); ``/redoc``, the
OAuth redirect route and trailing-slash redirects are disabled.

The upload route checks, in order: pipeline query parameter (400), pipeline id syntax (400),
bearer token (401), upload pipeline exists (404), token allows it (403), content type (415),
idempotency key (400); then, before reading the body, ``Content-Length`` over the limit (413),
key in flight (409, retryable), queue full and the token's share of it full (503, retryable);
then the body is streamed to disk (counted, aborted at limit + 1, and when it pauses longer than
``body_idle_timeout`` or falls below ``body_min_rate``), extracted, validated and recorded.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import re
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qsl

import anyio
from anyio import to_thread
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from distributor_core import __version__
from distributor_core.config import Config, Environment, UploadGrant, UploadTokenTable, is_slug_like_id
from distributor_core.config import resolve_upload_tokens as _resolve_tokens
from distributor_core.jsonfmt import dumps_compact
from distributor_core.server import errors, openapi
from distributor_core.server.apidocs import install_docs
from distributor_core.server.archive import StagingError, TooLargeError
from distributor_core.server.publisher import InlinePublisher, PublishFunction, publish_staged_upload
from distributor_core.server.runstatus import RunStatusSource, load_run_status_source
from distributor_core.server.runtime import UploadRuntime
from distributor_core.server.service import NO_UPLOAD_PIPELINE, Ticket, UploadService
from distributor_core.server.shared import SharedUploadService
from distributor_core.server.shared_publisher import SharedPublisher
from distributor_core.staging import RandomSuffix, random_suffix
from distributor_core.storage import StorageError
from distributor_core.timefmt import Clock

log = logging.getLogger("distributor.server")

IDEMPOTENCY_KEY_RE = re.compile(r"[A-Za-z0-9._:-]{1,128}")
ARCHIVE_TYPES = {"application/x-tar": False, "application/gzip": True, "application/x-gzip": True}
BEARER_PREFIX = "Bearer "
#: threads for admission checks and releases, and for extracting, validating and recording uploads
QUICK_THREADS = 16
STAGING_THREADS = 32


class JSONBody(JSONResponse):
    """Compact Go-style JSON plus a newline (what Go's ``json.Encoder`` writes)."""

    def render(self, content: Any) -> bytes:
        return (dumps_compact(content) + "\n").encode("utf-8")


def error_response(status_code: int, message: str, *, retryable: bool = False,
                   retry_after: int | None = None) -> JSONBody:
    headers = {"Retry-After": str(retry_after)} if retry_after is not None else None
    return JSONBody(errors.error_body(message, retryable=retryable), status_code=status_code, headers=headers)


def rejected(exc: errors.UploadRejected) -> JSONBody:
    return error_response(exc.status_code, exc.message, retryable=exc.retryable, retry_after=exc.retry_after)


def unavailable(what: str, exc: BaseException) -> JSONBody:
    """``503`` for a staging store or disk that failed; the operator's detail goes to the log."""
    log.warning("distributor: %s: the upload staging failed: %s", what, exc)
    return rejected(errors.staging_unavailable())


def bearer_token(header: str | None) -> str | None:
    """The token of ``Authorization: Bearer <token>``: the prefix case-sensitive, exactly one space
    and then the token, with no whitespace around it (``Bearer  <token>`` is refused: the docs say
    one space, and a second token spelling would be a second way in)."""
    if header is None or not header.startswith(BEARER_PREFIX):
        return None
    token = header[len(BEARER_PREFIX) :]
    if not token or token != token.strip():
        return None
    return token


def authenticate(request: Request, tokens: UploadTokenTable) -> UploadGrant | None:
    token = bearer_token(request.headers.get("authorization"))
    return tokens.authenticate(token) if token is not None else None


def header_authenticator(tokens: UploadTokenTable) -> Callable[[list[tuple[bytes, bytes]]], bool]:
    """For the connection guards: whether a request head's (lower-cased) headers carry a valid
    upload token, the first ``Authorization`` header deciding, as in :func:`authenticate`."""

    def authenticated(headers: list[tuple[bytes, bytes]]) -> bool:
        for name, value in headers:
            if name == b"authorization":
                token = bearer_token(value.decode("latin-1"))
                return token is not None and tokens.authenticate(token) is not None
        return False

    return authenticated


def has_pipeline_query(query: str) -> bool:
    return any(name in ("pipeline", "pipeline_id") for name, _ in parse_qsl(query, keep_blank_values=True))


def archive_compression(content_type: str | None) -> bool | None:
    """``True`` for gzip, ``False`` for tar, ``None`` when the media type is not accepted."""
    if content_type is None:
        return None
    media_type = content_type.split(";", 1)[0].strip().lower()
    return ARCHIVE_TYPES.get(media_type)


class _BadKey(Exception):
    pass


def idempotency_key(request: Request) -> str | None:
    values = request.headers.getlist("idempotency-key")
    if not values:
        return None
    if len(values) > 1 or not IDEMPOTENCY_KEY_RE.fullmatch(values[0]):
        raise _BadKey
    return values[0]


def content_length(request: Request) -> int | None:
    value = request.headers.get("content-length")
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return None


async def receive_body(
    request: Request, path: Path, limit: int, idle_timeout: float, min_rate: int = 0
) -> int:
    """Stream the body into ``path`` (created exclusively), aborting at ``limit`` + 1 bytes.

    Two deadlines: no pause longer than ``idle_timeout``, and, with ``min_rate`` (bytes per
    second), once ``idle_timeout`` has passed the body must keep an average of ``min_rate``: the
    request fails as soon as fewer than ``(elapsed - idle_timeout) * min_rate`` bytes arrived, so a
    body of N bytes has ``idle_timeout + N / min_rate`` seconds in all.
    """
    loop = asyncio.get_running_loop()
    start = loop.time()
    received = 0
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "wb") as out:
        chunks = request.stream().__aiter__()
        while True:
            wait = idle_timeout
            rate_bound = False
            if min_rate > 0:
                left = start + idle_timeout + received / min_rate - loop.time()
                if left <= 0:
                    raise StagingBodyError(too_slow(min_rate))
                rate_bound = received > 0 and left < wait  # with nothing received both coincide
                wait = min(wait, left)
            try:
                chunk = await asyncio.wait_for(chunks.__anext__(), wait)
            except StopAsyncIteration:
                return received
            except TimeoutError:
                # which deadline was nearer decides (event loop timers may fire a little early)
                raise StagingBodyError(too_slow(min_rate) if rate_bound else "request body timed out") from None
            received += len(chunk)
            if received > limit:
                raise TooLargeError("body")
            out.write(chunk)


def too_slow(min_rate: int) -> str:
    return f"request body arrived slower than {min_rate} bytes/s (server.http.body_min_rate)"


class StagingBodyError(StagingError):
    def __str__(self) -> str:
        return f"invalid upload archive: {self.detail}"


def create_app(
    config: Config,
    *,
    env: Environment | None = None,
    publisher: Literal["inline", "dagster"] = "inline",
    tokens: UploadTokenTable | None = None,
    clock: Clock | None = None,
    suffix: RandomSuffix = random_suffix,
    lookup_dagster_run: RunStatusSource | None = None,
    publish: PublishFunction = publish_staged_upload,
    durable: bool = True,
    body_idle_timeout: float | None = None,
    body_min_rate: int | None = None,
) -> FastAPI:
    """Build the upload app for ``config``.

    Resolves the upload tokens (``SecretError`` with the startup messages of interfaces §3.1),
    then checks, locks, sweeps and loads every upload pipeline's staging path
    (``ServerSetupError`` naming the directory). The inline publisher and the expiry janitor
    start with the app's lifespan and stop with it (running publications get 30 s); the
    service and runtime are ``app.state.uploads`` and ``app.state.runtime``.
    ``lookup_dagster_run`` (dagster publisher) defaults to the run status source registered for
    ``dagster`` (:mod:`distributor_core.server.runstatus`): a query of ``DagsterInstance.get()``.
    """
    if not config.upload_pipelines:
        raise errors.ServerSetupError(NO_UPLOAD_PIPELINE)
    http = config.server.http
    idle_timeout = body_idle_timeout if body_idle_timeout is not None else http.body_idle_timeout.total_seconds()
    min_rate = body_min_rate if body_min_rate is not None else http.body_min_rate
    env = env or Environment.from_config(config)
    tokens = tokens if tokens is not None else _resolve_tokens(config, env)
    if publisher == "dagster" and lookup_dagster_run is None:
        lookup_dagster_run = load_run_status_source("dagster")
    service: UploadService | SharedUploadService
    inline: InlinePublisher | SharedPublisher | None = None
    if http.staging_store is not None:  # any number of replicas on one S3 staging store
        service = SharedUploadService(
            config, env=env, tokens=tokens, mode=publisher, clock=clock, suffix=suffix,
            lookup_dagster_run=lookup_dagster_run,
        )
        requeue = service.open()
        if publisher == "inline":
            inline = SharedPublisher(service, publish=publish)
    else:
        service = UploadService(
            config, env=env, tokens=tokens, mode=publisher, clock=clock, suffix=suffix,
            lookup_dagster_run=lookup_dagster_run, durable=durable,
        )
        requeue = service.open()
        if publisher == "inline":
            inline = InlinePublisher(service, publish=publish)
    runtime = UploadRuntime(service, inline, requeue if inline is not None else [])

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        runtime.start()
        try:
            yield
        finally:
            await run_in_threadpool(runtime.shutdown)

    app = FastAPI(
        title="distributor upload API",
        version=__version__,
        description="Upload source bundles to http_upload pipelines of `distributor serve` and follow their runs.",
        docs_url=None,  # apidocs.install_docs: Swagger UI from packaged assets, no CDN
        redoc_url=None,
        swagger_ui_oauth2_redirect_url=None,
        openapi_url="/openapi.json",
        redirect_slashes=False,
        lifespan=lifespan,
    )
    app.state.uploads = service
    app.state.runtime = runtime
    # Two thread pools: admissions and releases (memory work, a directory made or removed) never
    # queue behind the extraction and fsyncs of other uploads, which have their own.
    quick = anyio.CapacityLimiter(QUICK_THREADS)
    staging = anyio.CapacityLimiter(STAGING_THREADS)
    _install_error_handlers(app)
    _install_openapi(app)
    install_docs(app, title=f"{app.title} - Swagger UI")

    @app.get("/healthz", responses=openapi.HEALTH_RESPONSES, response_class=JSONBody, summary="Liveness")
    def healthz() -> JSONBody:
        body: dict[str, Any] = {"status": "ok"}
        quarantined = service.quarantined_records()
        if quarantined:  # set aside, everything else works: still ok, but worth an operator's look
            body["quarantined_records"] = quarantined
        return JSONBody(body)

    @app.post(
        "/v1/pipelines/{pipeline_id}/upload",
        status_code=202,
        responses=openapi.UPLOAD_RESPONSES,
        response_class=JSONBody,
        openapi_extra=openapi.UPLOAD_EXTRA,
        summary="Upload one source bundle",
    )
    async def upload(request: Request, pipeline_id: str) -> Response:
        early = _check_upload_request(request, pipeline_id, service)
        if isinstance(early, Response):
            return early
        compressed, key, grant = early
        try:
            ticket: Ticket = await to_thread.run_sync(
                service.admit, pipeline_id, grant.token_id, key, content_length(request), limiter=quick
            )
        except errors.UploadRejected as exc:
            return rejected(exc)
        except (OSError, StorageError) as exc:
            return unavailable(f"admitting an upload for pipeline {pipeline_id}", exc)
        try:
            await receive_body(request, ticket.archive, ticket.limit, idle_timeout, min_rate)
            accepted = await to_thread.run_sync(
                functools.partial(service.stage_and_commit, ticket, compressed=compressed, release=True),
                limiter=staging,
            )
        except errors.UploadRejected as exc:
            return rejected(exc)
        except StagingError as exc:
            return error_response(exc.status_code, str(exc))
        except ClientDisconnect:
            return error_response(400, "invalid upload archive: request body was not completely received")
        except (OSError, StorageError) as exc:  # the staging disk or store, not the request
            return unavailable(f"staging an upload for pipeline {pipeline_id}", exc)
        except Exception:
            log.exception("distributor: staging an upload for pipeline %s failed", pipeline_id)
            return error_response(500, errors.INTERNAL)
        finally:
            if not ticket.released:  # the staging thread releases it on its way out
                await to_thread.run_sync(service.release, ticket, limiter=quick)
        body = accepted.body
        return JSONBody(body, status_code=202, headers={"Location": str(body.get("status_url", ""))})

    @app.get(
        "/runs/{run_id}",
        responses=openapi.RUN_RESPONSES,
        response_class=JSONBody,
        openapi_extra=openapi.RUN_EXTRA,
        summary="Status of an upload run",
    )
    def run_status(request: Request, run_id: str) -> Response:
        grant = authenticate(request, service.tokens)
        if grant is None:
            return error_response(401, errors.UNAUTHORIZED)
        try:
            view = service.status(run_id, grant)
        except errors.UploadRejected as exc:
            return rejected(exc)
        except (OSError, StorageError) as exc:
            return unavailable("reading a run's status", exc)
        if view is None:
            return error_response(404, errors.RUN_NOT_FOUND)
        return JSONBody(view)

    return app


def _check_upload_request(
    request: Request, pipeline_id: str, service: UploadService | SharedUploadService
) -> Response | tuple[bool, str | None, UploadGrant]:
    """Checks 1 and 3–8 of interfaces §3.4 (the route itself is check 2)."""
    if has_pipeline_query(request.url.query):
        return error_response(400, errors.PIPELINE_QUERY)
    if not is_slug_like_id(pipeline_id):
        return error_response(400, errors.INVALID_PIPELINE_ID)
    grant = authenticate(request, service.tokens)
    if grant is None:
        return error_response(401, errors.UNAUTHORIZED)
    if pipeline_id not in service.pipelines:
        return error_response(404, errors.UPLOAD_PIPELINE_NOT_FOUND)
    if not grant.allows(pipeline_id):
        return error_response(403, errors.FORBIDDEN)
    compressed = archive_compression(request.headers.get("content-type"))
    if compressed is None:
        return error_response(415, errors.UNSUPPORTED_CONTENT_TYPE)
    try:
        key = idempotency_key(request)
    except _BadKey:
        return error_response(400, errors.INVALID_IDEMPOTENCY_KEY)
    return compressed, key, grant


def _install_error_handlers(app: FastAPI) -> None:
    async def http_error(request: Request, exc: Exception) -> Response:
        status = getattr(exc, "status_code", 500)
        if status in (404, 405):
            path = request.url.path
            if request.method == "POST" and path.startswith("/v1/pipelines/") and has_pipeline_query(request.url.query):
                return error_response(400, errors.PIPELINE_QUERY)
            return error_response(404, errors.NOT_FOUND)
        if status >= 500:
            return error_response(status, errors.INTERNAL)
        return error_response(status, "bad request")

    async def validation_error(_: Request, __: Exception) -> Response:
        return error_response(400, "bad request")

    async def internal_error(_: Request, exc: Exception) -> Response:
        log.error("distributor: unexpected error: %s", type(exc).__name__)
        return error_response(500, errors.INTERNAL)

    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(Exception, internal_error)


def _install_openapi(app: FastAPI) -> None:
    default = app.openapi

    def schema() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = default()
            document.setdefault("components", {})["securitySchemes"] = openapi.SECURITY_SCHEMES
            app.openapi_schema = document
        return app.openapi_schema

    app.openapi = schema  # type: ignore[method-assign]

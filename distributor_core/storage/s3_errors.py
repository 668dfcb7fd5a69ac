"""Map boto3/botocore failures to storage error kinds (interfaces §5.4).

``NoSuchKey``/``NotFound``/404 → ``not_found``; ``NoSuchBucket`` → ``not_found`` naming the
bucket; ``AccessDenied``/403 and credential or signature failures → ``permission``; 412 →
``conflict`` (callers turn it into ``already_exists`` for ``If-None-Match: *`` writes);
throttling, 5xx and connection failures → ``unavailable``; anything else → ``other``.

Causes are built from the S3 error code and message only. Request signatures, string-to-sign
dumps and credentials never reach them, and URL user-info is redacted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    CredentialRetrievalError,
    HTTPClientError,
    IncompleteReadError,
    NoCredentialsError,
    ParamValidationError,
    PartialCredentialsError,
)
from botocore.exceptions import (
    ConnectionError as BotoConnectionError,
)

from distributor_core.storage.errors import ErrorKind

_NOT_FOUND = frozenset({"NoSuchKey", "NotFound", "404", "NoSuchVersion"})
_PERMISSION = frozenset(
    {
        "AccessDenied",
        "403",
        "Forbidden",
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "AllAccessDisabled",
        "AccountProblem",
        "ExpiredToken",
        "InvalidToken",
        "TokenRefreshRequired",
        "InvalidSecurity",
        "InvalidClientTokenId",
        "RequestTimeTooSkewed",
        "UnauthorizedAccess",
    }
)
_PRECONDITION = frozenset({"PreconditionFailed", "412", "ConditionalRequestConflict"})
_UNAVAILABLE = frozenset(
    {
        "SlowDown",
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestLimitExceeded",
        "TooManyRequests",
        "TooManyRequestsException",
        "ServiceUnavailable",
        "InternalError",
        "RequestTimeout",
        "RequestTimeoutException",
        "BandwidthLimitExceeded",
        "OperationAborted",
        "500",
        "502",
        "503",
        "504",
    }
)
_INTEGRITY = frozenset({"BadDigest", "InvalidDigest", "XAmzContentSHA256Mismatch", "IncompleteBody"})
_LIMIT = frozenset({"EntityTooLarge", "TooManyParts"})

_USERINFO = re.compile(r"(?i)([a-z][a-z0-9+.-]*://)[^/@\s]*@")
_MAX_CAUSE = 300


@dataclass(frozen=True, slots=True)
class MappedError:
    kind: ErrorKind
    cause: str
    code: str = ""
    #: a precondition (If-Match / If-None-Match / copy-source condition) failed
    precondition: bool = False


def redact(text: str) -> str:
    """Remove URL user-info (``scheme://user:pass@``) and bound the length of a cause."""
    text = _USERINFO.sub(r"\1***@", text)
    if len(text) > _MAX_CAUSE:
        text = text[: _MAX_CAUSE - 3] + "..."
    return text


def client_error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", "") or "")


def client_error_status(exc: ClientError) -> int:
    try:
        return int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
    except (TypeError, ValueError):
        return 0


def map_error(exc: BaseException, *, bucket: str) -> MappedError:
    """Kind and a secret-free cause for a boto3/botocore exception."""
    if isinstance(exc, ClientError):
        return _map_client_error(exc, bucket)
    if isinstance(exc, NoCredentialsError | PartialCredentialsError | CredentialRetrievalError):
        return MappedError(ErrorKind.PERMISSION, "no usable AWS credentials were found")
    if isinstance(exc, IncompleteReadError):
        return MappedError(ErrorKind.UNAVAILABLE, "connection closed before the whole object was read")
    if isinstance(exc, BotoConnectionError | HTTPClientError):
        return MappedError(ErrorKind.UNAVAILABLE, redact(f"{type(exc).__name__}: {exc}"))
    if isinstance(exc, ParamValidationError):
        return MappedError(ErrorKind.OTHER, redact(str(exc)))
    if isinstance(exc, BotoCoreError):
        return MappedError(ErrorKind.OTHER, redact(f"{type(exc).__name__}: {exc}"))
    if isinstance(exc, ConnectionError | TimeoutError):
        return MappedError(ErrorKind.UNAVAILABLE, redact(f"{type(exc).__name__}: {exc}"))
    if _is_urllib3_error(exc):
        return MappedError(ErrorKind.UNAVAILABLE, redact(f"{type(exc).__name__}: {exc}"))
    return MappedError(ErrorKind.OTHER, redact(str(exc) or type(exc).__name__))


def _is_urllib3_error(exc: BaseException) -> bool:
    try:
        from urllib3.exceptions import HTTPError
    except ImportError:  # pragma: no cover - urllib3 always ships with botocore
        return False
    return isinstance(exc, HTTPError)


def _map_client_error(exc: ClientError, bucket: str) -> MappedError:
    code = client_error_code(exc)
    status = client_error_status(exc)
    message = str(exc.response.get("Error", {}).get("Message", "") or "")
    cause = redact(f"{code}: {message}" if message and message != code else (code or f"HTTP {status}"))
    if code == "NoSuchBucket":
        return MappedError(ErrorKind.NOT_FOUND, f"bucket {bucket} does not exist", code)
    if code in _PRECONDITION or status == 412:
        return MappedError(ErrorKind.CONFLICT, cause, code, precondition=True)
    if code in _NOT_FOUND or status == 404:
        return MappedError(ErrorKind.NOT_FOUND, cause, code)
    if code in _PERMISSION or status in (401, 403):
        return MappedError(ErrorKind.PERMISSION, cause, code)
    if code in _INTEGRITY:
        return MappedError(ErrorKind.INTEGRITY, cause, code)
    if code in _LIMIT:
        return MappedError(ErrorKind.LIMIT_EXCEEDED, cause, code)
    if code in _UNAVAILABLE or status == 429 or status >= 500:
        return MappedError(ErrorKind.UNAVAILABLE, cause, code)
    return MappedError(ErrorKind.OTHER, cause, code)

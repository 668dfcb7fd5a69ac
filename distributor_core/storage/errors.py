"""Typed storage errors (core-semantics §8.4, interfaces §5.1)."""

from __future__ import annotations

from enum import StrEnum

from distributor_core.paths import display_path


class ErrorKind(StrEnum):
    NOT_FOUND = "not_found"
    ALREADY_EXISTS = "already_exists"
    NOT_EMPTY = "not_empty"
    INVALID_PATH = "invalid_path"
    PERMISSION = "permission"
    UNSUPPORTED = "unsupported"
    LIMIT_EXCEEDED = "limit_exceeded"
    #: a concurrent writer won (lock held, S3 precondition failed)
    CONFLICT = "conflict"
    #: transient transport failure (connection refused, timeout, 5xx, throttling)
    UNAVAILABLE = "unavailable"
    #: the server could not be authenticated: its SSH host key is unknown, changed or unverifiable
    #: (not transient: nothing was sent, and a retry meets the same key)
    UNTRUSTED = "untrusted"
    #: bytes written did not match the expected size or sha256
    INTEGRITY = "integrity"
    OTHER = "other"


class StorageError(Exception):
    """An operation on one backend path failed.

    ``str(err)`` is ``<op> <backend> <path>: <kind>[: <cause>]``; the cause never carries secrets.
    A ``message`` overrides the generic form for errors whose text the spec fixes
    (for example ``destination bundle path <p> is not empty after managed cleanup``).
    """

    def __init__(
        self,
        op: str,
        backend: str,
        path: str,
        kind: ErrorKind | str,
        cause: BaseException | str | None = None,
        *,
        message: str | None = None,
    ) -> None:
        self.op = op
        self.backend = backend
        self.path = path
        self.kind = ErrorKind(kind)
        self.cause = cause
        self.message = message
        super().__init__(str(self))

    def __str__(self) -> str:
        if self.message is not None:
            return self.message
        text = f"{self.op} {self.backend} {display_path(self.path)}: {self.kind.value}"
        if self.cause is not None:
            cause = str(self.cause) or type(self.cause).__name__
            text += f": {cause}"
        return text

    def __reduce__(self):  # keep errors picklable across process boundaries (Dagster, servers)
        return (
            _rebuild,
            (self.op, self.backend, self.path, self.kind.value, _cause_text(self.cause), self.message),
        )


def _cause_text(cause: BaseException | str | None) -> str | None:
    if cause is None:
        return None
    return str(cause) or type(cause).__name__


def _rebuild(op, backend, path, kind, cause, message):  # pragma: no cover - pickling helper
    return StorageError(op, backend, path, kind, cause, message=message)


def error_kind(err: BaseException) -> ErrorKind | None:
    """Kind of the first StorageError in ``err``'s cause/context chain, if any."""
    seen: set[int] = set()
    current: BaseException | None = err
    while current is not None and id(current) not in seen:
        if isinstance(current, StorageError):
            return current.kind
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def is_kind(err: BaseException, kind: ErrorKind) -> bool:
    return error_kind(err) == kind


def is_not_found(err: BaseException) -> bool:
    return is_kind(err, ErrorKind.NOT_FOUND)


def is_already_exists(err: BaseException) -> bool:
    return is_kind(err, ErrorKind.ALREADY_EXISTS)


def is_conflict(err: BaseException) -> bool:
    return is_kind(err, ErrorKind.CONFLICT)

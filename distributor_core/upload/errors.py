"""Errors raised by the upload client (interfaces §4.2).

``UploadError`` is the base. ``HTTPError`` carries the server's answer; ``IdempotencyConflictError``
is raised for every 409, so ``except HTTPError`` catches it too. Network failures after the last
attempt are ``UploadTransportError``; a set ``cancel_event`` raises ``UploadCancelledError``.

The client builds every message through a :class:`Redactor`, so no message, ``repr`` or cause text
contains the bearer token (it reads ``[redacted]``), even when a server echoes it.
"""

from __future__ import annotations

REDACTED = "[redacted]"


class Redactor:
    """Replaces every occurrence of a secret with ``[redacted]``."""

    def __init__(self, secret: str) -> None:
        self._secret = secret

    def __call__(self, text: str) -> str:
        if self._secret and self._secret in text:
            return text.replace(self._secret, REDACTED)
        return text

    def cut(self, text: str, limit: int) -> str:
        """``text`` redacted, then cut to at most ``limit`` UTF-8 bytes (never inside a
        character). Redacting first means a cut can never leave the beginning of the secret; a
        marker split by the cut is completed, so the result may end up to 9 bytes past ``limit``."""
        text = self(text)
        encoded = text.encode("utf-8")
        if len(encoded) <= limit:
            return text
        head = encoded[:limit].decode("utf-8", "ignore")
        start = text.find(REDACTED, max(0, len(head) - len(REDACTED) + 1))
        if 0 <= start < len(head):  # the cut split a marker: keep it whole
            return head[:start] + REDACTED
        return head

    def deep(self, value: object) -> object:
        """``value`` with every string inside (dict keys and values, list items) redacted."""
        if isinstance(value, str):
            return self(value)
        if isinstance(value, dict):
            return {self(k) if isinstance(k, str) else k: self.deep(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.deep(v) for v in value]
        return value

    def __repr__(self) -> str:
        return "Redactor([redacted])"


class UploadError(Exception):
    """Base class of every upload client error."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class HTTPError(UploadError):
    """The server answered with an unexpected HTTP status.

    ``message`` is the server's ``error`` field (else the trimmed body text, at most 1 KiB);
    ``retryable`` is the server's flag when it sent one; without a flag a ``409`` is not
    retryable (``False``: only the in-flight 409 carries ``true``), a ``503`` is (``True``), and
    other statuses give ``None``.
    """

    def __init__(self, status_code: int, status: str, message: str, retryable: bool | None = None) -> None:
        text = f"HTTP {status}: {message}" if message else f"HTTP {status}"
        super().__init__(text)
        self.text = text
        self.status_code = status_code
        self.status = status
        self.message = message
        self.retryable = retryable

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(status_code={self.status_code!r}, status={self.status!r}, "
            f"message={self.message!r}, retryable={self.retryable!r})"
        )


class IdempotencyConflictError(HTTPError):
    """409: the key is in flight (``retryable`` true) or was used for a different manifest."""


class UploadTransportError(UploadError):
    """The request failed at the network level (after every allowed attempt)."""

    def __init__(self, message: str, *, cause_type: str = "") -> None:
        super().__init__(message)
        self.cause_type = cause_type


class UploadCancelledError(UploadError):
    """``cancel_event`` was set before an attempt or while waiting to retry."""

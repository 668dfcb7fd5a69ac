"""Client options and the pre-flight checks of interfaces §4.2."""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from urllib.parse import urlsplit

PIPELINE_ID_RE = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9._-]*")
IDEMPOTENCY_KEY_RE = re.compile(r"[A-Za-z0-9._:-]{1,128}")

DEFAULT_ATTEMPTS = 3
DEFAULT_BASE_DELAY = 0.5
DEFAULT_MAX_DELAY = 5.0


@dataclass(frozen=True)
class RetryOptions:
    """Retry policy; zero selects the default (3 attempts in total, 0.5 s base, 5 s max).

    The delay before retry ``n`` (1 for the first retry) is ``min(base * 2**(n-1), max)``.
    """

    max_attempts: int = 0
    base_delay: float = 0.0
    max_delay: float = 0.0

    def validate(self) -> RetryOptions:
        if self.max_attempts < 0 or self.base_delay < 0 or self.max_delay < 0:
            raise ValueError("retry options must not be negative")
        if self.base_delay and self.max_delay and self.max_delay < self.base_delay:
            raise ValueError("retry max delay must be greater than or equal to base delay")
        return self

    @property
    def attempts(self) -> int:
        return self.max_attempts or DEFAULT_ATTEMPTS

    def delay(self, retry: int) -> float:
        base = self.base_delay or DEFAULT_BASE_DELAY
        ceiling = self.max_delay or max(DEFAULT_MAX_DELAY, base)
        return min(base * 2 ** (retry - 1), ceiling)


def clean_endpoint(endpoint: str) -> str:
    """Validate the server base URL; keep its path without the trailing ``/``."""
    if not endpoint:
        raise ValueError("endpoint is required")
    try:
        parts = urlsplit(endpoint)
    except ValueError:
        raise ValueError("endpoint must be an http or https URL") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("endpoint must be an http or https URL")
    if "@" in parts.netloc or parts.query or parts.fragment or "?" in endpoint or "#" in endpoint:
        raise ValueError("endpoint must not include userinfo, query, or fragment")
    return endpoint.rstrip("/")


def check_pipeline_id(pipeline_id: str) -> None:
    if not pipeline_id:
        raise ValueError("pipeline id is required")
    if not PIPELINE_ID_RE.fullmatch(pipeline_id) or not pipeline_id.isascii():
        raise ValueError("pipeline id must be a slug-like identifier")


def idempotency_key_or_new(key: str | None) -> str:
    """The caller's key when valid; a fresh 128-bit lowercase hex key when none was given."""
    if key is None:
        return secrets.token_hex(16)
    if not IDEMPOTENCY_KEY_RE.fullmatch(key) or not key.isascii():
        raise ValueError("idempotency key must be 1-128 ASCII letters, digits, '.', '_', '-', or ':'")
    return key


def check_validation_flags(validate: bool, disable_validation: bool) -> None:
    if validate and disable_validation:
        raise ValueError("validate and disable validation cannot both be set")

"""Secret resolution (interfaces §1.4, §3.1, §5.4).

A secret is named in the config (``upload_tokens[].token_env``,
``credentials.access_key_id_env``, ``credentials.secret_access_key_env``), never written in it.
:class:`Environment` resolves a name: the process environment first (an empty value counts as
set), then, when ``secrets.directory`` is configured, the regular file ``<directory>/<NAME>``
with surrounding whitespace stripped. Names containing ``/`` or ``\\`` and the names ``.`` and
``..`` are never looked up as files.

Resolution happens when a command sets up (``serve`` resolves upload tokens; run, prune and
reconcile-state resolve S3 credentials), never at config load. No message, ``repr`` or error
produced here contains a secret value.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import stat
from collections.abc import Mapping
from pathlib import Path

import msgspec

from distributor_core.config.errors import SecretError
from distributor_core.config.models import Config, S3Backend


def _is_file_lookup_name(name: str) -> bool:
    return name not in ("", ".", "..") and "/" not in name and "\\" not in name and "\0" not in name


class Environment:
    """Resolves secret names. ``environ`` defaults to ``os.environ`` (read at lookup time)."""

    def __init__(
        self,
        environ: Mapping[str, str] | None = None,
        *,
        secrets_directory: str | os.PathLike[str] | None = None,
    ) -> None:
        self._environ = os.environ if environ is None else environ
        self._directory = Path(secrets_directory) if secrets_directory else None

    @classmethod
    def from_config(cls, config: Config, environ: Mapping[str, str] | None = None) -> Environment:
        """The resolver a command uses: the process (or given) environment and ``secrets.directory``."""
        return cls(environ, secrets_directory=config.secrets.resolved_directory)

    @property
    def secrets_directory(self) -> Path | None:
        return self._directory

    def lookup(self, name: str) -> str | None:
        """The value of ``name``, or ``None`` when it is set nowhere.

        Raises :class:`SecretError` when a secret file exists but cannot be read or decoded.
        """
        value = self._environ.get(name)
        if value is not None:
            return value
        if self._directory is None or not _is_file_lookup_name(name):
            return None
        path = self._directory / name
        try:
            info = path.stat()
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as exc:
            raise SecretError(f"secret file {path} cannot be read: {exc.strerror or exc}", name=name) from None
        if not stat.S_ISREG(info.st_mode):
            return None
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise SecretError(f"secret file {path} cannot be read: {exc.strerror or exc}", name=name) from None
        try:
            return data.decode("utf-8").strip()
        except UnicodeDecodeError:
            raise SecretError(f"secret file {path} is not valid UTF-8", name=name) from None

    def __repr__(self) -> str:
        return f"Environment(secrets_directory={self._directory!r})"


# --- upload tokens ----------------------------------------------------------------------------


class UploadGrant(msgspec.Struct, frozen=True):
    """What one upload token may do: its record id and the upload pipelines it may submit to."""

    token_id: str
    pipelines: frozenset[str]

    def allows(self, pipeline_id: str) -> bool:
        return pipeline_id in self.pipelines


def _digest(value: str) -> bytes:
    return hashlib.sha256(value.encode("utf-8", "surrogatepass")).digest()


class UploadTokenTable(msgspec.Struct, frozen=True):
    """Resolved upload tokens. Keeps only sha256 digests of the values; compares in constant time."""

    _entries: tuple[tuple[bytes, UploadGrant], ...] = ()

    @property
    def grants(self) -> tuple[UploadGrant, ...]:
        """One grant per token record, in config order."""
        return tuple(grant for _, grant in self._entries)

    def authenticate(self, presented: str) -> UploadGrant | None:
        """The grant of the token whose value equals ``presented``, or ``None``."""
        candidate = _digest(presented)
        found: UploadGrant | None = None
        for digest, grant in self._entries:
            if hmac.compare_digest(digest, candidate) and found is None:
                found = grant
        return found

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"UploadTokenTable(token_ids={[grant.token_id for grant in self.grants]!r})"


def resolve_upload_tokens(config: Config, env: Environment) -> UploadTokenTable:
    """Resolve every ``upload_tokens`` record in order (interfaces §3.1); the first failure raises
    :class:`SecretError` with the exact startup message."""
    entries: list[tuple[bytes, UploadGrant]] = []
    first_owner: dict[bytes, str] = {}
    for token in config.upload_tokens:
        value = env.lookup(token.token_env)
        if value is None:
            raise SecretError(f"upload token {token.id} environment variable {token.token_env} is not set",
                              name=token.token_env)
        if value == "":
            raise SecretError(f"upload token {token.id} environment variable {token.token_env} is empty",
                              name=token.token_env)
        digest = _digest(value)
        if digest in first_owner:
            raise SecretError(
                "upload token environment variables for tokens "
                f"{first_owner[digest]} and {token.id} resolve to the same value"
            )
        first_owner[digest] = token.id
        entries.append((digest, UploadGrant(token.id, frozenset(token.allow_pipelines))))
    return UploadTokenTable(tuple(entries))


# --- S3 credentials ---------------------------------------------------------------------------


class S3SecretPair(msgspec.Struct, frozen=True):
    """Resolved S3 credentials. Its ``repr`` never shows the values."""

    access_key_id: str
    secret_access_key: str

    def __repr__(self) -> str:
        return "S3SecretPair(access_key_id=<redacted>, secret_access_key=<redacted>)"


def resolve_s3_credentials(
    backend: S3Backend, env: Environment, *, context: str | None = None
) -> S3SecretPair | None:
    """Resolve the configured credential names of an S3 backend.

    Returns ``None`` when no names are configured (boto3's default credential chain applies).
    Otherwise both names must resolve to non-empty values, else :class:`SecretError`, e.g.
    ``pipelines[0].destinations[0]: s3 access key id environment variable AWS_KEY is not set``.
    """
    if backend.credentials is None:
        return None
    prefix = f"{context}: " if context else ""
    values: list[str] = []
    for label, name in (
        ("access key id", backend.credentials.access_key_id_env),
        ("secret access key", backend.credentials.secret_access_key_env),
    ):
        value = env.lookup(name)
        if value is None:
            raise SecretError(f"{prefix}s3 {label} environment variable {name} is not set", name=name)
        if value == "":
            raise SecretError(f"{prefix}s3 {label} environment variable {name} is empty", name=name)
        values.append(value)
    return S3SecretPair(values[0], values[1])


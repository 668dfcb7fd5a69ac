"""Errors raised by the config package.

``ConfigError`` carries every message found while loading a config; ``str(error)`` is
``invalid config: <m1>; <m2>; ...`` (interfaces §1.1). The other errors name a lookup that
failed or a secret that could not be resolved; none of them ever contains a secret value.
"""

from __future__ import annotations

from collections.abc import Iterable


class ConfigError(Exception):
    """A config could not be loaded: YAML, schema or validation problems, all listed."""

    def __init__(self, messages: Iterable[str], *, source: str | None = None) -> None:
        self.messages: list[str] = list(messages)
        self.source = source
        super().__init__(str(self))

    def __str__(self) -> str:
        return "invalid config: " + "; ".join(self.messages)

    def __reduce__(self) -> tuple[object, ...]:
        # Survives pickling (process pools, Dagster run workers) with its message list intact.
        return (self.__class__, (self.messages,), {"source": self.source})


class ConfigFileError(ConfigError):
    """The config file could not be read at all (missing, unreadable, not UTF-8)."""

    def __str__(self) -> str:
        return "; ".join(self.messages)


class ConfigLookupError(LookupError):
    """A pipeline or destination id does not name anything in the loaded config."""

    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(message)

    def __str__(self) -> str:
        return self.message


class SecretError(Exception):
    """A secret name could not be resolved to a usable value. Never carries the value; ``name``
    is the secret's name (the environment variable or secret file) when one is at fault."""

    def __init__(self, message: str, *, name: str = "") -> None:
        self.message = message
        self.name = name
        super().__init__(message)

    def __reduce__(self) -> tuple[object, ...]:
        return (self.__class__, (self.message,), {"name": self.name})

    def __str__(self) -> str:
        return self.message

"""The options of a generated code location, declared once (dagster.md §1): :class:`BuildOptions`.

None of them changes what a publication does; they only shape the Dagster objects (names, sensor
cadence and default status, automation, checks). Each field says its type, default, description
and, where one exists, the environment variable of ``distributor_dagster.definitions``
(``json_schema_extra={"env": ...}``). ``build_definitions`` takes them as keyword arguments or as
one :class:`BuildOptions`; :class:`~distributor_dagster.DistributorComponent` *is* a
``BuildOptions`` with a ``config_path``, so its ``defs.yaml`` attributes, defaults and schema
come from here too; ``location.py`` reads the variables from the fields.

A pydantic model rather than a msgspec Struct (which the core's config uses): Dagster's
Components are pydantic models (``dg.Model``, ``dg.Resolvable``), so inheriting one declaration
is what lets the component, the keyword arguments and the variables share it; the Dagster side
imports pydantic anyway. Every refusal is a ``ValueError`` naming the option (an unknown option
is a ``TypeError``, as for any unexpected keyword).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import dagster as dg
from pydantic import ConfigDict, Field, ValidationError, field_validator

from distributor_dagster.names import CHECK_NAMES, check_prefix, sanitize

#: Checks whose failure blocks downstream assets (and fails the check step), by default.
DEFAULT_BLOCKING_CHECKS = ("managed_outputs_present",)

_TRUE, _FALSE = ("1", "true", "yes", "on"), ("", "0", "false", "no", "off")


class OptionError(ValueError):
    """An option refused; ``option`` names it (``str`` is the refusal, without pydantic's frame)."""

    def __init__(self, option: str, message: str) -> None:
        self.option = option
        super().__init__(message)


def _env(variable: str, **more: str) -> dict[str, str]:
    return {"env": variable, **more}


class BuildOptions(dg.Model):
    """Options of a generated code location (see the module doc; dagster.md "Loading the
    definitions" lists them with their defaults)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    sensor_interval: int = Field(
        default=30,
        description="Minimum seconds between ticks of every watch_*, uploads_* and automation sensor.",
        json_schema_extra=_env("DISTRIBUTOR_DAGSTER_SENSOR_INTERVAL", number="a number of seconds"),
    )
    default_sensor_status: Literal["running", "stopped"] = Field(
        default="stopped",
        description="stopped (Dagster's default: turn sensors on in the UI) or running (they run as soon as the "
        "daemon loads the code location).",
        json_schema_extra=_env("DISTRIBUTOR_DAGSTER_SENSOR_STATUS"),
    )
    name_prefix: str = Field(
        default="",
        description="Prepended to every generated job, sensor, op and group name (letters, digits, _), to load "
        "several configs into one code location.",
        json_schema_extra=_env("DISTRIBUTOR_DAGSTER_NAME_PREFIX"),
    )
    asset_key_prefix: tuple[str, ...] = Field(
        default=(), description="Components prepended to every asset key (sanitised like ids)."
    )
    max_runs_per_tick: int = Field(
        default=100, description="Run requests one sensor tick emits at most; the rest follow on the next tick."
    )
    bundles_per_run: int = Field(
        default=100,
        description="Bundles one run publishes at most when many are published at once: the backfill policy of "
        "per-bundle destinations (a backfill, a sensor tick that finds many new bundles), and the uploads one run "
        "of an http_upload pipeline publishes at most.",
        json_schema_extra=_env("DISTRIBUTOR_DAGSTER_BUNDLES_PER_RUN", number="a whole number"),
    )
    automation: Literal["sensors", "eager"] = Field(
        default="sensors",
        description="sensors (the watch sensor requests publish runs) or eager (destination assets of local, ssh "
        "and s3 pipelines carry AutomationCondition.eager() and publish when their source is observed with a new "
        "bundle; the watch sensor then only observes).",
        json_schema_extra=_env("DISTRIBUTOR_DAGSTER_AUTOMATION"),
    )
    blocking_checks: tuple[str, ...] = Field(
        default=DEFAULT_BLOCKING_CHECKS,
        description="Asset checks whose failure fails the check step and blocks downstream assets in the same run "
        "(a list, or its names comma-separated; none for none).",
        json_schema_extra=_env("DISTRIBUTOR_DAGSTER_BLOCKING_CHECKS"),
    )
    digest_checks: bool = Field(
        default=False,
        description="Add the outputs_match_digests check to every destination asset (re-reads every byte of every "
        "published output whenever it is evaluated).",
        json_schema_extra=_env("DISTRIBUTOR_DAGSTER_DIGEST_CHECKS"),
    )

    @field_validator("sensor_interval", mode="before")
    @classmethod
    def _seconds(cls, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"sensor_interval must be a positive number of seconds, got {value!r}")
        return value

    @field_validator("max_runs_per_tick", "bundles_per_run", mode="before")
    @classmethod
    def _positive(cls, value: Any, info: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{info.field_name} must be a positive integer, got {value!r}")
        return value

    @field_validator("default_sensor_status", mode="before")
    @classmethod
    def _status(cls, value: Any) -> str:
        if isinstance(value, dg.DefaultSensorStatus):
            return value.value.lower()
        if isinstance(value, str) and value.lower() in ("running", "stopped"):
            return value.lower()
        raise ValueError(f"default_sensor_status must be running or stopped, got {value!r}")

    @field_validator("name_prefix", mode="before")
    @classmethod
    def _prefix(cls, value: Any) -> str:
        if not isinstance(value, str):
            raise ValueError(f"name_prefix must contain only letters, digits and underscores, got {value!r}")
        return check_prefix(value, "name_prefix")

    @field_validator("asset_key_prefix", mode="before")
    @classmethod
    def _keys(cls, value: Any) -> tuple[str, ...]:
        keys = (value,) if isinstance(value, str) else tuple(value) if isinstance(value, Sequence) else (value,)
        if any(not isinstance(k, str) or not k for k in keys):
            raise ValueError(f"asset_key_prefix must be non-empty strings, got {value!r}")
        return tuple(sanitize(k) for k in keys)

    @field_validator("automation", mode="before")
    @classmethod
    def _automation(cls, value: Any) -> str:
        if not isinstance(value, str) or value.lower() not in ("sensors", "eager"):
            raise ValueError(f"automation must be sensors or eager, got {value!r}")
        return value.lower()

    @field_validator("blocking_checks", mode="before")
    @classmethod
    def _blocking(cls, value: Any) -> tuple[str, ...]:
        """Check names, as a sequence or a comma-separated string (``""`` or ``"none"``: none)."""
        if isinstance(value, str):
            value = [] if value.strip().lower() in ("", "none") else [part.strip() for part in value.split(",")]
        names = tuple(value)
        unknown = [name for name in names if name not in CHECK_NAMES]
        if unknown:
            raise ValueError(f"blocking_checks must name checks among {', '.join(CHECK_NAMES)}, got {unknown[0]!r}")
        return tuple(name for name in CHECK_NAMES if name in names)

    @field_validator("digest_checks", mode="before")
    @classmethod
    def _flag(cls, value: Any) -> bool:
        """A boolean, or its text (``true``/``1``/``yes``/``on``, ``false``/``0``/``no``/``off``)."""
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in _TRUE + _FALSE:
            return value.strip().lower() in _TRUE
        raise ValueError(f"digest_checks must be true or false, got {value!r}")

    @property
    def eager(self) -> bool:
        return self.automation == "eager"

    @property
    def sensor_status(self) -> dg.DefaultSensorStatus:
        """``default_sensor_status`` as Dagster takes it."""
        return dg.DefaultSensorStatus(self.default_sensor_status.upper())

    @classmethod
    def of(cls, values: Mapping[str, Any], base: BuildOptions | None = None) -> BuildOptions:
        """The options ``values`` (by name; the others from ``base``, else their defaults).
        :class:`OptionError` names a refused one; an unknown name is a ``TypeError``."""
        merged = {**(base.values() if base is not None else {}), **values}
        try:
            return cls.model_validate(merged)
        except ValidationError as exc:
            error = exc.errors()[0]
            option = str(error["loc"][0]) if error["loc"] else ""
            if error["type"] == "extra_forbidden":
                raise TypeError(f"build_definitions() got an unexpected keyword argument {option!r}") from None
            cause = (error.get("ctx") or {}).get("error")
            raise OptionError(option, str(cause) if cause is not None else f"{option}: {error['msg']}") from None

    def values(self) -> dict[str, Any]:
        """The options as keyword arguments (a subclass's own fields, such as a component's
        ``config_path``, left out)."""
        return {name: getattr(self, name) for name in BuildOptions.model_fields}

    @classmethod
    def variables(cls) -> dict[str, str]:
        """Option name → environment variable of ``distributor_dagster.definitions``."""
        return {name: extra["env"] for name, extra in _extras(cls).items() if "env" in extra}


def _extras(model: type[BuildOptions]) -> dict[str, dict[str, Any]]:
    extras: dict[str, dict[str, Any]] = {}
    for name, field in model.model_fields.items():
        extra = field.json_schema_extra
        extras[name] = dict(extra) if isinstance(extra, dict) else {}
    return extras


def number_words(option: str) -> str | None:
    """How an environment variable's whole-number option is named in its message (``a number of
    seconds``), ``None`` for an option given as text."""
    return _extras(BuildOptions)[option].get("number")

"""Keyword options of :func:`distributor_dagster.build_definitions` (dagster.md §1).

None of them changes what a publication does; they only shape the Dagster objects (names,
sensor cadence and default status) or inject test seams (clock, environment).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import dagster as dg

from distributor_core.timefmt import Clock
from distributor_dagster.names import CHECK_NAMES, check_prefix, sanitize

SENSOR_STATUSES = {"running": dg.DefaultSensorStatus.RUNNING, "stopped": dg.DefaultSensorStatus.STOPPED}

#: Upper bound of run requests one sensor tick emits; the cursor resumes after the last one.
DEFAULT_MAX_RUNS_PER_TICK = 100
#: Bundles one run publishes at most when many are published at once (a backfill, a sensor tick
#: that finds many new bundles): the backfill policy of per-bundle destination assets.
DEFAULT_BUNDLES_PER_RUN = 100

#: How destinations get published: ``sensors`` (``watch_<p>`` requests publish runs) or
#: ``eager`` (destination assets carry ``AutomationCondition.eager()``; ``watch_<p>`` only observes).
AUTOMATION_MODES = ("sensors", "eager")
#: Checks whose failure blocks downstream assets (and fails the check step), by default.
DEFAULT_BLOCKING_CHECKS = ("managed_outputs_present",)


def sensor_status(value: str | dg.DefaultSensorStatus) -> dg.DefaultSensorStatus:
    if isinstance(value, dg.DefaultSensorStatus):
        return value
    try:
        return SENSOR_STATUSES[value.lower()]
    except (KeyError, AttributeError):
        raise ValueError(f"default_sensor_status must be running or stopped, got {value!r}") from None


def automation_mode(value: str) -> str:
    if not isinstance(value, str) or value.lower() not in AUTOMATION_MODES:
        raise ValueError(f"automation must be sensors or eager, got {value!r}")
    return value.lower()


def parse_blocking_checks(value: Sequence[str] | str) -> tuple[str, ...]:
    """Check names, as a sequence or a comma-separated string (``""`` or ``"none"``: none)."""
    if isinstance(value, str):
        value = [] if value.strip().lower() in ("", "none") else [part.strip() for part in value.split(",")]
    names = tuple(value)
    unknown = [name for name in names if name not in CHECK_NAMES]
    if unknown:
        raise ValueError(f"blocking_checks must name checks among {', '.join(CHECK_NAMES)}, got {unknown[0]!r}")
    return tuple(name for name in CHECK_NAMES if name in names)


_TRUE, _FALSE = ("1", "true", "yes", "on"), ("", "0", "false", "no", "off")


def parse_flag(value: bool | str, option: str) -> bool:
    """A boolean option, or its text (``true``/``1``/``yes``/``on``, ``false``/``0``/``no``/``off``)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE + _FALSE:
        return value.strip().lower() in _TRUE
    raise ValueError(f"{option} must be true or false, got {value!r}")


@dataclass(frozen=True)
class BuildOptions:
    """Options of a generated code location.

    - ``sensor_interval``: ``minimum_interval_seconds`` of every ``watch_*`` and ``uploads_*`` sensor.
    - ``default_sensor_status``: ``"stopped"`` (Dagster's default; turn sensors on in the UI) or
      ``"running"`` (sensors run as soon as the daemon loads the code location).
    - ``name_prefix``: prepended to every job, sensor, op and group name (letters, digits, ``_``),
      for loading several configs into one code location.
    - ``asset_key_prefix``: components prepended to every asset key (sanitised like ids).
    - ``max_runs_per_tick``: bound of run requests one sensor tick emits; the rest follow next tick.
    - ``bundles_per_run``: bundles one run publishes at most when many are published at once (the
      backfill policy of per-bundle destination assets; the uploads of one ``uploads_<p>`` run).
    - ``automation``: ``"sensors"`` (default: ``watch_<p>`` requests publish runs) or ``"eager"``
      (destination assets of ``local``/``ssh``/``s3`` pipelines get ``AutomationCondition.eager()``
      and publish when their source is observed with a new bundle; ``watch_<p>`` then only observes).
    - ``blocking_checks``: checks whose failure blocks downstream assets and fails the check step
      (default ``("managed_outputs_present",)``; ``()`` for none).
    - ``digest_checks``: add the opt-in ``outputs_match_digests`` check to every destination asset
      (re-reads every byte of every published output when evaluated; :mod:`distributor_dagster.audit`).
    - ``clock``: stamps state times (a test seam; default the system clock).
    - ``environ``: where secrets resolve from (default ``os.environ``, then ``secrets.directory``).
    """

    sensor_interval: int = 30
    default_sensor_status: dg.DefaultSensorStatus = dg.DefaultSensorStatus.STOPPED
    name_prefix: str = ""
    asset_key_prefix: tuple[str, ...] = ()
    max_runs_per_tick: int = DEFAULT_MAX_RUNS_PER_TICK
    bundles_per_run: int = DEFAULT_BUNDLES_PER_RUN
    automation: str = "sensors"
    blocking_checks: tuple[str, ...] = DEFAULT_BLOCKING_CHECKS
    digest_checks: bool = False
    clock: Clock | None = field(default=None, compare=False)
    environ: Mapping[str, str] | None = field(default=None, compare=False)

    @property
    def eager(self) -> bool:
        return self.automation == "eager"

    @classmethod
    def create(
        cls,
        *,
        sensor_interval: int = 30,
        default_sensor_status: str | dg.DefaultSensorStatus = "stopped",
        name_prefix: str = "",
        asset_key_prefix: Sequence[str] | str = (),
        max_runs_per_tick: int = DEFAULT_MAX_RUNS_PER_TICK,
        bundles_per_run: int = DEFAULT_BUNDLES_PER_RUN,
        automation: str = "sensors",
        blocking_checks: Sequence[str] | str = DEFAULT_BLOCKING_CHECKS,
        digest_checks: bool | str = False,
        clock: Clock | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> BuildOptions:
        if isinstance(sensor_interval, bool) or not isinstance(sensor_interval, int) or sensor_interval < 1:
            raise ValueError(f"sensor_interval must be a positive number of seconds, got {sensor_interval!r}")
        for option, value in (("max_runs_per_tick", max_runs_per_tick), ("bundles_per_run", bundles_per_run)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{option} must be a positive integer, got {value!r}")
        keys = (asset_key_prefix,) if isinstance(asset_key_prefix, str) else tuple(asset_key_prefix)
        if any(not isinstance(k, str) or not k for k in keys):
            raise ValueError(f"asset_key_prefix must be non-empty strings, got {asset_key_prefix!r}")
        return cls(
            sensor_interval=sensor_interval,
            default_sensor_status=sensor_status(default_sensor_status),
            name_prefix=check_prefix(name_prefix, "name_prefix"),
            asset_key_prefix=tuple(sanitize(k) for k in keys),
            max_runs_per_tick=max_runs_per_tick,
            bundles_per_run=bundles_per_run,
            automation=automation_mode(automation),
            blocking_checks=parse_blocking_checks(blocking_checks),
            digest_checks=parse_flag(digest_checks, "digest_checks"),
            clock=clock,
            environ=environ,
        )

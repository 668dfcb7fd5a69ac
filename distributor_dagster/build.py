"""``build_definitions``: a distributor config compiled into Dagster ``Definitions`` (dagster.md §1–2).

Loading parses and validates the config only; it never opens storage or the network. Storage is
opened by steps, sensors and checks when they run, with secrets resolved at that moment.
"""

from __future__ import annotations

import os

import dagster as dg

from distributor_core.config import load_config
from distributor_dagster.assets import destination_asset
from distributor_dagster.checks import destination_checks
from distributor_dagster.maintenance.prune_job import prune_job
from distributor_dagster.maintenance.repair_job import repair_job
from distributor_dagster.names import config_names
from distributor_dagster.options import BuildOptions
from distributor_dagster.publish.job import publish_job
from distributor_dagster.sensors.uploads import uploads_sensor
from distributor_dagster.sensors.watch import watch_sensor
from distributor_dagster.site import Site


def build_site(config_path: str | os.PathLike[str], options: BuildOptions) -> Site:
    config = load_config(config_path)
    names = config_names(config, prefix=options.name_prefix, key_prefix=options.asset_key_prefix)
    return Site(config=config, options=options, names=tuple(names))


def definitions_for(site: Site) -> dg.Definitions:
    assets: list[dg.AssetSpec] = []
    checks: list[dg.AssetChecksDefinition] = []
    jobs: list[dg.JobDefinition] = []
    sensors: list[dg.SensorDefinition] = []
    for pipeline, names in zip(site.config.pipelines, site.names, strict=True):
        publish = publish_job(site, pipeline, names)
        jobs.append(publish)
        for destination in pipeline.destinations:
            dnames = names.destination(destination.id)
            assets.append(destination_asset(pipeline, destination, dnames, names))
            checks.append(destination_checks(site, pipeline, destination, dnames))
            jobs.append(prune_job(site, pipeline, destination, dnames))
            jobs.append(repair_job(site, pipeline, destination, dnames))
        if pipeline.is_upload:
            sensors.append(uploads_sensor(site, pipeline, names, publish))
        else:
            sensors.append(watch_sensor(site, pipeline, names, publish))
    return dg.Definitions(assets=assets, asset_checks=checks, jobs=jobs, sensors=sensors)


def build_definitions(config_path: str | os.PathLike[str], **options: object) -> dg.Definitions:
    """Compile the distributor config at ``config_path`` into Dagster definitions.

    Options (keyword arguments, see :class:`~distributor_dagster.options.BuildOptions`):
    ``sensor_interval`` (seconds, default 30), ``default_sensor_status`` (``"stopped"`` or
    ``"running"``), ``name_prefix``, ``asset_key_prefix``, ``max_runs_per_tick``, and the test
    seams ``clock`` and ``environ``.

    Raises :class:`~distributor_core.config.ConfigError` (its message is the CLI's) for an
    invalid config and :class:`~distributor_dagster.names.NameCollisionError` when two ids map to
    one Dagster name.
    """
    return definitions_for(build_site(config_path, BuildOptions.create(**options)))  # type: ignore[arg-type]

"""``build_definitions``: a distributor config compiled into Dagster ``Definitions`` (dagster.md §1–2).

Loading parses and validates the config only; it never opens storage or the network. Storage is
opened by steps, sensors and checks when they run, with secrets resolved at that moment.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import dagster as dg

from distributor_core.app.refusal import name_config
from distributor_core.config import load_config
from distributor_core.gcpause import gc_paused
from distributor_core.timefmt import Clock
from distributor_dagster.assets import source_assets
from distributor_dagster.maintenance.jobs import maintenance_jobs
from distributor_dagster.names import config_names
from distributor_dagster.options import BuildOptions
from distributor_dagster.publish.config import resource_key, settings_resource
from distributor_dagster.publish.graph import PublishSteps, publish_assets
from distributor_dagster.publish.job import PUBLISH_EXECUTOR, publish_job
from distributor_dagster.publish.routes import Routes
from distributor_dagster.sensors.uploads import uploads_sensor
from distributor_dagster.sensors.watch import watch_sensor
from distributor_dagster.site import Site
from distributor_dagster.specs import pipeline_specs
from distributor_dagster.translator import DistributorTranslator, check_settings

if TYPE_CHECKING:
    from dagster._core.definitions.unresolved_asset_job_definition import UnresolvedAssetJobDefinition


def build_site(
    config_path: str | os.PathLike[str], options: BuildOptions, translator: DistributorTranslator | None = None,
    *, clock: Clock | None = None, environ: Mapping[str, str] | None = None,
) -> Site:
    config = load_config(config_path)
    name_config(config_path)  # remedies in failure metadata name this config, to be run as printed
    check_settings(config.pipelines)
    translator = translator if translator is not None else DistributorTranslator()
    specs = tuple(pipeline_specs(translator, pipeline, options) for pipeline in config.pipelines)
    names = config_names(config, prefix=options.name_prefix, keys=[spec.keys() for spec in specs])
    return Site(config=config, options=options, names=tuple(names), specs=specs, clock=clock, environ=environ)


#: Destination assets one automation sensor evaluates at most: a tick's cost grows with the assets
#: (and partitions) it evaluates, so a large site gets several sensors, each bounded (Dagster itself
#: refuses more than 500 targets for a sensor evaluated in the code server).
AUTOMATION_TARGETS = 300


def automation_sensors(
    site: Site, publications: list[list[dg.AssetsDefinition]]
) -> list[dg.AutomationConditionSensorDefinition]:
    """The sensors that evaluate the destination assets' eager automation conditions: each
    pipeline's destinations in one sensor, at most :data:`AUTOMATION_TARGETS` destinations per
    sensor (``distributor_automation``, then ``distributor_automation_2``, ...)."""
    chunks: list[list[dg.AssetsDefinition]] = [[]]
    count = 0
    for pipeline_assets in publications:
        size = sum(len(a.keys) for a in pipeline_assets)
        if chunks[-1] and count + size > AUTOMATION_TARGETS:
            chunks.append([])
            count = 0
        chunks[-1].extend(pipeline_assets)
        count += size
    return [
        dg.AutomationConditionSensorDefinition(
            name=f"{site.options.name_prefix}distributor_automation" + (f"_{index}" if index > 1 else ""),
            target=dg.AssetSelection.assets(*chunk),
            default_status=site.options.sensor_status,
            minimum_interval_seconds=site.options.sensor_interval,
            description="Publishes destination assets whose source was observed with a new bundle "
            f"(automation: eager); sensor {index} of {len(chunks)}.",
        )
        for index, chunk in enumerate(chunks, start=1)
        if chunk
    ]


def definitions_for(site: Site) -> dg.Definitions:
    assets: list[dg.AssetsDefinition] = []
    jobs: list[dg.JobDefinition | UnresolvedAssetJobDefinition] = []
    sensors: list[dg.SensorDefinition] = []
    automated: list[list[dg.AssetsDefinition]] = []
    steps = PublishSteps(site, Routes(site))  # the op definitions every publish graph shares
    for pipeline, names in zip(site.config.pipelines, site.names, strict=True):
        publication = publish_assets(site, steps, pipeline, names)
        assets.extend([*source_assets(site, pipeline, names), *publication])
        if site.options.eager and not pipeline.is_upload:
            automated.append(publication)
        publish = publish_job(pipeline, names, site.options.name_prefix)
        jobs.append(publish)
        if pipeline.is_upload:
            sensors.append(uploads_sensor(site, pipeline, names, publish))
        else:
            sensors.append(watch_sensor(site, pipeline, names))
    if automated:
        sensors.extend(automation_sensors(site, automated))
    # the publish executor is the location's default: runs of the implicit asset job (Materialize
    # in the UI, `dagster asset materialize`, `dg launch --assets`, automation) use it too
    jobs.extend(maintenance_jobs(site))
    # the run settings every publish step reads (one config schema for the code location)
    resources = {resource_key(site.options.name_prefix): settings_resource(site.config)}
    return dg.Definitions(assets=assets, jobs=jobs, sensors=sensors, resources=resources, executor=PUBLISH_EXECUTOR)


def build_definitions(
    config_path: str | os.PathLike[str],
    options: BuildOptions | None = None,
    *,
    translator: DistributorTranslator | None = None,
    clock: Clock | None = None,
    environ: Mapping[str, str] | None = None,
    **values: Any,
) -> dg.Definitions:
    """Compile the distributor config at ``config_path`` into Dagster definitions.

    ``options``: a :class:`~distributor_dagster.options.BuildOptions`, and/or its fields as
    keyword arguments (``sensor_interval``, ``default_sensor_status``, ``name_prefix``,
    ``asset_key_prefix``, ``max_runs_per_tick``, ``bundles_per_run``, ``automation``,
    ``blocking_checks``, ``digest_checks``: the one declaration says their types and defaults);
    a refused value is a ``ValueError`` naming the option, an unknown one a ``TypeError``.

    ``translator``: how the assets look (keys, groups, descriptions, owners, tags, kinds, metadata,
    automation conditions, upstream deps); default :class:`~distributor_dagster.DistributorTranslator`,
    which applies the config's ``dagster`` blocks. The test seams: ``clock`` stamps state times,
    ``environ`` is where secrets resolve from (default ``os.environ``, then ``secrets.directory``).

    Raises :class:`~distributor_core.config.ConfigError` (its message is the CLI's) for an
    invalid config or a ``dagster`` block Dagster refuses, and
    :class:`~distributor_dagster.names.NameCollisionError` when two ids (or two translated asset
    keys) map to one Dagster name.
    """
    chosen = BuildOptions.of(values, options)
    # a code location of a thousand pipelines allocates millions of objects (specs, graphs, asset
    # definitions) and frees almost none of them: the cyclic collector would walk them over and over
    # (about a quarter of the build); it runs once, after the build, instead
    with gc_paused():
        return definitions_for(build_site(config_path, chosen, translator, clock=clock, environ=environ))

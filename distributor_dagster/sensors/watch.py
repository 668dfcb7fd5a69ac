"""``watch_<pipeline>``: observes a local, ssh or s3 source and publishes what changed (dagster.md §2,
resolutions E3, issue 12 items 1 and 6, issue 24).

Each tick walks the source once (:mod:`.source_scan`) and, for the bundles that are new or whose
manifest changed (complete ones only):

- adds their partitions (per-bundle destinations) and observes each of them with its digest as
  data version, so exactly those partitions of the destinations that hold an older version turn
  stale; a manifest that cannot be read fails the source check ``bundle_valid`` of its partition;
- requests their publication to the per-bundle destinations: one run for one bundle (run key
  ``<bundle path>@<digest>@<manifest stamp>``), a backfill for several, which Dagster splits into
  runs of at most ``bundles_per_run`` bundles (the assets' backfill policy);
- when the newest bundle changed, observes the source as a whole (or the newest bundle view of a
  mixed pipeline) and requests a run of the ``fixed`` destinations.

With ``automation="eager"`` the sensor only adds partitions and observes: the destination assets'
eager automation condition publishes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import dagster as dg
from dagster._core.definitions.assets.graph.asset_graph_subset import AssetGraphSubset
from dagster._core.definitions.events import AssetKeyPartitionKey
from dagster._core.events import DagsterEventType

from distributor_core import paths as lp
from distributor_core.app.setup import SetupError, check_source_root
from distributor_core.config import Pipeline
from distributor_core.storage.factory import open_source_storage
from distributor_dagster.checks import SOURCE_CHECK, Outcome
from distributor_dagster.names import PipelineNames
from distributor_dagster.partitions import PartitionSets, bundle_key, bundle_path, key_problem
from distributor_dagster.pools import ensure_pipeline_pools, pipeline_pools
from distributor_dagster.sensors.source_scan import Cursor, Scan, scan_source
from distributor_dagster.site import Site
from distributor_dagster.sources import SourceSnapshot
from distributor_dagster.tags import tag_value, tag_values
from distributor_dagster.versions import DATA_VERSION_TAG, data_version_tags

#: Partitions asked for their last observed digest per query.
_CHUNK = 500


def observed_digests(instance: dg.DagsterInstance, key: dg.AssetKey, paths: Sequence[str]) -> dict[str, str]:
    """Bundle path -> the digest its partition was last observed with (absent: never observed)."""
    found: dict[str, str] = {}
    storage = instance.event_log_storage
    for start in range(0, len(paths), _CHUNK):
        chunk = [bundle_key(p) for p in paths[start:start + _CHUNK] if key_problem(p) is None]
        if not chunk:
            continue
        tags = storage.get_latest_tags_by_partition(
            key, DagsterEventType.ASSET_OBSERVATION, [DATA_VERSION_TAG], asset_partitions=chunk
        )
        found.update({bundle_path(k): v[DATA_VERSION_TAG] for k, v in tags.items() if DATA_VERSION_TAG in v})
    return found


def departures(instance: dg.DagsterInstance, key: dg.AssetKey, keys: Sequence[str]) -> list[dg.AssetObservation]:
    """What the source partition of each bundle that left the source records: that it is no longer
    there (``in_source: false``), with the digest it was last observed with as its data version, so
    the destination partitions that still hold the bundle do not turn stale for it."""
    last = observed_digests(instance, key, [bundle_path(k) for k in keys])
    events = []
    for partition in keys:
        path = bundle_path(partition)
        digest = last.get(path)
        events.append(dg.AssetObservation(
            asset_key=key, partition=partition, tags=data_version_tags(digest) if digest else None,
            metadata={"bundle_path": lp.display_path(path), "in_source": False},
            description=f"bundle {lp.display_path(path)} is no longer in the source",
        ))
    return events


def _selection(names: PipelineNames, partitioned: bool) -> list[dg.AssetKey]:
    return [dg.AssetKey(list(d.asset_key)) for d in names.destinations if d.partitioned == partitioned]


def partition_requests(
    context: dg.SensorEvaluationContext, pipeline: Pipeline, names: PipelineNames, scan: Scan, keys: list[str]
) -> list[dg.RunRequest]:
    """One run for one found bundle, one backfill for several."""
    selection = _selection(names, True)
    tags = {"distributor/pipeline": pipeline.id}
    if len(scan.found) == 1:
        found = scan.found[0]
        return [dg.RunRequest(
            run_key=tag_value(found.key), partition_key=keys[0], asset_selection=selection,
            tags=tag_values({**tags, "distributor/bundle_id": found.seen.bundle_id,
                             "distributor/bundle_path": lp.display_path(found.bundle_path)}),
        )]
    repository = context.repository_def
    assert repository is not None, "the watch sensor needs its repository to request a backfill"
    subset = AssetGraphSubset.from_asset_partition_set(
        {AssetKeyPartitionKey(asset, key) for asset in selection for key in keys}, repository.asset_graph
    )
    return [dg.RunRequest.for_asset_graph_subset(subset, tags=tag_values(tags))]


def watch_sensor(site: Site, pipeline: Pipeline, names: PipelineNames) -> dg.SensorDefinition:
    backend = pipeline.source.backend
    options = site.options
    pools = pipeline_pools(pipeline)  # once, at load
    source_key = dg.AssetKey(list(names.source_key))
    whole_key = dg.AssetKey(list(names.newest_key or names.source_key))
    partitioned = names.partitioned
    fixed = bool(_selection(names, False))
    what = (
        "Observes the {backend} source of pipeline {pipeline} (its destination assets publish by their eager "
        "automation condition)" if options.eager else
        "Publishes each new or changed bundle in the {backend} source of pipeline {pipeline} to its "
        "destination assets, and observes the source"
    )

    @dg.sensor(
        name=names.watch_sensor,
        # an asset selection, not the job: a sensor may request a backfill only for its assets
        asset_selection=dg.AssetSelection.assets(*(dg.AssetKey(list(d.asset_key)) for d in names.destinations)),
        minimum_interval_seconds=options.sensor_interval,
        default_status=options.sensor_status,
        description=what.format(backend=backend, pipeline=pipeline.id) + ".",
    )
    def watch(context: dg.SensorEvaluationContext) -> dg.SensorResult:
        ensure_pipeline_pools(context, pools)
        cursor = Cursor.parse(context.cursor)

        def observed(paths: list[str]) -> Mapping[str, str]:
            return observed_digests(context.instance, source_key, paths)

        with open_source_storage(pipeline.source, site.environment(), dry_run=True) as source:
            try:  # a missing source root is this tick's error (resolutions G3), shown by Dagster
                check_source_root(pipeline, source)
            except SetupError as exc:
                context.log.error(str(exc))
                raise
            scan = scan_source(source, backend, cursor, observed=observed if partitioned else None)
        for path, problem in scan.invalid:
            context.log.warning(f"skipping bundle with an unreadable manifest: {lp.display_path(path)}: {problem}")
        if scan.incomplete:
            context.log.info("waiting for incomplete bundle(s): " + ", ".join(map(lp.display_path, scan.incomplete)))
        if scan.partial:
            context.log.info(f"read {scan.read} manifest(s); the next tick continues")
        events: list[dg.AssetObservation | dg.AssetCheckEvaluation] = []
        requests: list[dg.RunRequest] = []
        dynamic: list[dg.AddDynamicPartitionsRequest] = []
        if partitioned:
            found_keys = [bundle_key(f.bundle_path) for f in scan.found if key_problem(f.bundle_path) is None]
            for found in scan.found:
                problem = key_problem(found.bundle_path)
                if problem:
                    context.log.warning(problem)
            invalid_keys = [(bundle_key(p), e) for p, e in scan.invalid if key_problem(p) is None]
            sets = PartitionSets.read(context.instance, names.partitions, names.published)
            held: list[str] = []
            if not cursor.buckets:  # a first tick (or one after an upgrade): what they published
                held = sets.materialized(context.instance, _selection(names, True))
            changes = sets.follow_source(
                wanted=found_keys + [k for k, _ in invalid_keys], published=found_keys + held,
                present={bundle_key(p) for p in scan.paths if key_problem(p) is None},
                departed=lambda key: scan.may_have_left(bundle_path(key)),
                max_partitions=pipeline.dagster.max_partitions,
            )
            dynamic.extend(changes.requests(names.partitions, names.published))
            for line in changes.log_lines():
                context.log.info(line)
            events.extend(departures(context.instance, source_key, changes.departed))
            events.extend(f.seen.observation(source_key) for f in scan.found if key_problem(f.bundle_path) is None)
            for key, error in invalid_keys:
                outcome = Outcome(SOURCE_CHECK, False, f"bundle {key}: manifest.json: {error}",
                                  {"bundle_path": key, "file": "manifest.json"})
                events.append(outcome.evaluation(source_key, key, blocking=False))
            if found_keys and not options.eager:
                requests.extend(partition_requests(context, pipeline, names, scan, found_keys))
        observed_as = cursor.observed
        if not scan.partial:
            newest = scan.cursor.newest
            view = SourceSnapshot(scan.count, newest.seen() if newest is not None else None)
            observed_as = f"{view.data_version} {view.bundle_count}"
            if observed_as != cursor.observed and (names.newest_key is not None or not partitioned):
                events.append(view.observation(whole_key))
            if fixed and not options.eager and newest is not None and (
                    cursor.observed.split(" ")[0] != newest.digest):
                requests.append(dg.RunRequest(
                    run_key=tag_value(f"newest:{newest.path}@{newest.digest}"),
                    asset_selection=_selection(names, False),
                    tags=tag_values({"distributor/pipeline": pipeline.id, "distributor/bundle_id": newest.bundle_id,
                                     "distributor/bundle_path": lp.display_path(newest.path)}),
                ))
        scan.cursor.observed = observed_as
        skip = None if requests or events or dynamic else "no new or changed bundles"
        return dg.SensorResult(
            run_requests=requests,
            asset_events=events,
            dynamic_partitions_requests=dynamic,
            cursor=scan.cursor.format(),
            skip_reason=skip,
        )

    return watch

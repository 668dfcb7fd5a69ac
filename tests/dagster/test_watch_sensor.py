"""``watch_<pipeline>`` over local, s3 and ssh sources (resolutions E3, issues 24 and 28): new and
changed bundles become partitions observed with their digests and are published (one run keyed
``<bundle path>@<digest>@<manifest mtime or ETag>`` for one bundle, one backfill for several),
nothing on the next tick, bundles with missing or wrong-sized files skipped (stat only), a small
cursor, and the fixed destination published when the newest bundle changes."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import dagster as dg
import pytest

from distributor_core.bundle import load_manifest
from distributor_core.storage.local import LocalStorage
from distributor_core.timefmt import format_precise
from distributor_dagster import build_definitions
from distributor_dagster.sensors.source_scan import Cursor, scan_source
from tests.dagster.conftest import FROZEN, apply_tick, make_bundle, write_config

pytestmark = pytest.mark.dagster

LOCAL = """\
pipelines:
  - id: reports.daily
    source: {backend: local, path: source}
    destinations:
      - {id: archive, backend: local, path: out}
"""


def tick(defs: dg.Definitions, name: str, cursor: str | None, instance: dg.DagsterInstance) -> dg.SensorResult:
    sensor = defs.resolve_sensor_def(name)
    context = dg.build_sensor_context(cursor=cursor, instance=instance, definitions=defs)
    result = sensor(context)
    assert isinstance(result, dg.SensorResult)
    return result


def mtime_key(bundle: Path, bundle_path: str, *, whole_seconds: bool = False) -> str:
    mtime = (bundle / "manifest.json").stat().st_mtime
    stamp = format_precise(datetime.fromtimestamp(int(mtime) if whole_seconds else mtime, UTC))
    return f"{bundle_path}@{load_manifest(bundle).digest}@{stamp}"


ARCHIVE = dg.AssetKey(["reports_daily", "archive"])
SOURCE = dg.AssetKey(["reports_daily"])


def backfill_partitions(request: dg.RunRequest) -> dict[dg.AssetKey, set[str]]:
    """The asset partitions a backfill request targets."""
    subset = request.asset_graph_subset
    assert subset is not None, "not a backfill request"
    return {key: set(part.get_partition_keys()) for key, part in subset.partitions_subsets_by_asset_key.items()}


def test_new_bundles_become_partitions_published_in_one_backfill_and_a_reissue_in_one_run(
    tmp_path: Path, instance: dg.DagsterInstance
) -> None:
    first = make_bundle(tmp_path / "source" / "2026" / "d1", "reports.daily", {"r.md": "# one\n"})
    second = make_bundle(tmp_path / "source" / "2026" / "d2", "reports.weekly", {"r.md": "# two\n"})
    defs = build_definitions(write_config(tmp_path, LOCAL))
    result = tick(defs, "watch_reports_daily", None, instance)
    # the bundles become partitions of the source and of the destinations (which will hold them)
    added = {r.partitions_def_name: sorted(r.partition_keys) for r in result.dynamic_partitions_requests}
    assert added == {"reports_daily__bundles": ["2026/d1", "2026/d2"],
                     "reports_daily__published": ["2026/d1", "2026/d2"]}
    assert all(isinstance(r, dg.AddDynamicPartitionsRequest) for r in result.dynamic_partitions_requests)
    # both bundles in one backfill (Dagster splits it into runs of at most bundles_per_run bundles)
    (request,) = result.run_requests
    assert backfill_partitions(request) == {ARCHIVE: {"2026/d1", "2026/d2"}}
    assert request.tags == {"distributor/pipeline": "reports.daily"}
    # each bundle's partition of the source is observed with its digest
    observed = {e.partition: e for e in result.asset_events}
    assert {k: e.tags["dagster/data_version"] for k, e in observed.items()} == {
        "2026/d1": load_manifest(first).digest, "2026/d2": load_manifest(second).digest,
    }
    assert all(e.asset_key == SOURCE for e in result.asset_events)
    assert observed["2026/d2"].metadata["bundle_id"].value == "reports.weekly"
    assert isinstance(observed["2026/d1"].metadata["created"], dg.TimestampMetadataValue)
    apply_tick(instance, result)

    again = tick(defs, "watch_reports_daily", result.cursor, instance)
    assert again.run_requests == [] and again.asset_events == [] and not again.dynamic_partitions_requests
    assert again.skip_reason is not None

    # the producer re-issues d1: exactly that bundle is observed anew and published, in one run
    make_bundle(first, "reports.daily", {"r.md": "# one, corrected\n"})
    changed = tick(defs, "watch_reports_daily", again.cursor, instance)
    (single,) = changed.run_requests
    assert single.run_key == mtime_key(first, "2026/d1")
    assert single.partition_key == "2026/d1" and single.asset_selection == [ARCHIVE]
    assert single.tags == {
        "distributor/pipeline": "reports.daily",
        "distributor/bundle_id": "reports.daily",
        "distributor/bundle_path": "2026/d1",
    }
    (observation,) = changed.asset_events
    assert (observation.partition, observation.tags["dagster/data_version"]) == ("2026/d1", load_manifest(first).digest)
    assert not changed.dynamic_partitions_requests  # the partition exists
    apply_tick(instance, changed)

    # the request is a valid run of the publish job: it publishes exactly that bundle
    job = defs.resolve_job_def("publish_reports_daily")
    run = job.execute_in_process(partition_key=single.partition_key, instance=instance)
    assert run.success
    assert (tmp_path / "out" / "2026" / "d1" / "r.md").read_text() == "# one, corrected\n"
    assert not (tmp_path / "out" / "2026" / "d2").exists()


def test_a_lost_cursor_requests_nothing_that_was_observed(tmp_path: Path, instance: dg.DagsterInstance) -> None:
    """The memory of what was seen is Dagster's own (partitions, their observed digests), not the
    cursor: a tick that starts over reads the manifests again but requests nothing new."""
    for name in ("a", "b"):
        make_bundle(tmp_path / "source" / name, "reports.daily", {"x.txt": name})
    defs = build_definitions(write_config(tmp_path, LOCAL))
    first = tick(defs, "watch_reports_daily", None, instance)
    apply_tick(instance, first)
    fresh = tick(defs, "watch_reports_daily", None, instance)
    assert fresh.run_requests == [] and fresh.asset_events == [] and not fresh.dynamic_partitions_requests


def test_incomplete_bundles_wait_and_nothing_is_hashed(tmp_path: Path, instance: dg.DagsterInstance) -> None:
    bundle = make_bundle(tmp_path / "source" / "b", "reports.daily", {"a.txt": "aaaa\n", "b.txt": "bbbb\n"})
    (bundle / "b.txt").unlink()
    defs = build_definitions(write_config(tmp_path, LOCAL))
    missing = tick(defs, "watch_reports_daily", None, instance)
    assert missing.run_requests == [] and missing.asset_events == []

    (bundle / "b.txt").write_text("bb\n")  # wrong size
    short = tick(defs, "watch_reports_daily", missing.cursor, instance)
    assert short.run_requests == []

    (bundle / "b.txt").write_text("XXXX\n")  # right size, wrong bytes: stat only, validate will catch it
    complete = tick(defs, "watch_reports_daily", short.cursor, instance)
    assert [r.run_key for r in complete.run_requests] == [mtime_key(bundle, "b")]
    apply_tick(instance, complete)
    assert tick(defs, "watch_reports_daily", complete.cursor, instance).run_requests == []


def test_an_unreadable_manifest_fails_the_source_check_once_and_is_read_again_when_it_changes(
    tmp_path: Path, instance: dg.DagsterInstance
) -> None:
    broken = tmp_path / "source" / "broken"
    broken.mkdir(parents=True)
    (broken / "manifest.json").write_text("{not json")
    defs = build_definitions(write_config(tmp_path, LOCAL))
    first = tick(defs, "watch_reports_daily", None, instance)
    assert first.run_requests == []
    (evaluation,) = first.asset_events
    assert isinstance(evaluation, dg.AssetCheckEvaluation)
    assert (evaluation.asset_key, evaluation.check_name, evaluation.partition) == (SOURCE, "bundle_valid", "broken")
    assert evaluation.passed is False and "manifest.json" in evaluation.description
    assert [list(r.partition_keys) for r in first.dynamic_partitions_requests] == [["broken"]]
    apply_tick(instance, first)
    again = tick(defs, "watch_reports_daily", first.cursor, instance)
    assert again.asset_events == [] and again.cursor == first.cursor

    make_bundle(broken, "reports.daily", {"ok.txt": "ok\n"})
    os.utime(broken / "manifest.json", (1_900_000_000, 1_900_000_000))
    fixed = tick(defs, "watch_reports_daily", first.cursor, instance)
    assert [r.run_key for r in fixed.run_requests] == [mtime_key(broken, "broken")]


def test_the_cursor_stays_small_and_a_new_bundle_reads_only_its_bucket(tmp_path: Path) -> None:
    """Issue 28: the cursor does not grow with the bundles, and a tick reads the manifests of the
    bucket a change fell into, not the whole source."""
    source = tmp_path / "source"
    for index in range(300):
        make_bundle(source / f"2026-01-{index:03d}", "reports.daily", {"r.txt": f"{index}\n"})
    storage = LocalStorage(source)
    seen: dict[str, str] = {}

    def observed(paths: list[str]) -> dict[str, str]:
        return {path: seen[path] for path in paths if path in seen}

    first = scan_source(storage, "local", Cursor(), observed=observed)
    assert first.read == 300 and len(first.found) == 300
    seen.update({found.bundle_path: found.seen.digest for found in first.found})
    cursor = first.cursor.format()
    assert len(cursor) < 8 * 1024
    steady = scan_source(storage, "local", Cursor.parse(cursor), observed=observed)
    assert steady.read == 0 and steady.found == []
    make_bundle(source / "2026-02-001", "reports.daily", {"r.txt": "new\n"})
    later = scan_source(storage, "local", Cursor.parse(cursor), observed=observed)
    assert [found.bundle_path for found in later.found] == ["2026-02-001"]
    assert later.read <= 5


MIXED = """\
pipelines:
  - id: reports.daily
    source: {backend: local, path: source}
    destinations:
      - {id: archive, backend: local, path: out/archive}
      - {id: latest, backend: local, path: out/latest, path_mapping: {mode: fixed}}
"""


def test_the_fixed_destination_is_published_when_the_newest_bundle_changes_only(
    tmp_path: Path, instance: dg.DagsterInstance
) -> None:
    """Issue 24 item 2: ``latest`` takes the newest bundle; an older bundle re-issued with a time
    that keeps it older is published to the archive only, and the newest view does not move."""
    older = make_bundle(tmp_path / "source" / "d1", "reports.daily", {"r.md": "# one\n"}, created=FROZEN)
    newer = make_bundle(tmp_path / "source" / "d2", "reports.daily", {"r.md": "# two\n"},
                        created=FROZEN + timedelta(days=1))
    defs = build_definitions(write_config(tmp_path, MIXED))
    first = tick(defs, "watch_reports_daily", None, instance)
    fixed = [r for r in first.run_requests if r.asset_graph_subset is None]
    (run,) = fixed
    assert run.asset_selection == [dg.AssetKey(["reports_daily", "latest"])]
    assert run.run_key == f"newest:d2@{load_manifest(newer).digest}"
    newest = [e for e in first.asset_events if e.asset_key == dg.AssetKey(["reports_daily", "newest"])]
    assert [e.tags["dagster/data_version"] for e in newest] == [load_manifest(newer).digest]
    apply_tick(instance, first)

    make_bundle(older, "reports.daily", {"r.md": "# one, fixed\n"}, created=FROZEN + timedelta(hours=1))
    reissued = tick(defs, "watch_reports_daily", first.cursor, instance)
    (request,) = reissued.run_requests
    assert request.partition_key == "d1" and request.asset_selection == [dg.AssetKey(["reports_daily", "archive"])]
    assert [e.partition for e in reissued.asset_events] == ["d1"]  # the newest view did not move


@pytest.mark.s3
def test_s3_source_runs_are_keyed_by_the_manifest_etag(
    tmp_path: Path, moto_server, instance: dg.DagsterInstance
) -> None:
    bucket = moto_server.create_bucket()
    bundle = make_bundle(tmp_path / "bundle", "reports.daily", {"r.md": "# s3\n", "data/d.csv": "1\n"})
    client = moto_server.client()
    for path in ("r.md", "data/d.csv", "manifest.json"):
        client.put_object(Bucket=bucket, Key=f"in/day1/{path}", Body=(bundle / path).read_bytes())
    etag = client.head_object(Bucket=bucket, Key="in/day1/manifest.json")["ETag"]
    config = write_config(
        tmp_path,
        f"""\
        pipelines:
          - id: reports.daily
            source:
              backend: s3
              bucket: {bucket}
              prefix: in
              endpoint: {moto_server.endpoint_url}
              force_path_style: true
              credentials: {{access_key_id_env: TEST_S3_KEY, secret_access_key_env: TEST_S3_SECRET}}
            destinations:
              - {{id: archive, backend: local, path: out}}
        """,
    )
    environ = {"TEST_S3_KEY": moto_server.access_key_id, "TEST_S3_SECRET": moto_server.secret_access_key}
    defs = build_definitions(config, environ=environ)
    result = tick(defs, "watch_reports_daily", None, instance)
    (request,) = result.run_requests
    assert request.run_key == f"day1@{load_manifest(bundle).digest}@{etag}"
    assert tick(defs, "watch_reports_daily", result.cursor, instance).run_requests == []
    run = defs.resolve_job_def("publish_reports_daily").execute_in_process(
        run_config=request.run_config, instance=instance
    )
    assert run.success
    assert (tmp_path / "out" / "day1" / "data" / "d.csv").read_text() == "1\n"


@pytest.mark.sftp
def test_ssh_source_runs_are_keyed_by_the_manifest_mtime(
    tmp_path: Path, sshd_server, instance: dg.DagsterInstance
) -> None:
    root = sshd_server.make_sftp_root()
    bundle = make_bundle(root / "day1", "reports.daily", {"r.md": "# ssh\n"})
    sshd_server.chown_to_user(root)
    config = write_config(
        tmp_path,
        f"""\
        pipelines:
          - id: reports.daily
            source:
              backend: ssh
              host: {sshd_server.host}
              port: {sshd_server.port}
              user: {sshd_server.user}
              path: {root}
              private_key_file: {sshd_server.client_key_path}
              known_hosts_file: {sshd_server.known_hosts_path}
            destinations:
              - {{id: archive, backend: local, path: out}}
        """,
    )
    defs = build_definitions(config)
    result = tick(defs, "watch_reports_daily", None, instance)
    (request,) = result.run_requests
    assert request.run_key == mtime_key(bundle, "day1", whole_seconds=True)  # SFTP reports whole seconds
    assert tick(defs, "watch_reports_daily", result.cursor, instance).run_requests == []


def test_a_first_tick_gives_the_destinations_back_the_partitions_they_published(
    tmp_path: Path, instance: dg.DagsterInstance
) -> None:
    """Issue 37: the destinations have partitions of their own (``<p>__published``). A deployment
    upgraded from one where they shared the source's gets them back at the watch sensor's first
    tick (its cursor format changed): the bundles they materialized, nothing else."""
    for name in ("a", "b", "c"):
        make_bundle(tmp_path / "source" / name, "reports.daily", {"x.txt": name})
    defs = build_definitions(write_config(tmp_path, LOCAL))
    first = tick(defs, "watch_reports_daily", None, instance)
    apply_tick(instance, first)
    job = defs.resolve_job_def("publish_reports_daily")
    for name in ("a", "b"):
        assert job.execute_in_process(partition_key=name, instance=instance).success
    for key in instance.get_dynamic_partitions("reports_daily__published"):  # as before the upgrade
        instance.delete_dynamic_partition("reports_daily__published", key)
    upgraded = tick(defs, "watch_reports_daily", "{\"v\": 3, \"b\": {}}", instance)
    (added,) = upgraded.dynamic_partitions_requests
    assert (added.partitions_def_name, sorted(added.partition_keys)) == ("reports_daily__published", ["a", "b"])
    apply_tick(instance, upgraded)
    later = tick(defs, "watch_reports_daily", upgraded.cursor, instance)
    assert not later.dynamic_partitions_requests

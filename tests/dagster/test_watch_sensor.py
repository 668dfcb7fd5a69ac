"""``watch_<pipeline>`` over local, s3 and ssh sources (resolutions E3): one run per new or changed
bundle keyed ``<bundle path>@<digest>@<manifest mtime or ETag>``, none on the next tick, and
bundles with missing or wrong-sized files skipped (stat only)."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import pytest

from distributor_core.bundle import load_manifest
from distributor_core.timefmt import format_precise
from distributor_dagster import build_definitions
from tests.dagster.conftest import make_bundle, write_config

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


def test_one_run_per_new_bundle_and_none_on_the_next_tick(tmp_path: Path, instance: dg.DagsterInstance) -> None:
    first = make_bundle(tmp_path / "source" / "2026" / "d1", "reports.daily", {"r.md": "# one\n"})
    make_bundle(tmp_path / "source" / "2026" / "d2", "reports.weekly", {"r.md": "# two\n"})
    defs = build_definitions(write_config(tmp_path, LOCAL))
    result = tick(defs, "watch_reports_daily", None, instance)
    requests = sorted(result.run_requests, key=lambda r: r.run_key)
    assert [r.run_key for r in requests] == [
        mtime_key(first, "2026/d1"), mtime_key(tmp_path / "source" / "2026" / "d2", "2026/d2")
    ]
    assert requests[0].run_config == {"ops": {"reports_daily": {"config": {"bundle_path": "2026/d1"}}}}
    assert requests[0].tags == {
        "distributor/pipeline": "reports.daily",
        "distributor/bundle_id": "reports.daily",
        "distributor/bundle_path": "2026/d1",
    }
    assert requests[1].tags["distributor/bundle_id"] == "reports.weekly"
    # the tick observes the source asset: the newest bundle (same created time: the first path)
    (observation,) = result.asset_events
    assert observation.asset_key == dg.AssetKey(["reports_daily"])
    assert observation.tags["dagster/data_version"] == load_manifest(first).digest
    assert observation.metadata["bundle_count"].value == 2
    assert observation.metadata["newest_bundle"].value == "2026/d1"
    assert observation.metadata["newest_id"].value == "reports.daily"
    assert isinstance(observation.metadata["newest_created"], dg.TimestampMetadataValue)

    again = tick(defs, "watch_reports_daily", result.cursor, instance)
    assert again.run_requests == [] and again.asset_events == []
    assert again.skip_reason is not None

    make_bundle(first, "reports.daily", {"r.md": "# one, corrected\n"})
    changed = tick(defs, "watch_reports_daily", again.cursor, instance)
    assert [r.run_key for r in changed.run_requests] == [mtime_key(first, "2026/d1")]
    assert changed.run_requests[0].run_key != requests[0].run_key
    (observation,) = changed.asset_events
    assert observation.tags["dagster/data_version"] == load_manifest(first).digest

    # the request is a valid run of the publish job
    job = defs.resolve_job_def("publish_reports_daily")
    run = job.execute_in_process(run_config=changed.run_requests[0].run_config, instance=instance)
    assert run.success
    assert (tmp_path / "out" / "2026" / "d1" / "r.md").read_text() == "# one, corrected\n"
    assert not (tmp_path / "out" / "2026" / "d2").exists()


def test_incomplete_bundles_wait_and_nothing_is_hashed(tmp_path: Path, instance: dg.DagsterInstance) -> None:
    bundle = make_bundle(tmp_path / "source" / "b", "reports.daily", {"a.txt": "aaaa\n", "b.txt": "bbbb\n"})
    (bundle / "b.txt").unlink()
    defs = build_definitions(write_config(tmp_path, LOCAL))
    missing = tick(defs, "watch_reports_daily", None, instance)
    assert missing.run_requests == []

    (bundle / "b.txt").write_text("bb\n")  # wrong size
    short = tick(defs, "watch_reports_daily", missing.cursor, instance)
    assert short.run_requests == []

    (bundle / "b.txt").write_text("XXXX\n")  # right size, wrong bytes: stat only, validate will catch it
    complete = tick(defs, "watch_reports_daily", short.cursor, instance)
    assert [r.run_key for r in complete.run_requests] == [mtime_key(bundle, "b")]
    assert tick(defs, "watch_reports_daily", complete.cursor, instance).run_requests == []


def test_an_unreadable_manifest_is_reported_once_and_read_again_only_when_it_changes(
    tmp_path: Path, instance: dg.DagsterInstance
) -> None:
    broken = tmp_path / "source" / "broken"
    broken.mkdir(parents=True)
    (broken / "manifest.json").write_text("{not json")
    defs = build_definitions(write_config(tmp_path, LOCAL))
    first = tick(defs, "watch_reports_daily", None, instance)
    assert first.run_requests == []
    remembered = json.loads(first.cursor)["bundles"]["broken"]
    assert remembered.startswith("broken@invalid@")
    assert tick(defs, "watch_reports_daily", first.cursor, instance).cursor == first.cursor

    make_bundle(broken, "reports.daily", {"ok.txt": "ok\n"})
    os.utime(broken / "manifest.json", (1_900_000_000, 1_900_000_000))
    fixed = tick(defs, "watch_reports_daily", first.cursor, instance)
    assert [r.run_key for r in fixed.run_requests] == [mtime_key(broken, "broken")]


def test_run_requests_per_tick_are_bounded(tmp_path: Path, instance: dg.DagsterInstance) -> None:
    for name in ("a", "b", "c"):
        make_bundle(tmp_path / "source" / name, "reports.daily", {"x.txt": name})
    defs = build_definitions(write_config(tmp_path, LOCAL), max_runs_per_tick=2)
    first = tick(defs, "watch_reports_daily", None, instance)
    assert [r.tags["distributor/bundle_path"] for r in first.run_requests] == ["a", "b"]
    second = tick(defs, "watch_reports_daily", first.cursor, instance)
    assert [r.tags["distributor/bundle_path"] for r in second.run_requests] == ["c"]
    assert tick(defs, "watch_reports_daily", second.cursor, instance).run_requests == []


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

"""Dagster publication from a shared ``s3://`` staging store (issue 29 item 3), against a real moto
server on 127.0.0.1 with authentication enforced: uploads are staged in the bucket as ``serve``
replicas stage them (:class:`~distributor_core.staging.objectstore.ObjectStagingStore`: bundle,
key, pending marker, record), the uploads sensor lists the store's pending markers, and the
publish run reads each bundle from the bucket and writes the record's status there: no local
staging directory is involved."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from distributor_core import staging as sg
from distributor_core.config import load_config
from distributor_core.staging.objectstore import ObjectStagingStore
from distributor_core.staging.ordering import marker_name
from distributor_core.staging.pending import PendingCursor
from distributor_core.storage import Storage
from distributor_core.timefmt import compact_stamp
from distributor_dagster import build_definitions
from distributor_dagster.describe import root_text
from tests.dagster.conftest import FROZEN, events_of, make_bundle, observations, write_config
from tests.dagster.reconstruct import reconstructable_job
from tests.peers.moto import MotoServer, make_s3_storage

pytestmark = pytest.mark.dagster

PIPELINE = "reports.daily"
PREFIX = "staging"
KEY_ENV, SECRET_ENV = "TEST_STAGING_KEY_ID", "TEST_STAGING_SECRET"
SENSOR, JOB = "uploads_reports_daily", "publish_reports_daily"


@dataclass
class Shared:
    """A site staging its uploads in ``s3://<bucket>/staging`` of the moto server."""

    server: MotoServer
    bucket: str
    config: Path
    root: Path
    #: this host's scratch directory for ``serve`` (the system temp directory is pointed here)
    scratch: Path
    storages: list[Storage]

    def replica(self) -> ObjectStagingStore:
        """A ``serve`` replica's view of the pipeline's staging store (its own connection)."""
        storage = make_s3_storage(self.server, bucket=self.bucket, prefix=f"{PREFIX}/{PIPELINE}",
                                  conditional_writes="trusted")
        self.storages.append(storage)
        return ObjectStagingStore(storage, PIPELINE)

    def keys(self, below: str) -> list[str]:
        """The object keys under ``staging/reports.daily/<below>``, behind the store's back."""
        client = self.server.client()
        try:
            found = client.list_objects_v2(Bucket=self.bucket, Prefix=f"{PREFIX}/{PIPELINE}/{below}")
        finally:
            client.close()
        return sorted(item["Key"] for item in found.get("Contents", []))


@pytest.fixture
def shared(tmp_path: Path, moto_server: MotoServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[Shared]:
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    # credentials resolve from the environment by name, as for an S3 destination (also in the
    # job that dagster.execute_job rebuilds from the config)
    monkeypatch.setenv(KEY_ENV, moto_server.access_key_id)
    monkeypatch.setenv(SECRET_ENV, moto_server.secret_access_key)
    bucket = moto_server.create_bucket()
    config = write_config(tmp_path, f"""\
        server:
          http:
            bind: "127.0.0.1:0"
            staging_root: s3://{bucket}/{PREFIX}
            staging_s3:
              endpoint: {moto_server.endpoint_url}
              region: {moto_server.region}
              force_path_style: true
              conditional_writes: trusted
              credentials: {{access_key_id_env: {KEY_ENV}, secret_access_key_env: {SECRET_ENV}}}
        upload_tokens:
          - {{id: producer, token_env: TEST_UPLOAD_TOKEN, allow_pipelines: [{PIPELINE}]}}
        pipelines:
          - id: {PIPELINE}
            source: {{backend: http_upload}}
            destinations:
              - {{id: archive, backend: local, path: out/archive}}
              - {{id: mirror, backend: local, path: out/mirror}}
        """)
    site = Shared(moto_server, bucket, config, tmp_path, scratch, [])
    try:
        yield site
    finally:
        for storage in site.storages:
            storage.close()


def stage(shared: Shared, store: ObjectStagingStore, index: int, *, seq: int | None = None) -> str:
    """Admit upload ``index`` (version ``index`` of bundle ``reports.daily``, ``r.md`` = ``# index``)
    as a replica does: bundle, idempotency key claim, record, claim settled, pending marker."""
    bundle = make_bundle(shared.root / f"bundle{index}", PIPELINE, {"r.md": f"# {index}\n"},
                         created=FROZEN + timedelta(minutes=index))
    manifest: dict[str, Any] = json.loads((bundle / "manifest.json").read_text())
    run_id = f"{PIPELINE}.{compact_stamp(FROZEN)}.{index:08x}"
    key = f"key-{index}"
    files = [("manifest.json", None, None), *((f["path"], f["size"], f["sha256"]) for f in manifest["files"])]
    store.put_bundle(run_id, bundle, files)
    shutil.rmtree(bundle)  # the publication can only read it from the bucket
    claim = store.claim_key("producer", key, run_id)
    assert claim.claimed
    record = sg.UploadRecord(
        run_id=run_id, seq=seq if seq is not None else store.next_number(), pipeline_id=PIPELINE,
        token_id="producer", idempotency_key=key, manifest=manifest,
        response={"run_id": run_id, "status": "accepted"}, status=sg.ACCEPTED, accepted_at=FROZEN,
    )
    return store.admit(record, claim=claim.lease).record.run_id


def tick(defs: dg.Definitions, cursor: str | None, instance: dg.DagsterInstance) -> dg.SensorResult:
    sensor = defs.resolve_sensor_def(SENSOR)
    return sensor(dg.build_sensor_context(cursor=cursor, instance=instance, definitions=defs))


def upload_ids(request: dg.RunRequest) -> list[str]:
    return request.run_config["resources"]["publish"]["config"]["upload_run_ids"]


def assert_no_local_staging(shared: Shared) -> None:
    assert not (shared.scratch / "distributor-staging").exists()
    assert not (shared.root / ".distributor").exists()


def test_the_sensor_lists_the_bucket_and_runs_publish_each_upload_from_it(
    shared: Shared, instance: dg.DagsterInstance
) -> None:
    store = shared.replica()
    run_ids = [stage(shared, store, index) for index in range(3)]
    defs = build_definitions(shared.config, bundles_per_run=2)

    first = tick(defs, None, instance)
    assert [r.run_key for r in first.run_requests] == [f"{run_ids[0]}..{run_ids[1]}", run_ids[2]]
    assert [upload_ids(r) for r in first.run_requests] == [run_ids[:2], run_ids[2:]]
    assert first.run_requests[1].tags["distributor/upload_run_id"] == run_ids[2]
    (observation,) = first.asset_events
    assert observation.metadata["newest_upload"].value == run_ids[-1]
    assert "uploads_admitted" not in observation.metadata  # a shared store keeps no admission count
    assert PendingCursor.parse(first.cursor).handed == {
        marker_name(r.seq, r.run_id) for r in (store.read(run_id).record for run_id in run_ids)  # type: ignore[union-attr]
    }
    second = tick(defs, first.cursor, instance)
    assert second.run_requests == [] and second.skip_reason is not None
    assert second.skip_reason.skip_message == "no new uploads"

    job = defs.resolve_job_def(JOB)
    published: dict[str, str] = {}
    for request in first.run_requests:
        result = job.execute_in_process(run_config=request.run_config, tags=request.tags, instance=instance)
        assert result.success
        published.update(dict.fromkeys(upload_ids(request), result.run_id))
    for run_id in run_ids:
        versioned = store.read(run_id)
        assert versioned is not None
        record = versioned.record
        assert record.status == sg.SUCCEEDED and record.error == ""
        assert record.dagster_run_id == published[run_id]
        assert [a["status"] for a in record.report["actions"]] == ["completed", "completed"]
        assert shared.keys(f"bundles/{run_id}") == []  # the staged bundle is removed from the bucket
    assert shared.keys("pending/") == []
    for name in ("archive", "mirror"):  # the last version published
        assert (shared.root / "out" / name / "r.md").read_bytes() == b"# 2\n"
    assert_no_local_staging(shared)
    assert tick(defs, second.cursor, instance).run_requests == []
    # the source asset names the staging store where it is
    source = load_config(shared.config).pipeline(PIPELINE).source
    assert source.uri() == f"s3://{shared.bucket}/{PREFIX}/{PIPELINE}"
    assert root_text(source) == f"s3://{shared.bucket}/{PREFIX}/{PIPELINE} at {shared.server.endpoint_url}"


def test_an_upload_admitted_late_by_a_slower_replica_is_requested_at_the_next_tick(
    shared: Shared, instance: dg.DagsterInstance
) -> None:
    fast, slow = shared.replica(), shared.replica()
    slow_number = slow.next_number()  # the slow replica numbered its upload first...
    early = stage(shared, fast, 1)
    defs = build_definitions(shared.config, bundles_per_run=10)
    first = tick(defs, None, instance)
    assert [r.run_key for r in first.run_requests] == [early]

    late = stage(shared, slow, 2, seq=slow_number)  # ...and makes it visible only now
    assert slow.read(late).record.seq < fast.read(early).record.seq  # type: ignore[union-attr]
    second = tick(defs, first.cursor, instance)
    assert [r.run_key for r in second.run_requests] == [late]
    assert upload_ids(second.run_requests[0]) == [late]
    assert tick(defs, second.cursor, instance).run_requests == []

    # an unusable cursor hands every upload still waiting out again, in admission order (a run
    # passes over the uploads another run is publishing or has published)
    again = tick(defs, "garbage", instance)
    assert [upload_ids(r) for r in again.run_requests] == [[late, early]]
    assert_no_local_staging(shared)


def test_a_failed_publication_records_failed_without_host_paths_and_a_rerun_reads_the_bucket(
    shared: Shared, instance: dg.DagsterInstance
) -> None:
    store = shared.replica()
    run_id = stage(shared, store, 0)
    stray = shared.root / "out" / "mirror" / "stray.txt"
    stray.parent.mkdir(parents=True)
    stray.write_text("unmanaged\n")
    (request,) = tick(build_definitions(shared.config), None, instance).run_requests
    job = reconstructable_job(shared.config, JOB)
    with dg.execute_job(job, instance, run_config=request.run_config, tags=request.tags) as result:
        assert not result.success
        failed_run = result.run_id
    versioned = store.read(run_id)
    assert versioned is not None
    record = versioned.record
    assert record.status == sg.FAILED and record.dagster_run_id == failed_run
    assert record.error.startswith("1 destination(s) failed: reports.daily/mirror [.]: fail_unmanaged")
    assert "stray.txt" not in record.error  # the file in the way is the operator's, in the run's log
    stored = sg.record_bytes(record)
    assert str(shared.root).encode() not in stored and str(shared.scratch).encode() not in stored
    assert [a["status"] for a in record.report["actions"]] == ["completed", "failed"]
    assert shared.keys(f"bundles/{run_id}") != []  # kept for a rerun
    assert shared.keys("pending/") == []  # finished: no longer offered to the sensor

    stray.unlink()
    with dg.execute_job(job, instance, reexecution_options=dg.ReexecutionOptions.from_failure(failed_run, instance)) \
            as rerun:
        assert rerun.success
        started = {e.step_key for e in events_of(rerun, "STEP_START")}
        assert "reports_daily.publish_mirror" in started and "reports_daily.discover" not in started
        rerun_id = rerun.run_id
    record = store.read(run_id).record  # type: ignore[union-attr]
    assert record.status == sg.SUCCEEDED and record.dagster_run_id == rerun_id
    assert (shared.root / "out" / "mirror" / "r.md").read_bytes() == b"# 0\n"
    assert shared.keys(f"bundles/{run_id}") == []
    assert_no_local_staging(shared)


@pytest.mark.parametrize("consistent", [False, True], ids=["file-changed", "file-and-manifest-changed"])
def test_a_bundle_corrupted_in_the_bucket_fails_its_upload_naming_no_bucket_or_host_path(
    shared: Shared, instance: dg.DagsterInstance, consistent: bool
) -> None:
    """A file changed in the bucket after admission fails validation; changed together with a
    manifest that lists it (issue 35, item 2), the upload fails naming both digests."""
    store = shared.replica()
    run_id = stage(shared, store, 0)
    bundles = f"{PREFIX}/{PIPELINE}/bundles/{run_id}"
    client = shared.server.client()
    try:
        client.put_object(Bucket=shared.bucket, Key=f"{bundles}/r.md", Body=b"# X\n")
        if consistent:
            admitted = store.read(run_id).record.manifest["digest"]  # type: ignore[union-attr]
            forged = make_bundle(shared.root / "forged", PIPELINE, {"r.md": "# X\n"}, created=FROZEN)
            client.put_object(Bucket=shared.bucket, Key=f"{bundles}/manifest.json",
                              Body=(forged / "manifest.json").read_bytes())
            forged_digest = json.loads((forged / "manifest.json").read_text())["digest"]
    finally:
        client.close()
    defs = build_definitions(shared.config)
    (request,) = tick(defs, None, instance).run_requests
    result = defs.resolve_job_def(JOB).execute_in_process(
        run_config=request.run_config, tags=request.tags, instance=instance, raise_on_error=False
    )
    record = store.read(run_id).record  # type: ignore[union-attr]
    assert record.status == sg.FAILED and record.dagster_run_id == result.run_id
    if consistent:
        assert record.error == (f"corrupt_bundle: staged bundle changed after admission: its manifest has digest "
                                f"{forged_digest}, the upload was admitted with digest {admitted}")
    else:
        assert record.error.startswith("corrupt_bundle: file r.md sha256 ")
    assert shared.bucket not in record.error and str(shared.root) not in record.error
    # the source check names the staged bundle where it is: in the bucket, not on a host path
    (check,) = [e.event_specific_data for e in events_of(result, "ASSET_CHECK_EVALUATION")
                if e.event_specific_data.check_name == "bundle_valid"]
    assert check.passed is False
    bundle = f"s3://{shared.bucket}/{PREFIX}/{PIPELINE}/bundles/{run_id}"
    assert check.metadata["root"].value == bundle
    assert shared.keys(f"bundles/{run_id}") != []  # a failed upload keeps its staged bundle
    assert not (shared.root / "out" / "archive" / "r.md").exists()
    assert_no_local_staging(shared)


def test_observing_the_source_reads_the_records_and_validates_the_bundles_in_the_bucket(
    shared: Shared, instance: dg.DagsterInstance
) -> None:
    store = shared.replica()
    run_ids = [stage(shared, store, index) for index in range(2)]
    defs = build_definitions(shared.config)
    source = dg.AssetKey(["reports_daily"])
    job = defs.resolve_implicit_global_asset_job_def()

    def observe() -> tuple[dg.AssetObservation, Any]:
        result = job.execute_in_process(asset_selection=[source], instance=instance)
        (observation,) = observations(result)
        (check,) = [e.event_specific_data for e in events_of(result, "ASSET_CHECK_EVALUATION")]
        return observation, check

    observation, check = observe()
    assert observation.metadata["newest_upload"].value == run_ids[-1]
    assert "uploads_admitted" not in observation.metadata
    assert check.passed and check.description == "2 staged upload(s) valid"

    client = shared.server.client()
    try:
        client.put_object(Bucket=shared.bucket, Key=f"{PREFIX}/{PIPELINE}/bundles/{run_ids[0]}/r.md", Body=b"# X\n")
    finally:
        client.close()
    _, check = observe()
    assert not check.passed and check.description.startswith(f"upload {run_ids[0]}: ")
    assert_no_local_staging(shared)

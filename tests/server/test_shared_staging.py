"""``distributor serve`` on shared S3 staging (issue 29): two replicas in this process on one
``s3://`` staging root of a moto server with authentication enforced (one request at a time, so
its conditional writes are atomic as on S3)."""

from __future__ import annotations

import concurrent.futures
import os
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from distributor_core.config import Environment
from distributor_core.server import create_app, queueview
from distributor_core.server.errors import ServerSetupError
from tests.peers.moto import MotoServer
from tests.server.harness import (
    DEFAULT_FILES,
    Running,
    Setup,
    bundle_archive,
    published,
    run_server,
    upload,
    wait_status,
    wait_until,
    write_setup,
)


def shared_setup(
    root: Path, server: MotoServer, *, bucket: str | None = None, **http: Any
) -> tuple[Setup, dict[str, str]]:
    bucket = server.create_bucket(bucket)
    setup = write_setup(root, http={
        "staging_root": f"s3://{bucket}/staging",
        "staging_s3": {"endpoint": server.endpoint_url, "force_path_style": True, "conditional_writes": "trusted",
                       "credentials": {"access_key_id_env": "STAGING_KEY_ID",
                                       "secret_access_key_env": "STAGING_SECRET"}},
        "publication_lease": "3s",
        **http,
    })
    environ = {**setup.environ, "STAGING_KEY_ID": server.access_key_id, "STAGING_SECRET": server.secret_access_key}
    return setup, environ


def keys(server: MotoServer, bucket: str, prefix: str) -> list[str]:
    found = server.client().list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", [])
    return sorted(item["Key"] for item in found)


@pytest.fixture
def replicas(tmp_path: Path, moto_serial_server: MotoServer) -> Iterator[tuple[Setup, list[Running], MotoServer]]:
    setup, environ = shared_setup(tmp_path, moto_serial_server)
    with ExitStack() as stack:
        running = [
            stack.enter_context(run_server(create_app(setup.config, env=Environment(environ))))
            for _ in range(2)
        ]
        yield setup, running, moto_serial_server


def test_an_upload_to_one_replica_is_published_and_readable_on_the_other(replicas) -> None:
    setup, (one, two), server = replicas
    with one.client() as first, two.client() as second:
        response = upload(first, "reports", bundle_archive(setup.root))
        assert response.status_code == 202, response.text
        run_id = response.json()["run_id"]
        final = wait_status(second, run_id, {"succeeded", "failed"})
    assert final["status"] == "succeeded", final
    assert published(setup.destinations["reports/dest1"])["report.md"]
    bucket = setup.config.server.http.staging_store.bucket
    # a published upload's bundle and pending marker are removed (right after its record says so)
    wait_until(lambda: keys(server, bucket, "staging/reports/") == [f"staging/reports/records/{run_id}.json"],
               message="the published bundle removed from the store")


def test_the_same_key_sent_to_two_replicas_at_once_is_admitted_once(replicas) -> None:
    setup, (one, two), _ = replicas
    body = bundle_archive(setup.root)
    with one.client() as first, two.client() as second, concurrent.futures.ThreadPoolExecutor(2) as pool:
        answers = list(pool.map(lambda c: upload(c, "reports", body, key="nightly-1"), (first, second)))
        codes = sorted(a.status_code for a in answers)
        run_ids = {a.json()["run_id"] for a in answers if a.status_code == 202}
        assert codes in ([202, 202], [202, 409]), [a.text for a in answers]
        assert len(run_ids) == 1
        (run_id,) = run_ids
        assert wait_status(first, run_id, {"succeeded", "failed"})["status"] == "succeeded"
        again = upload(second, "reports", body, key="nightly-1")
        assert (again.status_code, again.json()["run_id"]) == (202, run_id)
        other = upload(second, "reports", bundle_archive(setup.root, {"report.md": b"# other\n"}), key="nightly-1")
        assert other.status_code == 409


def test_a_refused_archive_leaves_nothing_in_the_store(replicas) -> None:
    setup, (one, _), server = replicas
    with one.client() as client:
        response = upload(client, "reports", b"not an archive", key="bad-1")
        assert response.status_code == 400, response.text
    bucket = setup.config.server.http.staging_store.bucket
    assert keys(server, bucket, "staging/") == []


def test_unreachable_staging_store_stops_serve_naming_it(tmp_path: Path, moto_serial_server: MotoServer) -> None:
    setup, environ = shared_setup(tmp_path, moto_serial_server)
    environ["STAGING_SECRET"] = "wrong"
    with pytest.raises(ServerSetupError, match=r"server.http.staging_root s3://.*/staging/reports cannot be used"):
        create_app(setup.config, env=Environment(environ))


def test_failed_bundles_in_the_store_are_kept_within_the_token_quota(
    tmp_path: Path, moto_serial_server: MotoServer
) -> None:
    setup, environ = shared_setup(tmp_path, moto_serial_server, max_failed_bytes_per_token=3000)
    created = datetime(2026, 6, 8, 12, tzinfo=UTC)
    files = {**DEFAULT_FILES, "pad.bin": b"a" * 1500}  # 3,000 bytes hold one failed bundle, not two
    bucket = setup.config.server.http.staging_store.bucket
    with run_server(create_app(setup.config, env=Environment(environ))) as server, server.client() as http:
        def send(bundle_id: str) -> str:
            response = upload(http, "reports", bundle_archive(setup.root, files, bundle_id=bundle_id, created=created))
            assert response.status_code == 202, response.text
            return response.json()["run_id"]

        assert wait_status(http, send("base"), {"succeeded", "failed"})["status"] == "succeeded"
        failed = [send(f"evil-{i}") for i in range(3)]  # same created, another bundle id: fail_conflict
        for run_id in failed:
            assert wait_status(http, run_id, {"succeeded", "failed"})["status"] == "failed"
        server.service.expire()  # what the janitor does every minute
        staged = {key.split("/")[3] for key in keys(moto_serial_server, bucket, "staging/reports/bundles/")}
        assert staged == {failed[-1]}
        for run_id in failed[:-1]:
            error = wait_status(http, run_id, "failed")["error"]
            assert error.endswith("; staged bundle removed to stay within server.http.max_failed_bytes_per_token")


def test_scratch_left_by_a_killed_replica_is_removed_at_start(
    tmp_path: Path, moto_serial_server: MotoServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    setup, environ = shared_setup(tmp_path / "site", moto_serial_server)
    scratch_root = setup.config.server.http.staging_root
    scratch_root.mkdir(mode=0o700)
    dead = scratch_root / "serve-999999999-x1"  # no such pid: a replica killed with kill -9
    (dead / "reports" / "0123").mkdir(parents=True)
    (dead / "reports" / "0123" / "upload.archive").write_bytes(b"half an upload")
    alive = scratch_root / f"serve-{os.getppid()}-x2"  # a replica still running on this host
    alive.mkdir()
    app = create_app(setup.config, env=Environment(environ))
    try:
        assert not dead.exists()
        assert alive.is_dir()
        assert {p.name for p in scratch_root.iterdir()} == {alive.name, app.state.uploads.scratch.name}
    finally:
        app.state.runtime.shutdown()
    assert {p.name for p in scratch_root.iterdir()} == {alive.name}


def test_the_queue_is_the_whole_store_s_whichever_replica_admitted(
    tmp_path: Path, moto_serial_server: MotoServer
) -> None:
    setup, environ = shared_setup(tmp_path, moto_serial_server, queue_size=2)
    with ExitStack() as stack:
        one, two = (
            stack.enter_context(run_server(create_app(
                setup.config, env=Environment(environ), publisher="dagster", lookup_dagster_run=lambda _: None,
            )))
            for _ in range(2)
        )
        with one.client() as first, two.client() as second:
            for name in ("a", "b"):  # nothing publishes them: no Dagster daemon
                body = bundle_archive(setup.root, {"report.md": f"# {name}\n".encode()}, bundle_id=f"q.{name}")
                assert upload(first, "reports", body).status_code == 202
            third = bundle_archive(setup.root, {"report.md": b"# c\n"}, bundle_id="q.c")
            refused = upload(first, "reports", third)  # the replica counts its own admissions at once
            assert refused.status_code == 503 and refused.json()["retryable"], refused.text
            # the other replica learns of them from its next listing of the store (every 2 s)
            time.sleep(2 * queueview.DEFAULT_INTERVAL + 1)
            elsewhere = upload(second, "reports", third)
            assert (elsewhere.status_code, elsewhere.json()) == (503, refused.json())
    bucket = setup.config.server.http.staging_store.bucket
    assert len(keys(moto_serial_server, bucket, "staging/reports/records/")) == 2

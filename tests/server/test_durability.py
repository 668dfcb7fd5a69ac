"""The durable staging area (resolutions D1, README resolutions 6 and 7): record layout, restart
with re-queue, startup sweep, retention, and a server killed with SIGKILL mid-queue."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from distributor_core import staging as sg
from distributor_core.server import create_app
from distributor_core.staging import key_sha256
from distributor_core.upload import UploadClient
from tests.server.harness import (
    TOKEN,
    bundle_archive,
    bundle_dir,
    foreign_lock,
    published,
    run_server,
    serve_setup,
    start_serve,
    upload,
    wait_idle,
    wait_status,
    wait_until,
    write_setup,
)

RECORD_KEYS = [
    "schema_version", "run_id", "seq", "pipeline_id", "token_id", "idempotency_key", "manifest", "response",
    "status", "accepted_at", "started_at", "finished_at", "error", "dagster_run_id", "report",
]


def test_record_layout(tmp_path: Path) -> None:
    setup = write_setup(tmp_path / "site")
    archive = bundle_archive(tmp_path)
    with serve_setup(setup, publisher="dagster") as server, server.client() as http:
        accepted = upload(http, "reports", archive, key="layout-key").json()
    run_id = accepted["run_id"]
    staging = setup.staging("reports")
    data = json.loads((staging / run_id / "upload.json").read_text())
    assert list(data) == RECORD_KEYS
    assert data["schema_version"] == 1 and data["seq"] == 1 and data["status"] == "accepted"
    assert (data["pipeline_id"], data["token_id"], data["idempotency_key"]) == ("reports", "reporter", "layout-key")
    assert data["response"] == accepted
    assert data["manifest"]["id"] == "reports.daily" and [f["path"] for f in data["manifest"]["files"]] == [
        "report.md", "summary.txt"]
    assert data["started_at"] is data["finished_at"] is data["report"] is data["dagster_run_id"] is None
    assert sorted(p.name for p in (staging / run_id / "bundle").iterdir()) == ["manifest.json", "report.md",
                                                                             "summary.txt"]
    assert (staging / ".idempotency" / "reporter" / key_sha256("layout-key")).read_text() == f"{run_id}\n"
    assert (staging / ".seq").read_text() == "1\n"
    assert list((staging / ".incoming").iterdir()) == []
    for path in (setup.staging_root, staging, staging / run_id, staging / ".incoming", staging / ".idempotency"):
        assert os.stat(path).st_mode & 0o777 == 0o700, path
    assert os.stat(staging / run_id / "upload.json").st_mode & 0o777 == 0o600


def test_restart_requeues_in_admission_order_and_answers_status(tmp_path: Path) -> None:
    setup = write_setup(tmp_path / "site", pipelines={"reports": 1, "weekly": 1})
    archives = [bundle_archive(tmp_path, created=datetime(2026, 6, 8, hour, tzinfo=UTC)) for hour in (1, 2, 3)]
    with serve_setup(setup, publisher="dagster") as server, server.client() as http:
        ids = [upload(http, "reports", a).json()["run_id"] for a in archives]
        weekly = upload(http, "weekly", archives[0]).json()["run_id"]
        assert {wait_status(http, i, "accepted")["status"] for i in [*ids, weekly]} == {"accepted"}
    with serve_setup(setup) as server, server.client() as http:
        done = [wait_status(http, i, {"succeeded", "failed"}) for i in ids]
        assert [d["status"] for d in done] == ["succeeded"] * 3
        assert [d["report"]["actions"][0]["action"] for d in done] == ["publish_new", "replace_older", "replace_older"]
        starts = [d["started_at"] for d in done]
        assert starts == sorted(starts)
        assert wait_status(http, weekly, "succeeded")["pipeline_id"] == "weekly"
    assert [r.seq for r in sg.list_records(setup.staging("reports"))] == [1, 2, 3]


def test_startup_sweeps_incoming_temp_files_and_stale_index_entries(tmp_path: Path) -> None:
    setup = write_setup(tmp_path / "site")
    with serve_setup(setup, publisher="dagster") as server, server.client() as http:
        run_id = upload(http, "reports", bundle_archive(tmp_path), key="kept").json()["run_id"]
    staging = setup.staging("reports")
    leftover = staging / ".incoming" / "deadbeef" / "bundle"
    leftover.mkdir(parents=True)
    (leftover / "half.md").write_text("half")
    (staging / run_id / ".upload.json.tmp-0123456789abcdef").write_text("{")
    stale = staging / ".idempotency" / "reporter" / key_sha256("gone")
    stale.write_text("reports.20260101T000000Z.00000000\n")
    lost = staging / ".idempotency" / "reporter" / key_sha256("kept")
    lost.unlink()
    with serve_setup(setup, publisher="dagster"):
        assert list((staging / ".incoming").iterdir()) == []
        assert not (staging / run_id / ".upload.json.tmp-0123456789abcdef").exists()
        assert not stale.exists()
        assert lost.read_text() == f"{run_id}\n"  # rebuilt from the record


def test_unreadable_record_is_set_aside_not_deleted(tmp_path: Path) -> None:
    setup = write_setup(tmp_path / "site")
    broken = setup.staging("reports") / "reports.20260101T000000Z.0000abcd"
    broken.mkdir(parents=True)
    (broken / "upload.json").write_text("{not json")
    with serve_setup(setup) as server, server.client() as http:
        assert server.service.records() == []
        assert http.get(f"/runs/{broken.name}", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 404
    assert not broken.exists()  # quarantined (issue 35, item 3): kept for the operator, never read again
    assert (setup.staging("reports") / ".quarantine" / broken.name / "upload.json").read_text() == "{not json"


def test_retention_expires_finished_records_only(tmp_path: Path) -> None:
    setup = write_setup(tmp_path / "site", pipelines={"good": 1, "bad": 1}, http={"retention": "2h"})
    (setup.destinations["bad/dest1"]).mkdir(parents=True)
    (setup.destinations["bad/dest1"] / "report.md").write_text("unmanaged")
    clock_now = [datetime(2026, 6, 3, 12, 0, tzinfo=UTC)]
    app = create_app(setup.config, env=setup.env, clock=lambda: clock_now[0])
    with run_server(app) as server, server.client() as http:
        good = upload(http, "good", bundle_archive(tmp_path), key="g").json()["run_id"]
        bad = upload(http, "bad", bundle_archive(tmp_path), key="b").json()["run_id"]
        wait_status(http, good, "succeeded")
        wait_status(http, bad, "failed")
        assert not (setup.staging("good") / good / "bundle").exists()
        assert (setup.staging("bad") / bad / "bundle" / "report.md").exists()  # kept for inspection
        lock = foreign_lock(setup.destinations["good/dest1"])
        pending = upload(http, "good", bundle_archive(tmp_path, created=datetime(2026, 6, 9, tzinfo=UTC))).json()
        wait_status(http, pending["run_id"], "running")
        clock_now[0] += timedelta(hours=3)
        assert sorted(server.service.expire()) == sorted([good, bad])
        for pipeline, run_id in (("good", good), ("bad", bad)):
            assert not (setup.staging(pipeline) / run_id).exists()
            assert list((setup.staging(pipeline) / ".idempotency" / "reporter").iterdir()) == []
        assert (setup.staging("good") / pending["run_id"] / "upload.json").exists()  # running: never expires
        lock.unlink()
        wait_status(http, pending["run_id"], "succeeded")
    assert (setup.staging("good") / ".seq").read_text() == "2\n"
    (setup.staging("good") / ".seq").write_text("1\n")  # an update lost in a crash (it is not fsynced)
    with serve_setup(setup) as server, server.client() as http:
        assert (setup.staging("good") / ".seq").read_text() == "2\n"  # repaired from the records
        again = upload(http, "good", bundle_archive(tmp_path, created=datetime(2026, 6, 10, tzinfo=UTC))).json()
        assert sg.read_record(setup.staging("good"), again["run_id"]).seq == 3  # never reused
        wait_idle(server.service)


def test_drain_stops_waiting_at_the_deadline(tmp_path: Path) -> None:
    setup = write_setup(tmp_path / "site")
    started = threading.Event()
    release = threading.Event()

    def publish(service: object, record: sg.UploadRecord) -> None:
        started.set()
        release.wait(30)

    app = create_app(setup.config, env=setup.env, publish=publish)
    runtime = app.state.runtime
    with run_server(app) as server, server.client() as http:
        run_id = upload(http, "reports", bundle_archive(tmp_path)).json()["run_id"]
        assert started.wait(10)
        runtime.request_stop()
        queued = upload(http, "reports", bundle_archive(tmp_path)).json()["run_id"]
        begin = time.monotonic()
        assert runtime.shutdown(grace=0.3) is False
        assert time.monotonic() - begin < 5
        assert sg.read_record(setup.staging("reports"), run_id).status == "running"
        assert sg.read_record(setup.staging("reports"), queued).status == "queued"  # not started after stop
        release.set()
        wait_until(lambda: sg.read_record(setup.staging("reports"), run_id).finished, message="publication end")


def test_sigkill_mid_queue_then_restart_finishes_every_upload(tmp_path: Path) -> None:
    setup = write_setup(tmp_path / "site")
    lock = foreign_lock(setup.destinations["reports/dest1"])
    roots = []
    for hour in (1, 2, 3):
        root = tmp_path / f"producer-{hour}"
        bundle_dir(root, {"report.md": f"# Report {hour}\n".encode()}, created=datetime(2026, 6, 8, hour, tzinfo=UTC))
        roots.append(root)
    first = start_serve(setup)
    try:
        with UploadClient(first.url, TOKEN) as client:
            ids = [client.upload_bundle(pipeline_id="reports", root=root, idempotency_key=f"producer-{i}").run_id
                   for i, root in enumerate(roots)]
            wait_until(lambda: client.status(ids[0]).status == "running", message="first upload to run")
            assert [client.status(i).status for i in ids[1:]] == ["queued", "queued"]
    finally:
        first.process.send_signal(signal.SIGKILL)
        first.process.wait(10)
    assert first.process.returncode == -signal.SIGKILL
    staging = setup.staging("reports")
    assert [r.status for r in sg.list_records(staging)] == ["running", "queued", "queued"]
    lock.unlink()
    second = start_serve(setup)
    try:
        with UploadClient(second.url, TOKEN) as client:
            wait_until(lambda: all(client.status(i).status in ("succeeded", "failed") for i in ids), timeout=60,
                       message="every upload to finish after the restart")
            statuses = [client.status(i) for i in ids]
            assert [s.status for s in statuses] == ["succeeded"] * 3, [s.error for s in statuses]
            assert [s.report["actions"][0]["action"] for s in statuses if s.report] == [
                "publish_new", "replace_older", "replace_older"]
            assert [s.started_at for s in statuses] == sorted(s.started_at for s in statuses)  # type: ignore[type-var]
            replay = client.upload_bundle(pipeline_id="reports", root=roots[0], idempotency_key="producer-0")
            assert replay.run_id == ids[0]
    finally:
        code, _ = second.stop(signal.SIGTERM)
    assert code == 0
    assert published(setup.destinations["reports/dest1"]) == {"report.md": b"# Report 3\n"}
    assert [p.name for p in staging.iterdir() if sg.is_run_id(p.name) and (p / "bundle").exists()] == []


def test_sync_tree_fsyncs_every_file_and_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tree = tmp_path / "record"
    (tree / "bundle" / "sub").mkdir(parents=True)
    (tree / "bundle" / "sub" / "a.md").write_text("a")
    (tree / "upload.json").write_text("{}")
    extra = tmp_path / "index" / "entry"
    extra.parent.mkdir()
    extra.write_text("id\n")
    synced: list[int] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    sg.sync_tree(tree, [extra])
    # 3 files (a.md, upload.json, entry) and 4 directories (record, bundle, sub, index)
    assert len(synced) == 3 + 4


def test_switching_publishers_hands_unfinished_records_over(tmp_path: Path) -> None:
    setup = write_setup(tmp_path / "site")
    staging = setup.staging("reports")
    archives = [bundle_archive(tmp_path, created=datetime(2026, 6, 8, hour, tzinfo=UTC)) for hour in (1, 2, 3)]
    with serve_setup(setup, publisher="dagster") as server, server.client() as http:
        ids = [upload(http, "reports", a).json()["run_id"] for a in archives]
    # as a crashed inline server left them, plus one a Dagster run had started
    sg.transition(staging, ids[0], status="running", started_at=datetime(2026, 6, 8, tzinfo=UTC))
    sg.transition(staging, ids[1], status="queued")
    sg.mark_running(staging, ids[2], dagster_run_id="dagster-run-7")
    with serve_setup(setup, publisher="dagster"):
        records = {r.run_id: r for r in sg.list_records(staging)}
        assert [records[i].status for i in ids] == ["accepted", "accepted", "running"]
        assert records[ids[0]].started_at is None
    with serve_setup(setup) as server, server.client() as http:  # inline: leaves the Dagster run alone
        assert [wait_status(http, i, "succeeded")["status"] for i in ids[:2]] == ["succeeded"] * 2
        assert sg.read_record(staging, ids[2]).status == "running"

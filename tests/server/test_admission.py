"""Admission is transactional (issue 14, second finding).

A request that failed after its upload was promoted used to answer 500 and leave an ``accepted``
record the running server did not know about; a retry with the same key got another 500 and a
second record, and after a restart both were published. Now a failure after promotion rolls the
record back (the retry is a fresh admission), or, when even that fails, the request is answered
as the accepted upload it became (the retry replays it); and a restart publishes only one record
of an idempotency scope, whatever an older version left.
"""

from __future__ import annotations

import errno
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from distributor_core import staging as sg
from distributor_core.staging import area
from tests.bundle.conftest import REPORT, SUMMARY
from tests.server.harness import (
    TOKEN,
    bundle_archive,
    published,
    serve_setup,
    snapshot,
    upload,
    wait_idle,
    wait_status,
    write_setup,
)

AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _fail_sync_once(monkeypatch: pytest.MonkeyPatch, name: str = "sync_paths") -> list[Any]:
    """Fail the first call of ``area.<name>``: ``sync_paths`` makes a placed upload durable (after
    its rename), ``sync_tree`` its bundle (before)."""
    calls: list[Any] = []
    real = getattr(area, name)

    def failing(*args: Any) -> None:
        calls.append(args)
        if len(calls) == 1:
            raise OSError(errno.EIO, "Input/output error")
        real(*args)

    monkeypatch.setattr(area, name, failing)
    return calls


def test_a_failure_after_promotion_rolls_the_record_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    setup = write_setup(tmp_path / "site")
    staging = setup.staging("reports")
    archive = bundle_archive(tmp_path)
    calls = _fail_sync_once(monkeypatch)
    with serve_setup(setup) as server, server.client() as http:
        before = snapshot(setup.staging_root)
        failed = upload(http, "reports", archive, key="late-failure")
        # the staging disk failed, not the request: a 503 to retry (issue 35, item 5)
        assert (failed.status_code, failed.json(), failed.headers["retry-after"]) == (
            503, {"error": "upload staging is unavailable", "retryable": True}, "2")
        assert calls, "the fault was not injected"
        # nothing of it stays: no record, no index entry, no slot, no key in flight (the token's
        # index directory and the sequence number may remain)
        structure = ("reports/.seq", "reports/.idempotency/reporter")
        assert {k: v for k, v in snapshot(setup.staging_root).items() if k not in structure} == {
            k: v for k, v in before.items() if k not in structure}
        assert sg.list_records(staging) == [] and server.service.pending_count() == 0
        retry = upload(http, "reports", archive, key="late-failure")
        assert retry.status_code == 202, retry.text
        run_id = retry.json()["run_id"]
        wait_status(http, run_id, "succeeded")
        replay = upload(http, "reports", archive, key="late-failure")
        assert replay.content == retry.content
    with serve_setup(setup) as server:  # across a restart too: one record, one publication
        wait_idle(server.service)
        assert [r.run_id for r in server.service.records()] == [run_id]
    records = sg.list_records(staging)
    assert [(r.run_id, r.status) for r in records] == [(run_id, "succeeded")]
    assert published(setup.destinations["reports/dest1"]) == {"report.md": REPORT, "summary.txt": SUMMARY}


def test_a_failure_to_sync_the_bundle_records_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    setup = write_setup(tmp_path / "site")
    staging = setup.staging("reports")
    archive = bundle_archive(tmp_path)
    calls = _fail_sync_once(monkeypatch, "sync_tree")
    with serve_setup(setup) as server, server.client() as http:
        before = snapshot(setup.staging_root)
        failed = upload(http, "reports", archive, key="early-failure")
        # the staging disk failed, not the request: a 503 to retry (issue 35, item 5)
        assert (failed.status_code, failed.json(), failed.headers["retry-after"]) == (
            503, {"error": "upload staging is unavailable", "retryable": True}, "2")
        assert calls, "the fault was not injected"
        assert snapshot(setup.staging_root) == before  # not even a sequence number was issued
        assert sg.list_records(staging) == [] and server.service.pending_count() == 0
        retry = upload(http, "reports", archive, key="early-failure")
        assert retry.status_code == 202, retry.text
        wait_status(http, retry.json()["run_id"], "succeeded")
    assert [r.seq for r in sg.list_records(staging)] == [1]


def test_a_promotion_that_cannot_be_undone_is_answered_as_accepted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    setup = write_setup(tmp_path / "site")
    staging = setup.staging("reports")
    archive = bundle_archive(tmp_path)
    _fail_sync_once(monkeypatch)

    def demote(*_: object) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(area.PipelineStaging, "_demote", demote)
    with serve_setup(setup) as server, server.client() as http:
        first = upload(http, "reports", archive, key="kept")
        assert first.status_code == 202, first.text
        run_id = first.json()["run_id"]
        assert wait_status(http, run_id, "succeeded")["pipeline_id"] == "reports"
        replay = upload(http, "reports", archive, key="kept")
        assert replay.content == first.content
        assert server.service.pending_count() == 0
    assert [r.run_id for r in sg.list_records(staging)] == [run_id]


def test_startup_publishes_one_record_per_idempotency_scope(tmp_path: Path) -> None:
    """Two ``accepted`` records with one key, as the old late-500 left them: one is published."""
    setup = write_setup(tmp_path / "site")
    staging = setup.staging("reports")
    archive = bundle_archive(tmp_path)
    with serve_setup(setup, publisher="dagster") as server, server.client() as http:
        first = upload(http, "reports", archive, key="twice").json()["run_id"]
    duplicate = first[:-8] + "ffffffff"
    shutil.copytree(staging / first, staging / duplicate)
    record = json.loads((staging / duplicate / "upload.json").read_text())
    record.update(run_id=duplicate, seq=2, response={**record["response"], "run_id": duplicate,
                                                      "status_url": f"/runs/{duplicate}"})
    (staging / duplicate / "upload.json").write_text(json.dumps(record))
    (staging / ".idempotency" / "reporter" / sg.key_sha256("twice")).write_text(f"{duplicate}\n")
    with serve_setup(setup) as server, server.client() as http:
        wait_idle(server.service)
        kept = wait_status(http, duplicate, {"succeeded", "failed"})
        dropped = wait_status(http, first, {"succeeded", "failed"})
        assert kept["status"] == "succeeded"  # the one the index names
        assert dropped["status"] == "failed"
        assert dropped["error"] == f"duplicate of upload {duplicate} (same idempotency key); not published"
        assert "report" not in dropped
        replay = upload(http, "reports", archive, key="twice")
        assert replay.json()["run_id"] == duplicate
    runs = [r for r in sg.list_records(staging) if r.status == "succeeded"]
    assert [r.run_id for r in runs] == [duplicate]

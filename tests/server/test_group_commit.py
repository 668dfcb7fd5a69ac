"""Admissions settle concurrently (issue 17, P6): the fsyncs that make an upload durable run
outside the pipeline's commit lock, so concurrent uploads share the filesystem's journal commits.
What must still hold: every file and directory of an upload is fsynced before its ``202`` (after
its last change), and the publisher still receives a pipeline's uploads in ``seq`` order, even
when their fsyncs end in another order."""

from __future__ import annotations

import os
import random
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from distributor_core import staging as sg
from distributor_core.server.publisher import publish_staged_upload
from distributor_core.server.service import _Handoff
from distributor_core.staging import area
from tests.server.harness import bundle_archive, serve_setup, upload, wait_idle, write_setup

UPLOADS = 8


def _record(run_id: str, seq: int) -> sg.UploadRecord:
    return sg.UploadRecord(
        run_id=run_id, seq=seq, pipeline_id="reports", token_id="reporter", idempotency_key=None,
        manifest={}, response={}, status=sg.ACCEPTED, accepted_at=datetime(2026, 6, 8, tzinfo=UTC),
    )


def test_the_handoff_delivers_in_seq_order_and_skips_rolled_back_uploads() -> None:
    written: list[int] = []
    handoff = _Handoff(written.append)
    delivered: list[int] = []
    for seq in (1, 2, 3, 4):
        handoff.expect(seq)
    handoff.done(3, _record("reports.20260608T000000Z.00000003", 3), lambda r: delivered.append(r.seq))
    handoff.done(4, _record("reports.20260608T000000Z.00000004", 4), lambda r: delivered.append(r.seq))
    assert delivered == [] and written == []  # 1 and 2 are still settling
    handoff.done(1, None, lambda r: delivered.append(r.seq))  # rolled back: never delivered
    assert delivered == [] and written == [1]
    handoff.done(2, _record("reports.20260608T000000Z.00000002", 2), lambda r: delivered.append(r.seq))
    assert delivered == [2, 3, 4] and written == [1, 4]  # .seq once per batch, the highest number
    handoff.expect(5)
    handoff.done(5, _record("reports.20260608T000000Z.00000005", 5), lambda r: delivered.append(r.seq))
    assert delivered == [2, 3, 4, 5] and written == [1, 4, 5]


def _burst(url: str, archives: list[bytes], *, keys: bool) -> list[tuple[httpx.Response, float, float]]:
    """Post every archive at once from its own thread; (response, sent, answered) per upload."""
    barrier = threading.Barrier(len(archives))
    results: list[Any] = [None] * len(archives)

    def producer(index: int) -> None:
        with httpx.Client(base_url=url, timeout=60) as http:
            barrier.wait()
            sent = time.perf_counter()
            response = upload(http, "reports", archives[index], key=f"key-{index}" if keys else None)
            results[index] = (response, sent, time.perf_counter())

    threads = [threading.Thread(target=producer, args=(i,)) for i in range(len(archives))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return results


def _archives(tmp_path: Path) -> list[bytes]:
    start = datetime(2026, 6, 8, tzinfo=UTC)
    return [
        bundle_archive(tmp_path, {"report.md": f"# {i}\n".encode(), "deep/er/summary.txt": os.urandom(70_000)},
                       created=start + timedelta(minutes=i))
        for i in range(UPLOADS)
    ]


def _tree(root: Path) -> list[Path]:
    paths = [root]
    for directory, subdirs, files in os.walk(root):
        paths += [Path(directory) / name for name in [*subdirs, *files]]
    return paths


def test_every_path_of_an_upload_is_fsynced_before_its_202(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    setup = write_setup(tmp_path / "site", http={"queue_size": 32})
    staging = setup.staging("reports")
    archives = _archives(tmp_path)
    fsynced: dict[tuple[int, int], list[float]] = {}
    renamed: dict[str, float] = {}
    lock = threading.Lock()
    real_fsync, real_rename = os.fsync, os.rename

    def fsync(fd: int) -> None:
        real_fsync(fd)
        info = os.fstat(fd)
        with lock:
            fsynced.setdefault((info.st_dev, info.st_ino), []).append(time.perf_counter())

    def rename(src: Any, dst: Any, **kwargs: Any) -> None:
        real_rename(src, dst, **kwargs)
        with lock:
            renamed[os.fspath(dst)] = time.perf_counter()

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "rename", rename)
    # the dagster publisher leaves the records as they were accepted (no later rewrite replaces them)
    with serve_setup(setup, publisher="dagster") as server:
        results = _burst(server.url, archives, keys=True)
    assert [r.status_code for r, _, _ in results] == [202] * UPLOADS, [r.text for r, _, _ in results]

    def synced_between(path: Path, after: float, before: float) -> bool:
        info = os.stat(path, follow_symlinks=False)
        return any(after <= t <= before for t in fsynced.get((info.st_dev, info.st_ino), []))

    for index, (response, sent, answered) in enumerate(results):
        run_id = response.json()["run_id"]
        run_dir = staging / run_id
        placed = renamed[str(run_dir)]
        assert sent < placed < answered
        # the bundle (fsynced before the placement, outside the commit lock): every file and directory
        bundle = _tree(run_dir / "bundle")
        assert len(bundle) == 6  # bundle/, manifest.json, report.md, deep/, deep/er/, summary.txt
        for path in bundle:
            assert synced_between(path, sent, answered), path
        # what the placement changed, fsynced after the rename and before the 202
        entry = staging / ".idempotency" / "reporter" / sg.key_sha256(f"key-{index}")
        assert entry.read_text() == f"{run_id}\n"
        for path in (run_dir / "upload.json", run_dir, entry, entry.parent, staging):
            assert synced_between(path, placed, answered), path
    assert sorted(r.seq for r in sg.list_records(staging)) == list(range(1, UPLOADS + 1))
    assert (staging / ".seq").read_text() == f"{UPLOADS}\n"


def test_the_publisher_gets_uploads_in_seq_order_when_fsyncs_end_out_of_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    setup = write_setup(tmp_path / "site", http={"queue_size": 32})
    archives = _archives(tmp_path)
    real_sync = area.sync_paths
    jitter = random.Random(17)

    def slow_sync(*args: Any) -> None:
        time.sleep(jitter.uniform(0, 0.05))  # settles finish in an order unrelated to their seq
        real_sync(*args)

    monkeypatch.setattr(area, "sync_paths", slow_sync)
    published: list[str] = []

    def publish(service: Any, record: sg.UploadRecord) -> object:
        published.append(record.run_id)
        return publish_staged_upload(service, record)

    with serve_setup(setup, publish=publish) as server:
        results = _burst(server.url, archives, keys=False)
        assert [r.status_code for r, _, _ in results] == [202] * UPLOADS
        wait_idle(server.service)
        by_seq = [r.run_id for r in sorted(server.service.records(), key=lambda r: r.seq)]
    assert published == by_seq
    records = sg.list_records(setup.staging("reports"))
    assert {r.status for r in records} == {"succeeded"}
    assert (setup.staging("reports") / ".seq").read_text() == f"{UPLOADS}\n"


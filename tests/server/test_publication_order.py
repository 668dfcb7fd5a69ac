"""Publication order is fair across tokens and pipelines (issue 26, item 9).

The inline publisher was first in, first out across pipelines: another pipeline's upload took
0.13 s alone and 4.0 s behind 8 queued uploads of one token. Now tokens take turns, and a
token's pipelines take turns; each pipeline still publishes its uploads exactly once and in
admission order.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from distributor_core import staging as sg
from distributor_core.server.publisher import publish_staged_upload
from distributor_core.upload import UploadClient
from tests.server.harness import DEFAULT_FILES, bundle_dir, serve_setup, wait_idle, wait_until, write_setup

CREATED = datetime(2026, 6, 8, tzinfo=UTC)


def _root(tmp_path: Path, name: str, index: int) -> Path:
    root = tmp_path / f"{name}-{index}"
    bundle_dir(root, {**DEFAULT_FILES, "n.txt": f"{name} {index}\n".encode()}, bundle_id=name,
               created=CREATED + timedelta(seconds=index))
    return root


def test_another_tokens_upload_waits_for_one_publication_not_eight(tmp_path: Path) -> None:
    setup = write_setup(
        tmp_path / "site", pipelines={"bulk": 1, "side": 1, "other": 1},
        tokens={"token-a": ("secret-a", ["bulk", "side"]), "token-b": ("secret-b", ["other"])},
        http={"queue_size": 16, "max_queue_per_token": 12, "max_concurrency": 1},
    )
    gate = threading.Event()
    order: list[tuple[str, str, int]] = []

    def publish(service: Any, record: sg.UploadRecord) -> object:
        order.append((record.pipeline_id, record.run_id, record.seq))
        gate.wait(60)  # the first publication holds the only worker while the queue fills
        return publish_staged_upload(service, record)

    with serve_setup(setup, publish=publish) as server, \
            UploadClient(server.url, "secret-a") as producer_a, UploadClient(server.url, "secret-b") as producer_b:
        first = producer_a.upload_bundle(pipeline_id="bulk", root=_root(tmp_path, "bulk", 0))
        wait_until(lambda: len(order) == 1, 10, "the first publication to start")
        bulk = [first.run_id] + [producer_a.upload_bundle(pipeline_id="bulk", root=_root(tmp_path, "bulk", i)).run_id
                                 for i in range(1, 9)]
        side = producer_a.upload_bundle(pipeline_id="side", root=_root(tmp_path, "side", 0)).run_id
        other = producer_b.upload_bundle(pipeline_id="other", root=_root(tmp_path, "other", 0)).run_id
        gate.set()
        wait_idle(server.service)
        statuses = {r.run_id: r.status for r in server.service.records()}
    published = [run_id for _, run_id, _ in order]
    # token b had not been served: it goes next; then token a's pipeline that had not been served
    assert published[:3] == [bulk[0], other, side]
    assert published[3:] == bulk[1:]  # the rest of bulk, exactly once each and in admission order
    assert [seq for pipeline, _, seq in order if pipeline == "bulk"] == list(range(1, 10))
    assert set(statuses.values()) == {"succeeded"} and len(statuses) == 11


def test_two_tokens_of_one_pipeline_keep_admission_order(tmp_path: Path) -> None:
    """Fairness never reorders one pipeline: its uploads are published in admission order,
    whichever token sent them."""
    setup = write_setup(
        tmp_path / "site", pipelines={"shared": 1},
        tokens={"token-a": ("secret-a", ["shared"]), "token-b": ("secret-b", ["shared"])},
        http={"queue_size": 16, "max_queue_per_token": 8, "max_concurrency": 2},
    )
    gate = threading.Event()
    order: list[int] = []

    def publish(service: Any, record: sg.UploadRecord) -> object:
        order.append(record.seq)
        gate.wait(60)
        return publish_staged_upload(service, record)

    with serve_setup(setup, publish=publish) as server, \
            UploadClient(server.url, "secret-a") as a, UploadClient(server.url, "secret-b") as b:
        for index in range(6):
            (a if index % 3 else b).upload_bundle(pipeline_id="shared", root=_root(tmp_path, "shared", index))
        gate.set()
        wait_idle(server.service)
    assert order == list(range(1, 7))

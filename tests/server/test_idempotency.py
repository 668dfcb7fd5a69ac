"""Idempotency (interfaces §3.5, §3.9 items 22–28; resolutions D1, D3): scope, replay, conflict,
in-flight keys, expiry, and durability across a restart."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from distributor_core import staging as sg
from distributor_core.server import create_app
from distributor_core.staging import key_sha256
from tests.server.harness import (
    TOKEN,
    bundle_archive,
    run_server,
    serve_setup,
    upload,
    wait_idle,
    wait_status,
    wait_until,
    write_setup,
)


class Clock:
    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now


def test_replay_after_success_returns_the_original_body(tmp_path: Path) -> None:
    setup = write_setup(tmp_path / "site")
    archive = bundle_archive(tmp_path)
    with serve_setup(setup) as server, server.client() as http:
        first = upload(http, "reports", archive, key="k-22")
        wait_status(http, first.json()["run_id"], "succeeded")
        second = upload(http, "reports", archive, key="k-22")
        assert second.status_code == 202
        assert second.json() == first.json()
        assert second.json()["status"] == "accepted"  # verbatim, although the run has succeeded
        assert len(server.service.records()) == 1


def test_scope_is_token_pipeline_and_key(tmp_path: Path) -> None:
    setup = write_setup(
        tmp_path / "site", pipelines={"reports-one": 1, "reports-two": 1},
        tokens={"reporter-a": ("a-secret", ["reports-one", "reports-two"]),
                "reporter-b": ("b-secret", ["reports-one"])},
    )
    one = bundle_archive(tmp_path, bundle_id="one")
    two = bundle_archive(tmp_path, bundle_id="two")
    with serve_setup(setup) as server, server.client() as http:
        by_a = upload(http, "reports-one", one, token="a-secret", key="shared-key").json()["run_id"]
        by_b = upload(http, "reports-one", two, token="b-secret", key="shared-key").json()["run_id"]
        other_pipeline = upload(http, "reports-two", two, token="a-secret", key="shared-key").json()["run_id"]
        assert len({by_a, by_b, other_pipeline}) == 3
        conflict = upload(http, "reports-one", two, token="a-secret", key="shared-key")
        assert conflict.status_code == 409 and "retryable" not in conflict.json()
        wait_idle(server.service)
    index = setup.staging("reports-one") / sg.IDEMPOTENCY_DIR
    assert sorted(p.name for p in index.iterdir()) == ["reporter-a", "reporter-b"]
    assert (index / "reporter-a" / key_sha256("shared-key")).read_text() == f"{by_a}\n"


def test_no_key_means_a_new_run_every_time(tmp_path: Path) -> None:
    setup = write_setup(tmp_path / "site")
    archive = bundle_archive(tmp_path)
    with serve_setup(setup) as server, server.client() as http:
        ids = {upload(http, "reports", archive).json()["run_id"] for _ in range(3)}
        assert len(ids) == 3
        wait_idle(server.service)
    assert not any((setup.staging("reports") / sg.IDEMPOTENCY_DIR).iterdir())


class _SlowBody:
    """A request body that sends its first bytes, then waits until released."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.started = threading.Event()
        self.release = threading.Event()

    def __iter__(self) -> Iterator[bytes]:
        yield self.data[:100]
        self.started.set()
        self.release.wait(30)
        yield self.data[100:]


def _post_in_thread(url: str, body: Any, key: str, token: str = TOKEN) -> tuple[threading.Thread, list[Any]]:
    result: list[Any] = []

    def run() -> None:
        with httpx.Client(base_url=url, timeout=60) as http:
            result.append(http.post("/v1/pipelines/reports/upload", content=body, headers={
                "Authorization": f"Bearer {token}", "Content-Type": "application/gzip", "Idempotency-Key": key}))

    thread = threading.Thread(target=run)
    thread.start()
    return thread, result


def _asgi_upload(app: Any, token: str, key: str) -> tuple[int, bytes, int]:
    """Call the ASGI app directly; return (status, body, number of receive() calls)."""
    calls = 0
    messages: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        nonlocal calls
        calls += 1
        return {"type": "http.request", "body": b"never read", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        messages.append(message)

    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
        "path": "/v1/pipelines/reports/upload", "raw_path": b"/v1/pipelines/reports/upload", "query_string": b"",
        "root_path": "", "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 2),
        "headers": [(b"authorization", f"Bearer {token}".encode()), (b"content-type", b"application/gzip"),
                    (b"idempotency-key", key.encode()), (b"content-length", b"10")],
    }
    asyncio.run(app(scope, receive, send))
    start = next(m for m in messages if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in messages if m["type"] == "http.response.body")
    return start["status"], body, calls


def test_key_in_flight_is_a_retryable_conflict_without_reading_the_body(tmp_path: Path) -> None:
    setup = write_setup(tmp_path / "site")
    slow = _SlowBody(bundle_archive(tmp_path))
    with serve_setup(setup) as server:
        thread, first = _post_in_thread(server.url, slow, "in-flight")
        assert slow.started.wait(10)
        wait_until(lambda: server.service.pending_count() == 1, message="first request to be admitted")
        status, body, receive_calls = _asgi_upload(server.app, TOKEN, "in-flight")
        assert status == 409
        assert body == b'{"error":"upload idempotency key is already being processed","retryable":true}\n'
        assert receive_calls == 0
        with server.client() as http:  # the same over HTTP
            again = upload(http, "reports", bundle_archive(tmp_path), key="in-flight")
            assert again.json() == {"error": "upload idempotency key is already being processed", "retryable": True}
        slow.release.set()
        thread.join(30)
        assert first[0].status_code == 202
        with server.client() as http:  # the reservation is released: a retry now replays
            assert upload(http, "reports", bundle_archive(tmp_path), key="in-flight").json() == first[0].json()
        wait_idle(server.service)


def test_in_flight_scope_includes_the_token(tmp_path: Path) -> None:
    setup = write_setup(tmp_path / "site", tokens={"a": ("a-secret", ["reports"]), "b": ("b-secret", ["reports"])})
    slow = _SlowBody(bundle_archive(tmp_path))
    with serve_setup(setup) as server:
        thread, first = _post_in_thread(server.url, slow, "in-flight", token="a-secret")
        assert slow.started.wait(10)
        with server.client() as http:
            second = upload(http, "reports", bundle_archive(tmp_path), token="b-secret", key="in-flight")
            assert second.status_code == 202 and second.json()["run_id"]
        slow.release.set()
        thread.join(30)
        assert first[0].status_code == 202
        assert first[0].json()["run_id"] != second.json()["run_id"]
        wait_idle(server.service)


def test_staging_failure_releases_the_key_and_records_nothing(tmp_path: Path) -> None:
    setup = write_setup(tmp_path / "site")
    with serve_setup(setup) as server, server.client() as http:
        bad = upload(http, "reports", b"not an archive", key="retry-me")
        assert bad.status_code == 400
        good = upload(http, "reports", bundle_archive(tmp_path), key="retry-me")
        assert good.status_code == 202
        wait_idle(server.service)


def test_expired_scope_gives_a_new_run(tmp_path: Path) -> None:
    setup = write_setup(tmp_path / "site", http={"retention": "1h"})
    clock = Clock(datetime(2026, 6, 3, 12, 0, tzinfo=UTC))
    suffixes = iter(["00000001", "00000002", "00000003"])
    app = create_app(setup.config, env=setup.env, clock=clock, suffix=lambda: next(suffixes))
    archive = bundle_archive(tmp_path)
    with run_server(app) as server, server.client() as http:
        first = upload(http, "reports", archive, key="expiring").json()["run_id"]
        assert first == "reports.20260603T120000Z.00000001"
        wait_status(http, first, "succeeded")
        clock.now += timedelta(minutes=59)
        assert server.service.expire() == []
        assert upload(http, "reports", archive, key="expiring").json()["run_id"] == first
        clock.now += timedelta(minutes=2)
        assert server.service.expire() == [first]
        assert not (setup.staging("reports") / first).exists()
        assert not (setup.staging("reports") / sg.IDEMPOTENCY_DIR / "reporter" / key_sha256("expiring")).exists()
        assert http.get(f"/runs/{first}", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 404
        second = upload(http, "reports", archive, key="expiring").json()["run_id"]
        assert second == "reports.20260603T130100Z.00000002"
        record = wait_status(http, second, "succeeded")
        assert record["accepted_at"] == "2026-06-03T13:01:00Z"


def test_idempotency_records_survive_a_restart(tmp_path: Path) -> None:
    setup = write_setup(tmp_path / "site")
    archive = bundle_archive(tmp_path)
    with serve_setup(setup) as server, server.client() as http:
        first = upload(http, "reports", archive, key="durable-key")
        wait_status(http, first.json()["run_id"], "succeeded")
    with serve_setup(setup) as server, server.client() as http:
        replay = upload(http, "reports", bundle_archive(tmp_path, gz=False), content_type="application/x-tar",
                        key="durable-key")
        assert replay.status_code == 202 and replay.content == first.content
        conflict = upload(http, "reports", bundle_archive(tmp_path, bundle_id="other"), key="durable-key")
        assert conflict.status_code == 409
        assert wait_status(http, first.json()["run_id"], "succeeded")["report"]["actions"][0]["action"] == "publish_new"
        assert len(server.service.records()) == 1

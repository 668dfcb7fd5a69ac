"""The producer client (interfaces §4.2, §4.3 items 1–12) against a scripted server on 127.0.0.1."""

from __future__ import annotations

import hashlib
import os
import re
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from distributor_core.bundle import BundleFile, BundleValidationError, load_manifest, marshal_manifest
from distributor_core.upload import (
    HTTPError,
    IdempotencyConflictError,
    RetryOptions,
    UploadCancelledError,
    UploadClient,
    UploadError,
    UploadTransportError,
)
from tests.bundle.conftest import REPORT, SUMMARY
from tests.upload.conftest import Script, write_producer_bundle

FAST = RetryOptions(base_delay=0.01, max_delay=0.02)


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    root = tmp_path / "bundle"
    write_producer_bundle(root)
    return root


# --- 1. options and URLs -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("endpoint", "token", "retry", "message"),
    [
        ("", "t", None, "endpoint is required"),
        ("ftp://host", "t", None, "endpoint must be an http or https URL"),
        ("host:8080", "t", None, "endpoint must be an http or https URL"),
        ("http://", "t", None, "endpoint must be an http or https URL"),
        ("http://user:pw@host", "t", None, "endpoint must not include userinfo, query, or fragment"),
        ("http://host/?a=1", "t", None, "endpoint must not include userinfo, query, or fragment"),
        ("http://host/#frag", "t", None, "endpoint must not include userinfo, query, or fragment"),
        ("http://host", "", None, "token is required"),
        ("http://host", "t", RetryOptions(max_attempts=-1), "retry options must not be negative"),
        ("http://host", "t", RetryOptions(base_delay=-0.1), "retry options must not be negative"),
        ("http://host", "t", RetryOptions(base_delay=2, max_delay=1),
         "retry max delay must be greater than or equal to base delay"),
    ],
)
def test_invalid_options(endpoint: str, token: str, retry: RetryOptions | None, message: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        UploadClient(endpoint, token, retry=retry)


def test_urls_and_defaults() -> None:
    with UploadClient("http://127.0.0.1:8080/base/", "secret") as client:
        assert client.upload_url("reports.daily") == "http://127.0.0.1:8080/base/v1/pipelines/reports.daily/upload"
        assert client.status_url("a/b c") == "http://127.0.0.1:8080/base/runs/a%2Fb%20c"
        assert client.http_client.timeout.read == 30.0
        assert "secret" not in repr(client)
    assert RetryOptions().attempts == 3
    assert [RetryOptions().delay(n) for n in (1, 2, 3, 4, 5)] == [0.5, 1.0, 2.0, 4.0, 5.0]
    assert [RetryOptions(base_delay=1, max_delay=3).delay(n) for n in (1, 2, 3)] == [1, 2, 3]


# --- 2, 3. what is sent ------------------------------------------------------------------------


def test_upload_bundle_sends_caller_key_and_manifest_archive(script: Script, bundle: Path) -> None:
    with UploadClient(script.url + "/", "secret-token", retry=FAST) as client:
        result = client.upload_bundle(pipeline_id="reports.daily", root=bundle, idempotency_key="producer.retry:one")
    assert result.run_id == "reports.20260603T120000Z.abcdef12" and result.status == "accepted"
    assert result.status_url == "/runs/reports.20260603T120000Z.abcdef12" and result.raw["pipeline_id"] == "reports"
    [request] = script.requests
    assert (request.method, request.path) == ("POST", "/v1/pipelines/reports.daily/upload")
    assert request.header("authorization") == "Bearer secret-token"
    assert request.header("idempotency-key") == "producer.retry:one"
    assert request.header("content-type") == "application/gzip"
    assert request.header("content-length") == str(len(request.body))
    assert request.header("transfer-encoding") is None
    manifest = load_manifest(bundle)
    assert request.entries() == [("manifest.json", 0o644, marshal_manifest(manifest)),
                                 ("report.md", 0o644, REPORT), ("summary.txt", 0o644, SUMMARY)]


def test_upload_files_builds_a_temporary_bundle_without_touching_sources(script: Script, tmp_path: Path) -> None:
    source = tmp_path / "out" / "report.md"
    source.parent.mkdir()
    source.write_bytes(REPORT)
    before = (source.stat().st_mtime_ns, source.read_bytes())
    temp_dir = tmp_path / "scratch"
    temp_dir.mkdir()
    with UploadClient(script.url, "secret", retry=FAST) as client:
        client.upload_files(pipeline_id="reports.files", id="reports.from.files",
                            files=[BundleFile(source, "report.md")], temp_dir=temp_dir)
    [request] = script.requests
    assert request.path == "/v1/pipelines/reports.files/upload"
    entries = request.entries()
    assert [name for name, _, _ in entries] == ["manifest.json", "report.md"]
    assert b'"id": "reports.from.files"' in entries[0][2]
    assert (source.stat().st_mtime_ns, source.read_bytes()) == before
    assert list(temp_dir.iterdir()) == []


def test_upload_bundle_leaves_no_temporary_files(script: Script, bundle: Path, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(scratch))
    script.answer((400, {"error": "invalid upload archive: nope"}))
    with UploadClient(script.url, "secret", retry=FAST) as client:
        with pytest.raises(HTTPError):
            client.upload_bundle(pipeline_id="reports", root=bundle)
        client.upload_bundle(pipeline_id="reports", root=bundle)
    assert list(scratch.iterdir()) == []


# --- 4, 5, 6, 12. local checks before any request ---------------------------------------------


def test_missing_pipeline_id_is_checked_before_local_work(script: Script, tmp_path: Path) -> None:
    temp_dir = tmp_path / "scratch"
    temp_dir.mkdir()
    source = tmp_path / "report.md"
    source.write_bytes(b"data")
    with UploadClient(script.url, "secret") as client:
        with pytest.raises(ValueError, match=r"^pipeline id is required$"):
            client.upload_bundle(pipeline_id="", root=tmp_path / "missing")
        with pytest.raises(ValueError, match=r"^pipeline id is required$"):
            client.upload_files(pipeline_id="", id="reports.from.files", files=[BundleFile(source, "report.md")],
                                temp_dir=temp_dir)
    assert list(temp_dir.iterdir()) == []
    assert script.requests == []


@pytest.mark.parametrize("pipeline_id", [".reports", "reports/daily", "reports daily", "répertoire", "a\n"])
def test_invalid_pipeline_ids(script: Script, bundle: Path, pipeline_id: str) -> None:
    with UploadClient(script.url, "secret") as client, pytest.raises(
            ValueError, match=r"^pipeline id must be a slug-like identifier$"):
        client.upload_bundle(pipeline_id=pipeline_id, root=bundle)
    assert script.requests == []


def test_preflight_order_and_messages(script: Script, bundle: Path) -> None:
    with UploadClient(script.url, "secret") as client:
        with pytest.raises(ValueError, match=r"^validate and disable validation cannot both be set$"):
            client.upload_bundle(pipeline_id="", root="", validate=True, disable_validation=True)
        with pytest.raises(ValueError, match=r"^root is required$"):
            client.upload_bundle(pipeline_id="reports", root="")
        with pytest.raises(ValueError, match=r"^id is required$"):
            client.upload_files(pipeline_id="reports", id="", files=[])
        with pytest.raises(ValueError, match=r"^files is required$"):
            client.upload_files(pipeline_id="reports", id="x", files=[])
        for key in ("bad key", "", "a" * 129, "é"):
            with pytest.raises(ValueError, match=r"^idempotency key must be 1-128 ASCII letters"):
                client.upload_bundle(pipeline_id="reports", root=bundle, idempotency_key=key)
        with pytest.raises(ValueError, match=r"^run id is required$"):
            client.status("")
    assert script.requests == []


def test_validation_failure_prevents_the_request_unless_disabled(script: Script, bundle: Path) -> None:
    (bundle / "report.md").write_bytes(b"changed after the manifest was written\n")
    with UploadClient(script.url, "secret", retry=FAST) as client:
        with pytest.raises(BundleValidationError, match=r"report\.md size"):
            client.upload_bundle(pipeline_id="reports", root=bundle)
        assert script.requests == []
        client.upload_bundle(pipeline_id="reports", root=bundle, disable_validation=True)
    assert len(script.requests) == 1


def test_manifest_parse_errors_fail_even_without_validation(script: Script, bundle: Path) -> None:
    (bundle / "manifest.json").write_text("{")
    with UploadClient(script.url, "secret") as client, pytest.raises(ValueError, match="manifest is not valid JSON"):
        client.upload_bundle(pipeline_id="reports", root=bundle, disable_validation=True)
    assert script.requests == []


# --- 7, 8, 9, 10, 11. retries, errors, redaction, cancellation -----------------------------------


def test_generated_key_is_reused_across_a_503_retry(script: Script, bundle: Path) -> None:
    script.answer((503, {"error": "upload queue is full", "retryable": True}))
    with UploadClient(script.url, "secret", retry=FAST) as client:
        result = client.upload_bundle(pipeline_id="reports", root=bundle)
    assert result.run_id
    keys = [r.header("idempotency-key") for r in script.requests]
    assert len(keys) == 2 and keys[0] == keys[1] and re.fullmatch(r"[0-9a-f]{32}", keys[0] or "")
    assert hashlib.sha256(script.requests[0].body).digest() == hashlib.sha256(script.requests[1].body).digest()


def test_each_call_generates_a_new_key(script: Script, bundle: Path) -> None:
    with UploadClient(script.url, "secret", retry=FAST) as client:
        client.upload_bundle(pipeline_id="reports", root=bundle)
        client.upload_bundle(pipeline_id="reports", root=bundle)
    assert script.requests[0].header("idempotency-key") != script.requests[1].header("idempotency-key")


@pytest.mark.parametrize("status", [400, 401, 403, 404, 409, 413, 415, 500, 502])
def test_no_retry_statuses(script: Script, bundle: Path, status: int) -> None:
    script.answer((status, {"error": f"refused with {status}", "retryable": status == 409}))
    with UploadClient(script.url, "secret", retry=FAST) as client, pytest.raises(HTTPError) as info:
        client.upload_bundle(pipeline_id="reports", root=bundle, idempotency_key="key")
    assert len(script.requests) == 1
    error = info.value
    assert error.status_code == status and error.status.startswith(f"{status} ")
    assert error.message == f"refused with {status}"
    assert error.retryable is (status == 409)
    assert isinstance(error, IdempotencyConflictError) is (status == 409)
    assert str(error) == f"HTTP {error.status}: refused with {status}"


def test_conflict_without_retryable_flag(script: Script, bundle: Path) -> None:
    script.answer((409, {"error": "upload idempotency key was already used for a different source manifest"}))
    with UploadClient(script.url, "secret") as client, pytest.raises(IdempotencyConflictError) as info:
        client.upload_bundle(pipeline_id="reports", root=bundle)
    assert info.value.retryable is False and info.value.status == "409 Conflict"  # issue 15 item 8


def test_last_503_is_raised_after_every_attempt(script: Script, bundle: Path) -> None:
    script.answer(*[(503, {"error": "upload queue is full", "retryable": True})] * 4)
    retry = RetryOptions(max_attempts=4, base_delay=0.01)
    with UploadClient(script.url, "secret", retry=retry) as client, pytest.raises(HTTPError) as info:
        client.upload_bundle(pipeline_id="reports", root=bundle)
    assert len(script.requests) == 4
    assert (info.value.status_code, info.value.retryable) == (503, True)


def test_unexpected_success_answers_are_errors(script: Script, bundle: Path) -> None:
    script.answer((202, {"status": "accepted"}), (200, {"run_id": "x"}))
    with UploadClient(script.url, "secret", retry=FAST) as client:
        with pytest.raises(UploadError, match=r"^upload was accepted but the response has no run_id$"):
            client.upload_bundle(pipeline_id="reports", root=bundle)
        with pytest.raises(UploadError, match=r"^unexpected upload response 200 OK$"):
            client.upload_bundle(pipeline_id="reports", root=bundle)
    assert len(script.requests) == 2


def test_plain_text_error_bodies_are_trimmed(script: Script, bundle: Path) -> None:
    script.answer((400, b"  " + b"x" * 5000 + b"\n"))
    with UploadClient(script.url, "secret") as client, pytest.raises(HTTPError) as info:
        client.upload_bundle(pipeline_id="reports", root=bundle)
    assert info.value.message == "x" * 1022 and info.value.retryable is None


def test_token_is_redacted_everywhere(script: Script, bundle: Path) -> None:
    token = "secret-token-value"
    script.answer((403, {"error": f"token {token} is not allowed"}))
    with UploadClient(script.url, token) as client:
        with pytest.raises(HTTPError) as info:
            client.upload_bundle(pipeline_id="reports", root=bundle)
        for text in (str(info.value), repr(info.value), info.value.message, repr(client)):
            assert token not in text
        assert info.value.message == "token [redacted] is not allowed"
    with UploadClient(f"http://127.0.0.1:1/{token}", token, retry=FAST) as client:
        with pytest.raises(UploadTransportError) as transport:
            client.upload_bundle(pipeline_id="reports", root=bundle)
        assert token not in str(transport.value) and "[redacted]" in str(transport.value)
        assert transport.value.__cause__ is None and transport.value.__context__ is None


class _Flaky(httpx.BaseTransport):
    """Fails the first requests with the given errors, after reading their whole body."""

    def __init__(self, errors: list[Exception]) -> None:
        self.errors = errors
        self.inner = httpx.HTTPTransport()
        self.keys: list[str | None] = []
        self.bodies: list[bytes] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.keys.append(request.headers.get("idempotency-key"))
        if self.errors:
            self.bodies.append(b"".join(request.stream))  # type: ignore[union-attr]
            raise self.errors.pop(0)
        return self.inner.handle_request(request)


@pytest.mark.parametrize("error", [
    httpx.ConnectError("connection refused"),
    httpx.ConnectTimeout("connect timed out"),
    httpx.ReadTimeout("read timed out"),
    httpx.WriteError("broken pipe"),
    httpx.RemoteProtocolError("Server disconnected without sending a response."),
    httpx.ReadError("connection reset by peer"),
])
def test_transient_network_errors_are_retried_with_the_same_key(script: Script, bundle: Path,
                                                                 error: Exception) -> None:
    transport = _Flaky([error])
    with httpx.Client(transport=transport, base_url=script.url) as http, \
            UploadClient(script.url, "secret", http_client=http, retry=FAST) as client:
        result = client.upload_bundle(pipeline_id="reports", root=bundle, idempotency_key="network-retry")
    assert result.run_id
    assert transport.keys == ["network-retry", "network-retry"]
    assert transport.bodies[0] == script.requests[0].body  # replayed byte for byte


def test_non_transient_transport_errors_are_not_retried(script: Script, bundle: Path) -> None:
    transport = _Flaky([httpx.UnsupportedProtocol("no"), httpx.ConnectError("later")])
    with httpx.Client(transport=transport) as http, \
            UploadClient(script.url, "secret", http_client=http, retry=FAST) as client, \
            pytest.raises(UploadTransportError, match="UnsupportedProtocol"):
        client.upload_bundle(pipeline_id="reports", root=bundle)
    assert len(transport.keys) == 1 and script.requests == []


def test_network_errors_exhaust_attempts(bundle: Path) -> None:
    transport = _Flaky([httpx.ConnectError("refused")] * 3)
    with httpx.Client(transport=transport) as http, \
            UploadClient("http://127.0.0.1:9", "secret", http_client=http, retry=FAST) as client, \
            pytest.raises(UploadTransportError, match="ConnectError: refused") as info:
        client.upload_bundle(pipeline_id="reports", root=bundle)
    assert len(transport.keys) == 3 and info.value.cause_type == "ConnectError"


def test_cancel_during_backoff(script: Script, bundle: Path) -> None:
    script.answer(*[(503, {"error": "upload queue is full", "retryable": True})] * 5)
    cancel = threading.Event()
    cancelled_at: list[float] = []

    def cancel_after_the_first_answer() -> None:  # not a fixed delay: a loaded machine is slow to send
        deadline = time.monotonic() + 30
        while not script.requests and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.2)  # inside the 10 s wait before the second attempt
        cancelled_at.append(time.monotonic())
        cancel.set()

    threading.Thread(target=cancel_after_the_first_answer, daemon=True).start()
    retry = RetryOptions(max_attempts=5, base_delay=10)
    with UploadClient(script.url, "secret", retry=retry) as client, pytest.raises(UploadCancelledError):
        client.upload_bundle(pipeline_id="reports", root=bundle, cancel_event=cancel)
    assert time.monotonic() - cancelled_at[0] < 3  # the wait was interrupted, not served
    assert len(script.requests) == 1


def test_cancel_before_the_first_attempt(script: Script, bundle: Path) -> None:
    cancel = threading.Event()
    cancel.set()
    with UploadClient(script.url, "secret") as client, pytest.raises(UploadCancelledError):
        client.upload_bundle(pipeline_id="reports", root=bundle, cancel_event=cancel)
    assert script.requests == []


# --- status ---------------------------------------------------------------------------------------


def test_status(script: Script) -> None:
    record: dict[str, Any] = {
        "run_id": "reports.20260603T120000Z.abcdef12", "pipeline_id": "reports", "status": "failed",
        "accepted_at": "2026-06-03T12:00:00Z", "started_at": "2026-06-03T12:00:01Z",
        "finished_at": "2026-06-03T12:00:02Z", "error": "1 destination(s) failed", "report": {"actions": []},
    }
    script.answer((200, record), (404, {"error": "run not found"}))
    with UploadClient(script.url + "/base", "secret") as client:
        status = client.status("reports.20260603T120000Z.abcdef12")
        assert (status.status, status.pipeline_id, status.error) == ("failed", "reports", "1 destination(s) failed")
        assert status.accepted_at is not None and status.accepted_at.isoformat() == "2026-06-03T12:00:00+00:00"
        assert status.report == {"actions": []} and status.raw == record and status.dagster_run_id is None
        with pytest.raises(HTTPError) as info:
            client.status("reports.20260603T120000Z.00000000")
        assert (info.value.status_code, info.value.message) == (404, "run not found")
    first = script.requests[0]
    assert (first.method, first.path) == ("GET", "/base/runs/reports.20260603T120000Z.abcdef12")
    assert first.header("authorization") == "Bearer secret"
    assert len(script.requests) == 2


def test_large_bundle_is_streamed_from_a_file(script: Script, tmp_path: Path) -> None:
    root = tmp_path / "big"
    root.mkdir()
    chunk = os.urandom(1024 * 1024)
    with open(root / "data.bin", "wb") as out:
        for _ in range(24):
            out.write(chunk)
    from distributor_core.bundle import build_manifest, write_manifest

    write_manifest(root, build_manifest(root, id="big", scan=True))
    with UploadClient(script.url, "secret", retry=FAST) as client:
        client.upload_bundle(pipeline_id="reports", root=root)
    [request] = script.requests
    assert int(request.header("content-length") or 0) > 24 * 1024 * 1024
    assert [(name, len(data)) for name, _, data in request.entries()][1:] == [("data.bin", 24 * 1024 * 1024)]

"""Routing, the check order of interfaces §3.4 and the error shapes of §3.3 (items 4–10 of §3.9),
plus status authorisation (resolutions D2), against a real uvicorn server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from distributor_core import staging as sg
from tests.server.harness import (
    TOKEN,
    Running,
    Setup,
    bundle_archive,
    serve_setup,
    snapshot,
    upload,
    wait_idle,
    wait_status,
    write_setup,
)


@pytest.fixture(scope="module")
def two_pipelines(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Setup, Running]]:
    """Upload pipelines ``reports`` and ``private``; ``reporter`` may use reports only."""
    setup = write_setup(
        tmp_path_factory.mktemp("routing") / "site",
        pipelines={"reports": 1, "private": 1},
        tokens={"reporter": (TOKEN, ["reports"]), "private-reporter": ("private-secret", ["private"])},
        max_upload_size={"reports": "64KB"},
    )
    with serve_setup(setup) as server:
        yield setup, server


@pytest.fixture
def http(two_pipelines: tuple[Setup, Running]) -> Iterator[httpx.Client]:
    with two_pipelines[1].client() as client:
        yield client


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    return bundle_archive(tmp_path_factory.mktemp("bundle"))


def _records(setup: Setup, pipeline: str) -> list[sg.UploadRecord]:
    return sg.list_records(setup.staging(pipeline))


def test_upload_is_accepted_and_recorded_with_token_pipeline_and_key(
    two_pipelines: tuple[Setup, Running], http: httpx.Client, archive: bytes
) -> None:
    setup, _ = two_pipelines
    response = upload(http, "reports", archive, content_type="application/x-gzip", key="producer.retry:20260603")
    assert response.status_code == 202, response.text
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    run_id = body["run_id"]
    assert body == {"run_id": run_id, "pipeline_id": "reports", "status": "accepted",
                    "status_url": f"/runs/{run_id}"}
    assert response.headers["location"] == f"/runs/{run_id}"
    assert sg.is_run_id(run_id) and run_id.startswith("reports.")
    record = sg.read_record(setup.staging("reports"), run_id)
    assert (record.pipeline_id, record.token_id, record.idempotency_key) == (
        "reports", "reporter", "producer.retry:20260603")
    assert record.response == body
    wait_status(http, run_id, "succeeded")


@pytest.mark.parametrize("authorization", [None, "", "Basic " + TOKEN, "Bearer", "Bearer wrong-token", "Bearer" + TOKEN,
                                           "bearer " + TOKEN, "Bearer  x" + TOKEN, "Bearer  " + TOKEN,
                                           "Bearer   \t" + TOKEN, "Bearer \t" + TOKEN])
def test_unauthorised_uploads(http: httpx.Client, archive: bytes, authorization: str | None) -> None:
    headers = {} if authorization is None else {"Authorization": authorization}
    response = upload(http, "reports", archive, token=None, headers=headers)
    assert response.status_code == 401
    assert response.json() == {"error": "unauthorized"}


def test_bearer_token_takes_exactly_one_space(http: httpx.Client, archive: bytes) -> None:
    """``Bearer <token>``, one space as the docs say (issue 35, item 9): two spaces or a tab are
    refused on both routes, and the token with its one space still works."""
    run_id = upload(http, "reports", archive).json()["run_id"]
    for header in (f"Bearer  {TOKEN}", f"Bearer \t{TOKEN}"):
        assert upload(http, "reports", archive, token=None, headers={"Authorization": header}).status_code == 401
        refused = http.get(f"/runs/{run_id}", headers={"Authorization": header})
        assert (refused.status_code, refused.json()) == (401, {"error": "unauthorized"})
    assert http.get(f"/runs/{run_id}", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200


def test_forbidden_pipeline_stages_nothing(two_pipelines: tuple[Setup, Running], http: httpx.Client,
                                           archive: bytes) -> None:
    setup, running = two_pipelines
    wait_idle(running.service)
    before = snapshot(setup.staging_root)
    response = upload(http, "private", archive)
    assert response.status_code == 403
    assert response.json() == {"error": "forbidden"}
    assert TOKEN not in response.text
    assert snapshot(setup.staging_root) == before
    assert running.service.pending_count() == 0


@pytest.mark.parametrize(
    ("path", "status", "message"),
    [
        ("/upload", 404, "not found"),
        ("/v1/pipelines//upload", 404, "not found"),
        ("/v1/pipelines/reports/upload/extra", 404, "not found"),
        ("/v1/pipelines/reports/upload/", 404, "not found"),
        ("/v1/pipelines/reports%2Fdaily/upload", 404, "not found"),
        ("/v1/pipelines/.reports/upload", 400, "invalid pipeline id"),
        ("/v1/pipelines/re%20ports/upload", 400, "invalid pipeline id"),
        ("/v1/pipelines/reports/upload?pipeline=other", 400, "pipeline id is not accepted"),
        ("/v1/pipelines/reports/upload?pipeline_id=other", 400, "pipeline id is not accepted"),
        ("/v1/pipelines/reports/upload?x=1&pipeline_id", 400, "pipeline id is not accepted"),
        ("/v1/pipelines//upload?pipeline=x", 400, "pipeline id is not accepted"),
        ("/v1/pipelines/missing/upload", 404, "upload pipeline not found"),
    ],
)
def test_upload_paths(two_pipelines: tuple[Setup, Running], http: httpx.Client, archive: bytes,
                      path: str, status: int, message: str) -> None:
    setup, running = two_pipelines
    wait_idle(running.service)
    before = snapshot(setup.staging_root)
    response = http.post(path, content=archive, headers={"Authorization": f"Bearer {TOKEN}",
                                                         "Content-Type": "application/gzip"})
    assert (response.status_code, response.json()) == (status, {"error": message})
    assert snapshot(setup.staging_root) == before


def test_invalid_pipeline_id_is_reported_before_authentication(http: httpx.Client, archive: bytes) -> None:
    response = upload(http, ".reports", archive, token="wrong")
    assert (response.status_code, response.json()) == (400, {"error": "invalid pipeline id"})
    # an unknown pipeline is only revealed to an authenticated caller
    response = upload(http, "missing", archive, token="wrong")
    assert (response.status_code, response.json()) == (401, {"error": "unauthorized"})


@pytest.mark.parametrize(
    ("content_type", "status"),
    [("application/zip", 415), ("", 415), ("text/plain", 415), ("APPLICATION/GZIP; charset=binary", 202),
     ("application/x-tar", 400)],
)
def test_content_types(http: httpx.Client, archive: bytes, content_type: str, status: int) -> None:
    response = upload(http, "reports", archive, content_type=content_type)
    assert response.status_code == status, response.text
    if status == 415:
        assert response.json() == {"error": "unsupported content type"}


def test_missing_content_type_is_415(http: httpx.Client, archive: bytes) -> None:
    response = http.post("/v1/pipelines/reports/upload", content=archive,
                         headers={"Authorization": f"Bearer {TOKEN}"})
    assert (response.status_code, response.json()) == (415, {"error": "unsupported content type"})


@pytest.mark.parametrize("keys", [["bad key"], [""], ["a" * 129], ["one", "two"], ["é"], ["a/b"], ["a,b"]])
def test_invalid_idempotency_keys(http: httpx.Client, archive: bytes, keys: list[str]) -> None:
    headers = [("Authorization", f"Bearer {TOKEN}"), ("Content-Type", "application/gzip")]
    headers += [("Idempotency-Key", key) for key in keys]
    response = http.post("/v1/pipelines/reports/upload", content=archive,
                         headers=httpx.Headers([(k, v.encode()) for k, v in headers]))
    assert (response.status_code, response.json()) == (400, {"error": "invalid idempotency key"})


def test_longest_valid_key_is_accepted(http: httpx.Client, archive: bytes) -> None:
    response = upload(http, "reports", archive, key="A-z.0_9:" * 16)
    assert response.status_code == 202


def test_check_order_before_body(two_pipelines: tuple[Setup, Running], http: httpx.Client) -> None:
    """415 beats a bad key; a bad key beats the size check; 413 comes from Content-Length alone."""
    setup, running = two_pipelines
    wait_idle(running.service)
    big = b"x" * (64 * 1024 + 1)
    assert upload(http, "reports", big, content_type="application/zip", key="bad key").status_code == 415
    assert upload(http, "reports", big, key="bad key").status_code == 400
    before = snapshot(setup.staging_root)
    response = upload(http, "reports", big)
    assert (response.status_code, response.json()) == (413, {"error": "upload exceeds maximum size"})
    assert snapshot(setup.staging_root) == before


def test_submission_errors_never_echo_token_or_run_id(http: httpx.Client, archive: bytes, tmp_path: Path) -> None:
    cases = [
        upload(http, "reports", b"not a tar archive", content_type="application/x-tar"),
        upload(http, "reports", b"\x1f\x8b not gzip"),
        upload(http, "reports", b"x" * 70000),
    ]
    first = upload(http, "reports", archive, key="error-shapes")
    assert first.status_code == 202
    run_id = first.json()["run_id"]
    other = bundle_archive(tmp_path, bundle_id="reports.other")
    cases.append(upload(http, "reports", other, key="error-shapes"))
    statuses = [c.status_code for c in cases]
    assert statuses == [400, 400, 413, 409]
    for case in cases:
        body = case.json()
        assert set(body) == {"error"}, body  # retryable only where specified
        assert TOKEN not in case.text and run_id not in case.text and "run_id" not in case.text
        assert "/" not in body["error"] or body["error"].startswith("invalid")
    assert cases[3].json() == {"error": "upload idempotency key was already used for a different source manifest"}


def test_healthz_and_catch_all(http: httpx.Client) -> None:
    response = http.get("/healthz")
    assert (response.status_code, response.json()) == (200, {"status": "ok"})
    assert response.headers["content-type"] == "application/json"
    for method, path in [("POST", "/healthz"), ("DELETE", "/healthz"), ("HEAD", "/healthz"), ("GET", "/"),
                         ("GET", "/v1/pipelines/reports/upload"), ("PUT", "/v1/pipelines/reports/upload"),
                         ("POST", "/runs/x"), ("GET", "/runs/"), ("GET", "/runs/a/b"), ("GET", "/redoc"),
                         ("GET", "/docs/oauth2-redirect"), ("GET", "/healthz/"), ("PATCH", "/nowhere"),
                         ("OPTIONS", "/healthz")]:
        response = http.request(method, path)
        assert response.status_code == 404, (method, path, response.status_code)
        if method != "HEAD":
            assert response.json() == {"error": "not found"}, (method, path)
        assert "allow" not in response.headers


def test_openapi_and_docs_need_no_token(http: httpx.Client) -> None:
    document = http.get("/openapi.json")
    assert document.status_code == 200
    spec = document.json()
    assert set(spec["paths"]) == {"/healthz", "/v1/pipelines/{pipeline_id}/upload", "/runs/{run_id}"}
    upload_op = spec["paths"]["/v1/pipelines/{pipeline_id}/upload"]["post"]
    assert set(upload_op["requestBody"]["content"]) == {"application/gzip", "application/x-gzip",
                                                         "application/x-tar"}
    assert {"202", "400", "401", "403", "404", "409", "413", "415", "503"} <= set(upload_op["responses"])
    assert spec["components"]["securitySchemes"]["bearerAuth"] == {"type": "http", "scheme": "bearer"}
    docs = http.get("/docs")
    assert docs.status_code == 200 and "swagger" in docs.text.lower()
    assert "oauth2RedirectUrl" not in docs.text


def test_run_status_requires_an_allowed_token(two_pipelines: tuple[Setup, Running], http: httpx.Client,
                                              archive: bytes) -> None:
    response = upload(http, "reports", archive)
    run_id = response.json()["run_id"]
    record = wait_status(http, run_id, "succeeded")
    assert record["run_id"] == run_id and record["pipeline_id"] == "reports"
    assert set(record) >= {"accepted_at", "started_at", "finished_at", "report"}
    assert "error" not in record
    assert http.get(f"/runs/{run_id}").status_code == 401
    assert http.get(f"/runs/{run_id}", headers={"Authorization": "Bearer wrong"}).json() == {"error": "unauthorized"}
    hidden = http.get(f"/runs/{run_id}", headers={"Authorization": "Bearer private-secret"})
    unknown = http.get("/runs/reports.20260101T000000Z.00000000", headers={"Authorization": f"Bearer {TOKEN}"})
    garbage = http.get("/runs/not-a-run-id", headers={"Authorization": f"Bearer {TOKEN}"})
    for response in (hidden, unknown, garbage):
        assert (response.status_code, response.json()) == (404, {"error": "run not found"})
    assert json.dumps(hidden.json()).find(run_id) == -1

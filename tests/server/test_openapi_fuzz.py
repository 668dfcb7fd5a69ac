"""Schemathesis against the served ``/openapi.json``: generated requests (with and without a valid
token) never get a 5xx, and every answer matches the documented status codes, content type and
response schemas (README resolution 4).

Schemathesis' pytest plugin does not support this pytest version, so its Python API drives
Hypothesis directly: one property per operation of the loaded schema.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from tests.server.harness import TOKEN, Running, serve_setup, wait_idle, write_setup

# archives are binary bodies: reuse schemathesis' octet-stream serializer for the three media types
schemathesis.serializer.alias(["application/gzip", "application/x-gzip", "application/x-tar"],
                              "application/octet-stream")

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
EXAMPLES = 80


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    setup = write_setup(Path(tmp_path_factory.mktemp("openapi")) / "site", http={"queue_size": 1000})
    with serve_setup(setup) as running:
        yield running
        wait_idle(running.service)


def _fuzz(served: Running, headers: dict[str, str] | None) -> dict[str, set[int]]:
    """Run every operation; return the status codes seen per operation label."""
    schema = schemathesis.openapi.from_url(f"{served.url}/openapi.json")
    seen: dict[str, set[int]] = {}
    for result in schema.get_all_operations():
        operation = result.ok()
        _property(operation, served.url, headers, seen.setdefault(operation.label, set()))()
    return seen


def _property(operation: Any, url: str, headers: dict[str, str] | None, codes: set[int]) -> Callable[[], None]:
    @given(case=operation.as_strategy())
    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    def property_(case: schemathesis.Case) -> None:
        response = case.call_and_validate(base_url=url, checks=CHECKS, headers=headers)
        codes.add(response.status_code)

    return property_  # type: ignore[return-value]


def test_generated_requests(served: Running) -> None:
    seen = _fuzz(served, None)
    assert sorted(seen) == ["GET /healthz", "GET /runs/{run_id}", "POST /v1/pipelines/{pipeline_id}/upload"]
    assert all(code < 500 for codes in seen.values() for code in codes)


def test_generated_requests_with_a_valid_token(served: Running) -> None:
    seen = _fuzz(served, {"Authorization": f"Bearer {TOKEN}"})
    upload_codes = seen["POST /v1/pipelines/{pipeline_id}/upload"]
    assert upload_codes & {400, 404, 415}, upload_codes  # the token got requests past authentication
    assert seen["GET /runs/{run_id}"] == {404}
    assert all(code < 500 for codes in seen.values() for code in codes)

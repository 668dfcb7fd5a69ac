"""Result types of the client (issue 15 item 8): a 409 gives ``retryable=False`` unless it is
the in-flight one (``True``), never ``None``."""

from __future__ import annotations

from pathlib import Path

import pytest

from distributor_core.upload import IdempotencyConflictError, UploadClient
from tests.server.harness import bundle_dir, serve_setup, write_setup
from tests.upload.conftest import Script, write_producer_bundle

TOKEN = "tok-0123456789abcdef"


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    root = tmp_path / "bundle"
    write_producer_bundle(root)
    return root


@pytest.mark.parametrize(("body", "retryable"), [
    ({"error": "upload idempotency key was already used for a different source manifest"}, False),
    ({"error": "upload idempotency key is already being processed", "retryable": True}, True),
    (b"conflict", False),
])
def test_409_retryable_is_a_boolean(script: Script, bundle: Path, body: object, retryable: bool) -> None:
    script.answer((409, body))
    with UploadClient(script.url, TOKEN) as client, pytest.raises(IdempotencyConflictError) as info:
        client.upload_bundle(pipeline_id="reports", root=bundle)
    assert info.value.retryable is retryable


def test_the_real_servers_key_conflict_is_not_retryable(tmp_path: Path) -> None:
    setup = write_setup(tmp_path / "site", tokens={"reporter": (TOKEN, ["reports"])})
    first, second = tmp_path / "first", tmp_path / "second"
    bundle_dir(first)
    bundle_dir(second, bundle_id="reports.other")
    with serve_setup(setup) as server, UploadClient(server.url, TOKEN) as client:
        client.upload_bundle(pipeline_id="reports", root=first, idempotency_key="one-run")
        with pytest.raises(IdempotencyConflictError) as info:
            client.upload_bundle(pipeline_id="reports", root=second, idempotency_key="one-run")
        assert info.value.retryable is False and info.value.status_code == 409
        assert info.value.message == "upload idempotency key was already used for a different source manifest"

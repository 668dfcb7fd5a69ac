"""Client redaction (issue 14, eighth finding).

A non-JSON error body cut at 1 KiB in the middle of the token used to leave the token's first
characters in ``HTTPError.message``; ``UploadResult``/``RunStatus`` reprs and ``report`` were not
redacted."""

from __future__ import annotations

from pathlib import Path

import pytest

from distributor_core.upload import HTTPError, UploadClient
from tests.upload.conftest import Script, write_producer_bundle

TOKEN = "tok-0123456789abcdef"


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    root = tmp_path / "bundle"
    write_producer_bundle(root)
    return root


@pytest.mark.parametrize("offset", [1014, 1016, 1020, 1023])
def test_a_token_cut_by_the_1_kib_limit_never_leaks(script: Script, bundle: Path, offset: int) -> None:
    script.answer((400, ("x" * offset + TOKEN + " and more text " * 100).encode()))
    with UploadClient(script.url, TOKEN) as client, pytest.raises(HTTPError) as info:
        client.upload_bundle(pipeline_id="reports", root=bundle)
    message = info.value.message
    assert message == "x" * offset + "[redacted]"
    for text in (message, str(info.value), repr(info.value)):
        assert TOKEN[:4] not in text and TOKEN not in text


def test_a_multibyte_body_is_cut_cleanly(script: Script, bundle: Path) -> None:
    script.answer((502, ("é" * 600).encode()))
    with UploadClient(script.url, TOKEN) as client, pytest.raises(HTTPError) as info:
        client.upload_bundle(pipeline_id="reports", root=bundle)
    assert info.value.message == "é" * 512 and info.value.retryable is None


def test_result_reprs_reports_and_raw_bodies_are_redacted(script: Script, bundle: Path) -> None:
    run_id = "reports.20260603T120000Z.abcdef12"
    script.answer(
        (202, {"run_id": run_id, "pipeline_id": "reports", "status": "accepted",
               "status_url": f"/runs/{run_id}?echo={TOKEN}"}),
        (200, {"run_id": run_id, "pipeline_id": "reports", "status": "failed", "error": f"bad token {TOKEN}",
               "accepted_at": "2026-06-03T12:00:00Z",
               "report": {"pipelines": [{"id": "reports", "error": f"echo {TOKEN}"}], TOKEN: [TOKEN]}}),
    )
    with UploadClient(script.url, TOKEN) as client:
        result = client.upload_bundle(pipeline_id="reports", root=bundle)
        status = client.status(result.run_id)
    assert result.run_id == run_id and result.status_url == f"/runs/{run_id}?echo=[redacted]"
    assert status.error == "bad token [redacted]"
    assert status.report == {"pipelines": [{"id": "reports", "error": "echo [redacted]"}],
                             "[redacted]": ["[redacted]"]}
    for text in (repr(result), repr(status), str(result.raw), str(status.raw), str(status.report)):
        assert TOKEN not in text
    assert repr(result) == (f"UploadResult(run_id={run_id!r}, pipeline_id='reports', status='accepted', "
                            f"status_url='/runs/{run_id}?echo=[redacted]')")
    assert repr(status).startswith(f"RunStatus(run_id={run_id!r}, pipeline_id='reports', status='failed', "
                                   "error='bad token [redacted]'")

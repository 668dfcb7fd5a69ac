"""An upload that ends ``skip_destination_newer`` everywhere succeeded but published nothing: its
run status says so (``published: false`` and a ``note``) and the Python client's ``wait`` returns
it and logs it, through a real uvicorn server (issue: a newcomer's first hour)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from pathlib import Path

import pytest

from distributor_core.upload import UploadClient
from tests.server.harness import TOKEN, bundle_archive, serve_setup, upload, write_setup

NEWER = datetime(2026, 6, 8, 15, 0, tzinfo=UTC)
OLDER = datetime(2026, 6, 7, 15, 0, tzinfo=UTC)


def test_an_upload_older_than_what_every_destination_holds_says_it_published_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    setup = write_setup(tmp_path / "site", pipelines={"reports": 2})
    caplog.set_level(logging.WARNING, logger="distributor.upload")
    with serve_setup(setup) as server, UploadClient(server.url, TOKEN) as client, server.client() as http:
        newer = upload(http, "reports", bundle_archive(tmp_path, {"report.md": b"# newer\n"}, created=NEWER),
                       key="newer").json()["run_id"]
        first = client.wait(newer, timeout=60, interval=0.05)
        assert (first.status, first.published, first.note) == ("succeeded", True, "")
        assert "published nothing" not in caplog.text

        older = upload(http, "reports", bundle_archive(tmp_path, {"report.md": b"# older\n"}, created=OLDER),
                       key="older").json()["run_id"]
        status = client.wait(older, timeout=60, interval=0.05)
    assert status.status == "succeeded"  # nothing failed ...
    assert status.published is False     # ... and nothing was published, which the status says
    destinations = ", ".join(key.split("/", 1)[1] for key in setup.destinations)
    assert status.note == (f"nothing was published: {destinations} already hold a newer bundle of this id "
                           "(skip_destination_newer)")
    assert status.raw["published"] is False and status.raw["note"] == status.note
    assert {a["action"] for a in status.report["actions"]} == {"skip_destination_newer"}
    assert f"distributor run {older} nothing was published: " in caplog.text
    for destination in setup.destinations.values():
        assert (destination / "report.md").read_bytes() == b"# newer\n"

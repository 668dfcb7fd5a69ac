"""The hostile-archive corpus of tests/server/test_archive_corpus.py sent to a server whose
staging is shared S3 (issue 29): the same answers (400 or 413, the same message), and a refused
upload leaves nothing behind: no record, no bundle object, no idempotency-key entry, no pending
marker in the bucket, nothing in the server's scratch directory, nothing written anywhere on
disk (the sentinel the archives aim at included)."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from distributor_core.config import Environment
from distributor_core.server import create_app
from distributor_core.staging.objectstore import ObjectStagingStore
from tests.bundle.conftest import REPORT, SUMMARY
from tests.peers.moto import MotoServer, make_s3_storage
from tests.server.harness import (
    TOKEN,
    Running,
    bundle_archive,
    craft_tar,
    published,
    run_server,
    snapshot,
    upload,
    valid_entries,
)
from tests.server.shared import STAGING_PREFIX, SharedSetup, write_shared_setup
from tests.server.test_archive_corpus import CASES, Case, corpus

Served = tuple[SharedSetup, Running, Path, Path, ObjectStagingStore]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, moto_serial_server: MotoServer) -> Iterator[Served]:
    base = tmp_path_factory.mktemp("corpus-s3")
    sentinel = base / "sentinel"
    sentinel.mkdir()
    (sentinel / "keep.txt").write_text("do not touch\n")
    scratch = base / "tmp"  # the server's $TMPDIR: where it receives uploads before the bucket
    scratch.mkdir(mode=0o700)
    setup = write_shared_setup(base / "site", moto_serial_server, max_upload_size={"reports": "16MB"})
    storage = make_s3_storage(moto_serial_server, bucket=setup.bucket, prefix=f"{STAGING_PREFIX}/reports")
    previous = tempfile.tempdir
    tempfile.tempdir = str(scratch)
    try:
        app = create_app(setup.config, env=Environment(setup.environ))
        with run_server(app) as running:
            # the server receives uploads below it, so the archives' ".." chains start there
            assert [p.name for p in scratch.iterdir()], "the server made no scratch directory in $TMPDIR"
            yield setup, running, sentinel, scratch, ObjectStagingStore(storage, "reports")
    finally:
        tempfile.tempdir = previous
        storage.close()


def _ups(sentinel: Path) -> str:
    """From wherever the server extracts (some directory below its scratch directory) up to
    ``/`` and down to the directory holding the sentinel: more ``..`` than there are levels."""
    return "../" * 24 + str(sentinel.parent).lstrip("/") + "/"


def _idle(store: ObjectStagingStore) -> None:
    deadline = time.monotonic() + 60
    while store.unfinished():
        assert time.monotonic() < deadline, f"uploads left unfinished: {store.unfinished()}"
        time.sleep(0.1)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_malicious_archive_is_refused_on_s3_staging_without_a_trace(served: Served, case: Case,
                                                                    tmp_path: Path) -> None:
    setup, running, sentinel, scratch, store = served
    real = {c.name: c for c in corpus(sentinel, _ups(sentinel))}[case.name]
    body = real.build(tmp_path)
    _idle(store)
    before_records = store.records()
    before_bucket = setup.staging_objects()
    before_scratch = snapshot(scratch)
    before_site = snapshot(setup.root.parent)
    with httpx.Client(base_url=running.url, timeout=60) as http:
        response = upload(http, "reports", body, content_type=real.content_type, key=f"corpus-{len(body)}")
    assert response.status_code == real.status, response.text
    assert real.message in response.json()["error"], response.json()
    assert set(response.json()) == {"error"}
    for private in (TOKEN, str(setup.root), str(scratch), setup.bucket, setup.moto_server.endpoint_url):
        assert private not in response.text
    assert setup.staging_objects() == before_bucket  # no record, bundle, key entry or marker
    assert snapshot(scratch) == before_scratch
    assert snapshot(setup.root.parent) == before_site  # nothing escaped anywhere, sentinel included
    assert sorted(p.name for p in sentinel.iterdir()) == ["keep.txt"]
    assert store.records() == before_records


def test_a_valid_archive_is_accepted_and_published_from_s3_staging(served: Served) -> None:
    """The control: the same server admits an ordinary upload into the bucket and publishes it,
    leaving its record and key entry, and no bundle."""
    setup, running, _, scratch, store = served
    before_scratch = snapshot(scratch)
    with httpx.Client(base_url=running.url, timeout=60) as http:
        response = upload(http, "reports", bundle_archive(setup.root), key="control")
        assert response.status_code == 202, response.text
        run_id = response.json()["run_id"]
        deadline = time.monotonic() + 60
        while (view := http.get(f"/runs/{run_id}", headers={"Authorization": f"Bearer {TOKEN}"}).json())[
                "status"] not in ("succeeded", "failed"):
            assert time.monotonic() < deadline, view
            time.sleep(0.1)
    assert view["status"] == "succeeded", view
    assert published(setup.root / "out" / "reports" / "dest1") == {"report.md": REPORT, "summary.txt": SUMMARY}
    _idle(store)
    objects = setup.staging_objects()
    assert [key for key in objects if key.startswith("records/")] == [f"records/{run_id}.json"]
    assert len([key for key in objects if key.startswith("keys/")]) == 1
    assert [key for key in objects if not key.startswith(("records/", "keys/"))] == []
    assert snapshot(scratch) == before_scratch


def test_a_path_whose_staging_key_would_exceed_s3s_limit_is_refused_before_the_bucket(
    served: Served, tmp_path: Path,
) -> None:
    """A path local staging would take (within every limit of ``server.http.limits``) but whose
    object key in the staging bucket would pass S3's 1,024 bytes: refused with 400 while the
    archive streams, nothing written to the bucket."""
    setup, running, _, scratch, store = served
    long_path = "/".join(["k" * 200] * 5) + ".txt"
    files = {"report.md": REPORT, long_path: b"deep\n"}
    body = craft_tar(valid_entries(files))
    _idle(store)
    before_bucket, before_scratch = setup.staging_objects(), snapshot(scratch)
    with httpx.Client(base_url=running.url, timeout=60) as http:
        response = upload(http, "reports", body, content_type="application/x-tar", key="long-key-path")
    assert response.status_code == 400, response.text
    assert response.json()["error"].startswith("invalid upload archive: ")
    assert "its key in the staging store would exceed 1024 bytes" in response.json()["error"]
    assert setup.staging_objects() == before_bucket
    assert snapshot(scratch) == before_scratch

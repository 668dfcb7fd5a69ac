"""A staged bundle changed after its ``202`` is never published (issue 35, item 2), through
uvicorn and the Python client, on local and on S3 staging: ``manifest.json`` and a file replaced
consistently (the new manifest lists the new file's digest) passed validation and the destination
served the new bytes. The upload is admitted by a server that leaves publishing to Dagster, its
staged bundle is changed behind the server's back, then a server with the inline publisher takes
it: the run fails naming both digests, and the destination holds nothing."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from distributor_core.bundle import ManifestFile, bundle_digest, file_digest, load_manifest
from distributor_core.upload import UploadClient
from tests.bundle.conftest import REPORT, SUMMARY
from tests.peers.moto import MotoServer
from tests.server.harness import TOKEN, bundle_dir, manifest_bytes, published, serve_setup, write_setup
from tests.server.shared import STAGING_PREFIX, write_shared_setup

EVIL = b"# not what was uploaded\n"


def _forged(admitted_id: str) -> tuple[bytes, str]:
    """A manifest listing the forged ``report.md`` (same id, consistent digest) and its digest."""
    files = {"report.md": EVIL, "summary.txt": SUMMARY}
    data = manifest_bytes(files, bundle_id=admitted_id)
    return data, bundle_digest([ManifestFile(p, file_digest(d), len(d)) for p, d in files.items()])


def _admit(setup: Any, tmp_path: Path) -> tuple[str, str]:
    """Upload through a server that only admits (publisher ``dagster``, no Dagster answering):
    the run id and the admitted digest."""
    root = tmp_path / "producer"
    admitted = bundle_dir(root, {"report.md": REPORT, "summary.txt": SUMMARY}).digest
    with serve_setup(setup, publisher="dagster", lookup_dagster_run=lambda _: None) as server, \
            UploadClient(server.url, TOKEN) as client:
        result = client.upload_bundle(pipeline_id="reports", root=root)
    assert load_manifest(root).digest == admitted
    return result.run_id, admitted


def _publish_and_check(setup: Any, run_id: str, admitted: str, forged: str) -> None:
    with serve_setup(setup) as server, UploadClient(server.url, TOKEN) as client:
        status = client.status(run_id)
        deadline = time.monotonic() + 60
        while status.status not in ("succeeded", "failed") and time.monotonic() < deadline:
            time.sleep(0.05)
            status = client.status(run_id)
    assert status.status == "failed", status
    assert (f"corrupt_bundle: invalid source bundle .: staged bundle changed after admission: its manifest has "
            f"digest {forged}, the upload was admitted with digest {admitted}") in status.error, status.error


def test_a_local_staged_bundle_changed_after_admission_is_refused(tmp_path: Path) -> None:
    setup = write_setup(tmp_path / "site")
    run_id, admitted = _admit(setup, tmp_path)
    staged = setup.staging("reports") / run_id / "bundle"
    manifest, forged = _forged(load_manifest(staged).id)
    (staged / "report.md").write_bytes(EVIL)
    (staged / "manifest.json").write_bytes(manifest)
    _publish_and_check(setup, run_id, admitted, forged)
    assert published(setup.destinations["reports/dest1"]) == {}


def test_a_bundle_changed_in_the_staging_bucket_after_admission_is_refused(
    tmp_path: Path, moto_serial_server: MotoServer
) -> None:
    setup = write_shared_setup(tmp_path / "site", moto_serial_server)
    run_id, admitted = _admit(setup, tmp_path)
    prefix = f"{STAGING_PREFIX}/reports/bundles/{run_id}"
    assert f"bundles/{run_id}/manifest.json" in setup.staging_objects()
    s3 = moto_serial_server.client()
    try:
        admitted_id = load_manifest(tmp_path / "producer").id
        manifest, forged = _forged(admitted_id)
        s3.put_object(Bucket=setup.bucket, Key=f"{prefix}/report.md", Body=EVIL)
        s3.put_object(Bucket=setup.bucket, Key=f"{prefix}/manifest.json", Body=manifest)
    finally:
        s3.close()
    _publish_and_check(setup, run_id, admitted, forged)
    assert published(setup.destinations["reports/dest1"]) == {}
    # the changed bundle is kept for the operator to look at (a failed upload's bundle stays)
    assert f"bundles/{run_id}/report.md" in setup.staging_objects()

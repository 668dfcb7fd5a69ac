"""Text an upload carries must be text (issue 35, items 1 and 6): a manifest ``id`` (or any other
string of the manifest) holding a lone UTF-16 surrogate (JSON's ``"\\ud800"``), or an ``id``
longer than every consumer keeps, is refused with
``400`` naming the field before anything is staged, on local and on S3 staging, through uvicorn
and the Python client: no ``500``, no traceback in the log, nothing left in the staging area or
the bucket (no record, pending marker, key claim or bundle object), and an honest upload sent
after them is published."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from distributor_core.bundle import MAX_ID_BYTES, BundleFile, ManifestError, ManifestFile, bundle_digest, file_digest
from distributor_core.upload import UploadClient
from tests.bundle.conftest import REPORT, SUMMARY
from tests.peers.moto import MotoServer
from tests.server.harness import (
    DEFAULT_FILES,
    TOKEN,
    Entry,
    Setup,
    bundle_archive,
    bundle_dir,
    craft_tar,
    published,
    serve_setup,
    snapshot,
    tar_of_dir,
    upload,
    valid_entries,
    wait_status,
    write_setup,
)
from tests.server.shared import write_shared_setup

SURROGATE_IDS = {
    "high": ("reports.\\ud800", "character 9 is an unpaired UTF-16 surrogate (\\ud800)"),
    "low": ("\\udfffreports", "character 1 is an unpaired UTF-16 surrogate (\\udfff)"),
    "reversed-pair": ("r\\udc00\\ud800", "character 2 is an unpaired UTF-16 surrogate (\\udc00)"),
}


#: (where in manifest.json, the field the error names) of every other text a manifest carries
OTHER_FIELDS = [
    (("created",), "created"), (("digest",), "digest"), (("files", 0, "path"), "files[0].path"),
    (("files", 1, "sha256"), "files[1].sha256"), (("note",), "note"),
]


def manifest_text(bundle_id_json: str, files: dict[str, bytes] | None = None,
                  place: tuple[str | int, ...] = ("id",)) -> bytes:
    """manifest.json for ``files`` whose text at ``place`` (its ``id`` unless said) is the raw
    JSON string body ``bundle_id_json``."""
    records = [ManifestFile(p, file_digest(d), len(d)) for p, d in (files or DEFAULT_FILES).items()]
    doc: dict = {"schema_version": 1, "id": "reports.daily", "created": "2026-06-01T12:00:00Z",  # type: ignore[type-arg]
                 "digest": bundle_digest(records),
                 "files": [{"path": r.path, "sha256": r.sha256, "size": r.size} for r in records]}
    node = doc
    for step in place[:-1]:
        node = node[step]
    node[place[-1]] = "@TEXT@"
    return json.dumps(doc, indent=2).replace("@TEXT@", bundle_id_json).encode()


def archive_with_id(bundle_id_json: str, place: tuple[str | int, ...] = ("id",)) -> bytes:
    entries = [Entry("manifest.json", manifest_text(bundle_id_json, place=place)),
               *(Entry(k, v) for k, v in DEFAULT_FILES.items())]
    return craft_tar(entries, gz=True)


def bad_requests() -> list[tuple[bytes, str]]:
    """(archive, the error it must get) for every refused text field."""
    cases = [(archive_with_id(text), f"invalid source bundle: manifest id is not valid UTF-8: {detail}")
             for text, detail in SURROGATE_IDS.values()]
    # every other string of the manifest too (``created`` answered 500: its error quoted the text)
    cases += [(archive_with_id("x\\ud800", place), f"invalid source bundle: manifest {field} is not valid UTF-8: "
                                                   "character 2 is an unpaired UTF-16 surrogate (\\ud800)")
              for place, field in OTHER_FIELDS]
    long_id = "r" * (MAX_ID_BYTES - 1) + "é"  # one byte over the limit, in characters one under
    cases.append((archive_with_id(long_id), f"invalid source bundle: manifest id is {MAX_ID_BYTES + 1} bytes; "
                                            f"the limit is {MAX_ID_BYTES} bytes (UTF-8)"))
    return cases


def bundle_archive_bytes() -> bytes:
    return craft_tar(valid_entries(), gz=True)


def _refused_everywhere(http, caplog: pytest.LogCaptureFixture) -> None:  # type: ignore[no-untyped-def]
    for key in (None, "producer-run-1"):
        for body, message in bad_requests():
            response = upload(http, "reports", body, key=key)
            assert (response.status_code, response.json()) == (400, {"error": message})
    # and of a path: an entry name holding a surrogate encoded as UTF-8 bytes (CESU-8), a URL's
    cesu = b"notes/x\xed\xa0\x80.md".decode("utf-8", "surrogateescape")
    body = craft_tar([*(Entry(e.name, e.data) for e in valid_entries()), Entry(cesu, b"x")], gz=True)
    response = upload(http, "reports", body)
    assert (response.status_code, response.json()) == (
        400, {"error": "invalid upload archive: entry name is not valid UTF-8"})
    response = http.post("/v1/pipelines/r%ED%A0%80/upload", content=bundle_archive_bytes(),
                         headers={"Authorization": f"Bearer {TOKEN}"})
    assert (response.status_code, response.json()) == (400, {"error": "invalid pipeline id"})
    response = http.get("/runs/r%ED%A0%80", headers={"Authorization": f"Bearer {TOKEN}"})
    assert (response.status_code, response.json()) == (404, {"error": "run not found"})
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], [r.getMessage() for r in caplog.records]


@pytest.fixture
def local(tmp_path: Path) -> Setup:
    return write_setup(tmp_path / "site")


def test_surrogates_and_overlong_ids_are_refused_on_local_staging(
    local: Setup, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="distributor")
    with serve_setup(local) as server, server.client() as http:
        before = snapshot(local.staging("reports"))
        _refused_everywhere(http, caplog)
        assert snapshot(local.staging("reports")) == before  # no record, no index entry, nothing left
        # an id exactly at the limit, multibyte characters included, is taken whole
        at_limit = "é" * (MAX_ID_BYTES // 2)
        bundle_dir(tmp_path / "at-limit", bundle_id=at_limit)
        run_id = upload(http, "reports", tar_of_dir(tmp_path / "at-limit")).json()["run_id"]
        assert wait_status(http, run_id, {"succeeded", "failed"})["status"] == "succeeded"
    state = json.loads((local.destinations["reports/dest1"] / ".distributor.json").read_text())
    assert state["source"]["manifest"]["id"] == at_limit


def test_the_python_client_refuses_them_before_sending(local: Setup, tmp_path: Path) -> None:
    """The client words the same problem as the server and sends nothing (it crashed with a
    ``UnicodeEncodeError`` building the archive before)."""
    bundle = tmp_path / "producer"
    bundle.mkdir()
    for name, data in DEFAULT_FILES.items():
        (bundle / name).write_bytes(data)
    (bundle / "manifest.json").write_bytes(manifest_text("reports.\\ud800"))
    with serve_setup(local) as server, UploadClient(server.url, TOKEN) as client:
        with pytest.raises(ManifestError, match=r"^manifest id is not valid UTF-8: character 9 is an unpaired "
                                                r"UTF-16 surrogate \(\\ud800\)$"):
            client.upload_bundle(pipeline_id="reports", root=bundle)
        with pytest.raises(ManifestError, match=rf"^manifest id is {MAX_ID_BYTES + 1} bytes; the limit is "):
            client.upload_files(pipeline_id="reports", id="r" * (MAX_ID_BYTES + 1),
                                files=[BundleFile(bundle / "report.md", "report.md")])
        assert server.service.records() == []


@pytest.fixture
def shared(tmp_path: Path, moto_serial_server: MotoServer) -> Iterator[tuple[object, object]]:
    setup = write_shared_setup(tmp_path / "site", moto_serial_server)
    with serve_setup(setup) as server:
        yield setup, server


def test_surrogates_and_overlong_ids_leave_nothing_in_the_staging_bucket(
    shared: tuple, tmp_path: Path, caplog: pytest.LogCaptureFixture  # type: ignore[type-arg]
) -> None:
    setup, server = shared
    caplog.set_level(logging.INFO, logger="distributor")
    with server.client() as http:  # type: ignore[attr-defined]
        _refused_everywhere(http, caplog)
        # no pending marker, key claim, record or bundle object of any refused request
        assert setup.staging_objects() == []
        run_id = upload(http, "reports", bundle_archive(tmp_path), key="honest").json()["run_id"]
        assert wait_status(http, run_id, {"succeeded", "failed"})["status"] == "succeeded"
    assert published(setup.destinations["reports/dest1"]) == {"report.md": REPORT, "summary.txt": SUMMARY}

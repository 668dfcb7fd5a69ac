"""``--publisher dagster``: the server only stages; the Dagster publish job publishes each upload and
records its outcome; ``GET /runs`` overlays the Dagster run found by tag (resolutions D1)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from distributor_core import staging as sg
from distributor_core.app.public import GENERIC
from distributor_core.server.service import DAGSTER_RUN_FAILED
from distributor_core.staging import host_redactions
from distributor_core.storage.errors import ErrorKind, StorageError
from distributor_dagster.upload_status import UPLOAD_RUN_ID_TAG, DagsterRunLookup, map_dagster_status
from tests.bundle.conftest import REPORT, SUMMARY
from tests.server.harness import TOKEN, bundle_archive, published, serve_setup, upload, write_setup

AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.mark.dagster
def test_dagster_mode_stages_and_the_publish_job_publishes_and_reports_the_upload(tmp_path: Path) -> None:
    """The whole path: the server only stages; the uploads sensor requests one run per upload; the
    real publish job publishes it and records its status and report, which ``GET /runs`` shows."""
    dg = pytest.importorskip("dagster")
    from distributor_dagster import build_definitions

    setup = write_setup(tmp_path / "site")
    # one run per upload (bundles_per_run 1); batches: tests/dagster/test_upload_sensor_batch.py
    defs = build_definitions(setup.config_path, environ=setup.environ, bundles_per_run=1)
    lookups: list[str] = []
    with dg.instance_for_test() as instance:
        dagster_lookup = DagsterRunLookup(instance)

        def lookup(run_id: str) -> tuple[str, str | None, str] | None:
            lookups.append(run_id)
            return dagster_lookup(run_id)

        with serve_setup(setup, publisher="dagster", lookup_dagster_run=lookup) as server, server.client() as http:
            ids = [upload(http, "reports", bundle_archive(tmp_path)).json()["run_id"] for _ in range(2)]
            assert http.get(f"/runs/{ids[0]}", headers=AUTH).json()["status"] == "accepted"  # no run yet
            assert lookups == [ids[0]]
            assert published(setup.destinations["reports/dest1"]) == {}  # the server only stages

            sensor = defs.resolve_sensor_def("uploads_reports")
            ticked = sensor(dg.build_sensor_context(instance=instance, definitions=defs))
            assert [request.run_key for request in ticked.run_requests] == ids  # one run per upload
            first = ticked.run_requests[0]
            result = defs.resolve_job_def("publish_reports").execute_in_process(
                run_config=first.run_config, tags=first.tags, instance=instance
            )
            assert result.success
            (materialization,) = result.asset_materializations_for_node("reports")
            assert materialization.asset_key == dg.AssetKey(["reports", "dest1"])
            assert materialization.metadata["action"].value == "publish_new"

            view = http.get(f"/runs/{ids[0]}", headers=AUTH).json()
            assert view["status"] == "succeeded" and view["dagster_run_id"] == result.run_id
            assert [action["action"] for action in view["report"]["actions"]] == ["publish_new"]
            assert lookups == [ids[0]]  # a finished record is answered from disk, not from Dagster
            assert http.get(f"/runs/{ids[1]}", headers=AUTH).json()["status"] == "accepted"
        staging = setup.staging("reports")
        assert not sg.bundle_dir(staging, ids[0]).exists()  # published: the staged copy is gone
        assert sg.bundle_dir(staging, ids[1]).is_dir()
    assert published(setup.destinations["reports/dest1"]) == {"report.md": REPORT, "summary.txt": SUMMARY}


@pytest.mark.parametrize(
    ("found", "expected"),
    [
        (("queued", "d-1", ""), {"status": "queued", "dagster_run_id": "d-1"}),
        (("running", "d-2", ""), {"status": "running", "dagster_run_id": "d-2"}),
        (("succeeded", "d-3", ""), {"status": "succeeded", "dagster_run_id": "d-3"}),
        # the run's own error is the operator's (issue 35, item 7): producers read where to look
        (("failed", "d-4", "step execute__archive: boom"), {"status": "failed", "dagster_run_id": "d-4",
                                                           "error": DAGSTER_RUN_FAILED}),
    ],
)
def test_status_overlay(tmp_path: Path, found: tuple[str, str, str], expected: dict[str, Any]) -> None:
    setup = write_setup(tmp_path / "site")
    with serve_setup(setup, publisher="dagster", lookup_dagster_run=lambda _: found) as server, \
            server.client() as http:
        run_id = upload(http, "reports", bundle_archive(tmp_path)).json()["run_id"]
        view = http.get(f"/runs/{run_id}", headers=AUTH).json()
    assert {k: view.get(k) for k in expected} == expected
    assert sg.read_record(setup.staging("reports"), run_id).status == "accepted"  # the overlay writes nothing


def test_overlay_errors_never_show_host_paths_and_lookup_failures_fall_back(tmp_path: Path) -> None:
    setup = write_setup(tmp_path / "site")
    staging = setup.staging("reports")
    calls = {"n": 0}

    def lookup(run_id: str) -> tuple[str, str | None, str] | None:
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("instance unavailable")
        return ("failed", "d-9", f"cannot read {staging}/{run_id}/bundle/report.md under {setup.root}")

    with serve_setup(setup, publisher="dagster", lookup_dagster_run=lookup) as server, server.client() as http:
        run_id = upload(http, "reports", bundle_archive(tmp_path)).json()["run_id"]
        assert http.get(f"/runs/{run_id}", headers=AUTH).json()["status"] == "accepted"
        view = http.get(f"/runs/{run_id}", headers=AUTH).json()
    assert view["status"] == "failed"
    assert view["error"] == DAGSTER_RUN_FAILED
    assert str(staging) not in str(view) and str(setup.root) not in str(view)


def test_mark_finished_failure_keeps_the_bundle_and_scrubs_paths(tmp_path: Path) -> None:
    setup = write_setup(tmp_path / "site")
    with serve_setup(setup, publisher="dagster") as server, server.client() as http:
        run_id = upload(http, "reports", bundle_archive(tmp_path)).json()["run_id"]
        staging = setup.staging("reports")
        sg.mark_running(staging, run_id)
        # an operator's text never reaches the record (issue 35, item 7); an exception is classified
        record = sg.mark_finished(staging, run_id, error=f"disk full writing {staging}/{run_id}/bundle/x",
                                  redact=[(str(setup.root), "<site>")])
        assert (record.status, record.error) == ("failed", GENERIC)
        assert sg.bundle_dir(staging, run_id).is_dir()
        sg.mark_running(staging, run_id)
        disk_full = StorageError("write", "local", "x", ErrorKind.LIMIT_EXCEEDED, OSError(28, f"{staging} is full"))
        record = sg.mark_finished(staging, run_id, error=disk_full)
        assert record.error == "limit_exceeded: a limit of the destination was exceeded"
        sg.mark_running(staging, run_id)
        failed_report = {"summary": {"failed": 1}, "pipelines": [], "actions": []}
        record = sg.mark_finished(staging, run_id, report=failed_report)
        assert (record.status, record.error) == ("failed", GENERIC)
        view = http.get(f"/runs/{run_id}", headers=AUTH).json()
        assert view["status"] == "failed" and view["report"] == failed_report


def test_status_map() -> None:
    assert {name: map_dagster_status(name) for name in (
        "QUEUED", "NOT_STARTED", "STARTING", "STARTED", "CANCELING", "SUCCESS", "FAILURE", "CANCELED")} == {
        "QUEUED": "queued", "NOT_STARTED": "queued", "STARTING": "queued", "STARTED": "running",
        "CANCELING": "running", "SUCCESS": "succeeded", "FAILURE": "failed", "CANCELED": "failed"}
    assert map_dagster_status("NEW_STATUS") is None


@pytest.mark.dagster
def test_default_lookup_reads_runs_by_tag_from_a_dagster_instance() -> None:
    dagster = pytest.importorskip("dagster")

    @dagster.op
    def publish_ok() -> None:
        return None

    @dagster.op
    def publish_fails() -> None:
        raise RuntimeError("destination archive is locked")

    @dagster.job
    def good_job() -> None:
        publish_ok()

    @dagster.job
    def bad_job() -> None:
        publish_fails()

    with dagster.DagsterInstance.ephemeral() as instance:
        good = good_job.execute_in_process(instance=instance,
                                           tags={UPLOAD_RUN_ID_TAG: "reports.20260101T000000Z.0000000a"})
        bad = bad_job.execute_in_process(instance=instance, raise_on_error=False,
                                         tags={UPLOAD_RUN_ID_TAG: "reports.20260101T000000Z.0000000b"})
        lookup = DagsterRunLookup(instance)
        assert lookup("reports.20260101T000000Z.0000000a") == ("succeeded", good.run_id, "")
        status, run_id, error = lookup("reports.20260101T000000Z.0000000b")  # type: ignore[misc]
        assert (status, run_id) == ("failed", bad.run_id)
        assert error == "step publish_fails: destination archive is locked"
        assert lookup("reports.20260101T000000Z.0000000c") is None


def test_host_redactions_cover_config_staging_and_local_destinations(tmp_path: Path) -> None:
    setup = write_setup(tmp_path / "site", pipelines={"reports": 2})
    pairs = dict(host_redactions(setup.config))
    assert pairs[str(setup.root)] == "<config dir>"
    assert pairs[str(setup.staging_root)] == "<staging>"
    assert pairs[str(setup.staging("reports"))] == "<staging>"
    assert pairs[str(setup.destinations["reports/dest2"])] == "<destination dest2>"
    message = f"cannot write {setup.destinations['reports/dest2']}/report.md (config in {setup.root})"
    assert sg.scrub(message, host_redactions(setup.config)) == (
        "cannot write <destination dest2>/report.md (config in <config dir>)")

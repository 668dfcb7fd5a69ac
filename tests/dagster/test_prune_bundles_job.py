"""The ``prune`` job with ``retention.prune.bundles`` (issue 37 items 2 and 3) on a local root, an
OpenSSH SFTP root and a moto S3 prefix: a dry run by default, then whole bundle paths removed,
a delete failing mid-way (the fault injector around the destination the core opens) failing the
step with the bundle named and leaving state that records what is still there, and a retry that
finishes; the archive's partitions follow: a bundle removed whole leaves them at once, the one
half removed when its last output goes. Once through ``dagster job execute`` with the failure
hooked into the subprocess, as an operator runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from distributor_core import paths as lp
from distributor_core.app import bundles as app_bundles
from distributor_core.app.run import RunOptions, run_config
from distributor_core.config import load_config
from distributor_core.state import parse_state_document
from distributor_core.storage.faults import Fault, FaultInjectingStorage
from distributor_dagster import build_definitions
from tests.reliability.conftest import hook_env
from tests.repair.test_prune_bundles import BACKENDS, DAYS, Archive, archive_on, local_archive, published, write_day

pytestmark = pytest.mark.dagster

ARCHIVE_KEY = dg.AssetKey(["reports", "archive"])
PUBLISHED = "reports__published"
APPLY = {"ops": {"prune": {"config": {"apply": True}}}}
FAILING = "2026-06-01/sub/summary.txt"


@pytest.fixture(params=BACKENDS)
def archive(request: pytest.FixtureRequest, tmp_path: Path) -> Archive:
    return archive_on(request.param, request, tmp_path)


def fail_deletes_of(monkeypatch: pytest.MonkeyPatch, path: str) -> None:
    """The destination storage the core opens fails the delete of ``path``, once."""
    original = app_bundles.open_destination_storage

    def opened(destination, env, *, dry_run=False):  # type: ignore[no-untyped-def]
        return FaultInjectingStorage(original(destination, env, dry_run=dry_run), [Fault("delete", path=path)])

    monkeypatch.setattr(app_bundles, "open_destination_storage", opened)


def prune_job(archive: Archive, instance: dg.DagsterInstance, run_config: dict | None = None):  # type: ignore[no-untyped-def]
    defs = build_definitions(archive.config, environ={**os.environ, **archive.env})
    return defs.resolve_job_def("prune").execute_in_process(run_config=run_config or {}, instance=instance,
                                                            raise_on_error=False)


def report(result: dg.ExecuteInProcessResult) -> dict:
    return result.output_for_node("prune")["destinations"]["reports/archive"]


def test_the_prune_job_removes_old_bundle_paths_and_their_partitions(
        archive: Archive, monkeypatch: pytest.MonkeyPatch) -> None:
    before = published(archive)
    archive.write_config("{keep_latest: 2}")
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("reports__bundles", DAYS)  # what the watch sensor's first tick adds
        instance.add_dynamic_partitions(PUBLISHED, DAYS)
        dry = prune_job(archive, instance)
        assert dry.success
        actions = {s["bundle_path"]: s["bundle_retention"]["action"] for s in report(dry)["bundles"]}
        assert actions == {DAYS[0]: "remove", DAYS[1]: "remove", DAYS[2]: "keep", DAYS[3]: "keep"}
        assert archive.tree() == before and list(instance.get_dynamic_partitions(PUBLISHED)) == DAYS

        fail_deletes_of(monkeypatch, FAILING)
        failed = prune_job(archive, instance, APPLY)
        assert not failed.success
        failure = next(e for e in failed.all_events if e.event_type_value == "STEP_FAILURE")
        assert f"reports/archive: 1 bundle(s) failed: {DAYS[0]}:" in failure.event_specific_data.error.message
        left = archive.tree()
        assert [o.path for o in parse_state_document(left[f"{DAYS[0]}/{lp.STATE_FILE_NAME}"].encode()).outputs] == \
            ["sub/summary.txt"]
        assert not any(p.startswith(DAYS[1]) for p in left)
        # the bundle removed whole left the partitions; the other still holds an output
        assert list(instance.get_dynamic_partitions(PUBLISHED)) == [DAYS[0], *DAYS[2:]]
        assert list(instance.get_dynamic_partitions("reports__bundles")) == DAYS  # the source holds them all

        monkeypatch.undo()
        retry = prune_job(archive, instance, APPLY)
        assert retry.success
        assert archive.tree() == {p: t for p, t in before.items() if p.startswith(tuple(DAYS[2:]))}
        assert list(instance.get_dynamic_partitions(PUBLISHED)) == DAYS[2:]


def test_dagster_job_execute_reports_a_failed_delete_and_the_retry_finishes(tmp_path: Path) -> None:
    archive = local_archive(tmp_path)
    before = published(archive)
    archive.write_config("{keep_latest: 2}")
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    apply = tmp_path / "apply.yaml"
    apply.write_text(json.dumps(APPLY))
    command = [str(Path(sys.executable).parent / "dagster"), "job", "execute", "-m", "distributor_dagster.definitions",
               "-j", "prune", "-c", str(apply)]
    env = {"DAGSTER_HOME": str(home), "DISTRIBUTOR_CONFIG": str(archive.config)}
    failing = subprocess.run(command, env=hook_env(**env, DISTRIBUTOR_TEST_FAIL=f"delete:{FAILING}"), cwd=tmp_path,
                             capture_output=True, text=True, timeout=300, check=False)
    assert failing.returncode == 1
    assert f"1 bundle(s) failed: {DAYS[0]}:" in failing.stdout + failing.stderr
    assert f"{DAYS[0]}/sub/summary.txt" in archive.tree() and not (tmp_path / "out" / DAYS[1]).exists()
    retry = subprocess.run(command, env={**os.environ, **env}, cwd=tmp_path, capture_output=True, text=True,
                           timeout=300, check=False)
    assert retry.returncode == 0, retry.stdout[-3000:] + retry.stderr[-3000:]
    assert archive.tree() == {p: t for p, t in before.items() if p.startswith(tuple(DAYS[2:]))}


def test_the_prune_job_removes_only_the_selected_owners_bundles_of_a_shared_root(tmp_path: Path) -> None:
    archive = local_archive(tmp_path)
    backend = archive.backend_yaml
    shared = "        state: {mode: shared_root}\n"
    archive.backend_yaml = backend + shared
    site = ("      - id: site\n" + backend + shared
            + "        publish: {source: false, html: true}\n        transform: {markdown_to_html: {enabled: true}}\n")
    for day in DAYS[:3]:
        write_day(tmp_path / "source", day)
    archive.write_config("{keep_latest: 10}", extra_destinations=site)
    assert run_config(load_config(archive.config), RunOptions()).ok
    archive.write_config("{keep_latest: 1}", extra_destinations=site)
    with dg.instance_for_test() as instance:
        only_archive = {"ops": {"prune": {"config": {"apply": True, "destinations": ["reports/archive"]}}}}
        result = prune_job(archive, instance, only_archive)
    assert result.success
    removed = [s["bundle_path"] for s in report(result)["bundles"] if s["bundle_removed"]]
    assert removed == DAYS[:2]
    files = archive.tree()
    for day in DAYS[:2]:  # site's page and record stay; archive's files and record are gone
        assert f"{day}/report.html" in files and f"{day}/report.md" not in files
        owners = parse_state_document(files[f"{day}/{lp.STATE_FILE_NAME}"].encode()).owners
        assert [o.scope.destination_id for o in owners] == ["site"]
    assert f"{DAYS[2]}/report.md" in files

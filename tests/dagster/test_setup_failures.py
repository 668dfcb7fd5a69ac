"""Setup failures in Dagster (issue 15 items 1 and 2, resolutions G3): a missing source root or
an unresolved credential fails the pipeline's ``discover`` step, naming the pipeline and the path
(``dagster job execute`` in a subprocess and in process), before any destination is touched; the
watch sensor's tick fails with the same words (logged, and the tick error Dagster shows). An
existing, empty source is zero bundles."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from distributor_core.app.setup import SetupError
from distributor_dagster import build_definitions
from tests.dagster.conftest import events_of, make_bundle, write_config

pytestmark = pytest.mark.dagster

DAGSTER = Path(sys.executable).parent / "dagster"

CONFIG = """\
pipelines:
  - id: reports.daily
    source: {{backend: local, path: {source}}}
    destinations:
      - {{id: archive, backend: local, path: out}}
"""


def _failure(result: dg.ExecuteInProcessResult) -> tuple[list[str], str]:
    failures = events_of(result, "STEP_FAILURE")
    return [e.step_key for e in failures], failures[0].event_specific_data.error.message if failures else ""


def test_missing_source_fails_discover_naming_pipeline_and_path(tmp_path: Path, instance: dg.DagsterInstance) -> None:
    config = write_config(tmp_path, CONFIG.format(source="spool-typo"))
    expected = f"pipeline reports.daily source path {tmp_path / 'spool-typo'} not found"
    defs = build_definitions(config)
    job = defs.resolve_job_def("publish_reports_daily")
    for run_config in ({}, {"resources": {"publish": {"config": {"bundle_path": "2026/d1"}}}}):
        result = job.execute_in_process(run_config=run_config, instance=instance, raise_on_error=False)
        assert not result.success
        steps, message = _failure(result)
        assert steps == ["reports_daily.discover"]
        assert expected in message
    assert not (tmp_path / "out").exists()

    # the watch sensor's tick fails with the same words (Dagster records it as the tick's error)
    sensor = defs.resolve_sensor_def("watch_reports_daily")
    context = dg.build_sensor_context(instance=instance, definitions=defs)
    with pytest.raises(SetupError, match=f"^{expected}$"):
        sensor(context)

    # an existing, empty source is zero bundles: discover succeeds, nothing is published
    (tmp_path / "spool-typo").mkdir()
    result = job.execute_in_process(instance=instance, raise_on_error=False)
    assert result.success
    tick = sensor(dg.build_sensor_context(instance=instance, definitions=defs))
    assert tick.run_requests == []


def test_dagster_job_execute_reports_the_failed_discover_step(tmp_path: Path) -> None:
    config = write_config(tmp_path, CONFIG.format(source="spool-typo"))
    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    env = {**os.environ, "DAGSTER_HOME": str(home), "DISTRIBUTOR_CONFIG": str(config)}
    command = [str(DAGSTER), "job", "execute", "-m", "distributor_dagster.definitions", "-j", "publish_reports_daily"]
    completed = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path, check=False)
    assert completed.returncode != 0
    output = completed.stdout + completed.stderr
    assert "reports_daily.discover" in output
    assert f"pipeline reports.daily source path {tmp_path / 'spool-typo'} not found" in output
    assert not (tmp_path / "out").exists()


def test_unresolved_credential_fails_discover_and_nothing_is_written(
    tmp_path: Path, instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_bundle(tmp_path / "source" / "d1", "reports.daily", {"r.md": "# one\n"})
    config = write_config(
        tmp_path,
        """\
pipelines:
  - id: reports.daily
    source: {backend: local, path: source}
    destinations:
      - {id: archive, backend: local, path: out}
      - id: bucket
        backend: s3
        bucket: not-contacted
        endpoint: http://192.0.2.1:9
        credentials: {access_key_id_env: DIST_TEST_DAGSTER_KEY, secret_access_key_env: DIST_TEST_DAGSTER_SECRET}
""",
    )
    monkeypatch.setenv("DIST_TEST_DAGSTER_KEY", "key")
    monkeypatch.delenv("DIST_TEST_DAGSTER_SECRET", raising=False)
    job = build_definitions(config).resolve_job_def("publish_reports_daily")
    result = job.execute_in_process(instance=instance, raise_on_error=False)
    assert not result.success
    steps, message = _failure(result)
    assert steps == ["reports_daily.discover"]
    assert (
        "pipeline reports.daily destination bucket: s3 secret access key environment variable "
        "DIST_TEST_DAGSTER_SECRET is not set" in message
    )
    assert not (tmp_path / "out").exists()

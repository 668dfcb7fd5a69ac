"""Asset checks of destination assets: they look at the bundle paths the asset materialized."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from distributor_dagster import build_definitions
from tests.dagster.conftest import make_bundle, write_config

pytestmark = pytest.mark.dagster

CONFIG = """\
pipelines:
  - id: reports
    source: {backend: local, path: source}
    destinations:
      - id: archive
        backend: local
        path: out
"""
KEY = dg.AssetKey(["reports", "archive"])
NAMES = ("state_valid", "managed_outputs_present", "no_unmanaged_content")


@pytest.fixture
def config(tmp_path: Path) -> Path:
    for day in ("d1", "d2"):
        make_bundle(tmp_path / "source" / day, "reports", {"r.txt": f"{day}\n", "sub/s.txt": "s\n"})
    return write_config(tmp_path, CONFIG)


def run_checks(defs: dg.Definitions, instance: dg.DagsterInstance) -> dict[str, dg.AssetCheckEvaluation]:
    job = defs.resolve_implicit_global_asset_job_def().get_subset(
        asset_check_selection={dg.AssetCheckKey(KEY, name) for name in NAMES}, asset_selection=set()
    )
    result = job.execute_in_process(instance=instance)
    assert result.success
    return {e.check_name: e for e in result.get_asset_check_evaluations()}


def publish(defs: dg.Definitions, instance: dg.DagsterInstance, bundle_path: str | None = None) -> None:
    config = {"bundle_path": bundle_path} if bundle_path is not None else {}
    result = defs.resolve_job_def("publish_reports").execute_in_process(
        instance=instance, run_config={"ops": {"discover": {"config": config}}}
    )
    assert result.success


def test_checks_pass_after_publication_and_fail_when_an_output_is_deleted_by_hand(
    tmp_path: Path, config: Path, instance: dg.DagsterInstance
) -> None:
    defs = build_definitions(config)
    publish(defs, instance)
    passed = run_checks(defs, instance)
    assert {name: e.passed for name, e in passed.items()} == dict.fromkeys(NAMES, True)
    assert passed["state_valid"].metadata["bundle_paths"].value == ["d1", "d2"]

    (tmp_path / "out" / "d2" / "sub" / "s.txt").unlink()
    after = run_checks(defs, instance)
    assert after["managed_outputs_present"].passed is False
    assert after["managed_outputs_present"].severity == dg.AssetCheckSeverity.ERROR
    assert after["managed_outputs_present"].metadata["missing"].value == {"d2": ["sub/s.txt"]}
    assert after["state_valid"].passed is True
    assert after["no_unmanaged_content"].passed is True


def test_unmanaged_content_is_a_warning_and_invalid_state_fails_state_valid(
    tmp_path: Path, config: Path, instance: dg.DagsterInstance
) -> None:
    defs = build_definitions(config)
    publish(defs, instance)
    (tmp_path / "out" / "d1" / "stray.txt").write_text("x\n")
    (tmp_path / "out" / "d2" / ".distributor.json").write_text("{not json")
    checks = run_checks(defs, instance)
    unmanaged = checks["no_unmanaged_content"]
    assert unmanaged.passed is False and unmanaged.severity == dg.AssetCheckSeverity.WARN
    assert unmanaged.metadata["unmanaged"].value == {"d1": ["stray.txt"]}
    assert checks["state_valid"].passed is False
    assert list(checks["state_valid"].metadata["errors"].value) == ["d2"]
    assert checks["managed_outputs_present"].passed is False


def test_checks_ignore_bundle_paths_the_asset_did_not_materialize(
    tmp_path: Path, config: Path, instance: dg.DagsterInstance
) -> None:
    defs = build_definitions(config)
    untouched = run_checks(defs, instance)
    assert all(e.passed for e in untouched.values())
    assert untouched["state_valid"].metadata["bundle_paths"].value == []

    publish(defs, instance, "d1")
    (tmp_path / "out" / "elsewhere").mkdir()
    (tmp_path / "out" / "elsewhere" / ".distributor.json").write_text("{broken")
    checks = run_checks(defs, instance)
    assert checks["state_valid"].metadata["bundle_paths"].value == ["d1"]
    assert all(e.passed for e in checks.values())

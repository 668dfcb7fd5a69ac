"""The documented demo (docs/dagster.md "Quick start"): ``dagster job execute`` on the example
config with a local DAGSTER_HOME publishes, and a second run writes nothing."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from tests.dagster.conftest import REPO

pytestmark = pytest.mark.dagster

BIN = Path(sys.executable).parent
JOB = "publish_example_source_bundle"


def test_demo_job_publishes_the_example_bundle_then_skips(tmp_path: Path) -> None:
    examples = tmp_path / "examples"
    examples.mkdir()
    shutil.copy(REPO / "examples" / "local-publish.yml", examples)
    shutil.copytree(REPO / "examples" / "source-bundle", examples / "source-bundle")
    home = tmp_path / ".dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    env = {**os.environ, "DAGSTER_HOME": str(home), "DISTRIBUTOR_CONFIG": "examples/local-publish.yml"}
    command = [str(BIN / "dagster"), "job", "execute", "-m", "distributor_dagster.definitions", "-j", JOB]

    for _ in range(2):
        run = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path, check=False)
        assert run.returncode == 0, run.stderr
        # Dagster's INFO line about check outputs not yielded comes after ours, which says what it means
        log = run.stdout + run.stderr
        ours = log.index("checks managed_outputs_present, no_unmanaged_content, state_valid: recorded as check "
                         "evaluations, per bundle (3 in all; the asset's Checks tab); Dagster's next line")
        assert ours < log.index("did not yield or return expected outputs")

    archive = tmp_path / "demo-output" / "local-publish" / "archive"
    assert sorted(p.name for p in archive.iterdir()) == [".distributor.json", "report.md", "summary.txt"]
    assert (archive / "report.md").read_bytes() == (REPO / "examples" / "source-bundle" / "report.md").read_bytes()
    with dg.DagsterInstance.from_config(str(home)) as instance:
        key = dg.AssetKey(["example_source_bundle", "local_archive"])
        # the bundle at the source root is the partition "."; the second run found it published
        # already: a materialization of the same data version that wrote nothing (issue 24)
        materialized = [r.asset_materialization for r in instance.fetch_materializations(key, limit=10).records]
        assert [m.partition for m in materialized] == [".", "."]
        assert [m.metadata["action"].value for m in materialized] == ["skip_same", "publish_new"]
        assert materialized[0].metadata["bytes_written"].value == 0
        assert materialized[0].tags["dagster/data_version"] == materialized[1].tags["dagster/data_version"]
        assert instance.get_materialized_partitions(key) == {"."}

"""examples/systemd: the units of one production host pass ``systemd-analyze verify`` (with the
binaries pointed at this venv), share one environment file that sets what the instance file and
the code location read, and run the commands tests/production runs."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.peers.daemon import REPO
from tests.production.harness import BIN

pytestmark = pytest.mark.dagster

SYSTEMD = REPO / "examples" / "systemd"
UNITS = ("dagster-daemon.service", "dagster-webserver.service", "distributor-serve.service")
INSTALLED = "/opt/distributor/venv/bin/"


def test_units_verify_and_share_the_environment_file(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    assert analyze, "systemd-analyze is missing: run scripts/install-test-peers.sh"
    for unit in UNITS:
        text = (SYSTEMD / unit).read_text()
        assert "EnvironmentFile=/etc/distributor/distributor.env" in text
        (tmp_path / unit).write_text(text.replace(INSTALLED, f"{BIN}/"))
    verify = subprocess.run([analyze, "verify", "--man=no", *(str(tmp_path / u) for u in UNITS)],
                            capture_output=True, text=True, timeout=120, check=False)
    assert (verify.returncode, verify.stdout + verify.stderr) == (0, "")

    env = dict(line.split("=", 1) for line in (SYSTEMD / "distributor.env").read_text().splitlines()
               if line and not line.startswith("#"))
    assert {"DAGSTER_HOME", "DAGSTER_PG_HOST", "DAGSTER_PG_PORT", "DAGSTER_PG_DB", "DAGSTER_PG_USER",
            "DAGSTER_PG_PASSWORD", "DISTRIBUTOR_CONFIG"} <= set(env)
    exec_start = {u: next(line for line in (SYSTEMD / u).read_text().splitlines() if line.startswith("ExecStart="))
                  for u in UNITS}
    assert exec_start["dagster-daemon.service"].endswith("dagster-daemon run -m distributor_dagster.definitions")
    assert "dagster-webserver -h 127.0.0.1 -p 3000 -m distributor_dagster.definitions" in exec_start[
        "dagster-webserver.service"]
    assert exec_start["distributor-serve.service"].endswith("serve --config ${DISTRIBUTOR_CONFIG} --publisher dagster")

"""The staging package sits below both shells (issue 16 item 3): the core never imports Dagster,
the Dagster layer never imports the HTTP server package, and ``--publisher dagster`` finds its run
status source through the registered hook."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from distributor_core.server.errors import ServerSetupError
from distributor_core.server.runstatus import load_run_status_source

ROOT = Path(__file__).resolve().parents[2]


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def test_the_dagster_layer_does_not_import_the_server_package() -> None:
    offenders = {
        str(path.relative_to(ROOT)): sorted(n for n in _imports(path) if n.startswith("distributor_core.server"))
        for path in (ROOT / "distributor_dagster").rglob("*.py")
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_staging_and_server_import_no_dagster() -> None:
    code = (
        "import sys, distributor_core.staging, distributor_core.server.app, distributor_core.server.serve;"
        "bad = sorted(m for m in sys.modules if m == 'dagster' or m.startswith(('dagster.', 'distributor_dagster')));"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    for path in (ROOT / "distributor_core" / "staging").rglob("*.py"):
        assert not [n for n in _imports(path) if n.split(".")[0] in ("dagster", "fastapi", "uvicorn", "httpx")
                    or n.startswith(("distributor_core.server", "distributor_dagster"))], path


def test_the_dagster_run_status_source_is_registered() -> None:
    from distributor_dagster.upload_status import DagsterRunLookup

    source = load_run_status_source("dagster")
    assert isinstance(source.load(), DagsterRunLookup)
    assert source.load() is source.load()
    with pytest.raises(ServerSetupError, match="no run status source is registered for publisher other"):
        load_run_status_source("other")


def test_the_run_status_source_imports_dagster_on_first_use_only() -> None:
    code = (
        "import sys; from distributor_core.server.runstatus import load_run_status_source;"
        "source = load_run_status_source('dagster');"
        "before = 'dagster' in sys.modules; source.load(); print(before, 'dagster' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "True"]

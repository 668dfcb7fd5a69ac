"""Helpers for CLI tests: run ``main(argv)`` in-process with captured streams."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from distributor_core.bundle import manifest_to_obj
from distributor_core.cli import main
from distributor_core.jsonfmt import dumps_indented
from tests.bundle.conftest import REPORT, SUMMARY, make_bundle


@dataclass
class Result:
    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)


class TTYStream(io.StringIO):
    """A captured stream that claims to be a terminal."""

    def isatty(self) -> bool:
        return True


Runner = Callable[..., Result]

REPO = Path(__file__).resolve().parents[2]
#: the installed ``distributor`` console script of this environment
SCRIPT = Path(sys.executable).parent / "distributor"


def run_script(
    *args: str, cwd: Path = REPO, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the real console script in a subprocess (``env`` is added to this environment)."""
    environment = {**os.environ, **env} if env else None
    return subprocess.run(
        [str(SCRIPT), *args], cwd=cwd, env=environment, capture_output=True, text=True, timeout=120, check=False
    )


@pytest.fixture
def cli() -> Runner:
    def run(*argv: str, tty: bool = False) -> Result:
        stdout = io.StringIO()
        stderr: io.StringIO = TTYStream() if tty else io.StringIO()
        code = main(list(argv), stdout=stdout, stderr=stderr)
        return Result(code, stdout.getvalue(), stderr.getvalue())

    return run


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A source tree with two valid bundles and one whose summary changed after the manifest."""
    root = tmp_path / "spool"
    make_bundle(root / "daily-1")
    make_bundle(root / "weekly" / "w23", {"report.md": REPORT}, bundle_id="reports.weekly")
    make_bundle(root / "broken")
    (root / "broken" / "summary.txt").write_bytes(SUMMARY + b"changed\n")
    return root


def write_config(tmp_path: Path, source: str = "spool") -> Path:
    config = tmp_path / "distributor.yml"
    config.write_text(
        f"""\
pipelines:
  - id: reports
    source:
      backend: local
      path: {source}
    destinations:
      - id: archive
        backend: local
        path: published
  - id: uploads
    source:
      backend: http_upload
    destinations:
      - id: archive
        backend: local
        path: uploaded
upload_tokens:
  - id: reporter
    token_env: REPORTER_TOKEN
    allow_pipelines: [uploads]
"""
    )
    return config


def write_state(directory: Path, *, valid: bool = True) -> Path:
    """A v2 single-owner ``.distributor.json`` recording the default fixture bundle."""
    source = directory / "_source"
    manifest = make_bundle(source)
    stamp = "2026-06-07T15:00:00Z"
    outputs = [
        {
            "path": f.path,
            "kind": "source",
            "source_path": f.path,
            "sha256": f.sha256,
            "size": f.size,
            "created_at": stamp,
            "updated_at": stamp,
        }
        for f in manifest.files
    ]
    doc: dict[str, Any] = {
        "schema_version": 2,
        "pipeline_id": "reports",
        "destination_id": "archive",
        "published_at": stamp,
        "created_at": stamp,
        "updated_at": stamp,
        "state": {"mode": "single_owner"},
        "reconciliation": {"mode": "replace"},
        "source": {"manifest": manifest_to_obj(manifest)},
        "outputs": outputs,
    }
    if not valid:
        del doc["outputs"]
    for item in source.iterdir():
        item.unlink()
    source.rmdir()
    path = directory / ".distributor.json"
    path.write_text(dumps_indented(doc))
    return path

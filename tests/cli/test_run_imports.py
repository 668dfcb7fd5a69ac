"""A run or an audit of a plain local config never loads the upload server, the remote backends'
libraries, Markdown rendering, Dagster or pydantic: a local user needs none of those stacks.

Each case runs the console entry point in a fresh interpreter and reads back ``sys.modules``.
(How long start-up takes is a bench figure, ``bench/run.py start-up``, not a test.)
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.bundle.conftest import make_bundle

_PROBE = """
import json, sys
from distributor_core.cli.main import main
code = main(sys.argv[1:])
print(json.dumps({"code": code, "loaded": sorted(sys.modules)}))
"""

#: never needed by a run of a plain local config: the upload server, the remote backends'
#: libraries, Markdown rendering, Dagster, pydantic (the config models are msgspec Structs)
NEVER_FOR_LOCAL = (
    "pydantic",
    "pydantic_core",
    "fastapi",
    "starlette",
    "uvicorn",
    "boto3",
    "botocore",
    "paramiko",
    "markdown_it",
    "dagster",
    "distributor_core.server",
    "distributor_core.transform.markdown",
    "distributor_core.storage.s3",
    "distributor_core.storage.sftp",
)

def _run(config: Path, *extra: str) -> tuple[int, list[str], str]:
    argv = ["run", "--config", str(config), "--dry-run", *extra]
    out = subprocess.run([sys.executable, "-c", _PROBE, *argv], capture_output=True, text=True, check=True)
    lines = out.stdout.splitlines()
    result = json.loads(lines[-1])
    return result["code"], result["loaded"], "\n".join(lines[:-1])


def _config(tmp_path: Path, source: Path) -> Path:
    source.mkdir(parents=True, exist_ok=True)
    config = tmp_path / "distributor.yml"
    config.write_text(
        json.dumps(
            {
                "pipelines": [
                    {
                        "id": "local",
                        "source": {"backend": "local", "path": str(source)},
                        "destinations": [{"id": "disk", "backend": "local", "path": str(tmp_path / "dst")}],
                    }
                ]
            }
        )
    )
    return config


def _top(loaded: list[str], name: str) -> bool:
    return any(m == name or m.startswith(name + ".") for m in loaded)


def test_a_run_over_an_empty_source_imports_neither_the_server_nor_remote_backends(
    tmp_path: Path,
) -> None:
    code, loaded, out = _run(_config(tmp_path, tmp_path / "src"))
    assert code == 0
    assert "Run: pipelines=1 actions=0 failed=0 dry_run=true" in out
    for name in NEVER_FOR_LOCAL:
        assert not _top(loaded, name), f"run over an empty local source imported {name}"


def test_a_run_with_a_bundle_loads_no_remote_library(
    tmp_path: Path,
) -> None:
    source = tmp_path / "src"
    make_bundle(source / "daily")
    code, loaded, out = _run(_config(tmp_path, source))
    assert code == 0
    assert "Run: pipelines=1 actions=1 failed=0 dry_run=true" in out
    for name in NEVER_FOR_LOCAL:
        assert not _top(loaded, name), f"run over a local source imported {name}"


def _probe(*argv: str) -> tuple[int, list[str], str]:
    out = subprocess.run([sys.executable, "-c", _PROBE, *argv], capture_output=True, text=True, check=True)
    lines = out.stdout.splitlines()
    result = json.loads(lines[-1])
    return result["code"], result["loaded"], "\n".join(lines[:-1])


def test_an_audit_of_a_local_destination_imports_neither_the_server_nor_remote_backends(
    tmp_path: Path,
) -> None:
    source = tmp_path / "src"
    make_bundle(source / "daily")
    config = _config(tmp_path, source)
    code, _, out = _probe("run", "--config", str(config))
    assert code == 0, out
    argv = ["audit", "--config", str(config), "--pipeline", "local", "--destination", "disk", "--bundle", "daily"]
    code, loaded, out = _probe(*argv)
    assert code == 0, out
    assert "status=ok checked=" in out
    for name in NEVER_FOR_LOCAL:
        assert not _top(loaded, name), f"audit of a local destination imported {name}"

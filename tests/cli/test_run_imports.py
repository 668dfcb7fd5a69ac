"""``distributor run`` imports only what its config and its bundles need (issue 17 start-up).

Each case runs the console entry point in a fresh interpreter and reads back ``sys.modules``.
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
    # the producer side of the bundle package (write_bundle: shutil with bz2 and lzma)
    "distributor_core.bundle.write",
    "bz2",
    "lzma",
)

#: the write protocol and state decoding: needed only once there is a bundle to plan
PUBLICATION_ONLY = (
    "distributor_core.execute.publish",
    "distributor_core.execute.executor",
    "distributor_core.plan.decide",
    "distributor_core.state.codec",
    "distributor_core.compare",
)


#: pydantic's plugin look-up imports importlib.metadata when it builds a schema: loading a config
#: builds none (config/construct.py)
NO_SCHEMA_BUILD = ("importlib.metadata",)


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


def test_a_run_over_an_empty_source_imports_neither_the_server_nor_remote_backends_nor_the_write_protocol(
    tmp_path: Path,
) -> None:
    code, loaded, out = _run(_config(tmp_path, tmp_path / "src"))
    assert code == 0
    assert "Run: pipelines=1 actions=0 failed=0 dry_run=true" in out
    for name in (*NEVER_FOR_LOCAL, *PUBLICATION_ONLY, *NO_SCHEMA_BUILD):
        assert not _top(loaded, name), f"run over an empty local source imported {name}"


def test_a_run_with_a_bundle_loads_the_write_protocol_when_it_plans_but_still_no_remote_library(
    tmp_path: Path,
) -> None:
    source = tmp_path / "src"
    make_bundle(source / "daily")
    code, loaded, out = _run(_config(tmp_path, source))
    assert code == 0
    assert "Run: pipelines=1 actions=1 failed=0 dry_run=true" in out
    for name in PUBLICATION_ONLY:
        assert _top(loaded, name), f"planning a bundle did not import {name}"
    for name in (*NEVER_FOR_LOCAL, "dataclasses", "inspect", "typing_extensions"):
        assert not _top(loaded, name), f"run over a local source imported {name}"


def _probe(*argv: str) -> tuple[int, list[str], str]:
    out = subprocess.run([sys.executable, "-c", _PROBE, *argv], capture_output=True, text=True, check=True)
    lines = out.stdout.splitlines()
    result = json.loads(lines[-1])
    return result["code"], result["loaded"], "\n".join(lines[:-1])


#: start-up cost an audit of a local destination does not pay (issue 18 P11): dataclasses with
#: inspect (every model is a msgspec Struct or a named tuple), typing_extensions (msgspec is
#: imported without it), and concurrent.futures with logging (only large local writes use a pool)
NEVER_FOR_LOCAL_AUDIT = ("dataclasses", "inspect", "typing_extensions", "concurrent.futures", "logging")


def test_an_audit_of_a_local_destination_imports_no_dataclasses_inspect_typing_extensions_or_thread_pool(
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
    for name in (*NEVER_FOR_LOCAL, *NEVER_FOR_LOCAL_AUDIT):
        assert not _top(loaded, name), f"audit of a local destination imported {name}"


def test_version_imports_no_msgspec_and_no_dataclasses() -> None:
    code, loaded, out = _probe("version")
    assert code == 0 and out.strip()
    for name in ("msgspec", "dataclasses", "yaml", "distributor_core.config"):
        assert not _top(loaded, name), f"version imported {name}"


def test_msgspec_imported_alone_leaves_typing_extensions_importable_afterwards() -> None:
    code = (
        "import sys\n"
        "from distributor_core.cli.main import import_msgspec_alone\n"
        "import_msgspec_alone()\n"
        "assert 'msgspec' in sys.modules and 'typing_extensions' not in sys.modules\n"
        "import msgspec, typing_extensions, pydantic\n"
        "class S(msgspec.Struct):\n"
        "    a: int\n"
        "    b: typing_extensions.Annotated[str, msgspec.Meta(min_length=1)] = 'x'\n"
        "assert msgspec.json.decode(b'{\"a\": 1}', type=S) == S(1)\n"
        "try:\n"
        "    msgspec.json.decode(b'{\"a\": 1, \"b\": \"\"}', type=S)\n"
        "except msgspec.ValidationError as exc:\n"
        "    print('refused', exc)\n"
        "print(pydantic.TypeAdapter(int).validate_python('3'))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "refused Expected `str` of length >= 1 - at `$.b`" in result.stdout
    assert result.stdout.rstrip().endswith("3")

"""The invalid-config corpus end to end (issue 9): ``tests/config/test_invalid_corpus.py`` checks
the messages of the parser; here every case is written to a file and loaded the ways a user
meets it:

- ``distributor run --config <file>`` (``main(argv)`` for every case; the real console script in
  a subprocess for a sample, every case with ``DISTRIBUTOR_LONG=1``): exit code 1, nothing on
  stdout, exactly one stderr line ``distributor: invalid config: <messages>``, naming the field,
  and no traceback;
- the Dagster code location: ``distributor_dagster.build_definitions(path)`` raises the same
  ``invalid config: ...`` message, and importing ``distributor_dagster.definitions`` with
  ``DISTRIBUTOR_CONFIG`` fails with ``DISTRIBUTOR_CONFIG=<path>: invalid config: ...``; neither
  message carries a traceback. One case also goes through ``dagster definitions validate``.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from tests.config.test_invalid_corpus import CASES

from .conftest import LONG, count, run_cli, run_inprocess

pytestmark = pytest.mark.slow

IDS = [case[0] for case in CASES]
#: the real console script runs every case in the long run and every 8th in CI
SUBPROCESS_CASES = CASES if LONG else CASES[::8]


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / f"{name}.yml"
    path.write_text(text)
    return path


def _expected(messages: list[str]) -> str:
    return "invalid config: " + "; ".join(messages)


def _clean(text: str) -> None:
    assert "Traceback" not in text and 'File "' not in text, text


def test_corpus_is_at_least_sixty_cases() -> None:
    assert len(CASES) >= 60


@pytest.mark.parametrize(("name", "text", "messages"), CASES, ids=IDS)
def test_cli_run_rejects_invalid_config(tmp_path: Path, name: str, text: str, messages: list[str]) -> None:
    config = _write(tmp_path, name, text)
    result = run_inprocess("run", "--config", str(config))
    assert result.code == 1
    assert result.stdout == ""
    assert result.stderr == f"distributor: {_expected(messages)}\n"
    _clean(result.stderr)
    count("invalid configs through distributor run (main)", 1)


@pytest.mark.parametrize(("name", "text", "messages"), SUBPROCESS_CASES, ids=[c[0] for c in SUBPROCESS_CASES])
def test_console_script_rejects_invalid_config(tmp_path: Path, name: str, text: str, messages: list[str]) -> None:
    config = _write(tmp_path, name, text)
    result = run_cli("run", "--config", str(config))
    assert (result.code, result.stdout) == (1, "")
    assert result.stderr == f"distributor: {_expected(messages)}\n"
    _clean(result.stderr)
    count("invalid configs through the distributor console script", 1)


@pytest.fixture(scope="module")
def dagster_build():  # type: ignore[no-untyped-def]
    from distributor_dagster import build_definitions

    return build_definitions


@pytest.mark.dagster
@pytest.mark.parametrize(("name", "text", "messages"), CASES, ids=IDS)
def test_dagster_build_definitions_rejects_invalid_config(
    dagster_build, tmp_path: Path, name: str, text: str, messages: list[str]  # type: ignore[no-untyped-def]
) -> None:
    from distributor_core.config import ConfigError

    config = _write(tmp_path, name, text)
    with pytest.raises(ConfigError) as info:
        dagster_build(config)
    assert str(info.value) == _expected(messages)
    _clean(str(info.value))
    count("invalid configs through build_definitions", 1)


@pytest.mark.dagster
@pytest.mark.parametrize(("name", "text", "messages"), CASES, ids=IDS)
def test_dagster_code_location_rejects_invalid_config(
    dagster_build, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, text: str, messages: list[str]  # type: ignore[no-untyped-def]
) -> None:
    from distributor_dagster.location import DistributorConfigError

    config = _write(tmp_path, name, text)
    monkeypatch.setenv("DISTRIBUTOR_CONFIG", str(config))
    sys.modules.pop("distributor_dagster.definitions", None)
    try:
        with pytest.raises(DistributorConfigError) as info:
            importlib.import_module("distributor_dagster.definitions")
    finally:
        sys.modules.pop("distributor_dagster.definitions", None)
    assert str(info.value) == f"DISTRIBUTOR_CONFIG={config}: {_expected(messages)}"
    _clean(str(info.value))
    count("invalid configs through the Dagster code location", 1)


@pytest.mark.dagster
def test_dagster_definitions_validate_shows_the_message(tmp_path: Path) -> None:
    name, text, messages = CASES[2]
    config = _write(tmp_path, name, text)
    env = {"DISTRIBUTOR_CONFIG": str(config), "DAGSTER_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    dagster = Path(sys.executable).with_name("dagster")
    proc = subprocess.run(
        [str(dagster), "definitions", "validate", "-m", "distributor_dagster.definitions"],
        env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )
    assert proc.returncode == 1
    line = f"DistributorConfigError: DISTRIBUTOR_CONFIG={config}: {_expected(messages)}"
    assert line in proc.stdout + proc.stderr

"""Fixtures for the upload server tests (harness in :mod:`tests.server.harness`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.server.harness import Running, Setup, serve_setup, write_setup


@pytest.fixture
def setup(tmp_path: Path) -> Setup:
    """One upload pipeline ``reports`` with one local destination and token ``reporter``."""
    return write_setup(tmp_path / "site")


@pytest.fixture
def running(setup: Setup) -> Iterator[Running]:
    with serve_setup(setup) as server:
        yield server


@pytest.fixture
def client(running: Running) -> Iterator[httpx.Client]:
    with running.client() as http:
        yield http

"""Shared pytest configuration: real test peers are session fixtures in tests/peers/."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

pytest_plugins = ["tests.peers.sshd", "tests.peers.moto", "tests.peers.postgres"]


@pytest.fixture(autouse=True, scope="session")
def _validation_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """``distributor run`` keeps a validation cache under the user's cache directory; every test
    (and every console script it starts) uses a session directory instead of the real home."""
    previous = os.environ.get("DISTRIBUTOR_CACHE_DIR")
    os.environ["DISTRIBUTOR_CACHE_DIR"] = str(tmp_path_factory.mktemp("distributor-cache"))
    yield
    if previous is None:
        os.environ.pop("DISTRIBUTOR_CACHE_DIR", None)
    else:
        os.environ["DISTRIBUTOR_CACHE_DIR"] = previous

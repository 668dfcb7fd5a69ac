"""Fixtures of the config tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import yaml

from distributor_core.config import loader


@pytest.fixture(params=["libyaml", "pure-python"])
def yaml_parser(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Run a test with each parser the loader may use: libyaml's (when PyYAML was built with it, as
    in CI) and PyYAML's pure-Python one (an install without libyaml); documents and messages must
    not depend on which."""
    if request.param == "libyaml":
        assert yaml.__with_libyaml__ and loader._CParser is not None, "the libyaml path is not tested"
    else:
        monkeypatch.setattr(loader, "_CParser", None)
    yield request.param

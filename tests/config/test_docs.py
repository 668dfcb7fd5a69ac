"""docs/config.md documents every key, value and example the loader knows."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from distributor_core.config.fields import BACKEND_FIELDS, ROOT_FIELDS, Field

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "config.md").read_text()


def _walk(fields: Mapping[str, Field]) -> Iterator[tuple[str, Field]]:
    for name, spec in fields.items():
        yield name, spec
        yield from _walk(spec.fields)


ALL_FIELDS = list(_walk(ROOT_FIELDS)) + [item for table in BACKEND_FIELDS.values() for item in _walk(table)]


@pytest.mark.parametrize("name", sorted({name for name, _ in ALL_FIELDS}))
def test_every_key_is_documented(name: str) -> None:
    assert re.search(rf"`[^`]*\b{re.escape(name)}\b[^`]*`", DOC), name


@pytest.mark.parametrize(
    "value", sorted({choice for _, spec in ALL_FIELDS for choice in spec.choices} | set(BACKEND_FIELDS))
)
def test_every_documented_value_is_in_the_doc(value: str) -> None:
    assert f"`{value}`" in DOC, value


def test_every_example_is_listed() -> None:
    for path in (ROOT / "examples").glob("*.yml"):
        assert f"`{path.name}`" in DOC, path.name


def test_upload_takeover_note() -> None:
    assert "each upload with a **new bundle id replaces" in DOC
    assert "**`takeover.mode: same_source` or `never`**" in DOC

"""docs/config.md documents every key, value and example the loader knows."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from distributor_core.config import shape
from distributor_core.config.reference import TABLES, rewrite

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "config.md").read_text()


ALL_FIELDS = [(path.rsplit(".", 1)[-1], key) for path, key in shape.walk(shape.root())] + [
    (name, key) for table in shape.backends().values() for name, key in shape.walk(table)
]


@pytest.mark.parametrize("name", sorted({name for name, _ in ALL_FIELDS}))
def test_every_key_is_documented(name: str) -> None:
    assert re.search(rf"`[^`]*\b{re.escape(name)}\b[^`]*`", DOC), name


@pytest.mark.parametrize(
    "value", sorted({choice for _, spec in ALL_FIELDS for choice in spec.choices} | set(shape.backends()))
)
def test_every_documented_value_is_in_the_doc(value: str) -> None:
    assert f"`{value}`" in DOC, value


def test_every_example_is_listed() -> None:
    for path in (ROOT / "examples").glob("*.yml"):
        assert f"`{path.name}`" in DOC, path.name


def test_upload_takeover_note() -> None:
    assert "each upload with a **new bundle id replaces" in DOC
    assert "**`takeover.mode: same_source` or `never`**" in DOC


def test_the_reference_tables_are_the_declarations() -> None:
    """Every table of keys in docs/config.md is written from the models (their types, defaults,
    bounds and descriptions): `python -m distributor_core.config.reference docs/config.md`."""
    assert rewrite(DOC) == DOC, "docs/config.md is out of date: python -m distributor_core.config.reference"
    assert set(re.findall(r"<!-- reference: ([\w.]+) -->", DOC)) == set(TABLES)

"""YAML 1.2 core-schema loading: scalars, duplicate keys, single mapping document (interfaces §1.1)."""

from __future__ import annotations

import math

import pytest

from distributor_core.config import ConfigError
from distributor_core.config.loader import YamlFloat, YamlInt, load_yaml_mapping

pytestmark = pytest.mark.usefixtures("yaml_parser")


def yaml_error(text: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_yaml_mapping(text, source_name="cfg.yml")
    assert str(info.value) == "invalid config: " + "; ".join(info.value.messages)
    return info.value.messages


@pytest.mark.parametrize("word", ["yes", "no", "on", "off", "y", "n", "Yes", "NO", "On", "OFF"])
def test_yaml_11_booleans_are_strings(word: str) -> None:
    # at the YAML level; the decoder makes them booleans in boolean fields only (resolutions G2)
    assert load_yaml_mapping(f"value: {word}") == {"value": word}


@pytest.mark.parametrize(("word", "expected"), [("true", True), ("True", True), ("TRUE", True), ("false", False),
                                                ("False", False), ("FALSE", False)])
def test_core_booleans(word: str, expected: bool) -> None:
    assert load_yaml_mapping(f"value: {word}")["value"] is expected


@pytest.mark.parametrize("word", ["~", "null", "Null", "NULL", ""])
def test_core_nulls(word: str) -> None:
    assert load_yaml_mapping(f"value: {word}") == {"value": None}


@pytest.mark.parametrize(
    ("word", "expected"), [("010", 10), ("0o17", 15), ("0x1F", 31), ("-7", -7), ("+3", 3), ("0", 0)]
)
def test_core_integers(word: str, expected: int) -> None:
    value = load_yaml_mapping(f"value: {word}")["value"]
    assert isinstance(value, YamlInt)
    assert value == expected
    assert value.yaml_text == word


@pytest.mark.parametrize(("word", "expected"), [("1.10", 1.1), ("1e3", 1000.0), (".5", 0.5), ("-.inf", -math.inf)])
def test_core_floats_keep_their_text(word: str, expected: float) -> None:
    value = load_yaml_mapping(f"value: {word}")["value"]
    assert isinstance(value, YamlFloat)
    assert value == expected
    assert value.yaml_text == word


@pytest.mark.parametrize("word", ["2026-06-08", "1_000", "0b101", "12:30:00", "0o8", ".Inf.", "<<", "=", "1e"])
def test_other_scalars_are_strings(word: str) -> None:
    assert load_yaml_mapping(f"value: '{word}'")["value"] == word
    assert load_yaml_mapping(f"value: {word}")["value"] == word


def test_nan() -> None:
    assert math.isnan(load_yaml_mapping("value: .nan")["value"])


def test_merge_key_is_an_ordinary_key() -> None:
    assert load_yaml_mapping("base: &b {a: 1}\nother:\n  <<: *b\n") == {"base": {"a": 1}, "other": {"<<": {"a": 1}}}


def test_anchors_and_aliases_work() -> None:
    doc = load_yaml_mapping("a: &x [1, 2]\nb: *x\n")
    assert doc == {"a": [1, 2], "b": [1, 2]}


def test_explicit_core_tags() -> None:
    assert load_yaml_mapping("a: !!str 010\nb: !!int '12'\n") == {"a": "010", "b": 12}


def test_non_string_keys_use_their_text() -> None:
    assert load_yaml_mapping("1: a\ntrue: b\n") == {"1": "a", "true": "b"}


def test_empty_document_is_an_empty_mapping() -> None:
    assert load_yaml_mapping("") == {}
    assert load_yaml_mapping("# only a comment\n") == {}


def test_byte_order_mark_is_ignored() -> None:
    assert load_yaml_mapping("\ufeffa: 1") == {"a": 1}


def test_duplicate_key_names_the_key_and_both_lines() -> None:
    text = "pipelines:\n  - id: a\n    source: {backend: local}\n    id: b\n"
    assert yaml_error(text) == ['cfg.yml: yaml: line 4: mapping key "id" already defined at line 2']


def test_duplicate_key_in_flow_mapping() -> None:
    assert yaml_error("a: {x: 1, x: 2}") == ['cfg.yml: yaml: line 1: mapping key "x" already defined at line 1']


def test_second_document_is_an_error() -> None:
    assert yaml_error("a: 1\n---\nb: 2\n") == [
        "cfg.yml: yaml: line 2: expected a single document, found another document"
    ]


@pytest.mark.parametrize(("text", "kind"), [("- a\n- b\n", "list"), ("just text", "string"), ("42", "integer"),
                                            ("true", "boolean")])
def test_document_must_be_a_mapping(text: str, kind: str) -> None:
    assert yaml_error(text) == [f"cfg.yml: yaml: the config document must be a mapping, not a {kind}"]


def test_syntax_error_names_the_line() -> None:
    assert yaml_error("a: 1\nb: [1, 2\n") == [
        "cfg.yml: yaml: line 3: expected ',' or ']', but got '<stream end>' (while parsing a flow sequence at line 2)"
    ]


def test_tab_indentation_is_an_error() -> None:
    (message,) = yaml_error("a:\n\tb: 1\n")
    assert message.startswith("cfg.yml: yaml: line 2: found character '\\t' that cannot start any token")


def test_unsupported_tags_are_refused() -> None:
    assert yaml_error("a: !!python/object:os.system x\n") == [
        "cfg.yml: yaml: line 1: unsupported tag !!python/object:os.system"
    ]
    assert yaml_error("a: !custom x\n") == ["cfg.yml: yaml: line 1: unsupported tag !custom"]
    assert yaml_error("a: !!binary aGVsbG8=\n") == ["cfg.yml: yaml: line 1: unsupported tag !!binary"]


def test_bad_explicit_int_is_an_error() -> None:
    assert yaml_error("a: !!int nope\n") == ['cfg.yml: yaml: line 1: "nope" is not an integer']


def test_recursive_alias_is_an_error() -> None:
    assert yaml_error("a: &x [*x]\n") == ["cfg.yml: yaml: line 1: found unconstructable recursive node"]


def test_control_character_is_an_error() -> None:
    assert yaml_error("a: \x00\n") == ["cfg.yml: yaml: unacceptable character #x0000 at position 3"]


def test_complex_keys_are_refused() -> None:
    assert yaml_error("? [a, b]\n: 1\n") == ["cfg.yml: yaml: line 1: mapping keys must be scalars"]

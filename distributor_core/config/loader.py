"""Strict YAML loading with YAML 1.2 core-schema semantics (interfaces §1.1, resolutions G2).

PyYAML implements YAML 1.1, where ``yes``/``no``/``on``/``off`` are booleans, ``010`` is octal,
``2026-06-08`` is a timestamp and ``<<`` merges mappings. The config follows the YAML 1.2 core
schema instead: only ``true``/``false`` (any case form the spec lists) are booleans, only
``null``/``~``/empty are null, integers are decimal, ``0o`` octal or ``0x`` hex, and everything
else is a string. Duplicate mapping keys are an error naming the key and both lines. The stream
must hold a single document.

YAML 1.1 booleans are therefore strings here; the decoder turns them into booleans in fields
typed boolean only (:data:`YAML11_BOOLEANS`), as the Go tool's yaml.v3 loader does, so a string
field given ``yes`` keeps ``"yes"``.

Numbers keep the text they were written with (:class:`YamlInt`, :class:`YamlFloat`), so a number
supplied for a string field is taken as written (``version: 1.10`` stays ``"1.10"``).

Parsing uses libyaml's parser (``yaml.CParser``) where PyYAML was built with it, under the same
resolver and constructor: it is several times faster on a large config (issue 37: the config of a
code location with a thousand pipelines). Whatever it refuses is read again by PyYAML's own
scanner, parser and composer, which word every error as before (libyaml's wording differs); so the
messages do not depend on how PyYAML was built.
"""

from __future__ import annotations

import re
from typing import Any

from yaml.composer import Composer, ComposerError
from yaml.constructor import BaseConstructor, ConstructorError
from yaml.error import MarkedYAMLError, YAMLError
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.parser import Parser
from yaml.reader import Reader, ReaderError
from yaml.resolver import BaseResolver
from yaml.scanner import Scanner

from distributor_core.config.errors import ConfigError

_STR = "tag:yaml.org,2002:str"
_NULL = "tag:yaml.org,2002:null"
_BOOL = "tag:yaml.org,2002:bool"
_INT = "tag:yaml.org,2002:int"
_FLOAT = "tag:yaml.org,2002:float"
_SEQ = "tag:yaml.org,2002:seq"
_MAP = "tag:yaml.org,2002:map"

_INT_DECIMAL = re.compile(r"[-+]?[0-9]+")
_INT_OCTAL = re.compile(r"0o[0-7]+")
_INT_HEX = re.compile(r"0x[0-9a-fA-F]+")


#: The YAML 1.1 spellings yaml.v3 decodes into a typed bool field (its ``decoder.scalar``), and only
#: there. Like yaml.v3 this works quoted too (``"yes"``), because the value is the string either way;
#: a quoted ``"true"`` stays a string and is not a boolean, also as in yaml.v3.
YAML11_BOOLEANS = {
    "y": True, "Y": True, "yes": True, "Yes": True, "YES": True, "on": True, "On": True, "ON": True,
    "n": False, "N": False, "no": False, "No": False, "NO": False, "off": False, "Off": False, "OFF": False,
}  # fmt: skip


class YamlInt(int):
    """An integer scalar that remembers how it was written."""

    yaml_text: str

    def __new__(cls, value: int, text: str) -> YamlInt:
        obj = super().__new__(cls, value)
        obj.yaml_text = text
        return obj


class YamlFloat(float):
    """A floating-point scalar that remembers how it was written."""

    yaml_text: str

    def __new__(cls, value: float, text: str) -> YamlFloat:
        obj = super().__new__(cls, value)
        obj.yaml_text = text
        return obj


class _CoreResolver(BaseResolver):
    """Implicit tags of the YAML 1.2 core schema, and nothing else."""


_CoreResolver.add_implicit_resolver(
    _BOOL, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)
_CoreResolver.add_implicit_resolver(_NULL, re.compile(r"^(?:~|null|Null|NULL|)$"), ["~", "n", "N", ""])
_CoreResolver.add_implicit_resolver(
    _INT, re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$"), list("-+0123456789")
)
_CoreResolver.add_implicit_resolver(
    _FLOAT,
    re.compile(
        r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
        r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
    ),
    list("-+0123456789."),
)


class _CoreConstructor(BaseConstructor):
    """Builds plain Python values for the core-schema tags; any other tag is an error."""

    def _scalar(self, node: Node) -> str:
        if not isinstance(node, ScalarNode):
            raise ConstructorError(None, None, f"expected a scalar for tag {node.tag}", node.start_mark)
        return node.value

    def construct_core_str(self, node: Node) -> str:
        return self._scalar(node)

    def construct_core_null(self, node: Node) -> None:
        self._scalar(node)
        return None

    def construct_core_bool(self, node: Node) -> bool:
        value = self._scalar(node)
        if value in ("true", "True", "TRUE"):
            return True
        if value in ("false", "False", "FALSE"):
            return False
        raise ConstructorError(None, None, f'"{value}" is not a boolean', node.start_mark)

    def construct_core_int(self, node: Node) -> YamlInt:
        text = self._scalar(node)
        if _INT_DECIMAL.fullmatch(text):
            return YamlInt(int(text, 10), text)
        if _INT_OCTAL.fullmatch(text):
            return YamlInt(int(text[2:], 8), text)
        if _INT_HEX.fullmatch(text):
            return YamlInt(int(text[2:], 16), text)
        raise ConstructorError(None, None, f'"{text}" is not an integer', node.start_mark)

    def construct_core_float(self, node: Node) -> YamlFloat:
        text = self._scalar(node)
        lowered = text.lower()
        if lowered in (".inf", "+.inf"):
            return YamlFloat(float("inf"), text)
        if lowered == "-.inf":
            return YamlFloat(float("-inf"), text)
        if lowered == ".nan":
            return YamlFloat(float("nan"), text)
        try:
            return YamlFloat(float(text), text)
        except ValueError:
            raise ConstructorError(None, None, f'"{text}" is not a number', node.start_mark) from None

    def construct_core_seq(self, node: Node) -> list[Any]:
        if not isinstance(node, SequenceNode):
            raise ConstructorError(None, None, "expected a sequence", node.start_mark)
        return [self.construct_object(child, deep=True) for child in node.value]

    def construct_core_map(self, node: Node) -> dict[str, Any]:
        if not isinstance(node, MappingNode):
            raise ConstructorError(None, None, "expected a mapping", node.start_mark)
        result: dict[str, Any] = {}
        first_line: dict[str, int] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, ScalarNode):
                raise ConstructorError(None, None, "mapping keys must be scalars", key_node.start_mark)
            key = self.construct_object(key_node, deep=True)
            if not isinstance(key, str):
                key = key_node.value
            line = key_node.start_mark.line + 1
            if key in first_line:
                raise ConstructorError(
                    None,
                    None,
                    f'mapping key "{key}" already defined at line {first_line[key]}',
                    key_node.start_mark,
                )
            first_line[key] = line
            result[key] = self.construct_object(value_node, deep=True)
        return result

    def construct_unknown(self, node: Node) -> Any:
        tag = node.tag.replace("tag:yaml.org,2002:", "!!", 1)
        raise ConstructorError(None, None, f"unsupported tag {tag}", node.start_mark)


_CoreConstructor.add_constructor(_STR, _CoreConstructor.construct_core_str)
_CoreConstructor.add_constructor(_NULL, _CoreConstructor.construct_core_null)
_CoreConstructor.add_constructor(_BOOL, _CoreConstructor.construct_core_bool)
_CoreConstructor.add_constructor(_INT, _CoreConstructor.construct_core_int)
_CoreConstructor.add_constructor(_FLOAT, _CoreConstructor.construct_core_float)
_CoreConstructor.add_constructor(_SEQ, _CoreConstructor.construct_core_seq)
_CoreConstructor.add_constructor(_MAP, _CoreConstructor.construct_core_map)
_CoreConstructor.add_constructor(None, _CoreConstructor.construct_unknown)


class _CoreLoader(Reader, Scanner, Parser, Composer, _CoreConstructor, _CoreResolver):
    def __init__(self, stream: str) -> None:
        Reader.__init__(self, stream)
        Scanner.__init__(self)
        Parser.__init__(self)
        Composer.__init__(self)
        _CoreConstructor.__init__(self)
        _CoreResolver.__init__(self)


try:  # PyYAML built with libyaml
    from yaml.cyaml import CParser as _CParser
except ImportError:  # pragma: no cover - PyYAML without libyaml
    _CParser = None  # type: ignore[assignment, misc]

if _CParser is not None:

    class _LibyamlCoreLoader(_CParser, _CoreConstructor, _CoreResolver):  # type: ignore[misc, valid-type]
        """libyaml's scanner, parser and composer with the core-schema resolver and constructor."""

        def __init__(self, stream: str) -> None:
            _CParser.__init__(self, stream)
            _CoreConstructor.__init__(self)
            _CoreResolver.__init__(self)


def _load(loader_class: type, text: str) -> Any:
    loader = loader_class(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def _load_document(text: str) -> Any:
    """The document, through libyaml when PyYAML has it; anything it refuses is read again by the
    pure-Python loader, whose error (or, should the two ever disagree, whose document) is the answer."""
    if _CParser is not None:
        try:
            return _load(_LibyamlCoreLoader, text)
        except (YAMLError, RecursionError):
            pass
    return _load(_CoreLoader, text)


def _describe(exc: YAMLError) -> str:
    if isinstance(exc, ComposerError) and exc.context == "expected a single document in the stream":
        line = exc.problem_mark.line + 1 if exc.problem_mark else 0
        return f"line {line}: expected a single document, found another document"
    if isinstance(exc, MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "invalid YAML"
        text = f"line {mark.line + 1}: {problem}" if mark is not None else problem
        if exc.problem and exc.context:
            where = f" at line {exc.context_mark.line + 1}" if exc.context_mark is not None else ""
            text += f" ({exc.context}{where})"
        return text
    if isinstance(exc, ReaderError):
        return f"unacceptable character #x{exc.character:04x} at position {exc.position}"
    return str(exc)


def yaml_type_name(value: Any) -> str:
    """How a decoded YAML value is named in messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    return "mapping"


def load_yaml_mapping(text: str, *, source_name: str = "<string>") -> dict[str, Any]:
    """Decode one YAML document that must be a mapping (an empty document is an empty mapping).

    Any problem is a :class:`ConfigError` with exactly one message, naming ``source_name``.
    """
    if text.startswith("\ufeff"):
        text = text[1:]
    try:
        document = _load_document(text)
    except YAMLError as exc:
        raise ConfigError([f"{source_name}: yaml: {_describe(exc)}"], source=source_name) from None
    except RecursionError:
        raise ConfigError([f"{source_name}: yaml: document is nested too deeply"], source=source_name) from None
    if document is None:
        return {}
    if not isinstance(document, dict):
        raise ConfigError(
            [f"{source_name}: yaml: the config document must be a mapping, not a {yaml_type_name(document)}"],
            source=source_name,
        )
    return document

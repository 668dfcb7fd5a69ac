"""The reference tables of docs/config.md, written from the declaration (:mod:`.models`).

Each table lists the keys of one mapping: name, type, default and rule (``required``, the bounds,
then the key's description). docs/config.md holds each between ``<!-- reference: NAME -->`` and
``<!-- end reference -->``; ``python -m distributor_core.config.reference docs/config.md``
writes them again (``--check`` only compares, as tests/config/test_docs.py does), so the page
says what the loader does.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import MappingProxyType

import msgspec

from distributor_core.config import models, shape
from distributor_core.config.shape import Key, Kind

_DURATION_OR_SIZE = "(#durations-and-byte-sizes)"


def _backend(tag: str) -> Callable[[], Key]:
    return lambda: shape.backends()[tag]


def _model(model: type[msgspec.Struct]) -> Callable[[], Key]:
    return lambda: shape.mapping_of(model)


#: each table: the mapping whose keys it lists, and which of its nested mappings list their keys too
#: (rows follow the declaration, but ``_FIRST`` of a table lead)
TABLES: Mapping[str, tuple[Callable[[], Key], tuple[str, ...]]] = MappingProxyType({
    "top": (shape.root, ()),
    "server.http": (_model(models.ServerHTTP), ("limits",)),
    "upload_tokens": (_model(models.UploadToken), ()),
    "pipelines": (_model(models.Pipeline), ("validation",)),
    "local": (_backend("local"), ()),
    "ssh": (_backend("ssh"), ()),
    "s3": (_backend("s3"), ("credentials",)),
    "http_upload": (_backend("http_upload"), ()),
    "destinations": (_model(models.Destination), ()),
    "publish": (_model(models.Destination), ("publish", "transform", "markdown_to_html")),
    "links": (_model(models.LinksPolicy), ()),
    "retention": (_model(models.RetentionPolicy), ("prune", "bundles")),
    "transfer": (_model(models.TransferPolicy), ()),
})
#: rows of the ``publish`` table (the keys of ``publish`` and ``transform`` only)
_ONLY = {"publish": ("publish", "transform")}
#: an S3 backend's own keys lead its table (the connection keys it shares with ``staging_s3`` follow)
_FIRST = {"s3": ("bucket", "prefix")}

_BLOCK = re.compile(r"(<!-- reference: (?P<name>[\w.]+) -->\n)(?P<body>.*?)(<!-- end reference -->)", re.DOTALL)


def table(name: str) -> str:
    """The Markdown table ``name`` of :data:`TABLES`."""
    get, expand = TABLES[name]
    key = get()
    lines = ["| Field | Type | Default | Rule |", "|---|---|---|---|"]
    rows = list(_rows(key, expand, _ONLY.get(name)))
    first = _FIRST.get(name, ())
    rows.sort(key=lambda row: first.index(row[0]) if row[0] in first else len(first))
    for path, child in rows:
        lines.append(f"| `{path}` | {_type(child)} | {_default(child)} | {_rule(child)} |")
    return "\n".join(lines) + "\n"


def _rows(key: Key, expand: tuple[str, ...], only: tuple[str, ...] | None, prefix: str = "") -> Iterator[
        tuple[str, Key]]:
    for name, child in key.keys.items():
        if only is not None and name not in only:
            continue
        path = f"{prefix}{name}"
        nested = child.kind is Kind.MAPPING and name in expand
        if not nested or child.optional:
            yield path, child
        if name == "id" and key.inline is not None:  # a destination's backend, after its id
            yield "backend", Key(name="backend", kind=Kind.STRING, doc=key.inline_doc, choices=key.backends)
        if nested:
            yield from _rows(child, expand, None, f"{path}.")


def _type(key: Key) -> str:
    if key.choices:
        return " \\| ".join(f"`{choice}`" for choice in key.choices)
    if key.shown:
        return key.shown
    if key.path:
        return "path"
    if key.kind is Kind.DURATION:
        return f"[duration]{_DURATION_OR_SIZE}"
    if key.kind is Kind.BYTE_SIZE:
        return f"[byte size]{_DURATION_OR_SIZE}"
    text = key.kind.value
    if key.min_items == 1:
        text += ", at least one"
    return text


def _default(key: Key) -> str:
    if key.default_text is not None:
        return key.default_text
    value = shape.written_default(key)
    if value is None:
        return "—"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if key.path and not str(value).startswith(("/", "~")):
        return f"`<config dir>/{value}`"
    if value == "":
        return '`""`'
    return f"`{value}`"


def _rule(key: Key) -> str:
    parts = []
    if key.is_required and not key.optional:
        parts.append("required")
    if key.le is not None and key.ge is not None:
        parts.append(f"{key.ge}–{key.le}")
    elif key.gt == 0:
        parts.append("greater than zero")
    elif key.ge == 0:
        parts.append("zero or greater")
    elif key.ge is not None:
        parts.append(f"{key.ge} or greater")
    if key.doc:
        parts.append(key.doc)
    return "; ".join(parts).replace("|", "\\|")


def rewrite(text: str) -> str:
    """``text`` (docs/config.md) with every reference table written again."""
    return _BLOCK.sub(lambda m: m[1] + table(m["name"]) + m[4], text)


def main(argv: list[str]) -> int:
    check = "--check" in argv
    paths = [Path(arg) for arg in argv if arg != "--check"] or [Path("docs/config.md")]
    stale = []
    for path in paths:
        text = path.read_text()
        new = rewrite(text)
        if new != text:
            stale.append(path)
            if not check:
                path.write_text(new)
    if check and stale:
        print(f"out of date: {', '.join(map(str, stale))} (python -m distributor_core.config.reference)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

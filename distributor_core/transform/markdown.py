"""Markdown to HTML rendering (resolutions F) and the generated-output path rules (core-semantics §4.4.2).

Rendering uses markdown-it-py's ``commonmark`` preset with raw HTML disabled, plus the ``table``
and ``strikethrough`` rules. The result is a fixed UTF-8 HTML5 page; its ``<title>`` is the plain
text of the first heading, or the source file's stem when the document has no heading with text.
Links are emitted exactly as written (``other.md`` stays ``other.md``).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Sequence

from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml
from markdown_it.token import Token

#: Transform id recorded in state for generated HTML outputs.
MARKDOWN_TO_HTML = "markdown_to_html"

SIDECAR = "sidecar"
INDEX = "index"
HTML_MODES = (SIDECAR, INDEX)

_MARKDOWN_SUFFIXES = (".md", ".markdown")

_PAGE_HEAD = (
    "<!DOCTYPE html>\n"
    "<html>\n"
    "<head>\n"
    '<meta charset="utf-8">\n'
    '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
    "<title>{title}</title>\n"
    "</head>\n"
    "<body>\n"
)
_PAGE_TAIL = "</body>\n</html>\n"

_WHITESPACE = re.compile(r"\s+")


def _build_renderer() -> MarkdownIt:
    return MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])


_MD = _build_renderer()


def is_markdown_path(path: str) -> bool:
    """True when the file name ends in ``.md`` or ``.markdown`` (case-insensitive)."""
    return posixpath.basename(path).lower().endswith(_MARKDOWN_SUFFIXES)


def _markdown_stem(path: str) -> str:
    """The file name without its Markdown suffix (``Notes.MD`` → ``Notes``, ``.md`` → ``""``)."""
    name = posixpath.basename(path)
    lowered = name.lower()
    for suffix in _MARKDOWN_SUFFIXES:
        if lowered.endswith(suffix):
            return name[: -len(suffix)]
    return posixpath.splitext(name)[0]


def sidecar_output_path(source_path: str) -> str:
    """``dir/name.md`` → ``dir/name.html`` (the Markdown suffix is replaced whatever its case)."""
    if not is_markdown_path(source_path):
        raise ValueError(f"{source_path} is not a Markdown path")
    directory = posixpath.dirname(source_path)
    name = _markdown_stem(source_path) + ".html"
    return f"{directory}/{name}" if directory else name


def index_output_path(source_path: str) -> str:
    """``dir/name.md`` → ``dir/index.html`` (``index.html`` for a top-level source)."""
    if not is_markdown_path(source_path):
        raise ValueError(f"{source_path} is not a Markdown path")
    directory = posixpath.dirname(source_path)
    return f"{directory}/index.html" if directory else "index.html"


def html_output_path(source_path: str, mode: str) -> str:
    """Generated HTML path of ``source_path`` for ``mode`` (``sidecar`` or ``index``)."""
    if mode == SIDECAR:
        return sidecar_output_path(source_path)
    if mode == INDEX:
        return index_output_path(source_path)
    raise ValueError(f"markdown_to_html mode must be sidecar or index, not {mode!r}")


def _inline_text(tokens: Sequence[Token]) -> str:
    parts: list[str] = []
    for token in tokens:
        if token.type in ("text", "code_inline"):
            parts.append(token.content)
        elif token.type in ("softbreak", "hardbreak"):
            parts.append(" ")
        elif token.type == "image" and token.children:
            parts.append(_inline_text(token.children))
    return "".join(parts)


def _first_heading_text(tokens: Sequence[Token]) -> str:
    for index, token in enumerate(tokens):
        if token.type != "heading_open":
            continue
        inline = tokens[index + 1] if index + 1 < len(tokens) else None
        if inline is None or inline.type != "inline":
            continue
        text = _WHITESPACE.sub(" ", _inline_text(inline.children or [])).strip()
        if text:
            return text
    return ""


def markdown_to_html(source: bytes, *, source_path: str) -> bytes:
    """Render Markdown bytes to a complete UTF-8 HTML5 page.

    The source is decoded as UTF-8 (a leading byte-order mark is dropped; invalid sequences
    become U+FFFD). The same input always yields the same bytes.
    """
    text = source.decode("utf-8", errors="replace")
    if text.startswith("\ufeff"):
        text = text[1:]
    env: dict[str, object] = {}
    tokens = _MD.parse(text, env)
    body = _MD.renderer.render(tokens, _MD.options, env)
    title = _first_heading_text(tokens) or _markdown_stem(source_path) or posixpath.basename(source_path)
    page = _PAGE_HEAD.format(title=escapeHtml(title)) + body + _PAGE_TAIL
    return page.encode("utf-8")

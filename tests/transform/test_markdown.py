"""Markdown rendering (resolutions F) and generated-output paths (core-semantics §4.4.2)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from distributor_core.transform import (
    html_output_path,
    index_output_path,
    is_markdown_path,
    markdown_to_html,
    sidecar_output_path,
)

GOLDEN = Path(__file__).parent / "golden"
GOLDEN_SOURCES = sorted(GOLDEN.glob("*.md"))

PAGE_HEAD = (
    '<!DOCTYPE html>\n<html>\n<head>\n<meta charset="utf-8">\n'
    '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
)


def _title(page: bytes) -> str:
    text = page.decode("utf-8")
    start = text.index("<title>") + len("<title>")
    return text[start : text.index("</title>")]


def test_golden_inputs_cover_the_pinned_cases() -> None:
    names = {path.stem for path in GOLDEN_SOURCES}
    assert names == {"code", "headings", "r&d notes", "raw-html", "tables", "title-escaping", "unicode"}
    for source in GOLDEN_SOURCES:
        assert source.with_suffix(".html").is_file(), source.name


@pytest.mark.parametrize("source", GOLDEN_SOURCES, ids=lambda p: p.stem)
def test_golden_bytes(source: Path) -> None:
    expected = source.with_suffix(".html").read_bytes()
    rendered = markdown_to_html(source.read_bytes(), source_path=f"docs/{source.name}")
    assert rendered == expected


@pytest.mark.parametrize("source", GOLDEN_SOURCES, ids=lambda p: p.stem)
def test_rendering_is_deterministic_and_independent_of_directory(source: Path) -> None:
    data = source.read_bytes()
    first = markdown_to_html(data, source_path=source.name)
    second = markdown_to_html(data, source_path=f"a/b/{source.name}")
    assert hashlib.sha256(first).digest() == hashlib.sha256(second).digest()


def test_page_shape() -> None:
    page = markdown_to_html(b"# Hello\n\nWorld\n", source_path="report.md")
    assert (
        page
        == (
            PAGE_HEAD + "<title>Hello</title>\n</head>\n<body>\n<h1>Hello</h1>\n<p>World</p>\n</body>\n</html>\n"
        ).encode()
    )


def test_empty_document_uses_file_stem_and_empty_body() -> None:
    page = markdown_to_html(b"", source_path="notes/Weekly.Summary.MD")
    assert page == (PAGE_HEAD + "<title>Weekly.Summary</title>\n</head>\n<body>\n</body>\n</html>\n").encode()


def test_first_heading_of_any_level_wins() -> None:
    page = markdown_to_html(b"text\n\n### Deep *one*\n\n# Top\n", source_path="x.md")
    assert _title(page) == "Deep one"


def test_setext_heading_title_joins_lines_with_spaces() -> None:
    page = markdown_to_html(b"Line one\nline two\n===\n", source_path="x.md")
    assert _title(page) == "Line one line two"
    assert b"<h1>Line one\nline two</h1>" in page


def test_heading_title_uses_image_alt_and_entities() -> None:
    page = markdown_to_html(b"# ![Logo](logo.png) R&amp;D &lt;2026&gt;\n", source_path="x.md")
    assert _title(page) == "Logo R&amp;D &lt;2026&gt;"


def test_empty_heading_falls_back_to_a_later_heading() -> None:
    page = markdown_to_html(b"#\n\n## Real title\n", source_path="x.md")
    assert _title(page) == "Real title"


def test_stem_title_is_escaped() -> None:
    page = markdown_to_html(b"plain\n", source_path='dir/<a&"b">.markdown')
    assert _title(page) == "&lt;a&amp;&quot;b&quot;&gt;"


def test_bare_suffix_name_falls_back_to_the_file_name() -> None:
    assert _title(markdown_to_html(b"plain\n", source_path="dir/.md")) == ".md"


def test_raw_html_is_escaped_not_passed_through() -> None:
    page = markdown_to_html(b"<script>alert(1)</script>\n\nx <em>y</em>\n", source_path="x.md")
    assert b"<script>" not in page
    assert b"&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert b"x &lt;em&gt;y&lt;/em&gt;" in page


def test_links_are_not_rewritten() -> None:
    page = markdown_to_html(b"[a](other.md) [b](../up/x.markdown#frag) [c](sub/)\n", source_path="x.md")
    assert b'href="other.md"' in page
    assert b'href="../up/x.markdown#frag"' in page
    assert b'href="sub/"' in page


def test_unsafe_link_schemes_are_not_linked() -> None:
    page = markdown_to_html(b"[x](javascript:alert(1))\n", source_path="x.md")
    assert b"<a " not in page


def test_tables_and_strikethrough_are_enabled_but_not_other_extensions() -> None:
    page = markdown_to_html(b"| a |\n|---|\n| ~~b~~ |\n\nhttps://example.com\n", source_path="x.md")
    assert b"<table>" in page
    assert b"<td><s>b</s></td>" in page
    # linkify is not part of the commonmark preset: bare URLs stay text
    assert b"<p>https://example.com</p>" in page


def test_byte_order_mark_is_dropped_and_invalid_utf8_replaced() -> None:
    page = markdown_to_html(b"\xef\xbb\xbf# Title\n\nbad \xff byte\n", source_path="x.md")
    assert _title(page) == "Title"
    assert "bad \ufffd byte".encode() in page


def test_output_is_utf8_and_non_ascii_is_kept_raw() -> None:
    page = markdown_to_html("# Zürich 🚀\n".encode(), source_path="x.md")
    assert "<title>Zürich 🚀</title>".encode() in page


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("report.md", True),
        ("dir/Report.MD", True),
        ("notes.markdown", True),
        ("notes.MarkDown", True),
        (".md", True),
        ("report.mdx", False),
        ("report.md.txt", False),
        ("markdown", False),
        ("dir.md/file.txt", False),
    ],
)
def test_is_markdown_path(path: str, expected: bool) -> None:
    assert is_markdown_path(path) is expected


@pytest.mark.parametrize(
    ("source", "sidecar", "index"),
    [
        ("report.md", "report.html", "index.html"),
        ("dir/name.md", "dir/name.html", "dir/index.html"),
        ("a/b/Notes.MARKDOWN", "a/b/Notes.html", "a/b/index.html"),
        ("a/v1.2.md", "a/v1.2.html", "a/index.html"),
    ],
)
def test_output_paths(source: str, sidecar: str, index: str) -> None:
    assert sidecar_output_path(source) == sidecar
    assert index_output_path(source) == index
    assert html_output_path(source, "sidecar") == sidecar
    assert html_output_path(source, "index") == index


def test_output_paths_reject_non_markdown_and_unknown_modes() -> None:
    with pytest.raises(ValueError, match="is not a Markdown path"):
        sidecar_output_path("report.txt")
    with pytest.raises(ValueError, match="is not a Markdown path"):
        index_output_path("report.txt")
    with pytest.raises(ValueError, match="must be sidecar or index"):
        html_output_path("report.md", "inline")



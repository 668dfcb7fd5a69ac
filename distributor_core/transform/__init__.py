"""Transforms that turn source files into generated outputs (core-semantics §4.4.2).

Owns: rendering (bytes in, bytes out). Must not know: storage, state, planning, any shell.
"""

from distributor_core.transform.markdown import (
    HTML_MODES,
    MARKDOWN_TO_HTML,
    html_output_path,
    index_output_path,
    is_markdown_path,
    markdown_to_html,
    sidecar_output_path,
)

__all__ = [
    "HTML_MODES",
    "MARKDOWN_TO_HTML",
    "html_output_path",
    "index_output_path",
    "is_markdown_path",
    "markdown_to_html",
    "sidecar_output_path",
]

"""The troubleshooting entries behind ``distributor explain <class>``, read from the user docs
packaged with the distribution (``distributor_core/docs``, the repository's ``docs/``), so an
installed copy explains its refusals without the repository.

An entry is the part of ``troubleshooting.md`` from its anchor (``<a id="unmanaged-content"></a>``,
the failure class with ``-`` for ``_``) to the next anchor.
"""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

PAGE = "troubleshooting.md"
_ANCHOR = re.compile(r'^<a id="([^"]+)"></a>\s*$', re.MULTILINE)


def failure_classes() -> tuple[str, ...]:
    from distributor_core.app.refusal import FAILURE_CLASSES

    return FAILURE_CLASSES


def page_path() -> Path:
    """The packaged troubleshooting page (a file of the installed distribution)."""
    return Path(str(resources.files("distributor_core").joinpath("docs", PAGE)))


def entries(text: str) -> dict[str, str]:
    """Every anchored entry of the page: anchor → its Markdown (anchor line removed)."""
    found: dict[str, str] = {}
    marks = list(_ANCHOR.finditer(text))
    for index, mark in enumerate(marks):
        end = marks[index + 1].start() if index + 1 < len(marks) else len(text)
        found[mark.group(1)] = text[mark.end():end].strip() + "\n"
    return found


def entry(failure: str) -> str | None:
    """The entry of failure class ``failure`` (``unmanaged_content`` or ``unmanaged-content``)."""
    text = page_path().read_text(encoding="utf-8")
    return entries(text).get(failure.replace("_", "-"))

"""User docs (README.md, docs/ less docs/internal/, the docs `distributor explain` ships) speak to
a newcomer: no project-internal references they cannot look up."""

from __future__ import annotations

import re

from tests.docs.snippets import REPO, pages

#: internal names: the predecessor as the team calls it, spec sections, issue numbers, benchmark ids
JARGON = {
    "the Go tool": re.compile(r"\bGo tool\b"),
    "a spec resolution": re.compile(r"\bresolutions? [A-H]\d+\b"),
    "a spec section": re.compile(r"§|core-semantics|interfaces\.md"),
    "an issue number": re.compile(r"\bissues? #?\d+\b", re.IGNORECASE),
    "a benchmark id": re.compile(r"\b(?:bench(?:/run\.py)? )?P\d{1,2}\b"),
}


def test_user_docs_have_no_internal_jargon() -> None:
    found = []
    for page in pages():
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            for name, pattern in JARGON.items():
                match = pattern.search(line)
                if match:
                    where = f"{page.relative_to(REPO)}:{number}"
                    found.append(f"{where}: {name} ({match.group(0)!r}): {line.strip()[:100]}")
    assert not found, "\n".join(found)


def test_the_jargon_check_reads_every_user_page() -> None:
    names = {str(page.relative_to(REPO)) for page in pages()}
    assert {"README.md", "docs/troubleshooting.md", "docs/integrations/ssh-sftp.md"} <= names
    assert not any(name.startswith("docs/internal/") for name in names)

"""The shell and Python snippets of README.md and docs/ (not docs/internal/), as a reader meets them.

A snippet is a fenced block:

- ```` ```sh ```` / ```` ```bash ````: commands, run as one bash script (``set -e``; a command
  that serves until stopped, ``distributor serve`` or ``dagster dev``, is started in the
  background, waited for until it serves, and stopped at the end of the block);
- ```` ```console ````: a transcript: ``$ `` lines are commands (``\\`` continues one), the others
  what it prints. Each command must exit as the transcript shows: 1 when its output ends in a
  ``distributor: ...`` error or a following ``echo $?`` prints 1, else 0; and its first line
  must carry the label the transcript shows (``Prune:``...), whatever the counts;
- ```` ```python ````: the blocks of one page run in order in one interpreter, as a reader pastes
  them into one session.

``<!-- snippet: not run (<reason>) -->`` right before a block leaves it out (a step that sets up
a host as root: PostgreSQL, systemd units). The placeholders a snippet may use are the table
between ``<!-- placeholders -->`` and ``<!-- /placeholders -->`` in README.md: the runner replaces
each by its stand-in in a clone, the only rewriting it does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LANGUAGES = {"sh": "sh", "bash": "sh", "console": "console", "python": "python"}
_FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>[A-Za-z0-9_+-]*)\s*$")
_DIRECTIVE = re.compile(r"^<!-- snippet: (?P<what>.+?) -->\s*$")
_NOT_RUN = re.compile(r"^not run \((?P<reason>.+)\)$")


@dataclass(frozen=True)
class Snippet:
    page: str  # repository-relative path of the Markdown file
    line: int  # line of the opening fence
    language: str  # sh | console | python
    text: str
    not_run: str = ""  # the reason given in the page, when it is not run

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def pages() -> list[Path]:
    found = [REPO / "README.md"]
    found += sorted(p for p in (REPO / "docs").rglob("*.md") if "internal" not in p.relative_to(REPO / "docs").parts)
    return found


def snippets(page: Path) -> list[Snippet]:
    lines = page.read_text(encoding="utf-8").splitlines()
    found: list[Snippet] = []
    index = 0
    while index < len(lines):
        fence = _FENCE.match(lines[index])
        if fence is None:
            index += 1
            continue
        indent, lang, start = len(fence["indent"]), fence["lang"], index
        body: list[str] = []
        index += 1
        while index < len(lines) and not re.match(rf"^ {{{indent}}}```\s*$", lines[index]):
            body.append(lines[index][indent:])
            index += 1
        index += 1
        if lang not in LANGUAGES:
            continue
        before = start - 1
        while before >= 0 and not lines[before].strip():
            before -= 1
        directive = _DIRECTIVE.match(lines[before]) if before >= 0 else None
        not_run = ""
        if directive is not None:
            reason = _NOT_RUN.match(directive["what"])
            assert reason is not None, f"{page}:{before + 1}: unknown snippet directive {directive['what']!r}"
            not_run = reason["reason"]
        found.append(Snippet(str(page.relative_to(REPO)), start + 1, LANGUAGES[lang], "\n".join(body) + "\n",
                             not_run))
    return found


def all_snippets() -> list[Snippet]:
    return [snippet for page in pages() for snippet in snippets(page)]


def placeholders(readme: Path = REPO / "README.md") -> dict[str, str]:
    """README's placeholder table: what the docs write → its stand-in in a clone (the first
    column, and the first text in backticks of the last)."""
    text = readme.read_text(encoding="utf-8")
    table = text.split("<!-- placeholders -->", 1)[1].split("<!-- /placeholders -->", 1)[0]
    found: dict[str, str] = {}
    for row in table.splitlines():
        cells = [cell.strip() for cell in row.strip().strip("|").split("|")]
        if len(cells) < 3 or not cells[0].startswith("`") or set(cells[0]) <= {"-", " "}:
            continue
        stand_in = re.search(r"`([^`]+)`", cells[-1])
        assert stand_in is not None, f"README placeholder row without a stand-in: {row}"
        found[cells[0].strip("`")] = stand_in.group(1)
    assert found, "README.md has no placeholder table"
    return found


def substitute(text: str, table: dict[str, str], values: dict[str, str]) -> str:
    """``text`` with every placeholder replaced (longest first); ``{name}`` in a stand-in is one of
    the runner's ``values`` (a port it chose)."""
    for placeholder in sorted(table, key=len, reverse=True):
        text = text.replace(placeholder, table[placeholder].format(**values))
    return text


@dataclass(frozen=True)
class Command:
    """One ``$`` command of a transcript and what the transcript says it does."""

    text: str
    output: tuple[str, ...]
    exit_code: int

    @property
    def label(self) -> str:
        """The first output line's label (``Prune`` of ``Prune: ...``), if it has one."""
        for line in self.output:
            match = re.match(r"^([A-Z][A-Za-z ]*): ", line)
            return match.group(1) if match else ""
        return ""


def transcript(text: str) -> list[Command]:
    """The commands of a console block, each with its output and expected exit code."""
    raw: list[tuple[str, list[str]]] = []
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        index += 1
        if line.startswith("$ "):
            command = line[2:]
            while command.endswith("\\") and index < len(lines):
                command = command + "\n" + lines[index]
                index += 1
            raw.append((command, []))
        elif raw and line.strip():
            raw[-1][1].append(line)
        elif line.strip():
            raise AssertionError(f"transcript line before any command: {line!r}")
    commands: list[Command] = []
    for position, (command, output) in enumerate(raw):
        if command.strip() == "echo $?":
            continue
        code = 0
        if output and output[-1].startswith("distributor: ") and not output[-1].startswith("distributor: warning"):
            code = 1
        following = raw[position + 1] if position + 1 < len(raw) else None
        if following is not None and following[0].strip() == "echo $?" and following[1]:
            code = int(following[1][0])
        commands.append(Command(command, tuple(output), code))
    return commands

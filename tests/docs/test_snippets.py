"""Every shell and Python snippet of README.md and docs/ runs as printed in a fresh clone after
``make demo``, with ``.venv/bin`` on PATH as the README says, and the README's placeholders
standing in for a reader's own config, directories and servers (:mod:`tests.docs.snippets`).

The clone is the repository's files (tracked and new, as ``git ls-files`` lists them) copied to a
scratch directory, with this environment's ``.venv`` linked in; what ``make demo`` leaves there is
made the same way the demo makes it, without its two Dagster runs (``tests/dagster/test_demo.py``
runs the demo itself): the example's publication (``distributor run --config
examples/local-publish.yml``) and ``.dagster_home`` with telemetry off. Pages run in the order the
README lists them (README first), blocks in page order, in one clone: a page may rely on what an
earlier block did, as a reader following it would. ``HOME`` is the clone's own.

``DOCS_SNIPPETS=docs/cli.md,docs/operations.md`` runs only those pages (after README.md, which
publishes the example the others use), to try a page while editing it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.docs.snippets import REPO, Snippet, all_snippets, placeholders, substitute, transcript

VENV_BIN = Path(sys.executable).parent
#: Commands that serve until stopped, with the line they print once they serve.
SERVERS = {
    "distributor serve": "serving HTTP upload API on ",
    "dagster dev": "Serving dagster-webserver on ",
}
#: A block's time limit (a Dagster run is several seconds on a loaded machine).
BLOCK_TIMEOUT = 300

PRELUDE = r"""
set -eo pipefail
__srv=""
__stop() {  # stop the server started last (its whole session), as Ctrl-C in its terminal would
    [ -n "$__srv" ] || return 0
    kill -TERM -- "-$__srv" 2>/dev/null || true
    for _ in $(seq 150); do kill -0 -- "-$__srv" 2>/dev/null || break; sleep 0.1; done
    kill -KILL -- "-$__srv" 2>/dev/null || true
    __srv=""
}
trap __stop EXIT
__serve() {  # __serve <ready text> <log>: wait until the server started last serves
    local deadline=$((SECONDS + 180))
    __srv=$!
    until grep -qF -- "$1" "$2"; do
        if ! kill -0 "$__srv" 2>/dev/null || (( SECONDS > deadline )); then
            echo "snippet server did not start:" >&2; cat "$2" >&2; return 1
        fi
        sleep 0.2
    done
}
"""


def clone(target: Path, *, venv: bool = True) -> Path:
    """The repository's files as a fresh clone has them (tracked and new, uncommitted edits
    included), with this environment's ``.venv`` linked in when ``venv``."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source, copy = REPO / name, target / name
        if not source.exists() and not source.is_symlink():
            continue  # deleted in the work tree
        copy.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            copy.symlink_to(os.readlink(source))
        else:
            shutil.copy2(source, copy)
    if venv:
        (target / ".venv").symlink_to(VENV_BIN.parent)
    return target


def environment(root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("DISTRIBUTOR_", "DAGSTER_", "PYTEST_")) and k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["PATH"] = f"{root / '.venv' / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["HOME"] = str(root / ".home")
    return env


def after_make_demo(root: Path, env: dict[str, str]) -> None:
    (root / ".home").mkdir()
    subprocess.run(["distributor", "run", "--config", "examples/local-publish.yml"], cwd=root, env=env,
                   check=True, capture_output=True, timeout=120)
    (root / ".dagster_home").mkdir()
    (root / ".dagster_home" / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")


def shell_script(text: str) -> str:
    lines = [PRELUDE]
    for index, line in enumerate(text.splitlines()):
        server = next((ready for command, ready in SERVERS.items() if command in line.split("#", 1)[0]), None)
        if server is None:
            lines.append(line)
            continue
        # one server at a time, in a session of its own (stopped with all its children)
        log = f"$__dir/server-{index}.log"
        assignments, command = re.match(r"^\s*((?:[A-Za-z_][A-Za-z0-9_]*=\S*\s+)*)(.*)$",
                                        line.split("#", 1)[0].rstrip().rstrip("&")).groups()
        lines.append(f'__stop; __dir=${{__dir:-$(mktemp -d)}}; {assignments}setsid {command} >"{log}" 2>&1 &')
        lines.append(f"__serve {json.dumps(server)} \"{log}\"")
    return "\n".join(lines) + "\n"


def run_bash(script: str, root: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``script`` in bash in its own process group; whatever it left serving is stopped after."""
    process = subprocess.Popen(["bash", "-c", script], cwd=root, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=BLOCK_TIMEOUT)
    finally:
        for sig, pause in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 0.0)):
            try:
                os.killpg(process.pid, sig)
            except ProcessLookupError:
                break
            deadline = time.monotonic() + pause
            while time.monotonic() < deadline:
                try:
                    os.killpg(process.pid, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.1)
        process.wait()
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


PYTHON_RUNNER = r"""
import json, sys, traceback
namespace = {"__name__": "__main__"}
for where, code in json.load(open(sys.argv[1])):
    try:
        exec(compile(code, where, "exec"), namespace)
    except BaseException:
        traceback.print_exc()
        print(f"snippet failed: {where}", file=sys.stderr)
        sys.exit(1)
"""


def check_shell(snippet: Snippet, text: str, root: Path, env: dict[str, str]) -> list[str]:
    result = run_bash(shell_script(text), root, env)
    if result.returncode != 0:
        return [f"{snippet.where}: exit {result.returncode}\n{text}{result.stdout[-3000:]}{result.stderr[-3000:]}"]
    return []


def check_console(snippet: Snippet, text: str, root: Path, env: dict[str, str]) -> list[str]:
    """The transcript's commands in one bash session (variables carry over, as in a terminal),
    each one's output and exit status kept apart."""
    commands = transcript(text)
    script = [PRELUDE.replace("set -eo pipefail", ""), "__d=$(mktemp -d)"]
    for index, command in enumerate(commands):
        script.append(f'{{ {command.text}\n}} >"$__d/out.{index}" 2>"$__d/err.{index}"; echo $? >"$__d/rc.{index}"')
    script.append('echo "$__d"')
    result = run_bash("\n".join(script) + "\n", root, env)
    outputs = Path(result.stdout.strip().splitlines()[-1])
    failures = []
    for index, command in enumerate(commands):
        rc = (outputs / f"rc.{index}").read_text().strip()
        stdout, stderr = (outputs / f"out.{index}").read_text(), (outputs / f"err.{index}").read_text()
        wrong = []
        if rc != str(command.exit_code):
            wrong.append(f"exit {rc}, the transcript shows {command.exit_code}")
        first = (stdout.splitlines() or [""])[0]
        if command.label and not first.startswith(f"{command.label}: "):
            wrong.append(f"first line {first!r}, the transcript shows {command.label}: ...")
        if "Traceback" in stderr:
            wrong.append("a traceback")
        if wrong:
            failures.append(f"{snippet.where}: $ {command.text}\n  " + "; ".join(wrong)
                            + f"\n{stdout[-2000:]}{stderr[-2000:]}")
    shutil.rmtree(outputs, ignore_errors=True)
    return failures


def check_python(page: str, blocks: list[tuple[Snippet, str]], root: Path, env: dict[str, str]) -> list[str]:
    listing = root / ".home" / "snippets.json"
    listing.write_text(json.dumps([[f"{s.page} (block at line {s.line})", text] for s, text in blocks]))
    result = subprocess.run([sys.executable, "-c", PYTHON_RUNNER, str(listing)], cwd=root, env=env,
                            capture_output=True, text=True, timeout=BLOCK_TIMEOUT, check=False)
    if result.returncode != 0:
        return [f"{page}: python\n{result.stdout[-2000:]}{result.stderr[-4000:]}"]
    return []


def page_order(found: list[Snippet]) -> list[str]:
    """README first, then the pages in the order the README links them, then the rest."""
    readme = (REPO / "README.md").read_text()
    pages = list(dict.fromkeys(s.page for s in found))
    return sorted(pages, key=lambda p: (p != "README.md", readme.find(f"({p})") if f"({p})" in readme else 10**9, p))


def test_placeholders_and_not_run_blocks_are_documented() -> None:
    table = placeholders()
    found = all_snippets()
    assert {"distributor.yml", "/srv/reports", "/var/spool/distributor"} <= set(table)
    skipped = [s for s in found if s.not_run]
    # only steps that set up a host as root stay out; each says why in the page
    assert len(skipped) <= 4, [s.where for s in skipped]
    assert all(len(s.not_run) > 20 for s in skipped)
    ran = [s for s in found if not s.not_run]
    assert len(ran) >= 40
    used = {p for p in table if any(p in s.text for s in ran)}
    assert used == set(table), f"placeholders no snippet uses: {set(table) - used}"


def test_every_snippet_runs_as_printed(tmp_path: Path, sshd_server) -> None:
    root = clone(tmp_path / "clone")
    env = environment(root)
    after_make_demo(root, env)
    table = placeholders()
    values = {"sshd_port": str(sshd_server.port)}
    found = [s for s in all_snippets() if not s.not_run]
    only = [page for page in os.environ.get("DOCS_SNIPPETS", "").split(",") if page]
    if only:
        found = [s for s in found if s.page in ("README.md", *only)]
    failures: list[str] = []
    for page in page_order(found):
        python: list[tuple[Snippet, str]] = []
        for snippet in (s for s in found if s.page == page):
            text = substitute(snippet.text, table, values)
            if snippet.language == "python":
                python.append((snippet, text))
            elif snippet.language == "console":
                failures += check_console(snippet, text, root, env)
            else:
                failures += check_shell(snippet, text, root, env)
        if python:
            failures += check_python(page, python, root, env)
    assert not failures, "\n\n".join(failures)

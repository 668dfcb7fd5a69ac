"""``distributor completion bash|zsh``: the scripts complete what the registry declares, in a real
bash (``complete -F``) and a real interactive zsh (on a pseudo-terminal, TAB pressed)."""

from __future__ import annotations

import os
import pty
import select
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.cli.conftest import REPO, SCRIPT
from tests.cli.conftest import run_script as run

BASH_PROBE = """
source "$1"
shift
compopt() { :; }   # only valid inside a real completion; the probe calls the function directly
COMP_WORDS=("$@"); COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 )); COMPREPLY=()
_distributor
printf '%s\\n' "${COMPREPLY[@]}"
"""


@pytest.fixture(scope="module")
def bash_script(tmp_path_factory: pytest.TempPathFactory) -> Path:
    result = run("completion", "bash")
    assert (result.returncode, result.stderr) == (0, "")
    path = tmp_path_factory.mktemp("completion") / "distributor.bash"
    path.write_text(result.stdout)
    return path


def bash_complete(script: Path, *words: str) -> list[str]:
    result = subprocess.run(["bash", "-c", BASH_PROBE, "probe", str(script), "distributor", *words],
                            cwd=REPO, capture_output=True, text=True, timeout=30, check=True)
    return [line for line in result.stdout.splitlines() if line]


def test_bash_completes_commands_subcommands_flags_and_choices(bash_script: Path) -> None:
    assert "reconcile-state" in bash_complete(bash_script, "")
    assert bash_complete(bash_script, "re") == ["reconcile-state"]
    assert bash_complete(bash_script, "config", "") == ["schema", "check", "--help"]
    assert bash_complete(bash_script, "run", "--d") == ["--destination", "--dry-run"]
    assert bash_complete(bash_script, "run", "--format", "") == ["text", "json"]
    assert bash_complete(bash_script, "serve", "--publisher", "") == ["inline", "dagster"]
    # a flag's value is skipped when finding the command; Go's one-dash form works too
    assert bash_complete(bash_script, "run", "-config", "examples/fan-out.yml", "--rep") == ["--republish"]
    assert bash_complete(bash_script, "config", "check", "--co") == ["--config", "--connect"]
    assert bash_complete(bash_script, "run", "--config", "examples/local-pu") == ["examples/local-publish.yml"]
    assert bash_complete(bash_script, "explain", "un") == [
        "unmanaged_content", "unreachable_root", "untrusted_host_key"]
    assert bash_complete(bash_script, "completion", "") == ["bash", "zsh"]


class ZshSession:
    """An interactive zsh on a pseudo-terminal with the generated script on its ``fpath`` and the
    distributor of this environment first on PATH; :meth:`tab` types a line and presses TAB."""

    def __init__(self, script_dir: Path) -> None:
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # pragma: no cover - the child
            os.chdir(REPO)
            os.environ["PATH"] = f"{SCRIPT.parent}{os.pathsep}{os.environ['PATH']}"
            os.environ["TERM"] = "dumb"
            os.execvp("zsh", ["zsh", "-f", "-i"])
        os.write(self.fd, f"PROMPT='> '; fpath=({script_dir} $fpath); autoload -U compinit; compinit -u -D; "
                          "echo READY''READY\n".encode())
        assert "READYREADY" in self._read_until("READYREADY")

    def _read_until(self, *expected: str, seconds: float = 20) -> str:
        data, deadline = "", time.monotonic() + seconds
        while time.monotonic() < deadline and not all(text in data for text in expected):
            ready, _, _ = select.select([self.fd], [], [], 0.05)
            if ready:
                try:
                    data += os.read(self.fd, 65536).decode(errors="replace")
                except OSError:
                    break
        return data

    def tab(self, line: str, *expected: str) -> str:
        """What zsh prints after ``line`` + TAB, once every ``expected`` text is in it (or after
        the time limit); the line is cleared afterwards (Ctrl-U)."""
        os.write(self.fd, f"{line}\t".encode())
        try:
            return self._read_until(*expected)
        finally:
            os.write(self.fd, b"\x15")

    def close(self) -> None:
        os.kill(self.pid, 9)
        os.waitpid(self.pid, 0)
        os.close(self.fd)


@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is installed by scripts/install-test-peers.sh")
def test_zsh_completes_with_descriptions(tmp_path: Path) -> None:
    result = run("completion", "zsh")
    assert result.returncode == 0 and result.stdout.startswith("#compdef distributor\n")
    (tmp_path / "_distributor").write_text(result.stdout)
    zsh = ZshSession(tmp_path)
    try:
        listing = zsh.tab("distributor run --", "--config", "--dry-run", "plan and report without writing")
        assert "configuration file" in listing and "plan and report without writing" in listing, listing
        assert "distributor explain" in zsh.tab("distributor expl", "distributor explain")  # completed in place
        classes = zsh.tab("distributor explain missing_", "missing_credential", "missing_state")
        assert "missing_credential" in classes and "missing_state" in classes, classes
        assert "distributor config check" in zsh.tab("distributor config ch", "distributor config check")
    finally:
        zsh.close()


def test_unknown_shell_is_a_usage_error() -> None:
    result = run("completion", "fish")
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == "distributor: completion: unknown shell 'fish' (want bash or zsh)\n"

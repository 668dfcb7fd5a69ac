"""Running one command imports only that command's module (issue 17 start-up)."""

from __future__ import annotations

import json
import subprocess
import sys

from distributor_core.cli import registry

_PROBE = """
import json, sys
from distributor_core.cli.main import main
code = main(sys.argv[1:])
loaded = sorted(m for m in sys.modules if m.startswith("distributor_core"))
print(json.dumps({"code": code, "loaded": loaded}))
"""


def _loaded_by(*argv: str) -> tuple[int, list[str]]:
    out = subprocess.run([sys.executable, "-c", _PROBE, *argv], capture_output=True, text=True, check=True)
    result = json.loads(out.stdout.splitlines()[-1])
    return result["code"], result["loaded"]


def test_version_imports_no_other_command_nor_the_library_behind_them() -> None:
    code, loaded = _loaded_by("version")
    assert code == 0
    commands = [m for m in loaded if m.startswith("distributor_core.cli.commands.")]
    assert commands == ["distributor_core.cli.commands.version"]
    for heavy in ("distributor_core.config", "distributor_core.app", "distributor_core.storage",
                  "distributor_core.state", "distributor_core.server"):
        assert heavy not in loaded, f"distributor version imported {heavy}"


def test_a_dashed_command_is_found_in_its_own_module() -> None:
    code, loaded = _loaded_by("reconcile-state", "--help")
    assert code == 0
    commands = {m for m in loaded if m.startswith("distributor_core.cli.commands.") and not m.endswith("._repair")}
    assert "distributor_core.cli.commands.reconcile_state" in commands
    assert "distributor_core.cli.commands.serve" not in commands


def test_root_help_and_unknown_names_still_see_every_command() -> None:
    code, loaded = _loaded_by("--help")
    assert code == 0
    every = {f"distributor_core.cli.commands.{c.name.replace('-', '_')}" for c in registry.all_commands()}
    assert every <= set(loaded)
    assert registry.find("no-such-command") is None
    assert registry.find("_bundles") is None  # helpers are never commands
    assert registry.find("../version") is None
    assert [registry.find(c.name) for c in registry.all_commands()] == list(registry.all_commands())

"""``distributor explain <class>`` prints the troubleshooting entry of every failure class from the
docs packaged with the distribution: through the console script, and from a built wheel run
outside the repository (what a user who installed distributor has)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

from distributor_core.app.refusal import FAILURE_CLASSES
from tests.cli.conftest import REPO
from tests.cli.conftest import run_script as run
from tests.docs.test_snippets import clone


def test_explain_prints_the_entry_of_every_failure_class() -> None:
    page = (REPO / "docs" / "troubleshooting.md").read_text()
    for failure in FAILURE_CLASSES:
        result = run("explain", failure)
        assert (result.returncode, result.stderr) == (0, ""), failure
        # the entry names its class and stops before the next one
        assert f"Class `{failure}`" in result.stdout, failure
        others = [f"Class `{other}`." for other in FAILURE_CLASSES if other != failure]
        assert not any(other in result.stdout for other in others), failure
        assert f'<a id="{failure.replace("_", "-")}"></a>' in page
        assert result.stdout.rstrip().endswith("troubleshooting.md)")
    dashed = run("explain", "unmanaged-content")
    assert dashed.returncode == 0 and dashed.stdout == run("explain", "unmanaged_content").stdout


def test_explain_lists_classes_and_refuses_unknown_ones() -> None:
    listing = run("explain")
    assert listing.returncode == 0
    assert [line.strip() for line in listing.stdout.splitlines()[1:-1]] == list(FAILURE_CLASSES)
    as_json = json.loads(run("explain", "locked", "--format", "json").stdout)
    assert as_json["result"]["class"] == "locked" and "Class `locked`" in as_json["result"]["entry"]
    unknown = run("explain", "bogus")
    assert (unknown.returncode, unknown.stdout) == (2, "")
    assert unknown.stderr.startswith('distributor: explain: unknown failure class "bogus" (want one of unmanaged_')


def test_an_installed_wheel_explains_without_the_repository(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    source = clone(tmp_path / "clone", venv=False)  # the build writes build/ next to its sources
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                    "--wheel-dir", str(wheels), str(source)], check=True, capture_output=True, timeout=300)
    (wheel,) = wheels.glob("distributor-*.whl")
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)
    assert (site / "distributor_core" / "docs" / "troubleshooting.md").is_file()
    assert not (site / "distributor_core" / "docs" / "internal").exists()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    probe = ("import sys, distributor_core; from distributor_core.cli.main import main; "
             "assert distributor_core.__file__.startswith(sys.argv[1]), distributor_core.__file__; "
             "sys.exit(main(['explain', 'foreign_owner']))")
    result = subprocess.run([sys.executable, "-c", probe, str(site)], cwd=elsewhere, capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": str(site)}, timeout=60, check=False)
    assert (result.returncode, result.stderr) == (0, "")
    assert "Class `foreign_owner`" in result.stdout
    assert f"(from {site / 'distributor_core' / 'docs' / 'troubleshooting.md'})" in result.stdout

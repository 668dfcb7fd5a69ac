"""The repair and prune docs quote what the code prints."""

from __future__ import annotations

from pathlib import Path

import pytest

from distributor_core.cli import registry

ROOT = Path(__file__).resolve().parents[2]
CLI = (ROOT / "docs" / "cli.md").read_text()
OPERATIONS = (ROOT / "docs" / "operations.md").read_text()
TROUBLESHOOTING = (ROOT / "docs" / "troubleshooting.md").read_text()


@pytest.mark.parametrize("name", ["reconcile-state", "prune", "audit"])
def test_synopsis_matches_the_command(name: str) -> None:
    command = registry.find(name)
    assert command is not None
    for usage in command.usage:
        assert f"distributor {usage}\n" in CLI
    for flag in command.flags:
        assert f"`{flag.name}" in CLI


@pytest.mark.parametrize(
    "text",
    [
        "distributor: prune requires exactly one of --dry-run or --apply",
        "reconcile-state accepts either --bundle or\n--all-bundles",
        "state owner is other/archive, not\n   reports/archive",
        "prune deletes outputs of the current publication of reports/archive: report.md, summary.txt",
        "Failed: path=daily-2026-05-01.csv error=delete managed outputs local daily-2026-05-01.csv",
        "Bundles: pipeline=reports destination=archive backend=local root=/srv/reports/archive bundles=2 failed=0",
        "distributor: audit found problems: reports/archive [daily/2026-06-08]: 1 size_mismatch, 1 unmanaged",
        'Unmanaged: path=notes.txt type=file reason="not an output the source plans here"',
        "Destinations: destinations=4 failed=1 dry_run=false",
        "reconcile-state accepts either --all or\n--pipeline and --destination",
    ],
)
def test_cli_doc_quotes(text: str) -> None:
    assert text in CLI


def test_operations_and_troubleshooting_sections() -> None:
    assert "## State repair\n" in OPERATIONS and "## Pruning\n" in OPERATIONS
    assert "| CLI `reconcile-state` | `--dry-run` | default |" in OPERATIONS
    assert "| CLI `reconcile-state --adopt` | default | `--apply` |" in OPERATIONS
    for section in ("### Whole config\n", "### Auditing destinations\n", "### Adopting copies\n"):
        assert section in OPERATIONS
    for anchor in ("operations.md#auditing-destinations", "operations.md#adopting-copies"):
        assert anchor in TROUBLESHOOTING
    for anchor in ("operations.md#state-repair", "operations.md#pruning"):
        assert anchor in CLI or anchor in TROUBLESHOOTING
    assert "does not exist; for state\nin bundle paths below the root" in TROUBLESHOOTING

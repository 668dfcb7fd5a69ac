"""``distributor reconcile-state`` and ``distributor prune`` (interfaces §2.6, §2.7, §2.10 items 1–14;
resolutions B2, C3)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from distributor_core.app import bundles as app_bundles
from distributor_core.state import OwnerScope
from distributor_core.storage.faults import FaultInjectingStorage
from tests.repair.conftest import (
    DEFAULT_FILES,
    PAST,
    Dest,
    Runner,
    config_file,
    single_owner_state,
)

SELECT = ("--pipeline", "reports", "--destination", "archive")


@pytest.fixture
def prune_fixture(tmp_path: Path, dest: Dest) -> tuple[Path, bytes]:
    """Item 8: destination holds report.md and summary.txt, matching state from 2020, and extra.txt."""
    data = dest.put_state(single_owner_state(dict.fromkeys(DEFAULT_FILES, PAST)), with_outputs=False)
    for name, content in DEFAULT_FILES.items():
        dest.write(name, content)
    dest.write("extra.txt", b"unmanaged")
    return config_file(tmp_path, dest.root, prune={"enabled": True, "older_than": "1h"}), data


@pytest.fixture
def repair_fixture(tmp_path: Path, dest: Dest) -> Path:
    """Items 11–13: state records report.md and summary.txt; only report.md exists."""
    dest.put_state(single_owner_state(dict.fromkeys(DEFAULT_FILES, PAST)), with_outputs=False)
    dest.write("report.md", DEFAULT_FILES["report.md"])
    return config_file(tmp_path, dest.root)


PRUNE_USAGE = [
    (["--pipeline", "reports", "--destination", "archive", "--dry-run"], "prune requires --config"),
    (["--config", "config.yml", "--destination", "archive", "--dry-run"], "prune requires --pipeline"),
    (["--config", "config.yml", "--pipeline", "reports", "--dry-run"], "prune requires --destination"),
    (["--config", "config.yml", *SELECT], "prune requires exactly one of --dry-run or --apply"),
    (["--config", "config.yml", *SELECT, "--dry-run", "--apply"], "prune requires exactly one of --dry-run or --apply"),
    (["--config", "config.yml", *SELECT, "--dry-run", "--format", "xml"], "format must be text or json"),
    (["--config", "config.yml", *SELECT, "--dry-run", "extra"], "prune does not accept positional arguments"),
    (["--config", "config.yml", *SELECT, "--dry-run", "--bundle", "a", "--all-bundles"],
     "prune accepts either --bundle or --all-bundles"),
    (["--config", "config.yml", *SELECT, "--dry-run", "--bundle", "../a"],
     'prune: invalid bundle path "../a": path must not contain "." or ".." segments'),
    (["--config", "config.yml", *SELECT, "--dry-run", "--bundle", "a/.distributor.lock"],
     'prune: invalid bundle path "a/.distributor.lock": path must not use reserved name ".distributor.lock"'),
    (["--config", "config.yml", *SELECT, "--dry-run", "--bogus"], "prune: flag provided but not defined: -bogus"),
    ([*SELECT, "--format", "xml", "extra"], "prune does not accept positional arguments"),
    (["--dry-run", "--format", "xml"], "format must be text or json"),
]


@pytest.mark.parametrize(("args", "message"), PRUNE_USAGE)
def test_prune_usage_errors(cli: Runner, args: list[str], message: str) -> None:
    # items 1-7 (plus B2 selection rules and the documented check order)
    result = cli("prune", *args)
    assert (result.code, result.stdout, result.stderr) == (2, "", f"distributor: {message}\n")


RECONCILE_USAGE = [
    (["--pipeline", "reports", "--destination", "archive"], "reconcile-state requires --config"),
    (["--config", "config.yml", "--destination", "archive"], "reconcile-state requires --pipeline"),
    (["--config", "config.yml", "--pipeline", "reports"], "reconcile-state requires --destination"),
    (["--config", "config.yml", *SELECT, "--format", "xml"], "format must be text or json"),
    (["--config", "config.yml", *SELECT, "extra"], "reconcile-state does not accept positional arguments"),
    (["--config", "config.yml", *SELECT, "--bundle", ".", "--all-bundles"],
     "reconcile-state accepts either --bundle or --all-bundles"),
    (
        ["--config", "config.yml", *SELECT, "--all-owners=yes"],
        'reconcile-state: invalid boolean value "yes" for -all-owners: parse error',
    ),
]


@pytest.mark.parametrize(("args", "message"), RECONCILE_USAGE)
def test_reconcile_usage_errors(cli: Runner, args: list[str], message: str) -> None:
    # item 14
    result = cli("reconcile-state", *args)
    assert (result.code, result.stdout, result.stderr) == (2, "", f"distributor: {message}\n")


@pytest.mark.parametrize("command", ["prune", "reconcile-state"])
def test_help_wins_over_every_other_check(cli: Runner, command: str) -> None:
    result = cli(command, "--format", "xml", "extra", "--help")
    assert result.code == 0 and result.stderr == ""
    assert result.stdout.startswith(f"Usage:\n  distributor {command} --config <path>")
    for flag in ("--config <path>", "--pipeline <id>", "--destination <id>", "--bundle <path>", "--all-bundles"):
        assert flag in result.stdout


def test_prune_dry_run_reports_without_writing(cli: Runner, dest: Dest, prune_fixture: tuple[Path, bytes]) -> None:
    # item 8, TestExecutePruneDryRunReportsWithoutWriting
    config, state = prune_fixture
    result = cli("prune", "--config", str(config), *SELECT, "--dry-run")
    assert (result.code, result.stderr) == (0, "")
    first = result.stdout.splitlines()[0]
    assert first == (
        f"Prune: pipeline=reports destination=archive backend=local root={dest.root} status=would_change "
        "checked=2 planned=2 deleted=0 preserved=0 dry_run=true"
    )
    assert result.stdout.splitlines()[1:] == [
        "Warning: prune deletes outputs of the current publication of reports/archive: report.md, summary.txt"
    ]
    assert dest.read("report.md") == DEFAULT_FILES["report.md"]
    assert dest.read("summary.txt") == DEFAULT_FILES["summary.txt"]
    assert dest.read("extra.txt") == b"unmanaged"
    assert dest.state_bytes() == state


def test_prune_json_report(cli: Runner, prune_fixture: tuple[Path, bytes]) -> None:
    # item 9, TestExecutePruneJSONReport
    config, _ = prune_fixture
    result = cli("prune", "--config", str(config), *SELECT, "--dry-run", "--format", "json")
    assert (result.code, result.stderr) == (0, "")
    envelope = result.json()
    assert list(envelope) == ["command", "ok", "warnings", "result"]
    assert (envelope["command"], envelope["ok"]) == ("prune", True)
    assert envelope["warnings"] == [
        "prune deletes outputs of the current publication of reports/archive: report.md, summary.txt"
    ]
    body = envelope["result"]
    assert (body["would_change"], body["state_changed"], body["dry_run"]) == (True, False, True)
    assert [item["path"] for item in body["planned_outputs"]] == ["report.md", "summary.txt"]
    assert body["planned_outputs"][0] == {"path": "report.md", "updated_at": "2020-01-01T00:00:00Z"}
    assert body["deleted_outputs"] == [] and body["preserved_outputs"] == []
    assert body["warnings"] == envelope["warnings"]
    assert result.stdout.endswith("}\n") and result.stdout.startswith('{\n  "command": "prune",')


def test_prune_apply_deletes_managed_outputs(cli: Runner, dest: Dest, prune_fixture: tuple[Path, bytes]) -> None:
    # item 10, TestExecutePruneApplyDeletesManagedOutputs
    config, _ = prune_fixture
    result = cli("prune", "--config", str(config), *SELECT, "--apply")
    assert (result.code, result.stderr) == (0, "")
    assert "status=changed" in result.stdout and "deleted=2" in result.stdout
    assert dest.files() == [".distributor.json", "extra.txt"]
    assert dest.read("extra.txt") == b"unmanaged"
    assert dest.paths() == []


def test_prune_partial_failure_text(
    cli: Runner, dest: Dest, prune_fixture: tuple[Path, bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    # resolutions C3: the usual line, then "Failed: path=<p> error=<e>", exit 1
    config, _ = prune_fixture
    real = app_bundles.open_destination_storage

    def faulty(destination, env, *, dry_run=False):
        storage = FaultInjectingStorage(real(destination, env, dry_run=dry_run))
        storage.fail("delete", path="summary.txt")
        return storage

    monkeypatch.setattr(app_bundles, "open_destination_storage", faulty)
    result = cli("prune", "--config", str(config), *SELECT, "--apply")
    error = "delete local summary.txt: permission: injected fault"
    assert result.code == 1
    assert result.stderr == f"distributor: {error}\n"
    lines = result.stdout.splitlines()
    assert lines[0] == (
        f"Prune: pipeline=reports destination=archive backend=local root={dest.root} status=changed "
        "checked=2 planned=2 deleted=1 preserved=0 dry_run=false"
    )
    assert lines[-1] == f"Failed: path=summary.txt error={error}"
    assert dest.paths() == ["summary.txt"]
    assert dest.files() == [".distributor.json", "extra.txt", "summary.txt"]


def test_prune_partial_failure_json(
    cli: Runner, dest: Dest, prune_fixture: tuple[Path, bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    config, _ = prune_fixture
    real = app_bundles.open_destination_storage

    def faulty(destination, env, *, dry_run=False):
        storage = FaultInjectingStorage(real(destination, env, dry_run=dry_run))
        storage.fail("delete", path="report.md")
        return storage

    monkeypatch.setattr(app_bundles, "open_destination_storage", faulty)
    result = cli("prune", "--config", str(config), *SELECT, "--apply", "--format", "json")
    assert result.code == 1
    envelope = result.json()
    assert list(envelope) == ["command", "ok", "error", "warnings", "result"]
    assert envelope["ok"] is False
    assert envelope["error"] == "delete local report.md: permission: injected fault"
    body = envelope["result"]
    assert body["failed_output"] == {"path": "report.md", "updated_at": "2020-01-01T00:00:00Z"}
    assert body["deleted_outputs"] == [] and body["state_changed"] is False
    assert [item["path"] for item in body["planned_outputs"]] == ["report.md", "summary.txt"]
    assert result.stderr == f"distributor: {envelope['error']}\n"
    assert dest.paths() == ["report.md", "summary.txt"]


def test_prune_runtime_errors_print_nothing_on_stdout(cli: Runner, tmp_path: Path, dest: Dest) -> None:
    config = config_file(tmp_path, dest.root, prune={"enabled": True, "keep_latest": 0})
    dest.put_state(single_owner_state({"a.txt": PAST}, scope=OwnerScope("other", "x")))
    result = cli("prune", "--config", str(config), *SELECT, "--apply")
    assert (result.code, result.stdout) == (1, "")
    # the error, then where and how to fix it (issue 25)
    assert result.stderr.startswith(f"distributor: state owner is other/x, not reports/archive (root {dest.root}; "
                                    f"paths (1): {dest.root}/.distributor.json; remedy: ")
    assert result.stderr.endswith("; more: distributor explain foreign_owner)\n")
    missing = cli("prune", "--config", str(config), "--pipeline", "nope", "--destination", "archive", "--dry-run")
    assert (missing.code, missing.stdout, missing.stderr) == (1, "", 'distributor: pipeline "nope" not found\n')
    unknown = cli("reconcile-state", "--config", str(config), "--pipeline", "reports", "--destination", "nope")
    assert (unknown.code, unknown.stdout) == (1, "")
    assert unknown.stderr == "distributor: pipeline reports destination nope not found\n"
    absent = cli("reconcile-state", "--config", str(tmp_path / "absent.yml"), *SELECT)
    assert (absent.code, absent.stdout) == (1, "")
    assert absent.stderr.startswith("distributor: ") and "absent.yml" in absent.stderr


def test_reconcile_applies_by_default(cli: Runner, dest: Dest, repair_fixture: Path) -> None:
    # item 11, TestExecuteReconcileStateAppliesByDefault
    dest.write("extra.txt", b"unmanaged")
    result = cli("reconcile-state", "--config", str(repair_fixture), *SELECT)
    assert (result.code, result.stderr) == (0, "")
    assert result.stdout == (
        f"Reconcile state: pipeline=reports destination=archive backend=local root={dest.root} status=changed "
        "checked=2 missing=1 unmanaged=1 dry_run=false\n"
    )
    assert dest.paths() == ["report.md"]
    assert dest.read("extra.txt") == b"unmanaged"


def test_reconcile_dry_run_reports_without_writing(cli: Runner, dest: Dest, repair_fixture: Path) -> None:
    # item 12, TestExecuteReconcileStateDryRunReportsWithoutWriting
    before = dest.state_bytes()
    result = cli("reconcile-state", "--config", str(repair_fixture), *SELECT, "--dry-run")
    assert (result.code, result.stderr) == (0, "")
    assert "status=would_change" in result.stdout
    assert dest.paths() == ["report.md", "summary.txt"]
    assert dest.state_bytes() == before


def test_reconcile_json_report(cli: Runner, dest: Dest, repair_fixture: Path) -> None:
    # item 13, TestExecuteReconcileStateJSONReport
    dest.write("extra.txt", b"unmanaged")
    result = cli("reconcile-state", "--config", str(repair_fixture), *SELECT, "--dry-run", "--format", "json")
    assert (result.code, result.stderr) == (0, "")
    envelope = json.loads(result.stdout)
    assert list(envelope) == ["command", "ok", "result"]
    assert (envelope["command"], envelope["ok"]) == ("reconcile-state", True)
    body = envelope["result"]
    assert (body["would_change"], body["changed"], body["dry_run"]) == (True, False, True)
    assert body["missing_managed_outputs"] == [{"path": "summary.txt", "storage_status": "missing"}]
    assert body["unmanaged_entries"] == [{"path": "extra.txt", "type": "file", "size": 9}]


def test_reconcile_bundle_flag_selects_a_bundle_path(cli: Runner, dest: Dest, tmp_path: Path) -> None:
    dest.put_state(single_owner_state({"a.txt": PAST, "b.txt": PAST}), bundle="daily/one")
    dest.path("daily/one/b.txt").unlink()
    config = config_file(tmp_path, dest.root)
    result = cli("reconcile-state", "--config", str(config), *SELECT, "--bundle", "daily/one/")
    assert (result.code, result.stderr) == (0, "")
    assert result.stdout.startswith(
        f"Reconcile state: pipeline=reports destination=archive backend=local root={dest.root} bundle=daily/one "
        "status=changed checked=2 missing=1"
    )
    assert dest.paths("daily/one") == ["a.txt"]
    as_json = cli("reconcile-state", "--config", str(config), *SELECT, "--bundle", "daily/one", "--format", "json")
    assert as_json.json()["result"]["bundle_path"] == "daily/one"
    root = cli("reconcile-state", "--config", str(config), *SELECT, "--bundle", ".", "--dry-run")
    assert root.code == 1 and root.stdout == ""
    assert root.stderr.startswith(f"distributor: destination state {dest.root}/.distributor.json does not exist; ")
    assert "--all-bundles" in root.stderr

"""``reconcile-state --all`` and ``audit --all`` walk every destination of a config (issue 18
item 2), and the CLI rules of the new flags (usage errors, ``--adopt`` dry by default)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from distributor_core.app.audit import audit_config, audit_destination
from distributor_core.app.reconcile import reconcile_config
from distributor_core.state import parse_state_document
from distributor_core.storage.errors import StorageError
from tests.bundle.conftest import make_bundle
from tests.repair.conftest import Runner

FILES = {"report.md": b"# Report\n", "summary.txt": b"Summary\n"}


@pytest.fixture
def world(tmp_path: Path, cli: Runner) -> Path:
    """Pipeline reports: archive (preserve_relative, two bundles), latest (fixed); pipeline other:
    a local destination never published, and an S3 destination whose credentials are missing."""
    src = tmp_path / "src"
    make_bundle(src / "daily", FILES)
    make_bundle(src / "weekly", {"w.txt": b"week\n"}, bundle_id="reports.weekly")
    config = tmp_path / "distributor.yml"
    config.write_text(
        f"""\
pipelines:
  - id: reports
    source:
      backend: local
      path: {src}
    destinations:
      - id: archive
        backend: local
        path: {tmp_path / "archive"}
      - id: latest
        backend: local
        path: {tmp_path / "latest"}
        path_mapping:
          mode: fixed
  - id: other
    source:
      backend: local
      path: {src}
    destinations:
      - id: never
        backend: local
        path: {tmp_path / "never"}
      - id: cloud
        backend: s3
        bucket: some-bucket
        credentials:
          access_key_id_env: WHOLE_CONFIG_MISSING_KEY
          secret_access_key_env: WHOLE_CONFIG_MISSING_SECRET
"""
    )
    result = cli("run", "--config", str(config), "--pipeline", "reports")
    assert result.code == 0, result.stderr
    return config


def test_audit_all_has_a_line_per_destination_and_bundle(world: Path, cli: Runner, tmp_path: Path) -> None:
    (tmp_path / "archive" / "weekly" / "w.txt").write_bytes(b"WEEK\n")
    result = cli("audit", "--config", str(world), "--all")
    assert result.code == 1
    lines = result.stdout.splitlines()
    audits = [line for line in lines if line.startswith("Audit:")]
    assert [line.split(" status=")[0].split("backend=local ")[1] for line in audits] == [
        f"root={tmp_path / 'archive'} bundle=daily",
        f"root={tmp_path / 'archive'} bundle=weekly",
        f"root={tmp_path / 'latest'} bundle=.",
    ]
    assert [" status=ok " in line for line in audits] == [True, False, True]
    assert "Failed: pipeline=other destination=cloud error=" in result.stdout
    assert "WHOLE_CONFIG_MISSING_KEY" in result.stdout
    assert lines[-1] == "Destinations: destinations=4 failed=1 dry_run=true"
    never = [line for line in lines if "destination=never" in line]
    assert never == [f"Bundles: pipeline=other destination=never backend=local root={tmp_path / 'never'} bundles=0 "
                     "failed=0 dry_run=true"]
    assert result.stderr.startswith("distributor: 1 destination(s) failed: other/cloud: ")
    assert "; audit found problems: reports/archive [weekly]: 1 digest_mismatch (root " in result.stderr
    assert result.stderr.rstrip().endswith("; more: distributor explain audit_problems)")


def test_audit_all_json_and_library(world: Path, cli: Runner) -> None:
    result = cli("audit", "--config", str(world), "--all", "--format", "json")
    document = json.loads(result.stdout)
    assert result.code == 1 and document["ok"] is False
    data = document["result"]
    assert (data["all"], data["destination_count"], data["failed_count"]) == (True, 4, 1)
    assert [(d["pipeline_id"], d["destination_id"], "error" in d) for d in data["destinations"]] == [
        ("reports", "archive", False), ("reports", "latest", False), ("other", "never", False), ("other", "cloud", True)
    ]
    assert [b["bundle_path"] for b in data["destinations"][0]["bundles"]] == ["daily", "weekly"]
    report = audit_config(world, environment=None)
    assert not report.ok and not report.clean and len(report.reports) == 3
    assert all(r.clean for r in report.reports)


def test_reconcile_all_repairs_every_destination_and_goes_on_after_a_failure(
    world: Path, cli: Runner, tmp_path: Path
) -> None:
    (tmp_path / "archive" / "daily" / "summary.txt").unlink()
    (tmp_path / "latest" / "report.md").unlink()
    dry = cli("reconcile-state", "--config", str(world), "--all", "--dry-run")
    assert dry.code == 1
    assert sum("status=would_change" in line for line in dry.stdout.splitlines()) == 2
    applied = cli("reconcile-state", "--config", str(world), "--all")
    assert applied.code == 1  # the S3 destination still fails; the others are repaired
    assert sum("status=changed" in line for line in applied.stdout.splitlines()) == 2
    for state in (tmp_path / "archive" / "daily", tmp_path / "latest"):
        doc = parse_state_document((state / ".distributor.json").read_bytes())
        assert all((state / output.path).is_file() for output in doc.outputs)
    assert applied.stdout.splitlines()[-1] == "Destinations: destinations=4 failed=1 dry_run=false"
    report = reconcile_config(world, dry_run=True)
    assert [d.name for d in report.failed] == ["other/cloud"]
    assert all(not r.would_change for r in report.reports)


def test_reconcile_all_adopt(world: Path, cli: Runner, tmp_path: Path) -> None:
    # a copy of the daily bundle made by another tool into the never-published destination
    for name, data in FILES.items():
        (tmp_path / "never" / "daily").mkdir(parents=True, exist_ok=True)
        (tmp_path / "never" / "daily" / name).write_bytes(data)
    plan = cli("reconcile-state", "--config", str(world), "--all", "--adopt", "--format", "json")
    assert plan.code == 1 and json.loads(plan.stdout)["result"]["dry_run"] is True
    assert not (tmp_path / "never" / "daily" / ".distributor.json").exists()
    applied = cli("reconcile-state", "--config", str(world), "--all", "--adopt", "--apply", "--format", "json")
    destinations = json.loads(applied.stdout)["result"]["destinations"]
    never = destinations[2]
    assert [(b["bundle_path"], len(b["adopted_outputs"]), b["changed"]) for b in never["bundles"]] == [
        ("daily", 2, True), ("weekly", 0, False)
    ]
    assert (tmp_path / "never" / "daily" / ".distributor.json").is_file()
    rerun = cli("run", "--config", str(world), "--pipeline", "other", "--destination", "never", "--dry-run")
    assert "path=daily destination_path=daily action=skip_same" in rerun.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--all", "--pipeline", "reports"], "{c} accepts either --all or --pipeline and --destination"),
        (["--all", "--all-bundles"], "{c} --all works on every bundle path; drop --bundle and --all-bundles"),
        (["--all", "--bundle", "x"], "{c} --all works on every bundle path; drop --bundle and --all-bundles"),
        (["--pipeline", "reports"], "{c} requires --destination"),
        ([], "{c} requires --pipeline"),
    ],
)
@pytest.mark.parametrize("command", ["audit", "reconcile-state"])
def test_usage_errors(cli: Runner, command: str, args: list[str], message: str) -> None:
    result = cli(command, "--config", "c.yml", *args)
    assert (result.code, result.stdout, result.stderr) == (2, "", f"distributor: {message.format(c=command)}\n")


def test_reconcile_dry_run_and_apply_exclude_each_other(cli: Runner) -> None:
    result = cli("reconcile-state", "--config", "c.yml", "--all", "--dry-run", "--apply")
    assert (result.code, result.stderr) == (2, "distributor: reconcile-state accepts either --dry-run or --apply\n")


def test_audit_requires_config(cli: Runner) -> None:
    result = cli("audit", "--all")
    assert (result.code, result.stderr) == (2, "distributor: audit requires --config\n")


def test_audit_progress_only_on_a_terminal(world: Path, cli: Runner) -> None:
    select = ("--config", str(world), "--pipeline", "reports", "--destination", "archive", "--bundle", "daily")
    assert cli("audit", *select).stderr == ""
    shown = cli("audit", *select, tty=True)
    assert "auditing reports/archive [daily] 2/2 files" in shown.stderr
    assert cli("audit", *select, "--format", "json", tty=True).stderr == ""


def test_audit_of_a_missing_state_fails_with_the_storage_error(world: Path, cli: Runner) -> None:
    result = cli("audit", "--config", str(world), "--pipeline", "reports", "--destination", "archive")
    assert result.code == 1 and result.stdout == ""
    assert result.stderr.startswith("distributor: destination state ") and "does not exist" in result.stderr
    with pytest.raises(StorageError):
        audit_destination(world, "reports", "archive")

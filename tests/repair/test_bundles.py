"""Bundle selection for repair and prune: ``bundle_path`` and ``all_bundles`` (resolutions B2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from distributor_core import paths as lp
from distributor_core.app.bundle_set import BundleSetReport
from distributor_core.app.prune import PruneError, prune
from distributor_core.app.reconcile import ReconcileStateError, reconcile_state
from distributor_core.app.repair_report import PruneReport, ReconcileStateReport
from distributor_core.app.selection import SelectionError, discover_state_bundles, normalise_bundle_path
from distributor_core.state import OwnerScope
from distributor_core.storage.errors import ErrorKind, StorageError
from distributor_core.storage.faults import FaultInjectingStorage
from tests.repair.conftest import NOW, PAST, Dest, Runner, ago, config_file, load, single_owner_state

SELECT = ("--pipeline", "reports", "--destination", "archive")


@pytest.fixture
def three_bundles(dest: Dest) -> None:
    """State at the root, daily/2026-06-07 and daily/2026-06-08; each has one missing output."""
    for bundle in ("", "daily/2026-06-07", "daily/2026-06-08"):
        dest.put_state(single_owner_state({"old.txt": ago(72), "new.txt": ago(1)}, published_at=ago(1)), bundle=bundle)
        dest.path(lp.join_prefix(bundle, "new.txt")).unlink()
    dest.write("daily/notes.txt", b"loose")


def test_discovery_finds_every_state_file_sorted(dest: Dest, three_bundles: None) -> None:
    dest.write(".distributor-tmp-0123456789abcdef/.distributor.json", b"{}")  # inside a reserved name
    assert discover_state_bundles(dest.storage()) == ["", "daily/2026-06-07", "daily/2026-06-08"]


def test_discovery_fails_past_its_bound(dest: Dest, three_bundles: None) -> None:
    with pytest.raises(StorageError) as info:
        discover_state_bundles(dest.storage(), limit=3)
    assert info.value.kind == ErrorKind.LIMIT_EXCEEDED
    assert "walk limit of 3 entries exceeded" in str(info.value)


def test_reconcile_all_bundles_dry_run(tmp_path: Path, dest: Dest, three_bundles: None) -> None:
    report = reconcile_state(
        load(tmp_path, dest), pipeline_id="reports", destination_id="archive", dry_run=True, all_bundles=True
    )
    assert isinstance(report, BundleSetReport)
    assert [r.bundle_path for r in report.reports] == ["", "daily/2026-06-07", "daily/2026-06-08"]
    assert all(isinstance(r, ReconcileStateReport) and r.would_change for r in report.reports)
    assert [[m.path for m in r.missing_managed_outputs] for r in report.reports] == [["new.txt"]] * 3
    # the root's unmanaged list leaves the nested bundles' files to their own state
    assert [e.path for e in report.reports[0].unmanaged_entries] == ["daily/notes.txt"]
    data = report.to_dict()
    assert list(data) == [
        "pipeline_id",
        "destination_id",
        "backend",
        "root_path",
        "all_bundles",
        "dry_run",
        "bundle_count",
        "failed_count",
        "bundles",
    ]
    assert (data["all_bundles"], data["bundle_count"], data["failed_count"]) == (True, 3, 0)
    sections = data["bundles"]
    assert [section["bundle_path"] for section in sections] == ["", "daily/2026-06-07", "daily/2026-06-08"]
    head = ["pipeline_id", "destination_id", "backend", "root_path", "bundle_path", "state_schema"]
    assert list(sections[0])[:6] == head
    lines = report.text_lines()
    where = f"pipeline=reports destination=archive backend=local root={dest.root}"
    assert lines[0].startswith(f"Reconcile state: {where} bundle=. ")
    assert lines[1].split(" status=")[0].endswith("bundle=daily/2026-06-07")
    assert lines[-1] == (
        f"Bundles: pipeline=reports destination=archive backend=local root={dest.root} bundles=3 failed=0 dry_run=true"
    )


def test_reconcile_all_bundles_apply_repairs_each(tmp_path: Path, dest: Dest, three_bundles: None) -> None:
    report = reconcile_state(
        load(tmp_path, dest), pipeline_id="reports", destination_id="archive", now=NOW, all_bundles=True
    )
    assert all(r.changed for r in report.reports)
    for bundle in ("", "daily/2026-06-07", "daily/2026-06-08"):
        assert dest.paths(bundle) == ["old.txt"]
        assert not dest.exists(lp.lock_path(bundle))


def test_one_failing_bundle_does_not_stop_the_others(tmp_path: Path, dest: Dest, three_bundles: None) -> None:
    foreign = dest.put_state(single_owner_state({"x.txt": PAST}, scope=OwnerScope("other", "site")), bundle="b")
    dest.write("c/.distributor.json", b"not json")
    with pytest.raises(ReconcileStateError) as info:
        reconcile_state(
            load(tmp_path, dest), pipeline_id="reports", destination_id="archive", now=NOW, all_bundles=True
        )
    report = info.value.report
    assert [s.bundle_path for s in report.sections] == ["", "b", "c", "daily/2026-06-07", "daily/2026-06-08"]
    assert [s.failed for s in report.sections] == [False, True, True, False, False]
    section = report.sections[1].to_dict()
    refusal = section.pop("refusal")  # where and how to fix it (issue 25)
    assert section == {
        "bundle_path": "b",
        "error": "state owner is other/site, not reports/archive",
    }
    assert (refusal["class"], refusal["root"], refusal["paths"]) == (
        "foreign_owner", str(dest.root), [f"{dest.root}/b/.distributor.json"])
    assert report.sections[2].to_dict()["refusal"]["class"] == "invalid_state"
    assert str(info.value).startswith("2 bundle(s) failed: b: state owner is other/site, not reports/archive; c: ")
    assert dest.state_bytes("b") == foreign
    assert dest.paths("daily/2026-06-08") == ["old.txt"]  # repaired after the failures
    assert "Failed: bundle=b error=state owner is other/site, not reports/archive" in report.text_lines()


def test_prune_all_bundles(tmp_path: Path, dest: Dest) -> None:
    for bundle in ("a", "b"):
        state = single_owner_state({"old.txt": ago(72), "fresh.txt": ago(1)}, published_at=ago(1))
        dest.put_state(state, bundle=bundle)
    config = load(tmp_path, dest, prune={"enabled": True, "older_than": "48h"})
    dry = prune(config, pipeline_id="reports", destination_id="archive", dry_run=True, now=NOW, all_bundles=True)
    assert isinstance(dry, BundleSetReport) and dry.ok
    assert [[c.path for c in r.planned_outputs] for r in dry.reports] == [["old.txt"], ["old.txt"]]
    report = prune(config, pipeline_id="reports", destination_id="archive", dry_run=False, now=NOW, all_bundles=True)
    assert [[c.path for c in r.deleted_outputs] for r in report.reports] == [["old.txt"], ["old.txt"]]
    assert dest.files() == ["a/.distributor.json", "a/fresh.txt", "b/.distributor.json", "b/fresh.txt"]


def test_prune_all_bundles_partial_failure_keeps_the_section_report(tmp_path: Path, dest: Dest) -> None:
    for bundle in ("a", "b"):
        dest.put_state(single_owner_state({"old.txt": ago(72)}, published_at=ago(1)), bundle=bundle)
    storage = FaultInjectingStorage(dest.storage())
    storage.fail("delete", path="a/old.txt")
    config = load(tmp_path, dest, prune={"enabled": True, "keep_latest": 0})
    with pytest.raises(PruneError) as info:
        prune(
            config,
            pipeline_id="reports",
            destination_id="archive",
            dry_run=False,
            now=NOW,
            all_bundles=True,
            storage=storage,
        )
    report = info.value.report
    assert isinstance(report, BundleSetReport)
    first = report.sections[0]
    assert isinstance(first.report, PruneReport) and first.report.failed_output.path == "old.txt"
    section = first.to_dict()
    assert section["bundle_path"] == "a" and section["failed_output"]["path"] == "old.txt"
    assert section["error"] == "delete local a/old.txt: permission: injected fault"
    assert first.failed_line() == f"Failed: bundle=a path=old.txt error={section['error']}"
    assert dest.paths("a") == ["old.txt"] and dest.paths("b") == []


def test_no_bundles_found_is_an_empty_report(tmp_path: Path, dest: Dest) -> None:
    config = load(tmp_path, dest)
    report = prune(config, pipeline_id="reports", destination_id="archive", dry_run=True, all_bundles=True)
    assert isinstance(report, BundleSetReport)
    assert report.to_dict()["bundles"] == [] and report.ok


def test_single_bundle_path_report_carries_it(tmp_path: Path, dest: Dest, three_bundles: None) -> None:
    report = prune(
        load(tmp_path, dest, prune={"enabled": True, "keep_latest": 0}),
        pipeline_id="reports",
        destination_id="archive",
        dry_run=False,
        now=NOW,
        bundle_path="daily/2026-06-07",
    )
    assert isinstance(report, PruneReport)
    assert report.to_dict()["bundle_path"] == "daily/2026-06-07"
    assert list(report.to_dict()).index("bundle_path") == 4
    assert dest.paths("daily/2026-06-07") == [] and dest.paths() == ["old.txt", "new.txt"]
    assert " bundle=daily/2026-06-07 " in report.text_line()


@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, ""), ("", ""), (".", ""), ("/", ""), ("daily/", "daily"), ("a/b", "a/b")],
)
def test_bundle_path_normalisation(value: str | None, expected: str) -> None:
    assert normalise_bundle_path(value) == expected


@pytest.mark.parametrize("value", ["../x", "/abs", "a//b", "a/.distributor-tmp-1", "a\\b"])
def test_bad_bundle_paths(value: str) -> None:
    with pytest.raises(SelectionError, match="invalid bundle path"):
        normalise_bundle_path(value)


def test_library_refuses_both_selectors(tmp_path: Path, dest: Dest) -> None:
    with pytest.raises(SelectionError, match=r"^bundle_path and all_bundles exclude each other$"):
        reconcile_state(
            load(tmp_path, dest), pipeline_id="reports", destination_id="archive", bundle_path="a", all_bundles=True
        )


def test_cli_all_bundles(cli: Runner, tmp_path: Path, dest: Dest, three_bundles: None) -> None:
    config = config_file(tmp_path, dest.root, prune={"enabled": True, "keep_latest": 1})
    text = cli("prune", "--config", str(config), *SELECT, "--apply", "--all-bundles")
    assert (text.code, text.stderr) == (0, "")
    lines = text.stdout.splitlines()
    assert sum(line.startswith("Prune: ") for line in lines) == 3
    assert lines[-1].startswith("Bundles: pipeline=reports destination=archive backend=local")
    assert lines[-1].endswith(" bundles=3 failed=0 dry_run=false")
    assert dest.paths("daily/2026-06-08") == ["new.txt"]
    as_json = cli("reconcile-state", "--config", str(config), *SELECT, "--all-bundles", "--format", "json")
    envelope = as_json.json()
    assert (as_json.code, envelope["ok"], envelope["result"]["bundle_count"]) == (0, True, 3)


def test_cli_all_bundles_failure(cli: Runner, tmp_path: Path, dest: Dest, three_bundles: None) -> None:
    dest.write("broken/.distributor.json", b"{}")
    config = config_file(tmp_path, dest.root)
    result = cli("reconcile-state", "--config", str(config), *SELECT, "--all-bundles", "--dry-run")
    assert result.code == 1
    assert result.stderr.startswith("distributor: 1 bundle(s) failed: broken: ")
    assert "Failed: bundle=broken error=" in result.stdout
    as_json = cli("reconcile-state", "--config", str(config), *SELECT, "--all-bundles", "--format", "json")
    envelope = as_json.json()
    assert as_json.code == 1 and envelope["ok"] is False
    assert envelope["error"].startswith("1 bundle(s) failed: broken: ")
    assert envelope["result"]["failed_count"] == 1

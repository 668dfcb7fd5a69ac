"""``prune`` library (core-semantics §7.2–7.4; interfaces §2.10 items 20–27; resolutions B4, C3)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from distributor_core.app.prune import PruneError, prune
from distributor_core.app.repair_report import PruneReport
from distributor_core.state import OwnerScope, PrunePolicy, SingleOwnerState, StateError, plan_prune, validate_state
from distributor_core.storage.errors import ErrorKind, StorageError
from distributor_core.storage.faults import FaultInjectingStorage
from tests.repair.conftest import (
    ARCHIVE,
    HTML,
    NOW,
    PAST,
    Dest,
    ago,
    load,
    shared_root_state,
    single_owner_state,
)

OLDER_THAN_48H = {"enabled": True, "older_than": "48h"}
KEEP_NONE = {"enabled": True, "keep_latest": 0}


def _prune(tmp_path: Path, dest: Dest, policy: dict[str, Any] | None, **kwargs: Any) -> PruneReport:
    config = load(tmp_path, dest, prune=policy)
    kwargs.setdefault("dry_run", False)
    report = prune(config, pipeline_id="reports", destination_id="archive", now=NOW, **kwargs)
    assert isinstance(report, PruneReport)
    return report


def paths(records: list) -> list[str]:
    return [record.path for record in records]


@pytest.fixture
def old_and_fresh(dest: Dest) -> bytes:
    """v2 state: old.txt updated 72 h ago, fresh.txt 24 h ago; unmanaged.txt present."""
    data = dest.put_state(
        single_owner_state({"old.txt": ago(72), "fresh.txt": ago(24)}, published_at=ago(96), created_at=ago(96))
    )
    dest.write("unmanaged.txt", b"keep")
    return data


def test_disabled_policy_plans_nothing(tmp_path: Path, dest: Dest, old_and_fresh: bytes) -> None:
    # item 20, TestPlanPruneDisabledPolicy
    report = _prune(tmp_path, dest, None)
    assert (report.enabled, report.checked_count, report.planned_outputs) == (False, 0, [])
    assert (report.state_changed, report.would_change, report.status) == (False, False, "unchanged")
    assert dest.state_bytes() == old_and_fresh
    assert dest.files() == [".distributor.json", "fresh.txt", "old.txt", "unmanaged.txt"]


def test_disabled_policy_skips_the_owner_check_but_still_needs_state(tmp_path: Path, dest: Dest) -> None:
    with pytest.raises(StorageError) as info:
        _prune(tmp_path, dest, None, dry_run=True)
    assert info.value.kind == ErrorKind.NOT_FOUND
    dest.write(".distributor.json", b"{}")
    with pytest.raises(StateError):
        _prune(tmp_path, dest, None, dry_run=True)
    dest.put_state(single_owner_state({"a.txt": PAST}, scope=HTML))
    report = _prune(tmp_path, dest, None, dry_run=True)
    assert (report.enabled, report.checked_count) == (False, 0)


def test_single_owner_older_than_plan(tmp_path: Path, dest: Dest, old_and_fresh: bytes) -> None:
    # item 21, TestPlanPruneSingleOwnerOutputs
    report = _prune(tmp_path, dest, OLDER_THAN_48H, dry_run=True)
    assert paths(report.planned_outputs) == ["old.txt"]
    assert paths(report.preserved_outputs) == ["fresh.txt"]
    assert report.checked_count == 2


def test_shared_root_keep_zero_plans_current_owner_only(tmp_path: Path, dest: Dest) -> None:
    # item 22, TestPlanPruneSharedRootCurrentOwnerOnly
    dest.put_state(shared_root_state([("archive.txt", ARCHIVE, ago(72)), ("html.txt", HTML, ago(72))]))
    report = _prune(tmp_path, dest, KEEP_NONE, dry_run=True)
    assert report.checked_count == 1
    assert paths(report.planned_outputs) == ["archive.txt"]
    assert report.planned_outputs[0].to_dict() == {
        "path": "archive.txt",
        "updated_at": "2026-06-05T12:00:00Z",
        "owner": {"pipeline_id": "reports", "destination_id": "archive"},
    }


def test_dry_run_deletes_and_writes_nothing(tmp_path: Path, dest: Dest, old_and_fresh: bytes) -> None:
    # item 23, TestPruneDryRunReportsPlannedDeletesWithoutDeletingOrRewritingState
    report = _prune(tmp_path, dest, OLDER_THAN_48H, dry_run=True)
    assert (report.would_change, report.state_changed, report.deleted_outputs) == (True, False, [])
    assert report.status == "would_change"
    assert paths(report.planned_outputs) == ["old.txt"]
    assert dest.state_bytes() == old_and_fresh
    assert dest.paths() == ["old.txt", "fresh.txt"]
    assert dest.state().updated_at == ago(96)
    assert dest.files() == [".distributor.json", "fresh.txt", "old.txt", "unmanaged.txt"]


def test_apply_deletes_only_managed_outputs_and_updates_state(tmp_path: Path, dest: Dest, old_and_fresh: bytes) -> None:
    # item 24, TestPruneApplyDeletesOnlyManagedOutputsAndUpdatesState
    report = _prune(tmp_path, dest, OLDER_THAN_48H)
    assert (report.state_changed, report.would_change, report.status) == (True, False, "changed")
    assert paths(report.deleted_outputs) == ["old.txt"]
    assert dest.files() == [".distributor.json", "fresh.txt", "unmanaged.txt"]  # no journal, no lock
    state = dest.state()
    validate_state(state)
    assert dest.paths() == ["fresh.txt"]
    assert state.updated_at == NOW
    assert isinstance(state, SingleOwnerState)
    assert state.published_at == ago(96)
    assert state.outputs[0].updated_at == ago(24)


def test_apply_with_a_failing_delete_keeps_failed_records(tmp_path: Path, dest: Dest, old_and_fresh: bytes) -> None:
    # item 25, TestPruneApplyPreservesStateForFailedDeletes
    storage = FaultInjectingStorage(dest.storage())
    storage.fail("delete", path="fresh.txt", kind="permission")
    with pytest.raises(PruneError) as info:
        _prune(tmp_path, dest, KEEP_NONE, storage=storage)
    report = info.value.report
    assert isinstance(report, PruneReport)
    assert report.failed_output is not None and report.failed_output.path == "fresh.txt"
    assert paths(report.deleted_outputs) == ["old.txt"]
    assert paths(report.planned_outputs) == ["old.txt", "fresh.txt"]
    assert report.state_changed
    assert info.value.report.to_dict()["failed_output"]["path"] == "fresh.txt"
    assert "permission" in str(info.value)
    assert isinstance(info.value.__cause__, StorageError)
    assert dest.paths() == ["fresh.txt"]
    assert dest.state().updated_at == NOW
    assert dest.files() == [".distributor.json", "fresh.txt", "unmanaged.txt"]


def test_first_delete_failing_leaves_state_byte_identical(tmp_path: Path, dest: Dest, old_and_fresh: bytes) -> None:
    storage = FaultInjectingStorage(dest.storage())
    storage.fail("delete", path="old.txt")
    with pytest.raises(PruneError) as info:
        _prune(tmp_path, dest, KEEP_NONE, storage=storage)
    report = info.value.report
    assert report.deleted_outputs == [] and not report.state_changed
    assert report.failed_output.path == "old.txt"
    assert dest.state_bytes() == old_and_fresh
    assert dest.files() == [".distributor.json", "fresh.txt", "old.txt", "unmanaged.txt"]


def test_a_delete_whose_answer_was_lost_is_not_recorded_again(tmp_path: Path, dest: Dest, old_and_fresh: bytes) -> None:
    storage = FaultInjectingStorage(dest.storage())
    storage.fail("delete", path="old.txt", when="after")  # the file goes, the call still fails
    with pytest.raises(PruneError) as info:
        _prune(tmp_path, dest, KEEP_NONE, storage=storage)
    report = info.value.report
    assert report.failed_output.path == "old.txt" and report.deleted_outputs == []
    assert dest.paths() == ["fresh.txt"]  # never a record of a file that is not there
    assert dest.files() == [".distributor.json", "fresh.txt", "unmanaged.txt"]
    assert any("old.txt no longer exists" in warning for warning in report.warnings)


def test_shared_root_apply_preserves_other_owner(tmp_path: Path, dest: Dest) -> None:
    # item 26, TestPruneSharedRootPreservesOtherOwnersWhenScopedToCurrentOwner
    dest.put_state(shared_root_state([("archive.txt", ARCHIVE, ago(72)), ("html.txt", HTML, ago(72))]))
    dest.write("html.txt", b"old")
    dest.write("unmanaged.txt", b"keep")
    report = _prune(tmp_path, dest, KEEP_NONE)
    assert paths(report.deleted_outputs) == ["archive.txt"]
    assert dest.read("html.txt") == b"old"
    assert dest.read("unmanaged.txt") == b"keep"
    assert dest.paths() == ["html.txt"]
    assert dest.files() == [".distributor.json", "html.txt", "unmanaged.txt"]


def test_shared_root_other_owner_files_and_records_are_byte_identical(tmp_path: Path, dest: Dest) -> None:
    before = shared_root_state(
        [
            ("a/archive-1.txt", ARCHIVE, ago(100)),
            ("html/one.html", HTML, ago(200)),
            ("a/archive-2.txt", ARCHIVE, ago(90)),
            ("html/two.html", HTML, ago(300)),
        ]
    )
    dest.put_state(before)
    dest.write("html/one.html", b"<p>one</p>")
    dest.write("html/two.html", b"<p>two</p>")
    report = _prune(tmp_path, dest, KEEP_NONE)
    assert paths(report.deleted_outputs) == ["a/archive-1.txt", "a/archive-2.txt"]
    after = dest.state()
    assert [o for o in after.outputs if o.scope == HTML] == [o for o in before.outputs if o.scope == HTML]
    assert after.owners == before.owners
    assert dest.read("html/one.html") == b"<p>one</p>" and dest.read("html/two.html") == b"<p>two</p>"
    assert not dest.path("a").exists()  # emptied parent directories are pruned
    assert dest.files() == [".distributor.json", "html/one.html", "html/two.html"]


def test_plan_ordering_cases(tmp_path: Path, dest: Dest) -> None:
    # item 27: keep_latest, combined policy, tie breaking
    dest.put_state(single_owner_state({"old.txt": ago(72), "new.txt": ago(1), "middle.txt": ago(24)}))
    report = _prune(tmp_path, dest, {"enabled": True, "keep_latest": 2}, dry_run=True)
    assert (paths(report.planned_outputs), paths(report.preserved_outputs)) == (["old.txt"], ["new.txt", "middle.txt"])

    dest.put_state(single_owner_state({"oldest.txt": ago(96), "old.txt": ago(72), "fresh.txt": ago(24)}))
    report = _prune(tmp_path, dest, {"enabled": True, "older_than": "48h", "keep_latest": 1}, dry_run=True)
    assert (paths(report.planned_outputs), paths(report.preserved_outputs)) == (
        ["oldest.txt", "old.txt"],
        ["fresh.txt"],
    )

    dest.put_state(single_owner_state({"b.txt": NOW, "a.txt": NOW, "c.txt": ago(1)}, published_at=ago(200)))
    report = _prune(tmp_path, dest, {"enabled": True, "keep_latest": 1}, dry_run=True)
    assert (paths(report.planned_outputs), paths(report.preserved_outputs)) == (["c.txt", "b.txt"], ["a.txt"])


def test_apply_deletes_in_planned_order(tmp_path: Path, dest: Dest) -> None:
    dest.put_state(single_owner_state({"b.txt": ago(50), "a.txt": ago(50), "c.txt": ago(60)}))
    storage = FaultInjectingStorage(dest.storage())
    report = _prune(tmp_path, dest, KEEP_NONE, storage=storage)
    deletes = [path for kind, path in storage.calls if kind == "delete" and path.endswith(".txt")]
    assert deletes == ["c.txt", "a.txt", "b.txt"] == paths(report.deleted_outputs)


def test_other_owner_state_is_refused_before_anything_is_deleted(tmp_path: Path, dest: Dest) -> None:
    data = dest.put_state(single_owner_state({"old.txt": ago(72)}, scope=OwnerScope("other", "archive")))
    with pytest.raises(StateError) as info:
        _prune(tmp_path, dest, KEEP_NONE)
    assert str(info.value) == "state owner is other/archive, not reports/archive"
    assert dest.state_bytes() == data
    assert dest.files() == [".distributor.json", "old.txt"]


def test_state_file_is_kept_with_no_outputs(tmp_path: Path, dest: Dest) -> None:
    dest.put_state(single_owner_state({"only.txt": ago(72)}))
    report = _prune(tmp_path, dest, KEEP_NONE)
    assert report.state_changed
    assert dest.paths() == []
    assert dest.files() == [".distributor.json"]


def test_missing_output_counts_as_deleted(tmp_path: Path, dest: Dest) -> None:
    dest.put_state(single_owner_state({"gone.txt": ago(72), "here.txt": ago(72)}))
    dest.path("gone.txt").unlink()
    report = _prune(tmp_path, dest, KEEP_NONE)
    assert paths(report.deleted_outputs) == ["gone.txt", "here.txt"]
    assert dest.paths() == []


def test_nothing_planned_writes_nothing(tmp_path: Path, dest: Dest, old_and_fresh: bytes) -> None:
    report = _prune(tmp_path, dest, {"enabled": True, "older_than": "1000h"})
    assert (report.planned_outputs, report.state_changed, report.status) == ([], False, "unchanged")
    assert dest.state_bytes() == old_and_fresh


def test_report_dict_fields_and_order(tmp_path: Path, dest: Dest, old_and_fresh: bytes) -> None:
    data = _prune(tmp_path, dest, OLDER_THAN_48H, dry_run=True).to_dict()
    assert data == {
        "pipeline_id": "reports",
        "destination_id": "archive",
        "backend": "local",
        "root_path": str(dest.root),
        "owner_scope": {"pipeline_id": "reports", "destination_id": "archive"},
        "enabled": True,
        "checked_count": 2,
        "planned_outputs": [{"path": "old.txt", "updated_at": "2026-06-05T12:00:00Z"}],
        "deleted_outputs": [],
        "preserved_outputs": [{"path": "fresh.txt", "updated_at": "2026-06-07T12:00:00Z"}],
        "state_changed": False,
        "would_change": True,
        "dry_run": True,
    }
    assert list(data) == [
        "pipeline_id",
        "destination_id",
        "backend",
        "root_path",
        "owner_scope",
        "enabled",
        "checked_count",
        "planned_outputs",
        "deleted_outputs",
        "preserved_outputs",
        "state_changed",
        "would_change",
        "dry_run",
    ]


def test_failed_report_dict_places_failed_output_after_preserved(
    tmp_path: Path, dest: Dest, old_and_fresh: bytes
) -> None:
    storage = FaultInjectingStorage(dest.storage())
    storage.fail("delete", path="fresh.txt")
    with pytest.raises(PruneError) as info:
        _prune(tmp_path, dest, KEEP_NONE, storage=storage)
    keys = list(info.value.report.to_dict())
    assert keys[keys.index("preserved_outputs") + 1] == "failed_output"


def test_text_line_is_exact(tmp_path: Path, dest: Dest, old_and_fresh: bytes) -> None:
    report = _prune(tmp_path, dest, OLDER_THAN_48H, dry_run=True)
    assert report.text_line() == (
        f"Prune: pipeline=reports destination=archive backend=local root={dest.root} status=would_change "
        "checked=2 planned=1 deleted=0 preserved=1 dry_run=true"
    )


class TestCurrentPublicationWarning:
    """Resolutions B4: deleting outputs of the owner's currently recorded publication warns."""

    def test_single_owner_current_outputs_are_named(self, tmp_path: Path, dest: Dest) -> None:
        published = ago(72)
        dest.put_state(
            single_owner_state({"kept-old.txt": ago(200), "report.md": published, "summary.txt": published},
                               published_at=published)
        )
        report = _prune(tmp_path, dest, KEEP_NONE, dry_run=True)
        assert report.warnings == [
            "prune deletes outputs of the current publication of reports/archive: report.md, summary.txt"
        ]
        assert report.to_dict()["warnings"] == report.warnings
        assert list(report.to_dict())[-1] == "warnings"
        assert report.text_lines()[1:] == [f"Warning: {report.warnings[0]}"]

    def test_no_warning_for_older_publications_only(self, tmp_path: Path, dest: Dest, old_and_fresh: bytes) -> None:
        report = _prune(tmp_path, dest, OLDER_THAN_48H, dry_run=True)
        assert report.warnings == [] and "warnings" not in report.to_dict()

    def test_shared_root_current_publication(self, tmp_path: Path, dest: Dest) -> None:
        dest.put_state(shared_root_state([("archive.txt", ARCHIVE, ago(72)), ("html.txt", HTML, ago(72))]))
        report = _prune(tmp_path, dest, KEEP_NONE)
        assert report.warnings == ["prune deletes outputs of the current publication of reports/archive: archive.txt"]


def test_library_plan_is_pure() -> None:
    doc = single_owner_state({"old.txt": ago(72), "fresh.txt": ago(24)})
    policy = PrunePolicy(True, timedelta(hours=48))
    plan = plan_prune(doc, policy, pipeline_id="reports", destination_id="archive", now=NOW)
    assert plan.pruned_paths == ("old.txt",)
    assert plan.to_dict()["planned_outputs"] == [{"path": "old.txt", "updated_at": "2026-06-05T12:00:00Z"}]

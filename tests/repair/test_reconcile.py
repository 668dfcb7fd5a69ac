"""``reconcile_state`` library (core-semantics §7.1, §7.4; interfaces §2.10 items 15–19)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from distributor_core.app.reconcile import reconcile_state
from distributor_core.app.repair_report import ReconcileStateReport
from distributor_core.bundle import manifest_to_obj
from distributor_core.config import ConfigLookupError
from distributor_core.state import StateError, validate_state
from distributor_core.storage.errors import ErrorKind, StorageError
from distributor_core.storage.faults import FaultInjectingStorage
from tests.repair.conftest import (
    ARCHIVE,
    HTML,
    MANIFEST,
    NOW,
    PAST,
    Dest,
    config_file,
    load,
    shared_root_state,
    single_owner_state,
)


def _run(tmp_path: Path, dest: Dest, **kwargs) -> ReconcileStateReport:
    config = load(tmp_path, dest)
    report = reconcile_state(config, pipeline_id="reports", destination_id="archive", now=NOW, **kwargs)
    assert isinstance(report, ReconcileStateReport)
    return report


@pytest.fixture
def two_outputs(dest: Dest) -> bytes:
    """State lists report.md, summary.txt; summary.txt deleted; unmanaged extra.txt present."""
    data = dest.put_state(single_owner_state({"report.md": PAST, "summary.txt": PAST}))
    dest.path("summary.txt").unlink()
    dest.write("extra.txt", b"unmanaged")
    return data


def test_dry_run_reports_missing_without_rewrite(tmp_path: Path, dest: Dest, two_outputs: bytes) -> None:
    # item 15, TestReconcileStateDryRunReportsMissingManagedOutputsWithoutRewrite
    report = _run(tmp_path, dest, dry_run=True)
    assert (report.would_change, report.changed, report.status) == (True, False, "would_change")
    assert [m.path for m in report.missing_managed_outputs] == ["summary.txt"]
    assert [e.path for e in report.unmanaged_entries] == ["extra.txt"]
    assert dest.state_bytes() == two_outputs
    assert dest.files() == [".distributor.json", "extra.txt", "report.md"]  # no lock, no journal left


def test_apply_removes_missing_records_and_keeps_unmanaged_files(
    tmp_path: Path, dest: Dest, two_outputs: bytes
) -> None:
    # item 16, TestReconcileStateApplyRemovesMissingRecordsAndPreservesUnmanagedFiles
    report = _run(tmp_path, dest)
    assert (report.changed, report.would_change, report.status) == (True, False, "changed")
    state = dest.state()
    validate_state(state)
    assert dest.paths() == ["report.md"]
    assert state.updated_at == NOW
    assert state.published_at == PAST  # nothing else changes
    assert state.outputs[0].updated_at == PAST
    assert dest.read("extra.txt") == b"unmanaged"
    assert dest.files() == [".distributor.json", "extra.txt", "report.md"]


def test_report_dict_has_the_documented_fields_in_order(tmp_path: Path, dest: Dest, two_outputs: bytes) -> None:
    report = _run(tmp_path, dest, dry_run=True)
    assert report.to_dict() == {
        "pipeline_id": "reports",
        "destination_id": "archive",
        "backend": "local",
        "root_path": str(dest.root),
        "state_schema": 2,
        "owner_scope": {"pipeline_id": "reports", "destination_id": "archive"},
        "checked_count": 2,
        "missing_managed_outputs": [{"path": "summary.txt", "storage_status": "missing"}],
        "unmanaged_entries": [{"path": "extra.txt", "type": "file", "size": 9}],
        "changed": False,
        "would_change": True,
        "dry_run": True,
    }
    assert list(report.to_dict()) == [
        "pipeline_id",
        "destination_id",
        "backend",
        "root_path",
        "state_schema",
        "owner_scope",
        "checked_count",
        "missing_managed_outputs",
        "unmanaged_entries",
        "changed",
        "would_change",
        "dry_run",
    ]


def test_nothing_missing_is_unchanged_and_writes_nothing(tmp_path: Path, dest: Dest) -> None:
    data = dest.put_state(single_owner_state({"report.md": PAST}))
    report = _run(tmp_path, dest)
    assert (report.changed, report.would_change, report.status) == (False, False, "unchanged")
    assert report.to_dict()["missing_managed_outputs"] == []
    assert report.to_dict()["unmanaged_entries"] == []
    assert dest.state_bytes() == data


def test_invalid_state_fails_without_rewrite(tmp_path: Path, dest: Dest) -> None:
    # item 17, TestReconcileStateInvalidStateFailsWithoutRewrite
    invalid = b'{"schema_version":2,"pipeline_id":"reports"}'
    dest.write(".distributor.json", invalid)
    with pytest.raises(StateError):
        _run(tmp_path, dest)
    assert dest.read(".distributor.json") == invalid
    assert dest.files() == [".distributor.json"]


def test_owner_mismatch_fails_without_rewrite(tmp_path: Path, dest: Dest) -> None:
    data = dest.put_state(single_owner_state({"report.md": PAST}, scope=HTML))
    dest.path("report.md").unlink()
    with pytest.raises(StateError) as info:
        _run(tmp_path, dest)
    assert str(info.value) == "state owner is reports/html, not reports/archive"
    assert dest.state_bytes() == data


def test_missing_state_is_the_storage_error(tmp_path: Path, dest: Dest) -> None:
    for dry_run in (True, False):
        with pytest.raises(StorageError) as info:
            _run(tmp_path, dest, dry_run=dry_run)
        assert info.value.kind == ErrorKind.NOT_FOUND
        assert str(info.value).startswith(f"destination state {dest.root}/.distributor.json does not exist; ")
    assert dest.files() == []


def test_missing_root_is_not_created(tmp_path: Path, dest: Dest) -> None:
    dest.root.rmdir()
    with pytest.raises(StorageError):
        _run(tmp_path, dest)
    assert not dest.root.exists()


def test_shared_root_owner_scope_repairs_current_owner_only(tmp_path: Path, dest: Dest) -> None:
    # item 18, TestReconcileStateSharedRootOwnerScopeRepairsCurrentOwnerOnly
    dest.put_state(shared_root_state([("report.md", ARCHIVE, PAST), ("report.html", HTML, PAST)]))
    dest.path("report.md").unlink()
    dest.path("report.html").unlink()
    report = _run(tmp_path, dest)
    assert report.changed
    assert report.checked_count == 1
    assert report.state_schema == 3
    assert dest.paths() == ["report.html"]
    assert [o.pipeline_id + "/" + o.destination_id for o in dest.state().owners] == ["reports/archive", "reports/html"]
    assert report.to_dict()["missing_managed_outputs"] == [
        {
            "path": "report.md",
            "owner_scope": {"pipeline_id": "reports", "destination_id": "archive"},
            "storage_status": "missing",
        }
    ]
    assert report.to_dict()["owner_scope"] == {"pipeline_id": "reports", "destination_id": "archive"}


def test_shared_root_all_owners_repairs_every_owner(tmp_path: Path, dest: Dest) -> None:
    # item 19, TestReconcileStateSharedRootAllOwnersRepairsEveryOwner
    dest.put_state(shared_root_state([("report.md", ARCHIVE, PAST), ("report.html", HTML, PAST)]))
    dest.path("report.md").unlink()
    dest.path("report.html").unlink()
    report = _run(tmp_path, dest, all_owners=True)
    assert report.changed and report.checked_count == 2
    assert dest.paths() == []
    assert len(dest.state().owners) == 2  # owner records are kept even without outputs
    assert report.to_dict()["owner_scope"] == {
        "pipeline_id": "reports",
        "destination_id": "archive",
        "all_owners": True,
    }


def test_shared_root_never_checks_other_owners_without_all_owners(tmp_path: Path, dest: Dest) -> None:
    data = dest.put_state(shared_root_state([("report.md", ARCHIVE, PAST), ("report.html", HTML, PAST)]))
    dest.path("report.html").unlink()  # only the other owner's output is missing
    report = _run(tmp_path, dest)
    assert (report.changed, report.checked_count, report.missing_managed_outputs) == (False, 1, [])
    assert dest.state_bytes() == data


def test_single_owner_ignores_all_owners(tmp_path: Path, dest: Dest, two_outputs: bytes) -> None:
    report = _run(tmp_path, dest, all_owners=True, dry_run=True)
    assert report.checked_count == 2
    assert report.to_dict()["owner_scope"] == {"pipeline_id": "reports", "destination_id": "archive"}


def test_legacy_state_reports_schema_2(tmp_path: Path, dest: Dest) -> None:
    legacy = {
        "schema_version": 1,
        "pipeline_id": "reports",
        "destination_id": "archive",
        "published_at": "2020-01-01T00:00:00Z",
        "source": {"manifest": manifest_to_obj(MANIFEST)},
        "outputs": [
            {
                "path": "report.md",
                "kind": "source",
                "source_path": "report.md",
                "sha256": "sha256:" + "a" * 64,
                "size": 8,
            }
        ],
    }
    dest.write(".distributor.json", json.dumps(legacy).encode())
    dest.write("report.md")
    report = _run(tmp_path, dest, dry_run=True)
    assert report.state_schema == 2
    assert report.checked_count == 1


def test_directory_at_a_managed_path_counts_as_present(tmp_path: Path, dest: Dest) -> None:
    dest.put_state(single_owner_state({"report.md": PAST}), with_outputs=False)
    dest.path("report.md").mkdir()
    report = _run(tmp_path, dest, dry_run=True)
    assert report.missing_managed_outputs == []


def test_other_stat_errors_abort(tmp_path: Path, dest: Dest) -> None:
    data = dest.put_state(single_owner_state({"report.md": PAST, "summary.txt": PAST}))
    storage = FaultInjectingStorage(dest.storage())
    storage.fail("stat", path="summary.txt", kind="unavailable")
    with pytest.raises(StorageError) as info:
        _run(tmp_path, dest, storage=storage)
    assert info.value.kind == ErrorKind.UNAVAILABLE
    assert dest.state_bytes() == data
    assert dest.files() == [".distributor.json", "report.md", "summary.txt"]  # lock released


def test_unmanaged_entries_skip_reserved_names_managed_paths_and_directories(tmp_path: Path, dest: Dest) -> None:
    dest.put_state(shared_root_state([("report.md", ARCHIVE, PAST), ("docs/report.html", HTML, PAST)]))
    dest.write("zeta/notes.txt", b"12345")
    dest.write("empty.txt", b"")
    dest.path("emptydir").mkdir()
    dest.write(".distributor-tmp-0123456789abcdef", b"temp")
    dest.write("docs/.distributor-bak-0123456789abcdef", b"backup")
    dest.write(".distributor-tmp-0123456789abcdef.d/inside.txt", b"x")
    (dest.root / "link").symlink_to("report.md")
    report = _run(tmp_path, dest, dry_run=True)
    assert [e.to_dict() for e in report.unmanaged_entries] == [
        {"path": "empty.txt", "type": "file"},
        {"path": "link", "type": "symlink", "size": len("report.md")},
        {"path": "zeta/notes.txt", "type": "file", "size": 5},
    ]


def test_other_bundle_paths_state_and_files_are_not_unmanaged_at_the_root(tmp_path: Path, dest: Dest) -> None:
    dest.put_state(single_owner_state({"report.md": PAST}))
    dest.put_state(single_owner_state({"daily.md": PAST}), bundle="daily/2026-06-08")
    dest.write("daily/loose.txt", b"loose")
    report = _run(tmp_path, dest, dry_run=True)
    assert [e.path for e in report.unmanaged_entries] == ["daily/loose.txt"]


def test_truncated_unmanaged_walk_reports_truncated(tmp_path: Path, dest: Dest) -> None:
    dest.put_state(single_owner_state({"report.md": PAST}))
    for index in range(5):
        dest.write(f"extra-{index}.txt", b"x")
    report = _run(tmp_path, dest, dry_run=True, walk_limit=3)
    assert report.truncated
    assert len(report.unmanaged_entries) <= 3
    data = report.to_dict()
    assert data["truncated"] is True
    assert list(data)[-1] == "truncated"
    assert report.text_line().endswith(" truncated=true")
    untruncated = _run(tmp_path, dest, dry_run=True, walk_limit=100)
    assert not untruncated.truncated and "truncated" not in untruncated.to_dict()
    assert len(untruncated.unmanaged_entries) == 5


def test_text_line_is_exact(tmp_path: Path, dest: Dest, two_outputs: bytes) -> None:
    report = _run(tmp_path, dest, dry_run=True)
    assert report.text_lines() == [
        f"Reconcile state: pipeline=reports destination=archive backend=local root={dest.root} "
        "status=would_change checked=2 missing=1 unmanaged=1 dry_run=true"
    ]


def test_root_path_is_the_configured_path(tmp_path: Path, dest: Dest) -> None:
    dest.put_state(single_owner_state({"report.md": PAST}))
    config = load(tmp_path, dest, backend_path="dest")
    report = reconcile_state(config, pipeline_id="reports", destination_id="archive", dry_run=True)
    assert report.root_path == "dest"


@pytest.mark.parametrize(
    ("pipeline", "destination", "message"),
    [
        ("", "archive", "pipeline id is required"),
        ("reports", "", "destination id is required"),
        ("nope", "archive", 'pipeline "nope" not found'),
        ("reports", "nope", "pipeline reports destination nope not found"),
    ],
)
def test_selection_errors(tmp_path: Path, dest: Dest, pipeline: str, destination: str, message: str) -> None:
    config = load(tmp_path, dest)
    with pytest.raises(ConfigLookupError) as info:
        reconcile_state(config, pipeline_id=pipeline, destination_id=destination)
    assert str(info.value) == message


def test_ids_are_checked_before_the_config_is_read(tmp_path: Path) -> None:
    with pytest.raises(ConfigLookupError, match=r"^pipeline id is required$"):
        reconcile_state(tmp_path / "missing.yml", pipeline_id="", destination_id="archive")


def test_config_path_is_accepted(tmp_path: Path, dest: Dest, two_outputs: bytes) -> None:
    path = config_file(tmp_path, dest.root)
    report = reconcile_state(str(path), pipeline_id="reports", destination_id="archive", dry_run=True)
    assert report.would_change

"""``audit_destination`` and ``reconcile_state(audit=True)`` on local roots (issue 18 item 1).

Outputs recorded by the fixtures are ``b"managed\\n"`` (8 bytes): a corrupted one has other bytes
of the same size, a truncated one fewer bytes, a deleted one is gone.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from distributor_core import paths as lp
from distributor_core.app.audit import AuditProgress, audit_destination, audit_error_message
from distributor_core.app.audit_report import AuditReport
from distributor_core.app.bundle_set import BundleSetReport
from distributor_core.app.output_check import check_outputs
from distributor_core.app.reconcile import reconcile_state
from distributor_core.lease import LeaseRecord
from distributor_core.state import OutputRecord, StateError
from distributor_core.storage.errors import ErrorKind, StorageError
from distributor_core.storage.faults import FaultInjectingStorage
from distributor_core.storage.local import LocalStorage
from tests.repair.conftest import ARCHIVE, HTML, NOW, PAST, Dest, ago, load, shared_root_state, single_owner_state

MANAGED_SHA = "sha256:" + hashlib.sha256(b"managed\n").hexdigest()
FOUR = {"ok.txt": PAST, "corrupt.txt": PAST, "short.txt": PAST, "gone.txt": PAST}


def _audit(tmp_path: Path, dest: Dest, **kwargs) -> AuditReport:
    report = audit_destination(load(tmp_path, dest), "reports", "archive", **kwargs)
    assert isinstance(report, AuditReport)
    return report


@pytest.fixture
def damaged(dest: Dest) -> bytes:
    """ok.txt intact, corrupt.txt same size other bytes, short.txt truncated, gone.txt deleted,
    extra.txt unmanaged."""
    data = dest.put_state(single_owner_state(FOUR))
    dest.write("corrupt.txt", b"MANAGED\n")
    dest.write("short.txt", b"mana")
    dest.path("gone.txt").unlink()
    dest.write("extra.txt", b"unmanaged")
    return data


def test_audit_reports_every_kind_of_damage_and_writes_nothing(tmp_path: Path, dest: Dest, damaged: bytes) -> None:
    before = {path: dest.read(path) for path in dest.files()}
    report = _audit(tmp_path, dest)
    assert [(c.path, c.status) for c in report.outputs] == [
        ("ok.txt", "ok"),
        ("corrupt.txt", "digest_mismatch"),
        ("short.txt", "size_mismatch"),
        ("gone.txt", "missing"),
    ]
    corrupt = report.outputs[1]
    assert corrupt.actual_sha256 == "sha256:" + hashlib.sha256(b"MANAGED\n").hexdigest()
    assert (corrupt.size, corrupt.sha256, corrupt.checked_by) == (8, MANAGED_SHA, "read")
    assert (report.outputs[2].actual_size, report.outputs[2].actual_sha256) == (4, None)  # not read
    assert [e.path for e in report.unmanaged_entries] == ["extra.txt"]
    assert report.bytes_read == 16  # the two files of the right size, read once each
    assert not report.clean and report.status == "problems"
    assert report.problem_summary() == "1 missing, 1 size_mismatch, 1 digest_mismatch, 1 unmanaged"
    message = audit_error_message(report)
    assert message.startswith(
        "audit found problems: reports/archive [.]: 1 missing, 1 size_mismatch, 1 digest_mismatch, 1 unmanaged"
        f" (root {dest.root}; paths (4): {dest.root}/corrupt.txt, {dest.root}/short.txt, {dest.root}/gone.txt, "
        f"{dest.root}/extra.txt; remedy: remove the unmanaged files, adopt copies of planned outputs with "
        "`distributor reconcile-state "
    )
    # the unmanaged files first: a republish refuses a bundle path that holds them
    assert message.index("remove the unmanaged files") < message.index("restore the outputs with `distributor run ")
    assert "--allow-unmanaged" in message and message.endswith("; more: distributor explain audit_problems)")
    assert {path: dest.read(path) for path in dest.files()} == before  # no lock, no journal, no rewrite


def test_report_shape_and_text(tmp_path: Path, dest: Dest, damaged: bytes) -> None:
    report = _audit(tmp_path, dest)
    data = report.to_dict()
    assert list(data) == [
        "pipeline_id", "destination_id", "backend", "root_path", "state_schema", "owner_scope", "status",
        "checked_count", "counts", "bytes_read", "allow_unmanaged", "outputs", "unmanaged_entries", "refusal",
    ]
    assert data["refusal"]["class"] == "audit_problems" and data["refusal"]["count"] == 4
    assert data["counts"] == {
        "ok": 1, "missing": 1, "not_a_file": 0, "size_mismatch": 1, "digest_mismatch": 1, "unmanaged": 1
    }
    assert data["outputs"][0] == {"path": "ok.txt", "status": "ok", "size": 8, "sha256": MANAGED_SHA,
                                  "checked_by": "read"}
    assert data["outputs"][2] == {"path": "short.txt", "status": "size_mismatch", "size": 8, "sha256": MANAGED_SHA,
                                  "actual_size": 4}
    assert data["outputs"][3] == {"path": "gone.txt", "status": "missing", "size": 8, "sha256": MANAGED_SHA}
    lines = report.text_lines()
    assert lines[0] == (
        f"Audit: pipeline=reports destination=archive backend=local root={dest.root} status=problems checked=4 "
        "ok=1 missing=1 not_a_file=0 size_mismatch=1 digest_mismatch=1 unmanaged=1 bytes_read=16"
    )
    assert lines[1].startswith(f"Output: path=corrupt.txt status=digest_mismatch size=8 sha256={MANAGED_SHA} ")
    assert lines[2] == f"Output: path=short.txt status=size_mismatch size=8 sha256={MANAGED_SHA} actual_size=4"
    assert lines[3] == f"Output: path=gone.txt status=missing size=8 sha256={MANAGED_SHA}"
    assert lines[4] == "Unmanaged: path=extra.txt type=file size=9"
    assert len(lines) == 5


def test_intact_destination_is_clean(tmp_path: Path, dest: Dest) -> None:
    dest.put_state(single_owner_state({"a.txt": PAST, "sub/b.txt": PAST}))
    report = _audit(tmp_path, dest)
    assert report.clean and report.status == "ok" and audit_error_message(report) == ""
    assert report.counts["ok"] == 2


def test_allow_unmanaged(tmp_path: Path, dest: Dest) -> None:
    dest.put_state(single_owner_state({"a.txt": PAST}))
    dest.write("notes.txt", b"hand written")
    assert not _audit(tmp_path, dest).clean
    allowed = _audit(tmp_path, dest, allow_unmanaged=True)
    assert allowed.clean and [e.path for e in allowed.unmanaged_entries] == ["notes.txt"]
    assert allowed.to_dict()["allow_unmanaged"] is True


def test_directory_or_symlink_at_a_recorded_path_is_not_a_file(tmp_path: Path, dest: Dest) -> None:
    dest.put_state(single_owner_state({"dir.txt": PAST, "link.txt": PAST}), with_outputs=False)
    dest.path("dir.txt").mkdir()
    dest.write("target.txt")
    os.symlink("target.txt", dest.path("link.txt"))
    report = _audit(tmp_path, dest, allow_unmanaged=True)
    assert [(c.path, c.status, c.entry_type) for c in report.outputs] == [
        ("dir.txt", "not_a_file", "directory"),
        ("link.txt", "not_a_file", "symlink"),
    ]
    assert report.to_dict()["outputs"][0]["type"] == "directory"


def test_shared_root_scope_and_all_owners(tmp_path: Path, dest: Dest) -> None:
    dest.put_state(shared_root_state([("mine.txt", ARCHIVE, PAST), ("theirs.html", HTML, PAST)]))
    dest.write("theirs.html", b"changed!")
    mine = _audit(tmp_path, dest)
    assert mine.clean and [c.path for c in mine.outputs] == ["mine.txt"]
    everyone = _audit(tmp_path, dest, all_owners=True)
    assert [(c.path, c.status, str(c.owner)) for c in everyone.outputs] == [
        ("mine.txt", "ok", "reports/archive"),
        ("theirs.html", "digest_mismatch", "reports/html"),
    ]
    assert everyone.to_dict()["owner_scope"]["all_owners"] is True
    assert everyone.to_dict()["outputs"][1]["owner_scope"] == {"pipeline_id": "reports", "destination_id": "html"}
    assert "owner=reports/html" in everyone.text_lines()[1]


def test_errors_of_one_bundle_path(tmp_path: Path, dest: Dest) -> None:
    with pytest.raises(StorageError) as missing:
        _audit(tmp_path, dest)
    assert missing.value.kind == ErrorKind.NOT_FOUND and "does not exist" in str(missing.value)
    dest.put_state(single_owner_state({"a.txt": PAST}, scope=HTML))
    with pytest.raises(StateError, match="state owner is reports/html, not reports/archive"):
        _audit(tmp_path, dest)
    dest.write(".distributor.json", b'{"schema_version":2}')
    with pytest.raises(StateError):
        _audit(tmp_path, dest)


def test_a_read_error_other_than_not_found_stops_the_audit(tmp_path: Path, dest: Dest) -> None:
    dest.put_state(single_owner_state({"a.txt": PAST, "b.txt": PAST}))
    storage = FaultInjectingStorage(dest.storage())
    storage.fail("read", path="b.txt", kind="permission")
    with pytest.raises(StorageError) as info:
        _audit(tmp_path, dest, storage=storage)
    assert info.value.kind == ErrorKind.PERMISSION


def test_all_bundles_one_section_each_and_failures_do_not_stop_the_others(tmp_path: Path, dest: Dest) -> None:
    dest.put_state(single_owner_state({"a.txt": PAST}), bundle="one")
    dest.put_state(single_owner_state({"a.txt": PAST}), bundle="two")
    dest.write("two/a.txt", b"changed\n")
    dest.write("three/.distributor.json", b"not json")
    report = audit_destination(load(tmp_path, dest), "reports", "archive", all_bundles=True)
    assert isinstance(report, BundleSetReport)
    assert [s.bundle_path for s in report.sections] == ["one", "three", "two"]
    assert [r.clean for r in report.reports] == [True, False]
    assert report.sections[1].error and not report.ok and not report.clean
    message = audit_error_message(report)
    assert message.startswith("1 bundle(s) failed: three: ")
    assert f"; audit found problems: reports/archive [two]: 1 digest_mismatch (root {dest.root}; " in message
    assert message.endswith("; more: distributor explain audit_problems)")


def test_warnings_for_a_writer_at_work(tmp_path: Path, dest: Dest) -> None:
    dest.put_state(single_owner_state({"a.txt": PAST}))
    lock = LeaseRecord(holder="another writer", host="elsewhere", pid=1, epoch="feedface", generation=3,
                       lease_seconds=0.1)
    dest.write(lp.LOCK_NAME, lock.to_bytes())
    dest.write(lp.JOURNAL_NAME, b"{}")
    report = _audit(tmp_path, dest)
    assert report.clean  # reserved names are never unmanaged
    assert [w.split(";")[0].split(" is held")[0] for w in report.warnings] == [
        f"an interrupted write left {lp.JOURNAL_NAME}",
        lp.LOCK_NAME,
    ]
    assert dest.read(lp.LOCK_NAME) == lock.to_bytes()  # an audit never breaks or takes a lock


class _Rewrites(FaultInjectingStorage):
    """Rewrites the state file while the audit reads its first output (a concurrent writer)."""

    def open_read(self, path: str):
        if path == "a.txt" and not getattr(self, "_done", False):
            self._done = True
            data = self.inner.read_bytes(".distributor.json")
            os.utime(Path(self.inner.root) / ".distributor.json", ns=(1, 1))
            assert self.inner.read_bytes(".distributor.json") == data
        return super().open_read(path)


def test_state_changing_during_the_audit_is_a_warning(tmp_path: Path, dest: Dest) -> None:
    dest.put_state(single_owner_state({"a.txt": PAST}))
    report = _audit(tmp_path, dest, storage=_Rewrites(dest.storage()))
    assert report.warnings == ["state changed while it was audited (a writer ran meanwhile); re-run the audit"]


def test_progress_counts_files_and_bytes(tmp_path: Path, dest: Dest) -> None:
    dest.put_state(single_owner_state({"a.txt": PAST, "b.txt": PAST}))
    events: list[AuditProgress] = []
    _audit(tmp_path, dest, progress=events.append)
    last = events[-1]
    assert (last.files_done, last.files_total, last.bytes_done, last.bytes_total) == (2, 2, 16, 16)
    assert {e.bundle_path for e in events} == {""}


def test_large_files_are_read_on_two_threads_in_record_order(tmp_path: Path) -> None:
    root = tmp_path / "big"
    root.mkdir()
    records = []
    for index in range(4):
        data = bytes([index]) * (3 * 1024 * 1024 + index)
        (root / f"f{index}.bin").write_bytes(data if index != 2 else data[:-1] + b"!")
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        records.append(OutputRecord(f"f{index}.bin", "source", f"f{index}.bin", digest, len(data), PAST, PAST))
    storage = FaultInjectingStorage(LocalStorage(root))
    assert storage.capabilities.read_threads(len(records), sum(r.size for r in records)) == 2
    done: list[int] = []
    checks = check_outputs(storage, "", records, on_bytes=done.append)
    assert [c.status for c in checks] == ["ok", "ok", "digest_mismatch", "ok"]
    assert sum(done) == sum(r.size for r in records)
    assert storage.count("read") == 4


def test_reconcile_audit_drops_records_of_outputs_that_no_longer_match(
    tmp_path: Path, dest: Dest, damaged: bytes
) -> None:
    config = load(tmp_path, dest)
    dry = reconcile_state(config, pipeline_id="reports", destination_id="archive", audit=True, dry_run=True, now=NOW)
    assert dry.would_change and dest.state_bytes() == damaged
    assert [m.path for m in dry.missing_managed_outputs] == ["gone.txt"]
    assert [(m.path, m.status) for m in dry.mismatched_managed_outputs] == [
        ("corrupt.txt", "digest_mismatch"),
        ("short.txt", "size_mismatch"),
    ]
    report = reconcile_state(config, pipeline_id="reports", destination_id="archive", audit=True, now=NOW)
    assert report.changed
    assert dest.paths() == ["ok.txt"]
    assert dest.state().updated_at == NOW
    assert dest.read("corrupt.txt") == b"MANAGED\n" and dest.read("short.txt") == b"mana"  # files stay
    data = report.to_dict()
    assert list(data)[7:10] == ["missing_managed_outputs", "mismatched_managed_outputs", "unmanaged_entries"]
    assert data["mismatched_managed_outputs"][1] == {
        "path": "short.txt", "storage_status": "size_mismatch", "size": 8, "sha256": MANAGED_SHA, "actual_size": 4
    }
    assert report.text_line() == (
        f"Reconcile state: pipeline=reports destination=archive backend=local root={dest.root} status=changed "
        "checked=4 missing=1 mismatched=2 unmanaged=1 dry_run=false"
    )
    again = _audit(tmp_path, dest)
    assert [e.path for e in again.unmanaged_entries] == ["corrupt.txt", "extra.txt", "short.txt"]
    assert again.counts["ok"] == 1 and not again.problems


def test_reconcile_audit_in_a_shared_root_touches_only_the_selected_owner(tmp_path: Path, dest: Dest) -> None:
    dest.put_state(shared_root_state([("mine.txt", ARCHIVE, PAST), ("theirs.html", HTML, ago(1))]))
    dest.write("mine.txt", b"MANAGED\n")
    dest.write("theirs.html", b"MANAGED\n")
    config = load(tmp_path, dest)
    report = reconcile_state(config, pipeline_id="reports", destination_id="archive", audit=True, now=NOW)
    assert [m.path for m in report.mismatched_managed_outputs] == ["mine.txt"]
    assert dest.paths() == ["theirs.html"]
    both = reconcile_state(config, pipeline_id="reports", destination_id="archive", audit=True, all_owners=True,
                           now=NOW)
    assert [m.path for m in both.mismatched_managed_outputs] == ["theirs.html"] and dest.paths() == []


def test_reconcile_without_audit_keeps_its_report_shape(tmp_path: Path, dest: Dest, damaged: bytes) -> None:
    report = reconcile_state(load(tmp_path, dest), pipeline_id="reports", destination_id="archive", dry_run=True)
    assert "mismatched_managed_outputs" not in report.to_dict()
    assert [m.path for m in report.missing_managed_outputs] == ["gone.txt"]  # bytes are not checked

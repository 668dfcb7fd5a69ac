"""``reconcile_state(adopt=True)``: unmanaged files equal to what the source would publish become
managed without a rewrite (issue 18 item 3).

The reference for "what run would publish" is run itself: a source bundle is published by
``run_config`` into a reference root, and copies of its files (never its state) are the hand
copies adopted elsewhere.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import pytest

from distributor_core import paths as lp
from distributor_core.app.adopt import AdoptError
from distributor_core.app.audit import audit_destination
from distributor_core.app.bundle_set import BundleSetReport
from distributor_core.app.reconcile import reconcile_state
from distributor_core.app.repair_report import ReconcileStateReport
from distributor_core.app.run import RunOptions, run_config
from distributor_core.bundle import build_manifest, write_manifest
from distributor_core.config import Config, load_config
from distributor_core.state import SharedRootState, SingleOwnerState, marshal_state, parse_state_document
from distributor_core.storage.errors import ErrorKind, StorageError
from distributor_core.storage.faults import FaultInjectingStorage
from distributor_core.storage.local import LocalStorage
from tests.bundle.conftest import make_bundle
from tests.lockholder import held_lock
from tests.repair.conftest import NOW, PAST

REPORT = b"# Report\n\nSunny *today*.\n"
SUMMARY = b"Summary\n"


@dataclass
class World:
    tmp: Path
    config: Config
    dst: Path
    ref: Path

    def publish_reference(self) -> None:
        """Publish the source into the reference root (a second config pointing there)."""
        report = run_config(_load(self.tmp, "ref.yml"), RunOptions())
        assert report.ok, report.error_message()

    def hand_copy(self, bundle: str = "daily", *, skip: tuple[str, ...] = ()) -> None:
        """Copy the reference bundle path's files (not its state) into the destination."""
        source = self.ref / bundle if bundle else self.ref
        target = self.dst / bundle if bundle else self.dst
        for path in sorted(source.rglob("*")):
            rel = path.relative_to(source).as_posix()
            if path.is_dir() or lp.is_reserved_path(rel) or rel in skip or (bundle == "" and "/" in rel):
                continue
            (target / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target / rel)

    def adopt(self, bundle: str | None = "daily", **kwargs: Any) -> ReconcileStateReport:
        report = reconcile_state(
            self.config, pipeline_id="reports", destination_id="archive", bundle_path=bundle, adopt=True, now=NOW,
            **kwargs,
        )
        assert isinstance(report, ReconcileStateReport)
        return report

    def state(self, bundle: str = "daily") -> Any:
        return parse_state_document((self.dst / lp.state_path(bundle)).read_bytes())

    def run(self) -> list[str]:
        report = run_config(self.config, RunOptions())
        assert report.ok, report.error_message()
        return [action.action for action in report.actions]


def _load(tmp: Path, name: str) -> Config:
    return load_config(tmp / name)


def _destination(
    dest_id: str, path: Path, *, html: bool, shared: bool, fixed: bool, links: bool, source: bool = True
) -> str:
    text = f"      - id: {dest_id}\n        backend: local\n        path: {path}\n"
    if html:
        text += (
            f"        publish:\n          source: {str(source).lower()}\n          html: true\n"
            "        transform:\n          markdown_to_html:\n            enabled: true\n"
        )
    if shared:
        text += "        state:\n          mode: shared_root\n"
    if fixed:
        text += "        path_mapping:\n          mode: fixed\n"
    if links:
        text += "        links:\n          base_url: https://example.test/reports/\n"
    return text


def make_world(
    tmp: Path, *, html: bool = False, shared: bool = False, fixed: bool = False, links: bool = False,
    second_owner: bool = False, upload: bool = False,
) -> World:
    src = tmp / "src"
    make_bundle(src / "daily", {"report.md": REPORT, "summary.txt": SUMMARY})
    dst, ref = tmp / "dst", tmp / "ref"
    for name, root in (("distributor.yml", dst), ("ref.yml", ref)):
        text = (
            "pipelines:\n  - id: reports\n    source:\n      backend: local\n"
            f"      path: {src}\n    destinations:\n"
            + _destination("archive", root, html=html, shared=shared, fixed=fixed, links=links)
        )
        if second_owner:
            text += _destination("html", root, html=True, shared=shared, fixed=fixed, links=False, source=False)
        if upload:
            text += (
                "  - id: uploads\n    source:\n      backend: http_upload\n    destinations:\n"
                f"      - id: archive\n        backend: local\n        path: {tmp / 'uploaded'}\n"
                "upload_tokens:\n  - id: t\n    token_env: ADOPT_TEST_TOKEN\n    allow_pipelines: [uploads]\n"
            )
        (tmp / name).write_text(text)
    return World(tmp, _load(tmp, "distributor.yml"), dst, ref)


def _outputs(doc: Any) -> list[tuple]:
    return [(o.path, o.kind, o.source_path, o.sha256, o.size, o.transform, o.url) for o in doc.outputs]


@pytest.mark.parametrize("html", [False, True])
def test_a_whole_hand_copy_without_state_becomes_the_publication_run_would_record(tmp_path: Path, html: bool) -> None:
    world = make_world(tmp_path, html=html, links=True)
    world.publish_reference()
    world.hand_copy()
    files_before = sorted(p.name for p in (world.dst / "daily").iterdir())

    plan = world.adopt(dry_run=True)
    assert plan.would_change and not plan.changed
    assert not (world.dst / "daily" / lp.STATE_FILE_NAME).exists() and not (world.dst / "daily" / lp.LOCK_NAME).exists()
    expected = ["report.md", "summary.txt", *(["report.html"] if html else [])]
    assert [o.path for o in plan.adopted_outputs] == expected
    assert plan.adoption.to_dict()["creates_state"] is True
    assert plan.unmanaged_entries == []

    report = world.adopt()
    assert report.changed and report.state_schema == 2
    reference = parse_state_document((world.ref / "daily" / lp.STATE_FILE_NAME).read_bytes())
    adopted = world.state()
    assert isinstance(adopted, SingleOwnerState)
    assert _outputs(adopted) == _outputs(reference)  # kinds, transforms, URLs: what run records
    assert adopted.manifest == reference.manifest and adopted.primary_url == reference.primary_url
    assert adopted.published_at == NOW and adopted.reconciliation_mode == "replace"
    assert sorted(p.name for p in (world.dst / "daily").iterdir()) == sorted([*files_before, lp.STATE_FILE_NAME])
    # no rewrite needed: the next run skips, and the audit is clean
    assert world.run() == ["skip_same"]
    assert audit_destination(world.config, "reports", "archive", bundle_path="daily").clean


def test_a_partial_copy_without_state_adopts_nothing(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    world.publish_reference()
    world.hand_copy(skip=("summary.txt",))
    report = world.adopt()
    assert not report.changed and not report.would_change
    assert report.adopted_outputs == []
    assert report.adoption.reason == (
        "no state records this owner here: a publication is recorded only when every planned output is present "
        "and matches; 1 of 2 do (first that does not: summary.txt: planned output is missing)"
    )
    assert report.adoption.missing == ["summary.txt"]
    assert [(e.path, e.reason) for e in report.unmanaged_entries] == [
        ("report.md", "nothing is adopted in this bundle path (see adoption.reason)")
    ]
    assert not (world.dst / "daily" / lp.STATE_FILE_NAME).exists()
    assert not (world.dst / "daily" / lp.LOCK_NAME).exists()


def test_a_restored_output_is_recorded_again_as_part_of_the_recorded_publication(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    assert world.run() == ["publish_new"]
    published = world.state()
    (world.dst / "daily" / "summary.txt").unlink()
    reconcile_state(world.config, pipeline_id="reports", destination_id="archive", bundle_path="daily", now=NOW)
    assert [o.path for o in world.state().outputs] == ["report.md"]
    (world.dst / "daily" / "summary.txt").write_bytes(SUMMARY)  # put back by hand
    (world.dst / "daily" / "notes.txt").write_bytes(b"not ours")
    report = world.adopt(dry_run=False)
    assert [o.path for o in report.adopted_outputs] == ["summary.txt"]
    assert [(e.path, e.reason) for e in report.unmanaged_entries] == [
        ("notes.txt", "not an output the source plans here")
    ]
    state = world.state()
    assert [o.path for o in state.outputs] == ["report.md", "summary.txt"]
    restored = state.outputs[1]
    assert (restored.created_at, restored.updated_at) == (published.published_at, published.published_at)
    assert state.updated_at == NOW and state.published_at == published.published_at
    assert _outputs(state) == _outputs(published)
    assert world.run() == ["skip_same"]


def test_files_that_differ_from_the_plan_stay_unmanaged_with_the_reason(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    world.run()
    for name in ("report.md", "summary.txt"):
        (world.dst / "daily" / name).unlink()
    reconcile_state(world.config, pipeline_id="reports", destination_id="archive", bundle_path="daily", now=NOW)
    state_before = (world.dst / "daily" / lp.STATE_FILE_NAME).read_bytes()
    (world.dst / "daily" / "report.md").write_bytes(REPORT + b"more")
    (world.dst / "daily" / "summary.txt").write_bytes(b"SUMMARY\n")
    report = world.adopt(dry_run=False)
    assert report.adopted_outputs == [] and not report.changed
    reasons = dict((e.path, e.reason) for e in report.unmanaged_entries)
    assert reasons["report.md"] == f"size {len(REPORT) + 4} differs from the planned {len(REPORT)}"
    assert reasons["summary.txt"].startswith("sha256 sha256:") and "differs from the planned sha256:" in reasons[
        "summary.txt"
    ]
    assert state_before == (world.dst / "daily" / lp.STATE_FILE_NAME).read_bytes()


def test_state_of_an_older_source_adopts_nothing(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    world.run()
    source = tmp_path / "src" / "daily"
    (source / "summary.txt").write_bytes(b"Summary v2\n")
    manifest = build_manifest(source, id="reports.daily", files=["report.md", "summary.txt"], created=NOW)
    write_manifest(source, manifest, overwrite=True)
    (world.dst / "daily" / "extra.txt").write_bytes(b"x")
    report = world.adopt(dry_run=False)
    assert report.adopted_outputs == [] and not report.changed
    assert report.adoption.reason.startswith("state records source reports.daily created 2026-06-07T")
    assert report.adoption.reason.endswith(
        "the source bundle is reports.daily created 2026-06-08T12:00:00Z: publish it with run; adoption only "
        "completes the recorded publication"
    )


def test_shared_root_adopts_only_the_selected_owners_planned_paths(tmp_path: Path) -> None:
    world = make_world(tmp_path, shared=True, second_owner=True)
    world.publish_reference()  # archive: report.md, summary.txt; html: report.html
    world.hand_copy()
    report = world.adopt(dry_run=False)
    assert [o.path for o in report.adopted_outputs] == ["report.md", "summary.txt"]
    assert [(e.path, e.reason) for e in report.unmanaged_entries] == [
        ("report.html", "not an output the source plans here")
    ]
    state = world.state()
    assert isinstance(state, SharedRootState)
    assert [str(o.scope) for o in state.owners] == ["reports/archive"]
    assert [(o.path, str(o.scope)) for o in state.outputs] == [
        ("report.md", "reports/archive"), ("summary.txt", "reports/archive")
    ]
    html = reconcile_state(world.config, pipeline_id="reports", destination_id="html", bundle_path="daily",
                           adopt=True, now=NOW)
    assert [o.path for o in html.adopted_outputs] == ["report.html"]
    assert [str(o.scope) for o in world.state().owners] == ["reports/archive", "reports/html"]
    assert world.run() == ["skip_same", "skip_same"]


def test_shared_root_path_recorded_for_another_owner_blocks_a_new_owner(tmp_path: Path) -> None:
    world = make_world(tmp_path, shared=True, second_owner=True)
    world.publish_reference()
    world.hand_copy()
    reconcile_state(world.config, pipeline_id="reports", destination_id="archive", bundle_path="daily", adopt=True,
                    now=NOW)
    # the html owner plans report.md too once it publishes sources: make archive own report.html
    state = world.state()
    hijacked = msgspec.structs.replace(state.outputs[0], path="report.html")
    (world.dst / "daily" / lp.STATE_FILE_NAME).write_bytes(marshal_state(msgspec.structs.replace(
        state, outputs=(hijacked, state.outputs[1]))))
    report = reconcile_state(world.config, pipeline_id="reports", destination_id="html", bundle_path="daily",
                             adopt=True, now=NOW)
    assert report.adopted_outputs == []
    assert report.adoption.reason == "planned output report.html is recorded for reports/archive"


def test_fixed_mapping_adopts_the_newest_source_bundle_at_the_root(tmp_path: Path) -> None:
    world = make_world(tmp_path, fixed=True)
    older = tmp_path / "src" / "older"
    older.mkdir()
    (older / "old.txt").write_bytes(b"old\n")
    write_manifest(older, build_manifest(older, id="reports.old", files=["old.txt"], created=PAST))
    world.publish_reference()
    world.hand_copy("")
    report = world.adopt("", dry_run=False)
    assert report.adoption.source_bundle_path == "daily"
    assert [o.path for o in report.adopted_outputs] == ["report.md", "summary.txt"]
    assert world.state("").manifest.id == "reports.daily"
    assert world.run() == ["skip_same"]


def test_a_bundle_path_without_a_source_bundle(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    (world.dst / "weekly").mkdir(parents=True)
    (world.dst / "weekly" / "report.md").write_bytes(REPORT)
    report = world.adopt("weekly", dry_run=False)
    assert report.adoption.reason == "the source of pipeline reports has no bundle for this bundle path"
    assert not report.changed


def test_upload_pipelines_cannot_adopt(tmp_path: Path) -> None:
    world = make_world(tmp_path, upload=True)
    with pytest.raises(AdoptError, match="pipeline uploads has an http_upload source"):
        reconcile_state(world.config, pipeline_id="uploads", destination_id="archive", adopt=True)


def test_all_bundles_includes_bundle_paths_the_source_publishes_to(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    make_bundle(tmp_path / "src" / "weekly", {"w.txt": b"week\n"}, bundle_id="reports.weekly")
    world.publish_reference()
    world.hand_copy("daily")
    world.hand_copy("weekly")
    report = reconcile_state(world.config, pipeline_id="reports", destination_id="archive", all_bundles=True,
                             adopt=True, now=NOW)
    assert isinstance(report, BundleSetReport)
    assert [(r.bundle_path, len(r.adopted_outputs), r.changed) for r in report.reports] == [
        ("daily", 2, True), ("weekly", 1, True)
    ]
    assert world.run() == ["skip_same", "skip_same"]


class _TouchAfterRead(FaultInjectingStorage):
    """Another tool rewrites summary.txt (same bytes, new mtime) while adoption reads it."""

    def open_read(self, path: str):
        stream = super().open_read(path)
        if path == "daily/summary.txt":
            os.utime(Path(self.inner.root) / path, ns=(10**9, 10**9))
        return stream


def test_a_file_that_changes_while_it_is_read_is_not_adopted(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    world.run()
    (world.dst / "daily" / "summary.txt").unlink()
    reconcile_state(world.config, pipeline_id="reports", destination_id="archive", bundle_path="daily", now=NOW)
    (world.dst / "daily" / "summary.txt").write_bytes(SUMMARY)
    report = world.adopt(dry_run=False, storage=_TouchAfterRead(LocalStorage(world.dst)))
    assert report.adopted_outputs == []
    assert [(e.path, e.reason) for e in report.unmanaged_entries] == [("summary.txt", "changed while it was read")]


def test_adoption_waits_for_the_lock_and_fails_with_the_conflict(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    world.publish_reference()
    world.hand_copy()
    with held_lock(LocalStorage(world.dst), "daily"), pytest.raises(StorageError) as info:
        world.adopt(dry_run=False, lock_wait=0.2)
    assert info.value.kind == ErrorKind.CONFLICT
    assert not (world.dst / "daily" / lp.STATE_FILE_NAME).exists()
    plan = world.adopt(dry_run=True)  # a dry run takes no lock and says so
    assert plan.would_change and not any("journal" in w for w in plan.warnings)


def test_adopt_and_audit_together(tmp_path: Path) -> None:
    world = make_world(tmp_path)
    world.run()
    (world.dst / "daily" / "summary.txt").write_bytes(b"SUMMARY\n")  # corrupted in place
    report = world.adopt(dry_run=False, audit=True)
    assert [m.path for m in report.mismatched_managed_outputs] == ["summary.txt"]
    assert report.adopted_outputs == []  # its bytes are not the planned ones either
    assert [o.path for o in world.state().outputs] == ["report.md"]
    (world.dst / "daily" / "summary.txt").write_bytes(SUMMARY)
    again = world.adopt(dry_run=False, audit=True)
    assert [o.path for o in again.adopted_outputs] == ["summary.txt"] and again.mismatched_managed_outputs == []
    assert again.text_lines()[0].endswith("checked=1 missing=0 mismatched=0 adopted=1 unmanaged=0 dry_run=false")

"""Execution and reconciliation (core-semantics §5.1–5.10), adjusted for resolutions A1/A2:
replace never deletes the previous publication before the new one is in place, a failed merge
restores the previous bytes and keeps the previous state, state never references removed files."""

from __future__ import annotations

import pytest

from distributor_core.execute.executor import ExecutionError, execute_plan
from distributor_core.plan.model import Action, LinkPolicy, TransferPolicy
from distributor_core.state import SharedRootState, SingleOwnerState, parse_state_document
from distributor_core.storage.errors import ErrorKind, StorageError
from distributor_core.transform.markdown import markdown_to_html

from .conftest import (
    CREATED,
    HOUR,
    LATER,
    NOW,
    OLD,
    OLDER,
    REPORT,
    SUMMARY,
    Env,
    SharedOwner,
    digest,
    manifest_for,
)


def _older(files: dict[str, bytes], **kwargs):
    return manifest_for(files, created=CREATED - HOUR, **kwargs)


def _by_path(doc) -> dict:
    return {o.path: o for o in doc.outputs}


# --------------------------------------------------------------------------- single owner


def test_publish_new_writes_outputs_and_state(env: Env):
    manifest = env.source({"report.md": REPORT, "summary.txt": SUMMARY})
    outcome = env.publish_ok(manifest, expect=Action.PUBLISH_NEW)
    assert env.files("bundle") == {
        "bundle/report.md": REPORT,
        "bundle/summary.txt": SUMMARY,
        "bundle/.distributor.json": env.state_bytes(),
    }
    doc = env.state()
    assert isinstance(doc, SingleOwnerState)
    assert (doc.pipeline_id, doc.destination_id, doc.reconciliation_mode) == ("reports", "archive", "replace")
    assert doc.manifest == manifest
    assert doc.distributor_version == "test"
    assert [(o.path, o.kind, o.source_path, o.sha256, o.size) for o in doc.outputs] == [
        ("report.md", "source", "report.md", digest(REPORT), len(REPORT)),
        ("summary.txt", "source", "summary.txt", digest(SUMMARY), len(SUMMARY)),
    ]
    assert [o.path for o in outcome.execution.written] == ["report.md", "summary.txt"]
    assert outcome.execution.bytes_written == len(REPORT) + len(SUMMARY)
    env.assert_consistent()


def test_publish_new_state_bytes_are_exact(env: Env):
    manifest = env.source({"report.md": REPORT})
    env.publish_ok(manifest)
    obj = env.state_obj()
    assert list(obj) == [
        "schema_version", "distributor_version", "pipeline_id", "destination_id", "published_at",
        "created_at", "updated_at", "state", "reconciliation", "source", "outputs",
    ]
    assert obj["published_at"] == obj["created_at"] == obj["updated_at"] == "2026-06-04T12:00:00Z"
    assert obj["state"] == {"mode": "single_owner"}
    assert obj["outputs"] == [{
        "path": "report.md", "kind": "source", "source_path": "report.md", "sha256": digest(REPORT),
        "size": len(REPORT), "created_at": "2026-06-04T12:00:00Z", "updated_at": "2026-06-04T12:00:00Z",
    }]
    assert env.state_bytes().endswith(b"}\n")
    assert env.state_bytes().startswith(b'{\n  "schema_version": 2,\n')


def test_replace_deletes_omitted_managed_outputs(env: Env):
    manifest = env.source({"report.md": REPORT})
    env.seed_single_owner({"report.md": b"# Report\nOld.\n", "summary.txt": b"old"}, created_at=OLDER)
    outcome = env.publish_ok(manifest, expect=Action.REPLACE_OLDER)
    assert env.read("bundle/report.md") == REPORT
    assert not env.exists("bundle/summary.txt")
    doc = env.state()
    assert [o.path for o in doc.outputs] == ["report.md"]
    assert doc.reconciliation_mode == "replace"
    assert outcome.execution.deleted == ["bundle/summary.txt"]
    # §5.9 replace_older (replace)
    assert (doc.created_at, doc.updated_at, doc.published_at) == (OLDER, NOW, NOW)
    assert (doc.outputs[0].created_at, doc.outputs[0].updated_at) == (OLD, NOW)
    env.assert_consistent()


def test_replace_prunes_directories_emptied_by_deletes(env: Env):
    manifest = env.source({"report.md": REPORT})
    env.seed_single_owner({"report.md": b"old", "deep/er/old.txt": b"o"})
    env.publish_ok(manifest)
    assert not env.exists("bundle/deep")
    env.assert_consistent()


def test_merge_retains_omitted_and_overwrites_managed_outputs(env: Env):
    manifest = env.source({"report.md": REPORT})
    env.seed_single_owner({"report.md": b"# Report\nOld.\n", "summary.txt": b"old"}, created_at=OLDER)
    env.publish_ok(manifest, reconciliation_mode="merge", expect=Action.REPLACE_OLDER)
    assert env.read("bundle/report.md") == REPORT
    assert env.read("bundle/summary.txt") == b"old"
    doc = env.state()
    outputs = _by_path(doc)
    assert [o.path for o in doc.outputs] == ["report.md", "summary.txt"]
    assert (outputs["summary.txt"].created_at, outputs["summary.txt"].updated_at) == (OLD, OLD)
    assert (outputs["report.md"].created_at, outputs["report.md"].updated_at) == (OLD, NOW)
    assert outputs["report.md"].sha256 == digest(REPORT)
    assert doc.reconciliation_mode == "merge"
    assert (doc.created_at, doc.updated_at, doc.published_at) == (OLDER, NOW, NOW)
    env.assert_consistent()


def test_merge_appends_new_paths_after_existing_records(env: Env):
    manifest = env.source({"new.md": b"n", "report.md": REPORT})
    env.seed_single_owner({"report.md": b"old", "summary.txt": b"old"})
    env.publish_ok(manifest, reconciliation_mode="merge")
    doc = env.state()
    assert [o.path for o in doc.outputs] == ["report.md", "summary.txt", "new.md"]
    assert (_by_path(doc)["new.md"].created_at, _by_path(doc)["new.md"].updated_at) == (NOW, NOW)


def test_run_merge_reconciliation_retains_managed_output(env: Env):
    manifest = env.source({"report.md": REPORT})
    env.seed_single_owner({"report.md": b"old\n", "summary.txt": b"old summary\n"})
    env.publish_ok(manifest, reconciliation_mode="merge")
    assert env.read("bundle/report.md") == REPORT
    assert env.read("bundle/summary.txt") == b"old summary\n"
    doc = env.state()
    assert doc.reconciliation_mode == "merge"
    assert len(doc.outputs) == 2


def test_merge_collision_is_refused_and_leaves_everything_untouched(env: Env):
    manifest = env.source({"report.md": REPORT})
    env.seed_single_owner({"summary.txt": b"old"}, manifest=_older({"summary.txt": b"Summary\n"}))
    env.put("bundle/report.md", b"unmanaged")
    before = env.files()
    outcome = env.publish(env.request(manifest, reconciliation_mode="merge"))
    assert outcome.status == "failed"
    assert outcome.plan.action == Action.FAIL_UNMANAGED
    assert outcome.error == (
        "fail_unmanaged: destination output path report.md exists but is not managed by destination state"
    )
    assert env.files() == before


def test_merge_collision_race_guard_at_execution(env: Env):
    """C1: execution keeps the planning check as a guard against races."""
    manifest = env.source({"report.md": REPORT, "new.md": b"new"})
    env.seed_single_owner({"report.md": b"old", "summary.txt": b"old"})
    plan = env.plan(manifest, reconciliation_mode="merge")
    assert plan.action == Action.REPLACE_OLDER
    env.put("bundle/new.md", b"raced in")
    state_before = env.state_bytes()
    with pytest.raises(StorageError) as info:
        execute_plan(plan, source=env.src, destination=env.dst, now=NOW, version="test")
    assert info.value.kind == ErrorKind.ALREADY_EXISTS
    assert env.read("bundle/new.md") == b"raced in"
    assert env.read("bundle/report.md") == b"old"
    assert env.read("bundle/summary.txt") == b"old"
    assert env.state_bytes() == state_before
    assert env.leftovers() == []


def test_replace_unmanaged_race_guard_at_execution(env: Env):
    """A file that appears at a planned, unrecorded path after planning is never clobbered."""
    manifest = env.source({"report.md": REPORT, "new.md": b"new"})
    env.seed_single_owner({"report.md": b"old"})
    plan = env.plan(manifest)
    env.put("bundle/new.md", b"raced in")
    with pytest.raises(StorageError):
        execute_plan(plan, source=env.src, destination=env.dst, now=NOW, version="test")
    assert env.read("bundle/new.md") == b"raced in"
    assert env.read("bundle/report.md") == b"old"
    assert [o.path for o in env.state().outputs] == ["report.md"]
    assert env.leftovers() == []


def test_failed_merge_restores_previous_bytes_and_state(env: Env, hooked):
    """§5.10 merge-failure case under A2: the overwritten managed file gets its previous bytes back,
    new outputs are removed, and the previous state stays."""
    manifest = env.source({"report.md": REPORT, "new.md": b"new\n", "fail.md": b"fail\n"})
    env.seed_single_owner({"report.md": b"old report"})
    state_before = env.state_bytes()

    renames = []

    def hook(op, path, **kw):
        if op == "rename":
            renames.append((path, kw["dst"]))
            if kw["dst"] == "bundle/fail.md":
                raise StorageError("rename", "local", path, ErrorKind.PERMISSION, "injected")

    hooked.hook = hook
    outcome = env.publish(env.request(manifest, reconciliation_mode="merge", dst=hooked))
    assert outcome.status == "failed"
    assert "injected" in outcome.error
    assert env.read("bundle/report.md") == b"old report"
    assert not env.exists("bundle/new.md")
    assert not env.exists("bundle/fail.md")
    assert env.state_bytes() == state_before
    env.assert_consistent()
    # A2: the overwritten file was moved to a backup before its replacement was renamed in, and
    # the rollback renamed the backup back
    backup = next(dst for src, dst in renames if src == "bundle/report.md")
    assert backup.startswith("bundle/.distributor-bak-")
    order = [dst for _, dst in renames]
    assert order.index(backup) < order.index("bundle/report.md")
    assert (backup, "bundle/report.md") in renames


def test_failed_publish_new_leaves_nothing(env: Env, hooked):
    manifest = env.source({"report.md": REPORT, "summary.txt": SUMMARY})

    def hook(op, path, **kw):
        if op == "write" and kw.get("expected_sha256") == digest(SUMMARY):
            raise StorageError("write", "local", path, ErrorKind.UNAVAILABLE, "injected")

    hooked.hook = hook
    outcome = env.publish(env.request(manifest, dst=hooked))
    assert outcome.status == "failed"
    assert env.files() == {}


def test_failed_replace_keeps_previous_publication_and_state(env: Env, hooked):
    """A1: single-owner replace no longer deletes the old publication before writing."""
    manifest = env.source({"report.md": REPORT, "summary.txt": SUMMARY})
    env.seed_single_owner({"report.md": b"old", "gone.txt": b"g"})
    before = env.files()

    def hook(op, path, **kw):
        if op == "rename" and kw["dst"] == "bundle/summary.txt":
            raise StorageError("rename", "local", path, ErrorKind.OTHER, "injected")

    hooked.hook = hook
    outcome = env.publish(env.request(manifest, dst=hooked))
    assert outcome.status == "failed"
    assert env.files() == before


def test_source_bytes_are_verified_at_execution(env: Env):
    """§4.4.1: bytes read from the source must match the manifest; nothing is published otherwise."""
    manifest = env.source({"report.md": REPORT, "summary.txt": SUMMARY})
    env.seed_single_owner({"report.md": b"old"})
    before = env.files()
    plan = env.plan(manifest)
    (env.src_root / "bundle" / "summary.txt").write_bytes(b"Summarx\n")
    with pytest.raises(StorageError) as info:
        execute_plan(plan, source=env.src, destination=env.dst, now=NOW, version="test")
    assert info.value.kind == ErrorKind.INTEGRITY
    # the output path and the source file, not the staging temporary the bytes went to
    assert info.value.path == "bundle/summary.txt"
    assert str(info.value).startswith("write local bundle/summary.txt: integrity: sha256 sha256:")
    assert str(info.value).endswith("(read from source bundle bundle file summary.txt)")
    assert env.files() == before


def test_a_failed_staging_write_names_the_output_path(env: Env, hooked):
    """Any error the destination raises writing a staging temporary names the output's final path."""
    manifest = env.source({"report.md": REPORT, "summary.txt": SUMMARY})
    env.seed_single_owner({"report.md": b"old"})
    before = env.files()

    def hook(op, path, **kw):
        if op == "write" and kw.get("in_place"):
            raise StorageError("write", "local", path, ErrorKind.PERMISSION, "Permission denied")

    hooked.hook = hook
    outcome = env.publish(env.request(manifest, dst=hooked))
    assert outcome.status == "failed"
    assert outcome.error in (
        "write local bundle/report.md: permission: Permission denied",
        "write local bundle/summary.txt: permission: Permission denied",
    )
    assert env.files() == before


def test_non_executable_actions_are_refused(env: Env):
    manifest = env.source()
    env.publish_ok(manifest)
    plan = env.plan(manifest)
    assert plan.action == Action.SKIP_SAME
    with pytest.raises(ExecutionError) as info:
        execute_plan(plan, source=env.src, destination=env.dst, now=NOW, version="test")
    assert str(info.value) == "cannot execute action skip_same: destination source manifest matches source"


def test_skip_leaves_state_untouched_even_when_policy_changed(env: Env):
    manifest = env.source()
    env.publish_ok(manifest)
    before = env.stats()
    outcome = env.publish(
        env.request(manifest, reconciliation_mode="merge", publish_html=True, markdown_enabled=True,
                    links=LinkPolicy("https://r.example.com")),
        now=LATER,
    )
    assert outcome.status == "skipped"
    assert outcome.plan.action == Action.SKIP_SAME
    assert outcome.execution is None
    assert env.stats() == before


def test_skip_destination_newer_writes_nothing(env: Env):
    manifest = env.source()
    env.seed_single_owner({"report.md": b"n"}, manifest=manifest_for({"report.md": b"n"}, created=CREATED + HOUR))
    before = env.stats()
    outcome = env.publish(env.request(manifest))
    assert (outcome.status, outcome.plan.action) == ("skipped", Action.SKIP_DESTINATION_NEWER)
    assert env.stats() == before


# --------------------------------------------------------------------------- republish (B3)


def test_republish_restores_lost_outputs(env: Env):
    manifest = env.source({"report.md": REPORT, "summary.txt": SUMMARY})
    env.publish_ok(manifest)
    (env.dst_root / "bundle" / "summary.txt").unlink()
    assert env.plan(manifest).action == Action.SKIP_SAME
    outcome = env.publish_ok(manifest, now=LATER, republish=True, expect=Action.REPLACE_OLDER)
    assert outcome.plan.reason == "republish of same source requested"
    assert env.read("bundle/summary.txt") == SUMMARY
    doc = env.state()
    assert (doc.created_at, doc.published_at) == (NOW, LATER)
    assert [(o.created_at, o.updated_at) for o in doc.outputs] == [(NOW, LATER), (NOW, LATER)]
    env.assert_consistent()


def test_republish_applies_a_changed_publish_and_link_policy(env: Env):
    manifest = env.source({"report.md": REPORT})
    env.publish_ok(manifest)
    env.publish_ok(manifest, republish=True, publish_source=False, publish_html=True, markdown_enabled=True,
                   links=LinkPolicy("https://r.example.com"))
    assert not env.exists("bundle/report.md")
    assert env.read("bundle/report.html") == markdown_to_html(REPORT, source_path="report.md")
    doc = env.state()
    assert doc.primary_url == "https://r.example.com/bundle/report.html"
    assert [(o.path, o.kind, o.url) for o in doc.outputs] == [
        ("report.html", "generated", "https://r.example.com/bundle/report.html")
    ]
    env.assert_consistent()


def test_republish_in_merge_mode_keeps_other_recorded_outputs(env: Env):
    manifest = env.source({"report.md": REPORT})
    env.publish_ok(manifest)
    env.publish_ok(manifest, republish=True, reconciliation_mode="merge", publish_html=True, markdown_enabled=True)
    assert [o.path for o in env.state().outputs] == ["report.md", "report.html"]
    env.assert_consistent()


# --------------------------------------------------------------------------- force_replace


def test_force_replace_over_unmanaged_content(env: Env):
    manifest = env.source({"report.md": REPORT})
    env.put("bundle/unmanaged.txt", b"u")
    env.put("bundle/report.md", b"hand-made report")
    env.put("bundle/nested/old.txt", b"o")
    env.put("bundle-sibling/keep.txt", b"k")
    env.put("bundlex", b"k")
    outcome = env.publish_ok(manifest, force=True, expect=Action.FORCE_REPLACE)
    assert env.files() == {
        "bundle/report.md": REPORT,
        "bundle/.distributor.json": env.state_bytes(),
        "bundle-sibling/keep.txt": b"k",
        "bundlex": b"k",
    }
    assert not env.exists("bundle/nested")
    assert sorted(outcome.execution.deleted) == ["bundle/nested/old.txt", "bundle/unmanaged.txt"]
    doc = env.state()
    assert (doc.created_at, doc.outputs[0].created_at, doc.outputs[0].updated_at) == (NOW, NOW, NOW)
    env.assert_consistent()


def test_force_replace_over_conflicting_state_keeps_created_at(env: Env):
    """§5.9 / Appendix B: force over a valid conflicting single-owner state keeps its created_at
    and the per-path created_at of recorded paths."""
    manifest = env.source({"report.md": REPORT, "new.md": b"n"})
    env.seed_single_owner({"report.md": b"old", "other.md": b"o"}, pipeline="other", created_at=OLDER)
    env.publish_ok(manifest, force=True, transfer=TransferPolicy(on_conflict="replace"), takeover_mode="never",
                   expect=Action.FORCE_REPLACE)
    doc = env.state()
    assert (doc.pipeline_id, doc.created_at, doc.updated_at, doc.published_at) == ("reports", OLDER, NOW, NOW)
    outputs = _by_path(doc)
    assert (outputs["report.md"].created_at, outputs["report.md"].updated_at) == (OLD, NOW)
    assert (outputs["new.md"].created_at, outputs["new.md"].updated_at) == (NOW, NOW)
    assert not env.exists("bundle/other.md")
    env.assert_consistent()


def test_force_replace_never_retains_in_merge_mode(env: Env):
    manifest = env.source({"report.md": REPORT})
    env.seed_single_owner({"report.md": b"n", "keep.md": b"k"},
                          manifest=manifest_for({"report.md": b"n", "keep.md": b"k"}, created=CREATED + HOUR))
    env.publish_ok(manifest, force=True, reconciliation_mode="merge",
                   transfer=TransferPolicy(on_destination_newer="replace"), expect=Action.FORCE_REPLACE)
    doc = env.state()
    assert [o.path for o in doc.outputs] == ["report.md"]
    assert doc.reconciliation_mode == "merge"
    assert not env.exists("bundle/keep.md")
    env.assert_consistent()


def test_publish_new_in_merge_mode_records_merge(env: Env):
    manifest = env.source()
    env.publish_ok(manifest, reconciliation_mode="merge", expect=Action.PUBLISH_NEW)
    assert env.state().reconciliation_mode == "merge"


def test_fixed_force_replace_clears_the_root_but_keeps_the_root(env: Env):
    manifest = env.source({"report.md": REPORT}, bundle="day")
    env.put("a.txt", b"a")
    env.put("deep/b.txt", b"b")
    env.publish_ok(manifest, bundle="day", path_mapping="fixed", force=True, expect=Action.FORCE_REPLACE)
    assert env.files() == {"report.md": REPORT, ".distributor.json": env.state_bytes("")}
    assert env.dst_root.is_dir()


def test_force_replace_keeps_a_held_lock_of_a_nested_bundle(env: Env):
    manifest = env.source({"report.md": REPORT}, bundle="day")
    env.put("nested/.distributor.lock", b'{"holder": "someone"}')
    env.put("nested/file.txt", b"f")
    env.publish_ok(manifest, bundle="day", path_mapping="fixed", force=True)
    assert env.read("nested/.distributor.lock") == b'{"holder": "someone"}'
    assert not env.exists("nested/file.txt")


def test_force_replace_leaves_no_nested_state_describing_deleted_files(env: Env):
    """§5.7 deletes everything under the bundle path; A1 keeps only a held lock. A nested bundle's
    state whose outputs were deleted must not survive to describe files that no longer exist."""
    manifest = env.source({"report.md": REPORT}, bundle="day")
    env.seed_single_owner({"report.md": b"nested"}, bundle="sub")
    env.publish_ok(manifest, bundle="day", path_mapping="fixed", force=True, expect=Action.FORCE_REPLACE)
    assert not env.exists("sub/report.md")
    assert not env.exists("sub/.distributor.json")


# --------------------------------------------------------------------------- fixed path mapping


@pytest.mark.parametrize("mode", ["replace", "merge"])
def test_fixed_path_supports_reconciliation_modes(env: Env, mode):
    manifest = env.source({"report.md": REPORT}, bundle="new")
    env.seed_single_owner({"report.md": b"old", "old.md": b"o"}, bundle="",
                          manifest=_older({"report.md": b"old", "old.md": b"o"}, id="older.source"))
    env.publish_ok(manifest, bundle="new", path_mapping="fixed", reconciliation_mode=mode,
                   expect=Action.REPLACE_OLDER)
    assert env.read("report.md") == REPORT
    doc = env.state("")
    assert doc.reconciliation_mode == mode
    assert doc.manifest.id == "reports.example"
    assert env.exists("old.md") == (mode == "merge")
    assert not env.exists("new/report.md")
    env.assert_consistent("")


# --------------------------------------------------------------------------- publish policies


HTML = markdown_to_html(REPORT, source_path="report.md")


@pytest.mark.parametrize("mode", ["replace", "merge"])
@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        ({}, {"report.md": REPORT}),
        ({"publish_source": False, "publish_html": True, "markdown_enabled": True}, {"report.html": HTML}),
        ({"publish_html": True, "markdown_enabled": True}, {"report.md": REPORT, "report.html": HTML}),
        ({"publish_html": True, "markdown_enabled": True, "markdown_mode": "index"},
         {"report.md": REPORT, "index.html": HTML}),
    ],
)
def test_reconciliation_modes_honor_publish_policies(env: Env, mode, policy, expected):
    manifest = env.source({"report.md": REPORT})
    env.seed_single_owner({"report.md": b"old"})
    env.publish_ok(manifest, reconciliation_mode=mode, **policy)
    doc = env.state()
    recorded = [o.path for o in doc.outputs]
    if mode == "merge" and "report.md" not in expected:
        assert recorded == ["report.md", *expected]  # the retained old source copy stays recorded
    else:
        assert recorded == list(expected)
    for path, data in expected.items():
        assert env.read(f"bundle/{path}") == data
    generated = [o for o in doc.outputs if o.kind == "generated"]
    assert all((o.transform, o.source_path) == ("markdown_to_html", "report.md") for o in generated)
    env.assert_consistent()


def test_state_order_is_source_copies_then_generated_in_manifest_order(env: Env):
    files = {"z.md": b"# Z\n", "b.txt": b"b", "a/m.md": b"# M\n"}
    manifest = env.source(files)
    env.publish_ok(manifest, publish_html=True, markdown_enabled=True)
    assert [o.path for o in env.state().outputs] == ["z.md", "b.txt", "a/m.md", "z.html", "a/m.html"]
    env.assert_consistent()


def test_links_are_recorded_in_state(env: Env):
    manifest = env.source({"report.md": REPORT, "summary.txt": SUMMARY})
    env.publish_ok(manifest, publish_html=True, markdown_enabled=True,
                   links=LinkPolicy("https://reports.example.com/archive/"))
    obj = env.state_obj()
    assert obj["links"] == {"primary_url": "https://reports.example.com/archive/bundle/report.html"}
    assert [o["url"] for o in obj["outputs"]] == [
        "https://reports.example.com/archive/bundle/report.md",
        "https://reports.example.com/archive/bundle/summary.txt",
        "https://reports.example.com/archive/bundle/report.html",
    ]


def test_index_html_url_recorded_as_directory(env: Env):
    manifest = env.source({"weather-daily/report.md": REPORT}, bundle="")
    env.publish_ok(manifest, bundle="", publish_source=False, publish_html=True, markdown_enabled=True,
                   markdown_mode="index", links=LinkPolicy("https://reports.example.com"))
    doc = env.state("")
    assert doc.primary_url == "https://reports.example.com/weather-daily/"
    assert doc.outputs[0].path == "weather-daily/index.html"
    assert doc.outputs[0].url == "https://reports.example.com/weather-daily/"


def test_merge_primary_url_comes_from_new_outputs_only(env: Env):
    manifest = env.source({"summary.txt": SUMMARY})
    env.seed_single_owner({"report.md": b"old"}, primary_url="https://old.example.com/report.md")
    env.publish_ok(manifest, reconciliation_mode="merge", links=LinkPolicy("https://r.example.com", "html"))
    doc = env.state()
    assert doc.primary_url == ""
    assert "links" not in env.state_obj()
    assert _by_path(doc)["report.md"].url == ""


def test_html_only_without_markdown_publishes_empty_outputs(env: Env):
    manifest = env.source({"summary.txt": SUMMARY})
    env.publish_ok(manifest, publish_source=False, publish_html=True, markdown_enabled=True)
    assert env.state_obj()["outputs"] == []
    assert env.files("bundle") == {"bundle/.distributor.json": env.state_bytes()}


# --------------------------------------------------------------------------- §5.9 timestamps over a sequence


def test_timestamps_across_publish_replace_merge(env: Env):
    first = env.source({"report.md": b"# 1\n", "a.txt": b"a"}, created=CREATED)
    env.publish_ok(first, now=NOW)
    second = env.source({"report.md": b"# 2\n", "b.txt": b"b"}, created=CREATED + HOUR)
    t2 = NOW + HOUR
    env.publish_ok(second, now=t2, reconciliation_mode="merge")
    doc = env.state()
    stamps = {o.path: (o.created_at, o.updated_at) for o in doc.outputs}
    assert stamps == {"report.md": (NOW, t2), "a.txt": (NOW, NOW), "b.txt": (t2, t2)}
    assert (doc.created_at, doc.updated_at, doc.published_at) == (NOW, t2, t2)
    third = env.source({"b.txt": b"b3"}, created=CREATED + 2 * HOUR)
    t3 = NOW + 2 * HOUR
    env.publish_ok(third, now=t3)
    doc = env.state()
    assert {o.path: (o.created_at, o.updated_at) for o in doc.outputs} == {"b.txt": (t2, t3)}
    assert (doc.created_at, doc.updated_at, doc.published_at) == (NOW, t3, t3)
    assert not env.exists("bundle/a.txt") and not env.exists("bundle/report.md")
    env.assert_consistent()


def test_clock_is_truncated_to_whole_seconds(env: Env):
    manifest = env.source()
    env.publish_ok(manifest, now=NOW.replace(microsecond=987654))
    assert env.state_obj()["published_at"] == "2026-06-04T12:00:00Z"


# --------------------------------------------------------------------------- shared root


def test_shared_root_publishes_owner_and_preserves_other_owners(env: Env):
    manifest = env.source({"report.md": b"# Report\n"})
    env.seed_shared_root([SharedOwner("other", "archive", _older({"other/report.md": b"old"}, id="other.id"),
                                      {"other/report.md": b"old"})])
    other_before = env.state().outputs
    env.publish_ok(manifest, state_mode="shared_root", expect=Action.PUBLISH_NEW)
    assert env.read("bundle/report.md") == b"# Report\n"
    assert env.read("bundle/other/report.md") == b"old"
    doc = env.state()
    assert isinstance(doc, SharedRootState)
    assert [str(o.scope) for o in doc.owners] == ["other/archive", "reports/archive"]
    assert [o.path for o in doc.outputs] == ["other/report.md", "report.md"]
    assert doc.outputs[0] == other_before[0]
    assert env.state_obj()["state"] == {"mode": "shared_root"}
    new = doc.outputs[1]
    assert (new.source_id, new.source_digest, new.source_created) == (manifest.id, manifest.digest, CREATED)
    assert (new.created_at, new.updated_at) == (NOW, NOW)
    assert (doc.created_at, doc.updated_at) == (OLDER, NOW)
    env.assert_consistent()


def test_shared_root_replace_deletes_only_current_owner_omitted_outputs(env: Env):
    manifest = env.source({"report.md": REPORT})
    env.seed_shared_root([
        SharedOwner("other", "archive", _older({"other/report.md": b"o"}, id="other.id"), {"other/report.md": b"o"}),
        SharedOwner("reports", "archive", _older({"report.md": b"r", "old.md": b"x"}),
                    {"report.md": b"r", "old.md": b"x"}),
    ])
    env.publish_ok(manifest, state_mode="shared_root", expect=Action.REPLACE_OLDER)
    assert not env.exists("bundle/old.md")
    assert env.read("bundle/other/report.md") == b"o"
    doc = env.state()
    assert [o.path for o in doc.outputs] == ["other/report.md", "report.md"]
    assert doc.created_at == OLDER
    report = _by_path(doc)["report.md"]
    assert (report.created_at, report.updated_at) == (OLD, NOW)
    assert _by_path(doc)["other/report.md"].updated_at == OLD
    env.assert_consistent()


def test_shared_root_merge_retains_current_owner_omitted_outputs(env: Env):
    manifest = env.source({"report.md": REPORT})
    env.seed_shared_root([
        SharedOwner("other", "archive", _older({"other/report.md": b"o"}, id="other.id"), {"other/report.md": b"o"}),
        SharedOwner("reports", "archive", _older({"report.md": b"r", "old.md": b"x"}),
                    {"report.md": b"r", "old.md": b"x"}),
    ])
    env.publish_ok(manifest, state_mode="shared_root", reconciliation_mode="merge", expect=Action.REPLACE_OLDER)
    assert env.read("bundle/old.md") == b"x"
    doc = env.state()
    assert [o.path for o in doc.outputs] == ["other/report.md", "report.md", "old.md"]
    old = _by_path(doc)["old.md"]
    assert (old.created_at, old.updated_at, old.source_created) == (OLD, OLD, CREATED - HOUR)
    assert doc.owner(doc.owners[1].scope).reconciliation_mode == "merge"
    env.assert_consistent()


def test_shared_root_force_replace_deletes_only_bundle_path(env: Env):
    manifest = env.source({"report.md": REPORT})
    env.put("bundle/unmanaged.txt", b"u")
    env.put("bundle/nested/old.txt", b"o")
    env.put("bundle-sibling/keep.txt", b"k")
    env.publish_ok(manifest, state_mode="shared_root", force=True, expect=Action.FORCE_REPLACE)
    assert env.read("bundle/report.md") == REPORT
    assert not env.exists("bundle/unmanaged.txt") and not env.exists("bundle/nested/old.txt")
    assert env.read("bundle-sibling/keep.txt") == b"k"
    doc = env.state()
    assert [str(o.scope) for o in doc.owners] == ["reports/archive"]
    assert (doc.created_at, doc.updated_at) == (NOW, NOW)
    env.assert_consistent()


def test_shared_root_force_replace_removes_unrelated_owners(env: Env):
    manifest = env.source({"report.md": REPORT})
    env.seed_shared_root([
        SharedOwner("other", "archive", _older({"other.md": b"o"}, id="other.id"), {"other.md": b"o"}),
        SharedOwner("reports", "archive", manifest_for({"report.md": b"r"}, created=CREATED + HOUR),
                    {"report.md": b"r"}),
    ])
    env.publish_ok(manifest, state_mode="shared_root", force=True,
                   transfer=TransferPolicy(on_destination_newer="replace"), expect=Action.FORCE_REPLACE)
    doc = env.state()
    assert [str(o.scope) for o in doc.owners] == ["reports/archive"]
    assert not env.exists("bundle/other.md")
    # §5.9 shared-root force_replace: root created_at now, current owner's recorded path keeps created_at
    assert (doc.created_at, doc.updated_at) == (NOW, NOW)
    assert (doc.outputs[0].created_at, doc.outputs[0].updated_at) == (OLD, NOW)
    env.assert_consistent()


def test_two_pipelines_publish_into_one_shared_root(env: Env, tmp_path):
    from distributor_core.storage.local import LocalStorage

    first_root, second_root = tmp_path / "first", tmp_path / "second"
    first = env.source({"first.md": b"# First\n"}, bundle="", id="reports.first", root=first_root)
    second = env.source({"second.md": b"# Second\n"}, bundle="", id="reports.second", root=second_root)
    env.publish_ok(first, bundle="", pipeline="reports-first", source=LocalStorage(first_root),
                   state_mode="shared_root")
    env.publish_ok(second, bundle="", pipeline="reports-second", source=LocalStorage(second_root),
                   state_mode="shared_root", now=LATER)
    assert env.read("first.md") == b"# First\n" and env.read("second.md") == b"# Second\n"
    doc = env.state("")
    assert [str(o.scope) for o in doc.owners] == ["reports-first/archive", "reports-second/archive"]
    assert [o.path for o in doc.outputs] == ["first.md", "second.md"]
    assert (doc.created_at, doc.updated_at) == (NOW, LATER)
    env.assert_consistent("")


def test_shared_root_owner_links_follow_the_plan(env: Env):
    manifest = env.source({"report.md": REPORT})
    env.seed_shared_root([SharedOwner("reports", "archive", _older({"report.md": b"r"}), {"report.md": b"r"},
                                      primary_url="https://old.example.com/x")])
    env.publish_ok(manifest, state_mode="shared_root")
    owner = env.state_obj()["owners"][0]
    assert "links" not in owner
    newer = env.source({"report.md": REPORT}, created=CREATED + HOUR)
    env.publish_ok(newer, state_mode="shared_root", links=LinkPolicy("https://r.example.com"))
    assert env.state_obj()["owners"][0]["links"] == {"primary_url": "https://r.example.com/bundle/report.md"}


# --------------------------------------------------------------------------- migration


@pytest.mark.parametrize("mode", ["replace", "merge"])
def test_single_owner_state_migrates_to_shared_root(env: Env, mode):
    manifest = env.source({"report.md": REPORT})
    old_manifest = _older({"report.md": b"old", "summary.txt": b"s"})
    env.seed_single_owner({"report.md": b"old", "summary.txt": b"s"}, manifest=old_manifest, created_at=OLDER)
    env.publish_ok(manifest, state_mode="shared_root", reconciliation_mode=mode, expect=Action.REPLACE_OLDER)
    doc = env.state()
    assert isinstance(doc, SharedRootState)
    assert env.state_obj()["schema_version"] == 3
    assert [str(o.scope) for o in doc.owners] == ["reports/archive"]
    assert doc.owners[0].manifest == manifest
    assert (doc.created_at, doc.updated_at) == (OLDER, NOW)
    outputs = _by_path(doc)
    assert (outputs["report.md"].created_at, outputs["report.md"].updated_at) == (OLD, NOW)
    if mode == "merge":
        assert [o.path for o in doc.outputs] == ["report.md", "summary.txt"]
        kept = outputs["summary.txt"]
        assert (kept.source_id, kept.source_digest, kept.source_created) == (
            old_manifest.id, old_manifest.digest, old_manifest.created
        )
        assert (kept.created_at, kept.updated_at) == (OLD, OLD)
        assert env.read("bundle/summary.txt") == b"s"
    else:
        assert [o.path for o in doc.outputs] == ["report.md"]
        assert not env.exists("bundle/summary.txt")
    env.assert_consistent()


def test_migration_skip_leaves_v2_file_unchanged(env: Env):
    manifest = env.source()
    env.publish_ok(manifest)
    before = env.stats()
    outcome = env.publish(env.request(manifest, state_mode="shared_root"))
    assert (outcome.status, outcome.plan.action) == ("skipped", Action.SKIP_SAME)
    assert env.stats() == before
    assert env.state_obj()["schema_version"] == 2


def test_migration_of_another_owners_state_is_a_conflict(env: Env):
    manifest = env.source()
    env.seed_single_owner({"report.md": b"old"}, pipeline="other")
    for takeover in ("same_pipeline", "any_managed"):
        plan = env.plan(manifest, state_mode="shared_root", takeover_mode=takeover)
        assert plan.action == Action.FAIL_CONFLICT
        assert plan.reason == 'pipeline id "other" does not match "reports"'


def _v1_state(manifest_obj: dict) -> bytes:
    import json

    return json.dumps({
        "schema_version": 1,
        "pipeline_id": "reports",
        "destination_id": "archive",
        "published_at": "2026-05-30T13:12:00+02:00",
        "source": {"manifest": manifest_obj},
        "outputs": [{"path": "report.md", "kind": "source", "source_path": "report.md",
                     "sha256": digest(b"v1"), "size": 2}],
    }).encode()


def test_v1_to_v2_to_v3_sequence_stays_valid(env: Env):
    from distributor_core.bundle import manifest_to_obj

    v1_manifest = manifest_for({"report.md": b"v1"}, created=CREATED - 2 * HOUR)
    env.put("bundle/report.md", b"v1")
    env.put("bundle/.distributor.json", _v1_state(manifest_to_obj(v1_manifest)))
    v1_published = OLDER

    second = env.source({"report.md": b"v2", "extra.md": b"e"}, created=CREATED - HOUR)
    env.publish_ok(second, reconciliation_mode="merge", expect=Action.REPLACE_OLDER)
    doc = env.state()
    obj = env.state_obj()
    assert obj["schema_version"] == 2
    assert doc.created_at == v1_published
    assert {o.path: (o.created_at, o.updated_at) for o in doc.outputs} == {
        "report.md": (v1_published, NOW), "extra.md": (NOW, NOW)
    }
    env.assert_consistent()

    third = env.source({"report.md": b"v3"}, created=CREATED)
    env.publish_ok(third, now=LATER, state_mode="shared_root", reconciliation_mode="merge",
                   expect=Action.REPLACE_OLDER)
    doc = env.state()
    assert env.state_obj()["schema_version"] == 3
    assert doc.created_at == v1_published
    assert {o.path: (o.created_at, o.updated_at, o.source_created) for o in doc.outputs} == {
        "report.md": (v1_published, LATER, CREATED),
        "extra.md": (NOW, NOW, CREATED - HOUR),
    }
    assert parse_state_document(env.state_bytes()) == doc
    env.assert_consistent()
    # and back on the same destination: the shared root keeps working as such
    assert env.plan(third, state_mode="shared_root").action == Action.SKIP_SAME


def test_failed_shared_root_replace_keeps_state_truthful(env: Env, hooked):
    """README deviation 8 / A1: after a failed shared-root replace the state references no removed
    file; the omitted output is deleted only after the new state is committed."""
    manifest = env.source({"report.md": REPORT, "new.md": b"new"})
    env.seed_shared_root([
        SharedOwner("other", "archive", _older({"other.md": b"o"}, id="other.id"), {"other.md": b"o"}),
        SharedOwner("reports", "archive", _older({"report.md": b"r", "old.md": b"x"}),
                    {"report.md": b"r", "old.md": b"x"}),
    ])
    before = env.files()

    def hook(op, path, **kw):
        if op == "rename" and kw["dst"] == "bundle/new.md":
            raise StorageError("rename", "local", path, ErrorKind.UNAVAILABLE, "injected")

    hooked.hook = hook
    outcome = env.publish(env.request(manifest, state_mode="shared_root", dst=hooked))
    assert outcome.status == "failed"
    assert env.files() == before
    env.assert_consistent()


# --------------------------------------------------------------------------- executor details


def test_parallel_writes_keep_plan_order_in_state(env: Env):
    files = {f"f{i:02d}.txt": f"file {i}\n".encode() for i in range(12)}
    manifest = env.source(files)
    plan = env.plan(manifest)
    seen = []
    result = execute_plan(plan, source=env.src, destination=env.dst, now=NOW, version="test", workers=4,
                          progress=lambda p: seen.append((p.files_done, p.bytes_done)))
    assert [o.path for o in env.state().outputs] == list(files)
    assert [o.path for o in result.written] == list(files)
    assert sorted(seen)[-1] == (12, sum(len(d) for d in files.values()))
    assert len(seen) == 12
    env.assert_consistent()


def test_parallel_write_failure_rolls_everything_back(env: Env, hooked):
    files = {f"f{i:02d}.txt": f"file {i}\n".encode() for i in range(12)}
    manifest = env.source(files)
    env.seed_single_owner({"f00.txt": b"old"})
    before = env.files()
    plan = env.plan(manifest, dst=hooked)

    def hook(op, path, **kw):
        if op == "write" and kw.get("expected_sha256") == digest(files["f07.txt"]):
            raise StorageError("write", "local", path, ErrorKind.UNAVAILABLE, "injected")

    hooked.hook = hook
    with pytest.raises(StorageError):
        execute_plan(plan, source=env.src, destination=hooked, now=NOW, version="test", workers=4)
    assert env.files() == before


def test_concurrent_state_change_is_detected_by_the_conditional_state_write(env: Env, hooked):
    """A writer that ignored the lock changed the state after planning: the state write is
    conditional on the revision read at planning and fails with a conflict; the attempt is undone."""
    manifest = env.source({"report.md": REPORT})
    env.seed_single_owner({"report.md": b"old"})
    plan = env.plan(manifest, dst=hooked)
    foreign = env.seed_single_owner({"report.md": b"old"}, pipeline="intruder", write_files=False)
    foreign_bytes = env.state_bytes()
    assert foreign.pipeline_id == "intruder"
    with pytest.raises(StorageError) as info:
        execute_plan(plan, source=env.src, destination=hooked, now=NOW, version="test")
    assert info.value.kind == ErrorKind.CONFLICT
    assert env.state_bytes() == foreign_bytes
    assert env.read("bundle/report.md") == b"old"
    assert env.leftovers() == []


def test_recorded_outputs_missing_on_storage_do_not_block_replace(env: Env):
    manifest = env.source({"report.md": REPORT})
    env.seed_single_owner({"report.md": b"old", "gone.txt": b"g"}, write_files=False)
    outcome = env.publish_ok(manifest, expect=Action.REPLACE_OLDER)
    assert outcome.execution.deleted == []
    assert env.read("bundle/report.md") == REPORT
    env.assert_consistent()


def test_publish_reports_the_plan_made_under_the_lock(env: Env):
    manifest = env.source()
    first = env.plan(manifest)
    env.publish_ok(manifest)
    seen = []
    outcome = env.publish(env.request(manifest), first_plan=first, on_plan=seen.append)
    assert outcome.plan.action == Action.SKIP_SAME
    assert outcome.first_plan is first and first.action == Action.PUBLISH_NEW
    assert seen == [outcome.plan]
    same = env.publish(env.request(manifest), first_plan=outcome.plan)
    assert same.first_plan is None


def test_planning_errors_become_failed_outcomes(env: Env):
    manifest = env.source({"report.html": b"<p>x</p>", "report.md": REPORT})
    request = env.request(manifest, publish_html=True, markdown_enabled=True)
    for dry_run in (True, False):
        outcome = env.publish(request, dry_run=dry_run)
        assert (outcome.status, outcome.plan) == ("failed", None)
        assert outcome.error == "destination output path collision: report.html"
    assert env.files() == {}

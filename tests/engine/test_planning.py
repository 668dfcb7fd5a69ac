"""Publish planning: core-semantics §4.1, §4.4–4.8, resolutions B3 (force deletes) and C1
(planning-time unmanaged checks). Planning only reads; every test here also proves that."""

from __future__ import annotations

import pytest

from distributor_core.execute.publish import plan_only
from distributor_core.plan.model import Action, LinkPolicy, PlanError, TransferPolicy
from distributor_core.state.model import OwnerScope
from distributor_core.transform.markdown import markdown_to_html

from .conftest import CREATED, HOUR, REPORT, SUMMARY, Env, SharedOwner, manifest_for

FIXED_OLDER = "fixed destination source is older than selected source"


def _paths(records) -> list[str]:
    return [r.path for r in records]


# --------------------------------------------------------------------------- §4.1 request validation


@pytest.mark.parametrize(
    ("policy", "message"),
    [
        ({"publish_source": False, "publish_html": False},
         "publish/transform policy: publish must enable source or html"),
        ({"publish_html": True},
         "publish/transform policy: transform.markdown_to_html must be enabled when publish.html is true"),
        ({"publish_html": True, "markdown_enabled": True, "markdown_mode": "inline"},
         "publish/transform policy: transform.markdown_to_html.mode must be sidecar or index"),
        ({"reconciliation_mode": "append"}, "reconciliation.mode must be replace or merge"),
        ({"state_mode": "multi"}, "state.mode must be single_owner or shared_root"),
    ],
)
def test_request_validation_errors(env: Env, policy, message):
    manifest = env.source()
    with pytest.raises(PlanError) as info:
        env.plan(manifest, **policy)
    assert str(info.value) == message
    assert env.files() == {}


def test_enabled_transform_without_html_publication_is_allowed_and_unused(env: Env):
    manifest = env.source()
    plan = env.plan(manifest, markdown_enabled=True)
    assert [(o.path, o.kind) for o in plan.outputs] == [("report.md", "source")]


def test_missing_ids_are_rejected(env: Env):
    manifest = env.source()
    with pytest.raises(PlanError):
        env.plan(manifest, pipeline="")
    with pytest.raises(PlanError):
        env.plan(manifest, destination="")


def test_empty_modes_default_to_replace_and_single_owner(env: Env):
    """§4.1: an empty reconciliation mode defaults to replace, an empty state mode to single_owner."""
    manifest = env.source()
    plan = env.plan(manifest, reconciliation_mode="", state_mode="")
    assert plan.reconciliation_mode == "replace"
    assert plan.state_mode == "single_owner"


# --------------------------------------------------------------------------- §4.4 outputs


def test_source_copies_follow_manifest_order(env: Env):
    files = {"z.txt": b"z", "a/b.md": b"# B\n", "m.csv": b"1,2\n"}
    manifest = env.source(files)
    plan = env.plan(manifest)
    assert [(o.path, o.kind, o.source_path, o.sha256, o.size, o.transform, o.url) for o in plan.outputs] == [
        (f.path, "source", f.path, f.sha256, f.size, "", "") for f in manifest.files
    ]
    assert [o.path for o in plan.outputs] == ["z.txt", "a/b.md", "m.csv"]
    assert plan.primary_url == ""


def test_sidecar_html_outputs_follow_sources_in_manifest_order(env: Env):
    files = {"z.MD": b"# Z\n", "notes.txt": b"n", "docs/guide.markdown": b"# Guide\n", "a.md": b"# A\n"}
    manifest = env.source(files)
    plan = env.plan(manifest, publish_html=True, markdown_enabled=True)
    assert [(o.path, o.kind, o.source_path, o.transform) for o in plan.outputs] == [
        ("z.MD", "source", "z.MD", ""),
        ("notes.txt", "source", "notes.txt", ""),
        ("docs/guide.markdown", "source", "docs/guide.markdown", ""),
        ("a.md", "source", "a.md", ""),
        ("z.html", "generated", "z.MD", "markdown_to_html"),
        ("docs/guide.html", "generated", "docs/guide.markdown", "markdown_to_html"),
        ("a.html", "generated", "a.md", "markdown_to_html"),
    ]
    generated = plan.outputs[5]
    expected = markdown_to_html(b"# Guide\n", source_path="docs/guide.markdown")
    assert generated.content == expected
    assert generated.size == len(expected)
    assert generated.sha256 == manifest_for({"x": expected}).files[0].sha256


def test_html_only_publishes_only_generated_outputs(env: Env):
    manifest = env.source({"report.md": REPORT, "summary.txt": SUMMARY})
    plan = env.plan(manifest, publish_source=False, publish_html=True, markdown_enabled=True)
    assert [(o.path, o.kind) for o in plan.outputs] == [("report.html", "generated")]


def test_html_only_without_markdown_plans_zero_outputs(env: Env):
    manifest = env.source({"summary.txt": SUMMARY})
    plan = env.plan(manifest, publish_source=False, publish_html=True, markdown_enabled=True)
    assert plan.action == Action.PUBLISH_NEW
    assert plan.outputs == ()


def test_index_mode_writes_index_html_next_to_the_single_markdown(env: Env):
    manifest = env.source({"docs/report.md": REPORT, "data.csv": b"1\n"})
    plan = env.plan(manifest, publish_html=True, markdown_enabled=True, markdown_mode="index")
    assert [(o.path, o.source_path) for o in plan.outputs][-1] == ("docs/index.html", "docs/report.md")


@pytest.mark.parametrize(
    ("files", "count"),
    [({"data.csv": b"1\n"}, 0), ({"a.md": b"# A\n", "b.md": b"# B\n"}, 2)],
)
def test_index_mode_requires_exactly_one_markdown(env: Env, files, count):
    manifest = env.source(files)
    with pytest.raises(PlanError) as info:
        env.plan(manifest, publish_html=True, markdown_enabled=True, markdown_mode="index")
    assert str(info.value) == f"markdown_to_html index mode requires exactly one Markdown source file, found {count}"


def test_source_html_and_sidecar_html_collide(env: Env):
    manifest = env.source({"report.html": b"<p>hand</p>", "report.md": REPORT})
    with pytest.raises(PlanError) as info:
        env.plan(manifest, publish_html=True, markdown_enabled=True)
    assert str(info.value) == "destination output path collision: report.html"


def test_injected_renderer_is_used(env: Env):
    manifest = env.source()
    seen = []

    def render(data: bytes, source_path: str) -> bytes:
        seen.append((data, source_path))
        return b"<h1>Report</h1>\n"

    plan = env.plan(manifest, publish_html=True, markdown_enabled=True, renderer=render)
    assert seen == [(REPORT, "report.md")]
    assert plan.outputs[-1].content == b"<h1>Report</h1>\n"
    assert plan.outputs[-1].size == 16


def test_markdown_changed_after_validation_fails_planning(env: Env):
    manifest = env.source()
    (env.src_root / "bundle" / "report.md").write_bytes(b"# Changed\n")
    with pytest.raises(PlanError) as info:
        env.plan(manifest, publish_html=True, markdown_enabled=True)
    assert str(info.value) == "source file report.md changed after validation"


# --------------------------------------------------------------------------- §4.4.5 links


def test_links_give_every_output_a_url_and_auto_primary_prefers_html(env: Env):
    manifest = env.source({"report.md": REPORT, "data dir/ü.csv": b"1\n"})
    plan = env.plan(
        manifest, publish_html=True, markdown_enabled=True, links=LinkPolicy("https://reports.example.com/archive")
    )
    assert [(o.path, o.url) for o in plan.outputs] == [
        ("report.md", "https://reports.example.com/archive/bundle/report.md"),
        ("data dir/ü.csv", "https://reports.example.com/archive/bundle/data%20dir/%C3%BC.csv"),
        ("report.html", "https://reports.example.com/archive/bundle/report.html"),
    ]
    assert plan.primary_url == "https://reports.example.com/archive/bundle/report.html"


@pytest.mark.parametrize(
    ("primary", "html", "expected"),
    [
        ("auto", False, "https://r.example.com/bundle/report.md"),
        ("source", True, "https://r.example.com/bundle/report.md"),
        ("html", True, "https://r.example.com/bundle/report.html"),
        ("html", False, ""),
    ],
)
def test_primary_url_selection(env: Env, primary, html, expected):
    manifest = env.source()
    links = LinkPolicy("https://r.example.com/", primary)
    plan = env.plan(manifest, publish_html=html, markdown_enabled=True, links=links)
    assert plan.primary_url == expected
    assert all(o.url for o in plan.outputs)


def test_primary_source_without_source_outputs_is_empty(env: Env):
    manifest = env.source()
    plan = env.plan(
        manifest, publish_source=False, publish_html=True, markdown_enabled=True,
        links=LinkPolicy("https://r.example.com", "source"),
    )
    assert plan.primary_url == ""
    assert [o.url for o in plan.outputs] == ["https://r.example.com/bundle/report.html"]


def test_index_html_url_is_its_directory_with_trailing_slash(env: Env):
    manifest = env.source({"weather-daily/report.md": REPORT}, bundle="")
    plan = env.plan(
        manifest, bundle="", publish_html=True, markdown_enabled=True, markdown_mode="index",
        links=LinkPolicy("https://reports.example.com"),
    )
    assert plan.outputs[-1].path == "weather-daily/index.html"
    assert plan.outputs[-1].url == "https://reports.example.com/weather-daily/"
    assert plan.primary_url == "https://reports.example.com/weather-daily/"


def test_root_index_html_url_is_the_base_url(env: Env):
    manifest = env.source({"report.md": REPORT}, bundle="")
    plan = env.plan(
        manifest, bundle="", publish_html=True, markdown_enabled=True, markdown_mode="index",
        links=LinkPolicy("https://reports.example.com/site"),
    )
    assert plan.outputs[-1].url == "https://reports.example.com/site/"


def test_fixed_mapping_urls_use_the_destination_root(env: Env):
    manifest = env.source(bundle="nested/day")
    plan = env.plan(manifest, bundle="nested/day", path_mapping="fixed", links=LinkPolicy("https://r.example.com"))
    assert plan.bundle_path == ""
    assert plan.outputs[0].url == "https://r.example.com/report.md"


def test_invalid_link_base_fails_planning(env: Env):
    manifest = env.source()
    with pytest.raises(PlanError) as info:
        env.plan(manifest, links=LinkPolicy("ftp://files.example.com/"))
    assert str(info.value).startswith("invalid output URL for report.md: ")


def test_without_links_no_urls(env: Env):
    manifest = env.source()
    plan = env.plan(manifest, publish_html=True, markdown_enabled=True)
    assert [o.url for o in plan.outputs] == ["", ""]
    assert plan.primary_url == ""


# --------------------------------------------------------------------------- §4.4.4 path mapping


def test_preserve_relative_uses_the_source_bundle_path(env: Env):
    manifest = env.source(bundle="2026/06/04")
    assert env.plan(manifest, bundle="2026/06/04").bundle_path == "2026/06/04"
    root = env.source(bundle="")
    assert env.plan(root, bundle="").bundle_path == ""


# --------------------------------------------------------------------------- §4.8 cases


def _older(files: dict[str, bytes], **kwargs):
    return manifest_for(files, created=CREATED - HOUR, **kwargs)


def test_shared_root_treats_absent_owner_as_publishable(env: Env):
    manifest = env.source()
    env.seed_shared_root([SharedOwner("other", "archive", _older({"other/report.md": b"old"}, id="other.id"),
                                      {"other/report.md": b"old"})])
    plan = env.plan(manifest, state_mode="shared_root")
    assert plan.action == Action.PUBLISH_NEW
    assert plan.owner_scope == OwnerScope("reports", "archive")
    assert _paths(plan.other_owner_outputs) == ["other/report.md"]
    assert _paths(plan.owner_outputs_to_write) == ["report.md"]
    assert plan.owner_outputs_to_delete == () and plan.retained_owner_outputs == ()


@pytest.mark.parametrize(("mode", "deleted", "retained"), [("replace", ["old.md"], []), ("merge", [], ["old.md"])])
def test_shared_root_replace_and_merge_partition_current_owner_outputs(env: Env, mode, deleted, retained):
    manifest = env.source()
    env.seed_shared_root([
        SharedOwner("other", "archive", _older({"other/report.md": b"o"}, id="other.id"), {"other/report.md": b"o"}),
        SharedOwner("reports", "archive", _older({"report.md": b"r", "old.md": b"x"}),
                    {"report.md": b"r", "old.md": b"x"}),
    ])
    plan = env.plan(manifest, state_mode="shared_root", reconciliation_mode=mode)
    assert (plan.action, plan.reason) == (Action.REPLACE_OLDER, "destination source is older than source")
    assert _paths(plan.owner_outputs_to_delete) == deleted
    assert _paths(plan.retained_owner_outputs) == retained
    assert _paths(plan.other_owner_outputs) == ["other/report.md"]
    assert _paths(plan.owner_outputs_to_write) == ["report.md"]


def test_shared_root_rejects_other_owner_path_conflict(env: Env):
    manifest = env.source()
    env.seed_shared_root([SharedOwner("other", "archive", _older({"report.md": b"o"}, id="other.id"),
                                      {"report.md": b"o"})])
    plan = env.plan(manifest, state_mode="shared_root")
    assert plan.action == Action.FAIL_CONFLICT
    assert plan.error == "fail_conflict: destination output path report.md is owned by other/archive"
    assert plan.owner_outputs_to_write == ()


def test_shared_root_rejects_unmanaged_path_collision(env: Env):
    manifest = env.source()
    env.seed_shared_root([SharedOwner("other", "archive", _older({"x.md": b"o"}, id="other.id"), {"x.md": b"o"})])
    env.put("bundle/report.md", b"unmanaged")
    plan = env.plan(manifest, state_mode="shared_root")
    assert plan.action == Action.FAIL_UNMANAGED
    assert plan.error == (
        "fail_unmanaged: destination output path report.md exists but is not managed by destination state"
    )


def test_shared_root_without_state_but_with_files_is_unmanaged(env: Env):
    manifest = env.source()
    env.put("bundle/elsewhere.txt", b"x")
    plan = env.plan(manifest, state_mode="shared_root")
    assert plan.error == "fail_unmanaged: destination has content but no distributor state"


def test_shared_root_force_replace_over_unmanaged_files(env: Env):
    manifest = env.source()
    env.put("bundle/unmanaged.txt", b"u")
    env.put("bundle/nested/old.txt", b"o")
    env.put("bundle-sibling/keep.txt", b"k")
    plan = env.plan(manifest, state_mode="shared_root", force=True)
    assert plan.action == Action.FORCE_REPLACE
    assert plan.deletes == ("nested/old.txt", "unmanaged.txt")
    assert _paths(plan.owner_outputs_to_write) == ["report.md"]


@pytest.mark.parametrize("mode", ["replace", "merge"])
def test_fixed_mapping_refines_different_source_to_older(env: Env, mode):
    manifest = env.source(bundle="new")
    env.seed_single_owner({"report.md": b"old"}, bundle="", manifest=_older({"report.md": b"old"}, id="older.source"))
    plan = env.plan(manifest, bundle="new", path_mapping="fixed", reconciliation_mode=mode)
    assert plan.bundle_path == ""
    assert (plan.action, plan.reason) == (Action.REPLACE_OLDER, FIXED_OLDER)


def test_fixed_mapping_refines_different_source_to_newer(env: Env):
    manifest = env.source(bundle="new")
    env.seed_single_owner({"report.md": b"n"}, bundle="",
                          manifest=manifest_for({"report.md": b"n"}, id="newer.source", created=CREATED + HOUR))
    plan = env.plan(manifest, bundle="new", path_mapping="fixed")
    assert (plan.action, plan.reason) == (
        Action.SKIP_DESTINATION_NEWER, "fixed destination source is newer than selected source"
    )


def test_fixed_mapping_keeps_conflict_for_identical_created(env: Env):
    manifest = env.source(bundle="new")
    env.seed_single_owner({"report.md": b"n"}, bundle="",
                          manifest=manifest_for({"report.md": b"n"}, id="same.time", created=CREATED))
    plan = env.plan(manifest, bundle="new", path_mapping="fixed", takeover_mode="never")
    assert plan.error == "fail_conflict: destination source id differs from source"


def test_fixed_mapping_shared_root_refinement(env: Env):
    manifest = env.source(bundle="new")
    env.seed_shared_root(
        [SharedOwner("reports", "archive", _older({"report.md": b"o"}, id="older.source"), {"report.md": b"o"})],
        bundle="",
    )
    plan = env.plan(manifest, bundle="new", path_mapping="fixed", state_mode="shared_root", takeover_mode="never")
    assert (plan.action, plan.reason) == (Action.REPLACE_OLDER, FIXED_OLDER)


def test_shared_root_dry_run_writes_nothing(env: Env):
    manifest = env.source()
    outcome = env.publish(env.request(manifest, state_mode="shared_root"), dry_run=True)
    assert outcome.status == "planned"
    assert outcome.plan.action == Action.PUBLISH_NEW
    assert env.files() == {}


def test_unmanaged_destination_error_text(env: Env):
    manifest = env.source()
    env.put("bundle/x", b"x")
    outcome = plan_only(env.request(manifest))
    assert outcome.status == "failed"
    assert outcome.error == "fail_unmanaged: destination has content but no distributor state"


def test_planning_performs_no_writes(env: Env, hooked):
    manifest = env.source({"report.md": REPORT, "summary.txt": SUMMARY})
    env.seed_single_owner({"report.md": b"old", "old.txt": b"o"})
    before = env.stats()
    plan = env.plan(manifest, dst=hooked, publish_html=True, markdown_enabled=True)
    assert plan.action == Action.REPLACE_OLDER
    assert {op for op, _ in hooked.calls} <= {"stat", "read", "list"}
    assert env.stats() == before


def _reads(env: Env, hooked, manifest, **kwargs) -> tuple[str, list[tuple[str, str]]]:
    plan = env.plan(manifest, dst=hooked, **kwargs)
    return plan.action.value, hooked.calls


def test_planning_reads_the_destination_in_protocol_order(env: Env, hooked):
    """execute.facts answers plan.decide's requests in the order the checks need them: the state
    file (stat before read), then has-any, the bounded listing or the stats of planned paths."""
    manifest = env.source({"report.md": REPORT, "summary.txt": SUMMARY})
    state = ("stat", "bundle/.distributor.json")
    assert _reads(env, hooked, manifest) == ("publish_new", [state, ("list", "bundle")])
    hooked.calls.clear()
    env.put("bundle/stray.txt", b"x")
    listing = ("list", "bundle")
    assert _reads(env, hooked, manifest, force=True) == ("force_replace", [state, listing, listing])
    hooked.calls.clear()
    (env.dst_root / "bundle" / "stray.txt").unlink()
    env.seed_single_owner({"report.md": b"old"}, mode="merge")
    read = ("read", "bundle/.distributor.json")
    assert _reads(env, hooked, manifest) == ("replace_older", [state, read, ("list", "bundle")])
    hooked.calls.clear()
    merged = _reads(env, hooked, manifest, reconciliation_mode="merge")
    assert merged == ("replace_older", [state, read, ("stat", "bundle/summary.txt")])


# --------------------------------------------------------------------------- C1 planning-time checks


def test_merge_collision_with_unmanaged_file_fails_at_planning(env: Env):
    manifest = env.source({"report.md": REPORT})
    env.seed_single_owner({"summary.txt": b"old"}, mode="merge")
    env.put("bundle/report.md", b"unmanaged")
    plan = env.plan(manifest, reconciliation_mode="merge")
    assert plan.action == Action.FAIL_UNMANAGED
    assert plan.reason == "destination output path report.md exists but is not managed by destination state"
    dry = env.publish(env.request(manifest, reconciliation_mode="merge"), dry_run=True)
    assert dry.status == "failed"
    assert dry.error == (
        "fail_unmanaged: destination output path report.md exists but is not managed by destination state"
    )


def test_merge_collision_at_root_bundle_uses_display_path(env: Env):
    manifest = env.source({"sub/report.md": REPORT}, bundle="")
    env.seed_single_owner({"summary.txt": b"old"}, bundle="", mode="merge")
    env.put("sub/report.md", b"unmanaged")
    plan = env.plan(manifest, bundle="", reconciliation_mode="merge")
    assert plan.reason == "destination output path sub/report.md exists but is not managed by destination state"


def test_replace_mode_with_unmanaged_content_fails_at_planning(env: Env):
    manifest = env.source()
    env.seed_single_owner({"report.md": b"old"})
    env.put("bundle/zz.txt", b"stray")
    env.put("bundle/a/extra.txt", b"stray")
    plan = env.plan(manifest)
    assert plan.action == Action.FAIL_UNMANAGED
    assert plan.error == "fail_unmanaged: destination bundle path bundle contains unmanaged content: a/extra.txt"
    dry = env.publish(env.request(manifest), dry_run=True)
    assert dry.error == plan.error


def test_replace_mode_unmanaged_content_at_root_names_dot(env: Env):
    manifest = env.source(bundle="")
    env.seed_single_owner({"report.md": b"old"}, bundle="")
    env.put("stray.txt", b"s")
    plan = env.plan(manifest, bundle="")
    assert plan.reason == "destination bundle path . contains unmanaged content: stray.txt"


def test_replace_mode_ignores_reserved_names(env: Env):
    manifest = env.source()
    env.seed_single_owner({"report.md": b"old"})
    env.put("bundle/.distributor-bak-0123456789abcdef", b"b")
    env.put("bundle/sub/.distributor-tmp-0123456789abcdef", b"t")
    plan = env.plan(manifest)
    assert plan.action == Action.REPLACE_OLDER


def test_unmanaged_content_does_not_block_merge_when_not_colliding(env: Env):
    manifest = env.source()
    env.seed_single_owner({"report.md": b"old"}, mode="merge")
    env.put("bundle/hand-made.txt", b"h")
    plan = env.plan(manifest, reconciliation_mode="merge")
    assert plan.action == Action.REPLACE_OLDER
    assert plan.merge_retention is True


# --------------------------------------------------------------------------- B3 / §5.7 force deletes


def test_force_replace_deletes_are_bounded_by_whole_segments(env: Env):
    manifest = env.source()
    env.put("bundle/unmanaged.txt", b"u")
    env.put("bundle/report.md", b"planned path, overwritten")
    env.put("bundle-sibling/keep.txt", b"k")
    env.put("bundlex", b"k")
    env.put("top.txt", b"k")
    plan = env.plan(manifest, force=True)
    assert plan.deletes == ("unmanaged.txt",)


def test_force_replace_deletes_list_other_owners_outputs_and_unmanaged_files(env: Env):
    manifest = env.source()
    newer = manifest_for({"report.md": b"r", "old.md": b"x"}, created=CREATED + HOUR)
    env.seed_shared_root([
        SharedOwner("other", "archive", _older({"other.md": b"o"}, id="other.id"), {"other.md": b"o"}),
        SharedOwner("reports", "archive", newer, {"report.md": b"r", "old.md": b"x"}),
    ])
    env.put("bundle/loose.txt", b"l")
    forced = env.plan(
        manifest, state_mode="shared_root", transfer=TransferPolicy(on_destination_newer="replace"), force=True
    )
    assert (forced.action, forced.reason) == (Action.FORCE_REPLACE, "destination source is newer than source")
    # everything under the bundle path that is not re-written: the current owner's omitted output,
    # the other owner's output and the unmanaged file
    assert forced.deletes == ("loose.txt", "old.md", "other.md")
    assert _paths(forced.owner_outputs_to_write) == ["report.md"]


def test_force_replace_on_fixed_root_lists_the_whole_root(env: Env):
    manifest = env.source(bundle="day")
    env.put("a.txt", b"a")
    env.put("deep/b.txt", b"b")
    plan = env.plan(manifest, bundle="day", path_mapping="fixed", force=True)
    assert plan.bundle_path == ""
    assert plan.deletes == ("a.txt", "deep/b.txt")


def test_force_replace_dry_run_lists_deletes_and_writes_nothing(env: Env):
    manifest = env.source()
    env.put("bundle/unmanaged.txt", b"u")
    before = env.stats()
    outcome = env.publish(env.request(manifest, force=True), dry_run=True)
    assert outcome.status == "planned"
    assert outcome.plan.action == Action.FORCE_REPLACE
    assert outcome.plan.deletes == ("unmanaged.txt",)
    assert env.stats() == before


def test_deletes_empty_for_non_force_actions(env: Env):
    manifest = env.source()
    env.seed_single_owner({"report.md": b"old", "gone.txt": b"g"})
    plan = env.plan(manifest)
    assert plan.action == Action.REPLACE_OLDER
    assert plan.deletes == ()


def test_shared_root_non_write_plans_record_only_other_owners(env: Env):
    manifest = env.source()
    env.seed_shared_root([
        SharedOwner("other", "archive", _older({"other.md": b"o"}, id="other.id"), {"other.md": b"o"}),
        SharedOwner("reports", "archive", manifest, {"report.md": REPORT}),
    ])
    skip = env.plan(manifest, state_mode="shared_root")
    assert skip.action == Action.SKIP_SAME
    assert _paths(skip.other_owner_outputs) == ["other.md"]
    assert skip.owner_outputs_to_write == () and skip.retained_owner_outputs == ()
    assert skip.owner_outputs_to_delete == () and skip.deletes == ()
    failed = env.plan(manifest, state_mode="shared_root", transfer=TransferPolicy(on_destination_same="fail"))
    assert failed.action == Action.FAIL_CONFLICT
    assert _paths(failed.other_owner_outputs) == ["other.md"]
    assert failed.owner_outputs_to_write == ()

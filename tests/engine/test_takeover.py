"""Takeover policy (core-semantics §6, test cases §6.7)."""

from __future__ import annotations

import pytest

from distributor_core.plan.model import Action, TransferPolicy
from distributor_core.state import SharedRootState, SingleOwnerState
from distributor_core.state.model import OwnerScope

from .conftest import CREATED, HOUR, NOW, OLD, OLDER, REPORT, Env, SharedOwner, manifest_for


def _taken(plan) -> list[tuple[str, str, str]]:
    return [(t.path, str(t.previous_owner), t.previous_source_id) for t in plan.taken_over_outputs]


# --------------------------------------------------------------------------- single owner


def _latest_old(env: Env, *, pipeline="reports", destination="latest-old", id="a", created=CREATED - HOUR,
                outputs=None, mode="replace"):
    outputs = outputs or {"report.md": b"old a"}
    return env.seed_single_owner(outputs, manifest=manifest_for(outputs, id=id, created=created),
                                 pipeline=pipeline, destination=destination, mode=mode, created_at=OLDER)


def test_default_mode_takes_over_same_pipeline_other_destination(env: Env):
    manifest = env.source({"report.md": REPORT}, id="b")
    _latest_old(env)
    plan = env.plan(manifest, destination="latest")
    assert plan.action == Action.REPLACE_TAKEOVER
    assert plan.reason == (
        'takeover permitted by takeover.mode same_pipeline: destination id "latest-old" does not match "latest"'
    )
    assert _taken(plan) == [("report.md", "reports/latest-old", "a")]
    assert plan.force is False
    env.publish_ok(manifest, destination="latest", expect=Action.REPLACE_TAKEOVER)
    doc = env.state()
    assert isinstance(doc, SingleOwnerState)
    assert (doc.pipeline_id, doc.destination_id, doc.manifest.id) == ("reports", "latest", "b")
    assert env.read("bundle/report.md") == REPORT
    # decision §6.6: root and per-path created_at follow replace_older (kept from the previous state)
    assert (doc.created_at, doc.updated_at, doc.published_at) == (OLDER, NOW, NOW)
    assert (doc.outputs[0].created_at, doc.outputs[0].updated_at) == (OLD, NOW)
    env.assert_consistent()


def test_same_source_mode_refuses_other_source_ids(env: Env):
    manifest = env.source({"report.md": REPORT}, id="b")
    _latest_old(env)
    plan = env.plan(manifest, destination="latest", takeover_mode="same_source")
    assert plan.error == 'fail_conflict: destination id "latest-old" does not match "latest"'
    forced = env.plan(manifest, destination="latest", takeover_mode="same_source",
                      transfer=TransferPolicy(on_conflict="replace"), force=True)
    assert (forced.action, forced.reason) == (
        Action.FORCE_REPLACE, 'destination id "latest-old" does not match "latest"'
    )
    assert forced.taken_over_outputs == ()


def test_never_mode_behaves_as_without_takeover(env: Env):
    manifest = env.source({"report.md": REPORT}, id="b")
    _latest_old(env)
    plan = env.plan(manifest, destination="latest", takeover_mode="never")
    assert plan.error == 'fail_conflict: destination id "latest-old" does not match "latest"'


def test_same_pipeline_refuses_another_pipeline_and_any_managed_takes_it(env: Env):
    manifest = env.source({"report.md": REPORT}, id="b")
    _latest_old(env, pipeline="other", destination="archive")
    plan = env.plan(manifest)
    assert plan.error == 'fail_conflict: pipeline id "other" does not match "reports"'
    plan = env.plan(manifest, takeover_mode="any_managed")
    assert plan.action == Action.REPLACE_TAKEOVER
    assert plan.reason == (
        'takeover permitted by takeover.mode any_managed: pipeline id "other" does not match "reports"'
    )
    assert _taken(plan) == [("report.md", "other/archive", "a")]


def test_same_source_takes_over_another_pipeline_with_the_same_id(env: Env):
    manifest = env.source({"report.md": REPORT})
    _latest_old(env, pipeline="other", destination="archive", id=manifest.id)
    plan = env.plan(manifest, takeover_mode="same_source")
    assert plan.action == Action.REPLACE_TAKEOVER
    env.publish_ok(manifest, takeover_mode="same_source", expect=Action.REPLACE_TAKEOVER)
    assert env.state().pipeline_id == "reports"


def test_identical_manifest_under_another_identity_is_taken_over(env: Env):
    manifest = env.source({"report.md": REPORT})
    env.seed_single_owner({"report.md": REPORT}, manifest=manifest, destination="latest-old")
    plan = env.plan(manifest, destination="latest")
    assert plan.action == Action.REPLACE_TAKEOVER


def test_permitted_takeover_of_a_newer_source_is_skipped(env: Env):
    manifest = env.source({"report.md": REPORT}, id="b")
    _latest_old(env, destination="archive", created=CREATED + HOUR)
    plan = env.plan(manifest)
    assert (plan.action, plan.reason) == (Action.SKIP_DESTINATION_NEWER, "destination source is newer than source")


def test_permitted_takeover_with_identical_created_is_a_conflict(env: Env):
    manifest = env.source({"report.md": REPORT}, id="b")
    _latest_old(env, destination="archive", created=CREATED)
    plan = env.plan(manifest)
    assert plan.error == "fail_conflict: destination source id differs from source"


def test_identity_takeover_guard_with_same_id_and_created(env: Env):
    manifest = env.source({"report.md": REPORT})
    _latest_old(env, destination="latest-old", id=manifest.id, created=CREATED)
    plan = env.plan(manifest, destination="latest")
    assert plan.error == "fail_conflict: destination source has same id and created time but different digest"


def test_takeover_needs_no_force_and_ignores_on_destination_older(env: Env):
    manifest = env.source({"report.md": REPORT}, id="b")
    _latest_old(env)
    plan = env.plan(manifest, destination="latest", transfer=TransferPolicy(on_destination_older="fail"))
    assert plan.action == Action.REPLACE_TAKEOVER


def test_cross_source_takeover_in_merge_mode_does_not_retain(env: Env):
    manifest = env.source({"report.md": REPORT}, id="b")
    _latest_old(env, destination="archive", outputs={"report.md": b"old", "old.md": b"o"})
    outcome = env.publish_ok(manifest, reconciliation_mode="merge", expect=Action.REPLACE_TAKEOVER)
    assert outcome.plan.merge_retention is False
    assert not env.exists("bundle/old.md")
    doc = env.state()
    assert [o.path for o in doc.outputs] == ["report.md"]
    assert doc.reconciliation_mode == "merge"
    env.assert_consistent()


def test_same_source_takeover_in_merge_mode_retains(env: Env):
    manifest = env.source({"report.md": REPORT})
    _latest_old(env, destination="latest-old", id=manifest.id, outputs={"report.md": b"old", "old.md": b"o"})
    outcome = env.publish_ok(manifest, destination="latest", reconciliation_mode="merge",
                             expect=Action.REPLACE_TAKEOVER)
    assert outcome.plan.merge_retention is True
    assert env.read("bundle/old.md") == b"o"
    doc = env.state()
    assert (doc.destination_id, [o.path for o in doc.outputs]) == ("latest", ["report.md", "old.md"])
    assert (doc.outputs[1].created_at, doc.outputs[1].updated_at) == (OLD, OLD)
    env.assert_consistent()


def test_single_owner_takeover_refuses_unmanaged_content(env: Env):
    manifest = env.source({"report.md": REPORT}, id="b")
    _latest_old(env, destination="archive")
    env.put("bundle/hand.txt", b"h")
    plan = env.plan(manifest)
    assert plan.error == "fail_unmanaged: destination bundle path bundle contains unmanaged content: hand.txt"


def test_takeover_never_applies_to_invalid_state(env: Env):
    manifest = env.source({"report.md": REPORT})
    env.put("bundle/report.md", b"x")
    env.put("bundle/.distributor.json", b'{"schema_version": 2}')
    for mode in ("same_pipeline", "same_source", "any_managed", "never"):
        plan = env.plan(manifest, takeover_mode=mode)
        assert plan.error == "fail_conflict: state pipeline_id is required"
        shared = env.plan(manifest, takeover_mode=mode, state_mode="shared_root")
        assert shared.error == "fail_conflict: state pipeline_id is required"


def test_takeover_never_applies_to_unmanaged_content(env: Env):
    manifest = env.source({"report.md": REPORT})
    env.put("bundle/report.md", b"x")
    plan = env.plan(manifest, takeover_mode="any_managed")
    assert plan.action == Action.FAIL_UNMANAGED


def test_takeover_never_crosses_state_modes(env: Env):
    manifest = env.source({"report.md": REPORT}, id="b")
    env.seed_shared_root([SharedOwner("reports", "archive", manifest_for({"r.md": b"r"}, id="a",
                                                                         created=CREATED - HOUR), {"r.md": b"r"})])
    plan = env.plan(manifest, takeover_mode="any_managed")
    assert plan.error == 'fail_conflict: destination state mode "shared_root" does not match "single_owner"'


def test_fixed_refinement_is_independent_of_takeover(env: Env):
    manifest = env.source({"report.md": REPORT}, bundle="new")
    env.seed_single_owner({"report.md": b"old"}, bundle="",
                          manifest=manifest_for({"report.md": b"old"}, id="older.source", created=CREATED - HOUR))
    for mode in ("same_source", "never", "same_pipeline", "any_managed"):
        plan = env.plan(manifest, bundle="new", path_mapping="fixed", takeover_mode=mode)
        assert (plan.action, plan.reason) == (
            Action.REPLACE_OLDER, "fixed destination source is older than selected source"
        )
        assert plan.taken_over_outputs == ()


def test_takeover_dry_run_writes_nothing(env: Env):
    manifest = env.source({"report.md": REPORT}, id="b")
    _latest_old(env)
    before = env.stats()
    outcome = env.publish(env.request(manifest, destination="latest"), dry_run=True)
    assert outcome.status == "planned"
    assert outcome.plan.action == Action.REPLACE_TAKEOVER
    assert env.stats() == before


# --------------------------------------------------------------------------- shared root


def _html_owner(env: Env, *, pipeline="reports", destination="html", created=CREATED - HOUR, id="reports.html",
                extra: dict | None = None):
    outputs = {"report.html": b"<p>old</p>", **(extra or {})}
    return SharedOwner(pipeline, destination, manifest_for(outputs, id=id, created=created), outputs)


def test_shared_root_path_takeover_within_the_pipeline(env: Env):
    manifest = env.source({"report.md": REPORT})
    env.seed_shared_root([_html_owner(env, extra={"keep.html": b"k"})])
    request = dict(state_mode="shared_root", publish_html=True, markdown_enabled=True)
    plan = env.plan(manifest, **request)
    assert plan.action == Action.REPLACE_TAKEOVER
    assert plan.reason == (
        "takeover permitted by takeover.mode same_pipeline: destination output path report.html is owned by "
        "reports/html"
    )
    assert _taken(plan) == [("report.html", "reports/html", "reports.html")]
    assert [o.path for o in plan.other_owner_outputs] == ["keep.html"]
    env.publish_ok(manifest, **request, expect=Action.REPLACE_TAKEOVER)
    doc = env.state()
    assert isinstance(doc, SharedRootState)
    owners = {o.path: str(o.scope) for o in doc.outputs}
    assert owners == {"keep.html": "reports/html", "report.md": "reports/archive", "report.html": "reports/archive"}
    assert [str(o.scope) for o in doc.owners] == ["reports/html", "reports/archive"]
    html = next(o for o in doc.outputs if o.path == "report.html")
    assert (html.created_at, html.updated_at, html.source_id) == (NOW, NOW, manifest.id)
    assert doc.owner(OwnerScope("reports", "html")).manifest.id == "reports.html"
    env.assert_consistent()


def test_owner_left_without_outputs_stays_recorded(env: Env):
    manifest = env.source({"report.md": REPORT})
    env.seed_shared_root([_html_owner(env)])
    env.publish_ok(manifest, state_mode="shared_root", publish_html=True, markdown_enabled=True,
                   expect=Action.REPLACE_TAKEOVER)
    doc = env.state()
    assert [str(o.scope) for o in doc.owners] == ["reports/html", "reports/archive"]
    assert all(o.scope == OwnerScope("reports", "archive") for o in doc.outputs)


def test_shared_root_path_takeover_refused_for_another_pipeline(env: Env):
    manifest = env.source({"report.md": REPORT})
    env.seed_shared_root([_html_owner(env, pipeline="other")])
    plan = env.plan(manifest, state_mode="shared_root", publish_html=True, markdown_enabled=True)
    assert plan.error == "fail_conflict: destination output path report.html is owned by other/html"


@pytest.mark.parametrize(
    ("mode", "owner_pipeline", "owner_source", "permitted"),
    [
        ("same_source", "other", "reports.example", True),
        ("same_source", "reports", "reports.html", False),
        ("any_managed", "other", "other.id", True),
        ("never", "reports", "reports.example", False),
    ],
)
def test_shared_root_path_takeover_permission_by_mode(env: Env, mode, owner_pipeline, owner_source, permitted):
    manifest = env.source({"report.md": REPORT})
    env.seed_shared_root([_html_owner(env, pipeline=owner_pipeline, id=owner_source)])
    plan = env.plan(manifest, state_mode="shared_root", publish_html=True, markdown_enabled=True, takeover_mode=mode)
    if permitted:
        assert plan.action == Action.REPLACE_TAKEOVER
    else:
        assert plan.error == f"fail_conflict: destination output path report.html is owned by {owner_pipeline}/html"


def test_shared_root_path_takeover_guard_refuses_a_newer_owner_source(env: Env):
    manifest = env.source({"report.md": REPORT})
    env.seed_shared_root([_html_owner(env, created=CREATED + HOUR)])
    plan = env.plan(manifest, state_mode="shared_root", publish_html=True, markdown_enabled=True)
    assert plan.error == (
        "fail_conflict: destination output path report.html is owned by reports/html and its source is newer "
        "than the current source"
    )


def test_shared_root_path_takeover_guard_compares_whole_seconds(env: Env):
    manifest = env.source({"report.md": REPORT}, created=CREATED.replace(microsecond=400000))
    env.seed_shared_root([_html_owner(env, created=CREATED)])
    plan = env.plan(manifest, state_mode="shared_root", publish_html=True, markdown_enabled=True)
    assert plan.action == Action.REPLACE_TAKEOVER


def test_shared_root_takeover_still_refuses_unmanaged_collisions(env: Env):
    manifest = env.source({"report.md": REPORT})
    env.seed_shared_root([_html_owner(env)])
    env.put("bundle/report.md", b"unmanaged")
    plan = env.plan(manifest, state_mode="shared_root", publish_html=True, markdown_enabled=True,
                    takeover_mode="any_managed")
    assert plan.error == (
        "fail_unmanaged: destination output path report.md exists but is not managed by destination state"
    )


def _own_record(env: Env, *, id="reports.old", created=CREATED - HOUR, outputs=None, mode="replace"):
    outputs = outputs or {"report.md": b"old", "old.md": b"o"}
    return SharedOwner("reports", "archive", manifest_for(outputs, id=id, created=created), outputs, mode=mode)


def test_shared_root_owner_record_takeover(env: Env):
    manifest = env.source({"report.md": REPORT})
    env.seed_shared_root([_own_record(env)])
    plan = env.plan(manifest, state_mode="shared_root")
    assert plan.action == Action.REPLACE_TAKEOVER
    assert plan.reason == "takeover permitted by takeover.mode same_pipeline: destination source id differs from source"
    assert [o.path for o in plan.owner_outputs_to_delete] == ["old.md"]
    for mode in ("same_source", "never"):
        refused = env.plan(manifest, state_mode="shared_root", takeover_mode=mode)
        assert refused.error == "fail_conflict: destination source id differs from source"


def test_shared_root_owner_record_takeover_guard(env: Env):
    manifest = env.source({"report.md": REPORT})
    env.seed_shared_root([_own_record(env, created=CREATED + HOUR)])
    plan = env.plan(manifest, state_mode="shared_root")
    assert (plan.action, plan.reason) == (Action.SKIP_DESTINATION_NEWER, "destination source is newer than source")


def test_shared_root_takeover_in_merge_mode_keeps_only_same_source_outputs(env: Env):
    """§6.6: the current owner's omitted outputs are retained under merge only when their
    source_id is the current source id; others are deleted."""
    manifest = env.source({"report.md": REPORT})
    owner = _own_record(env, id="reports.old", outputs={"report.md": b"old", "old.md": b"o"}, mode="merge")
    env.seed_shared_root([owner])
    outcome = env.publish_ok(manifest, state_mode="shared_root", reconciliation_mode="merge",
                             expect=Action.REPLACE_TAKEOVER)
    assert [o.path for o in outcome.plan.owner_outputs_to_delete] == ["old.md"]
    assert not env.exists("bundle/old.md")
    assert [o.path for o in env.state().outputs] == ["report.md"]
    env.assert_consistent()


def test_shared_root_path_takeover_in_merge_mode_retains_same_source_outputs(env: Env):
    manifest = env.source({"report.md": REPORT})
    # the current owner already published this source id earlier (older created) with keep.md
    mine = SharedOwner("reports", "archive", manifest_for({"keep.md": b"k"}, id=manifest.id, created=CREATED - HOUR),
                       {"keep.md": b"k"}, mode="merge")
    env.seed_shared_root([_html_owner(env), mine])
    outcome = env.publish_ok(manifest, state_mode="shared_root", reconciliation_mode="merge", publish_html=True,
                             markdown_enabled=True, expect=Action.REPLACE_TAKEOVER)
    assert [o.path for o in outcome.plan.retained_owner_outputs] == ["keep.md"]
    assert env.read("bundle/keep.md") == b"k"
    doc = env.state()
    assert {o.path: str(o.scope) for o in doc.outputs} == {
        "keep.md": "reports/archive", "report.md": "reports/archive", "report.html": "reports/archive"
    }
    env.assert_consistent()


def test_shared_root_takeover_dry_run_writes_nothing(env: Env):
    manifest = env.source({"report.md": REPORT})
    env.seed_shared_root([_html_owner(env)])
    before = env.stats()
    outcome = env.publish(env.request(manifest, state_mode="shared_root", publish_html=True, markdown_enabled=True),
                          dry_run=True)
    assert (outcome.status, outcome.plan.action) == ("planned", Action.REPLACE_TAKEOVER)
    assert env.stats() == before


def test_failed_shared_root_takeover_restores_the_other_owners_bytes(env: Env, hooked):
    """A2 / §6.6: a failed takeover never leaves new bytes under another owner's record."""
    from distributor_core.storage.errors import ErrorKind, StorageError

    manifest = env.source({"report.md": REPORT, "summary.txt": b"s"})
    env.seed_shared_root([_html_owner(env)])
    before = env.files()

    def hook(op, path, **kw):
        if op == "rename" and kw["dst"] == "bundle/report.html":
            hooked.hook = lambda *a, **k: None
            raise StorageError("rename", "local", path, ErrorKind.UNAVAILABLE, "injected")

    # fail the last rename into place: report.md and summary.txt are already in place by then
    hooked.hook = hook
    outcome = env.publish(env.request(manifest, dst=hooked, state_mode="shared_root", publish_html=True,
                                      markdown_enabled=True))
    assert outcome.status == "failed"
    assert outcome.plan.action == Action.REPLACE_TAKEOVER
    assert env.files() == before
    assert env.read("bundle/report.html") == b"<p>old</p>"
    env.assert_consistent()


def test_failed_single_owner_takeover_keeps_the_previous_owner(env: Env, hooked):
    from distributor_core.storage.errors import ErrorKind, StorageError

    manifest = env.source({"report.md": REPORT, "new.md": b"n"}, id="b")
    _latest_old(env, outputs={"report.md": b"old a", "old.md": b"o"})
    before = env.files()

    def hook(op, path, **kw):
        if op == "write" and path == "bundle/.distributor.json":
            raise StorageError("write", "local", path, ErrorKind.UNAVAILABLE, "injected")

    hooked.hook = hook
    outcome = env.publish(env.request(manifest, destination="latest", dst=hooked))
    assert outcome.status == "failed"
    assert env.files() == before
    assert env.state().destination_id == "latest-old"

"""``plan.decide`` with no storage at all: facts in, plan out (issue 16 item 1).

Every test states a destination as plain data — the state file's bytes (made by the real
``marshal_state``) and the set of paths present — and lets :func:`run` answer the fact requests
``decide`` returns from that data. The request sequence itself is asserted where it is part of
the contract (what a dry run reads, and in which order).
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest

from distributor_core import paths as lp
from distributor_core.bundle import Manifest, ManifestFile, bundle_digest, validate_manifest
from distributor_core.compare import Outcome
from distributor_core.plan import (
    FORCE_WALK_LIMIT,
    REPLACE_CHECK_SLACK,
    DestinationFacts,
    DestinationPolicy,
    FirstExisting,
    HasAny,
    LinkPolicy,
    ListFiles,
    Listing,
    Plan,
    PlanError,
    StateFacts,
    TransferPolicy,
    decide,
    markdown_sources,
    prepare,
    render_markdown,
)
from distributor_core.plan.model import Action
from distributor_core.plan.modes import ReconciliationMode, StateMode, TakeoverMode
from distributor_core.state import (
    OutputRecord,
    OwnerRecord,
    SharedOutputRecord,
    SharedRootState,
    SingleOwnerState,
    marshal_state,
)

CREATED = datetime(2026, 6, 4, 11, 55, tzinfo=UTC)
HOUR = timedelta(hours=1)
OLD = datetime(2026, 6, 1, 8, 0, tzinfo=UTC)
BUNDLE = "bundle"


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def manifest(files: dict[str, bytes], *, id: str = "reports.example", created: datetime = CREATED) -> Manifest:
    records = tuple(ManifestFile(p, _digest(d), len(d)) for p, d in files.items())
    return Manifest(schema_version=1, id=id, digest=bundle_digest(records), created=created, files=records)


SOURCE = validate_manifest(manifest({"report.md": b"# Report\n", "summary.txt": b"Summary\n"}))


def single_owner(
    recorded: Manifest, *, pipeline: str = "reports", destination: str = "archive", mode: str = "replace"
) -> bytes:
    outputs = tuple(OutputRecord(f.path, "source", f.path, f.sha256, f.size, OLD, OLD) for f in recorded.files)
    return marshal_state(
        SingleOwnerState(
            pipeline_id=pipeline,
            destination_id=destination,
            published_at=OLD,
            created_at=OLD,
            updated_at=OLD,
            reconciliation_mode=mode,
            manifest=recorded,
            outputs=outputs,
        )
    )


def shared_root(*owners: tuple[str, str, Manifest, str]) -> bytes:
    """Owners as (pipeline, destination, recorded manifest, reconciliation mode); each owns the
    recorded manifest's paths."""
    records, outputs = [], []
    for pipeline, destination, recorded, mode in owners:
        records.append(OwnerRecord(pipeline, destination, mode, recorded))
        for f in recorded.files:
            outputs.append(
                SharedOutputRecord(
                    f.path, "source", f.path, f.sha256, f.size, pipeline, destination,
                    recorded.id, recorded.digest, recorded.created, OLD, OLD,
                )
            )
    return marshal_state(SharedRootState(created_at=OLD, updated_at=OLD, owners=tuple(records), outputs=tuple(outputs)))


class Destination:
    """A destination as data: the state file's bytes and the bundle-relative paths present.
    ``answer`` is what ``execute.facts`` does against storage, done on this data."""

    def __init__(self, state: bytes | None = None, files: set[str] | frozenset[str] = frozenset()) -> None:
        self.state = state
        self.files = set(files)
        self.requests: list[object] = []

    def facts(self, publication) -> DestinationFacts:
        if self.state is None:
            return DestinationFacts(StateFacts.absent())
        return DestinationFacts(StateFacts.from_bytes(self.state, "rev-1", source_manifest=publication.manifest))

    def answer(self, request):
        self.requests.append(request)
        if isinstance(request, HasAny):
            return any(not lp.is_reserved_path(p) for p in self.files)
        if isinstance(request, ListFiles):
            visible = sorted(p for p in self.files if request.include_reserved or not lp.is_reserved_path(p))
            return Listing(tuple(visible[: request.limit]), truncated=len(visible) > request.limit)
        if isinstance(request, FirstExisting):
            return next((p for p in request.paths if p in self.files), None)
        raise AssertionError(request)


def run(destination: Destination, source: Manifest = SOURCE, *, policy: DestinationPolicy | None = None,
        pipeline: str = "reports", dest_id: str = "archive", force: bool = False, republish: bool = False,
        markdown: dict[str, bytes] | None = None) -> Plan:
    policy = policy or DestinationPolicy()
    generated = [
        render_markdown(record, (markdown or {})[record.path], policy, lambda data, path: b"<p>" + data + b"</p>")
        for record in markdown_sources(source.files, policy)
    ]
    publication = prepare(
        source, policy, pipeline_id=pipeline, destination_id=dest_id, source_bundle_path=BUNDLE,
        generated=generated, force=force, republish=republish,
    )
    facts = destination.facts(publication)
    for _ in range(10):
        result = decide(publication, facts)
        if isinstance(result, Plan):
            assert decide(publication, facts) == result  # deterministic
            return result
        facts = facts.with_answer(result, destination.answer(result))
    raise AssertionError("decide kept asking")


def shared(**kwargs) -> DestinationPolicy:
    return DestinationPolicy(state_mode="shared_root", **kwargs)


# --------------------------------------------------------------------------- no storage at all


def test_plan_package_imports_no_storage_or_shell_module():
    code = (
        "import sys, distributor_core.plan;"
        "bad = sorted(m for m in sys.modules if m.startswith(('distributor_core.storage', 'distributor_core.execute',"
        " 'distributor_core.server', 'distributor_core.app', 'distributor_core.cli', 'boto3', 'paramiko', 'fastapi',"
        " 'dagster')));"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_plan_is_frozen():
    plan = run(Destination())
    with pytest.raises(AttributeError):
        plan.action = Action.SKIP_SAME  # type: ignore[misc]


def test_answers_must_have_the_requested_type():
    facts = DestinationFacts(StateFacts.absent())
    with pytest.raises(TypeError):
        facts.with_answer(HasAny(BUNDLE), Listing(()))


# --------------------------------------------------------------------------- every action


def test_absent_state_asks_has_any_then_publishes_new():
    destination = Destination()
    plan = run(destination)
    assert destination.requests == [HasAny(BUNDLE)]
    assert (plan.action, plan.reason) == (Action.PUBLISH_NEW, "destination state is absent")
    assert [o.path for o in plan.outputs] == ["report.md", "summary.txt"]
    assert plan.state_revision == ""


def test_content_without_state_fails_unmanaged_and_force_lists_what_it_deletes():
    files = {"notes.txt", "report.md", "sub/.distributor.json", "sub/x.txt", ".distributor.lock"}
    plan = run(Destination(files=files))
    assert plan.action == Action.FAIL_UNMANAGED
    assert plan.error == "fail_unmanaged: destination has content but no distributor state"

    destination = Destination(files=files)
    forced = run(destination, force=True)
    assert destination.requests == [HasAny(BUNDLE), ListFiles(BUNDLE, FORCE_WALK_LIMIT, include_reserved=True)]
    assert forced.action == Action.FORCE_REPLACE and forced.force
    # planned paths are overwritten, not deleted; the lock stays; a nested bundle's state goes
    assert forced.deletes == ("notes.txt", "sub/.distributor.json", "sub/x.txt")


def test_force_refuses_a_bundle_path_beyond_the_walk_bound():
    publication = prepare(SOURCE, DestinationPolicy(), pipeline_id="reports", destination_id="archive",
                          source_bundle_path=BUNDLE, force=True)
    facts = DestinationFacts(StateFacts.absent()).with_answer(HasAny(BUNDLE), True)
    request = decide(publication, facts)
    assert request == ListFiles(BUNDLE, FORCE_WALK_LIMIT, include_reserved=True)
    facts = facts.with_answer(request, Listing(("a",), truncated=True))
    refusal = "holds more than 1000000 entries; forced replacement refuses to run"
    with pytest.raises(PlanError, match=re.escape(refusal)):
        decide(publication, facts)


def test_same_source_skips_with_no_further_request_and_republish_replaces():
    state = single_owner(SOURCE)
    destination = Destination(state, {"report.md", "summary.txt"})
    plan = run(destination)
    assert destination.requests == []
    assert (plan.action, plan.reason) == (Action.SKIP_SAME, "destination source manifest matches source")
    assert plan.state_revision == "rev-1"
    assert plan.existing_state is not None and plan.existing_state.manifest is SOURCE  # reused, not rebuilt

    again = Destination(state, {"report.md", "summary.txt"})
    republished = run(again, republish=True)
    assert (republished.action, republished.reason) == (Action.REPLACE_OLDER, "republish of same source requested")
    assert again.requests == [ListFiles(BUNDLE, limit=2 + REPLACE_CHECK_SLACK)]


def test_older_destination_replace_mode_checks_for_unmanaged_content_c1():
    older = manifest({"report.md": b"old", "old.txt": b"x"}, created=CREATED - HOUR)
    clean = run(Destination(single_owner(older), {"report.md", "old.txt"}))
    assert (clean.action, clean.reason) == (Action.REPLACE_OLDER, "destination source is older than source")
    assert not clean.merge_retention

    dirty = run(Destination(single_owner(older), {"report.md", "old.txt", "stray.bin"}))
    assert dirty.action == Action.FAIL_UNMANAGED
    assert dirty.reason == "destination bundle path bundle contains unmanaged content: stray.bin"


def test_older_destination_merge_mode_stats_unrecorded_planned_paths_c1():
    older = manifest({"report.md": b"old"}, created=CREATED - HOUR)
    policy = DestinationPolicy(reconciliation_mode="merge")
    destination = Destination(single_owner(older, mode="merge"), {"report.md", "elsewhere.txt"})
    plan = run(destination, policy=policy)
    assert destination.requests == [FirstExisting(BUNDLE, ("summary.txt",))]
    assert plan.action == Action.REPLACE_OLDER and plan.merge_retention

    colliding = Destination(single_owner(older, mode="merge"), {"report.md", "summary.txt"})
    failed = run(colliding, policy=policy)
    assert failed.action == Action.FAIL_UNMANAGED
    assert failed.reason == "destination output path summary.txt exists but is not managed by destination state"


def test_newer_destination_by_transfer_policy():
    newer = manifest({"report.md": b"new"}, created=CREATED + HOUR)
    state = single_owner(newer)
    assert run(Destination(state)).action == Action.SKIP_DESTINATION_NEWER
    failing = run(Destination(state), policy=DestinationPolicy(transfer=TransferPolicy(on_destination_newer="fail")))
    assert failing.error == "fail_conflict: destination is newer and transfer.on_destination_newer is fail"
    replace = DestinationPolicy(transfer=TransferPolicy(on_destination_newer="replace"))
    assert run(Destination(state), policy=replace).error == (
        "fail_conflict: destination is newer and replacement requires --force"
    )
    assert run(Destination(state), policy=replace, force=True).action == Action.FORCE_REPLACE


def test_invalid_state_is_a_conflict_with_the_parse_reason():
    plan = run(Destination(b"{}", {"report.md"}))
    assert plan.comparison.outcome == Outcome.INVALID_STATE
    assert plan.error == "fail_conflict: state schema_version is required"
    assert plan.existing_state is None


# --------------------------------------------------------------------------- takeover modes


@pytest.mark.parametrize(
    ("mode", "recorded_pipeline", "recorded_id", "expected"),
    [
        ("same_pipeline", "reports", "other.id", Action.REPLACE_TAKEOVER),
        ("same_pipeline", "other", "reports.example", Action.FAIL_CONFLICT),
        ("same_source", "other", "reports.example", Action.REPLACE_TAKEOVER),
        ("same_source", "reports", "other.id", Action.FAIL_CONFLICT),
        ("any_managed", "other", "other.id", Action.REPLACE_TAKEOVER),
        ("never", "reports", "other.id", Action.FAIL_CONFLICT),
    ],
)
def test_single_owner_takeover_modes(mode, recorded_pipeline, recorded_id, expected):
    recorded = manifest({"report.md": b"old"}, id=recorded_id, created=CREATED - HOUR)
    state = single_owner(recorded, pipeline=recorded_pipeline, destination="elsewhere")
    plan = run(Destination(state, {"report.md"}), policy=DestinationPolicy(takeover_mode=mode))
    assert plan.action == expected
    if expected == Action.REPLACE_TAKEOVER:
        assert plan.reason.startswith(f"takeover permitted by takeover.mode {mode}: ")
        assert [(t.path, str(t.previous_owner), t.previous_source_id) for t in plan.taken_over_outputs] == [
            ("report.md", f"{recorded_pipeline}/elsewhere", recorded_id)
        ]


def test_takeover_ordering_guard_keeps_a_newer_publication():
    recorded = manifest({"report.md": b"new"}, id="other.id", created=CREATED + HOUR)
    plan = run(Destination(single_owner(recorded), {"report.md"}))
    assert (plan.action, plan.reason) == (Action.SKIP_DESTINATION_NEWER, "destination source is newer than source")


def test_same_source_takeover_in_merge_mode_retains_only_same_source_outputs():
    recorded = manifest({"report.md": b"old", "kept.txt": b"k"}, created=CREATED - HOUR)
    state = single_owner(recorded, destination="elsewhere", mode="merge")
    policy = DestinationPolicy(reconciliation_mode="merge", takeover_mode="same_source")
    plan = run(Destination(state, {"report.md", "kept.txt"}), policy=policy)
    assert plan.action == Action.REPLACE_TAKEOVER and plan.merge_retention


# --------------------------------------------------------------------------- shared root


def test_shared_root_partitions_replace_and_merge():
    mine = manifest({"report.md": b"old", "old.md": b"o"}, created=CREATED - HOUR)
    theirs = manifest({"other/report.md": b"x"}, id="other.id")
    for mode, retained, deleted in (("replace", [], ["old.md"]), ("merge", ["old.md"], [])):
        state = shared_root(("reports", "archive", mine, mode), ("other", "archive", theirs, "replace"))
        source = manifest({"report.md": b"# Report\n"})
        destination = Destination(state, {"report.md", "old.md", "other/report.md"})
        plan = run(destination, source, policy=shared(reconciliation_mode=mode))
        assert plan.action == Action.REPLACE_OLDER
        assert [r.path for r in plan.retained_owner_outputs] == retained
        assert [r.path for r in plan.owner_outputs_to_delete] == deleted
        assert [r.path for r in plan.other_owner_outputs] == ["other/report.md"]
        assert [o.path for o in plan.owner_outputs_to_write] == ["report.md"]
        assert destination.requests == []  # every planned path is recorded: nothing to stat


def test_shared_root_absent_owner_publishes_new_and_stats_unmanaged_paths():
    theirs = manifest({"other/report.md": b"x"}, id="other.id")
    state = shared_root(("other", "archive", theirs, "replace"))
    destination = Destination(state, {"other/report.md"})
    plan = run(destination, policy=shared())
    assert (plan.action, plan.reason) == (Action.PUBLISH_NEW, "destination owner reports/archive is absent")
    assert destination.requests == [FirstExisting(BUNDLE, ("report.md", "summary.txt"))]

    colliding = run(Destination(state, {"other/report.md", "summary.txt"}), policy=shared())
    assert colliding.error == (
        "fail_unmanaged: destination output path summary.txt exists but is not managed by destination state"
    )


def test_shared_root_path_owned_by_another_owner_conflicts_or_is_taken_over():
    theirs = manifest({"report.md": b"x"}, id="other.id", created=CREATED - HOUR)
    state = shared_root(("reports", "publisher", theirs, "replace"))
    never = run(Destination(state, {"report.md"}), policy=shared(takeover_mode=TakeoverMode.NEVER))
    assert never.error == "fail_conflict: destination output path report.md is owned by reports/publisher"

    taken = run(Destination(state, {"report.md"}), policy=shared())
    assert taken.action == Action.REPLACE_TAKEOVER
    assert taken.reason == (
        "takeover permitted by takeover.mode same_pipeline: destination output path report.md is owned by "
        "reports/publisher"
    )
    assert [(t.path, str(t.previous_owner)) for t in taken.taken_over_outputs] == [("report.md", "reports/publisher")]
    assert taken.other_owner_outputs == ()


def test_shared_root_path_takeover_guard_refuses_a_newer_source():
    theirs = manifest({"report.md": b"x"}, id="other.id", created=CREATED + HOUR)
    state = shared_root(("reports", "publisher", theirs, "replace"))
    plan = run(Destination(state, {"report.md"}), policy=shared())
    assert plan.error == (
        "fail_conflict: destination output path report.md is owned by reports/publisher and its source is newer "
        "than the current source"
    )


def test_shared_root_owner_record_takeover_follows_the_same_rule():
    mine = manifest({"report.md": b"old"}, id="older.id", created=CREATED - HOUR)
    state = shared_root(("reports", "archive", mine, "replace"))
    assert run(Destination(state, {"report.md"}), policy=shared()).action == Action.REPLACE_TAKEOVER
    refused = run(Destination(state, {"report.md"}), policy=shared(takeover_mode="same_source"))
    assert refused.error == "fail_conflict: destination source id differs from source"


def test_shared_root_force_needs_no_ownership_checks_and_deletes_other_owners_outputs():
    mine = manifest({"report.md": b"old"}, id="older.id", created=CREATED - HOUR)
    theirs = manifest({"other/report.md": b"x"}, id="other.id")
    state = shared_root(("reports", "archive", mine, "replace"), ("other", "archive", theirs, "replace"))
    destination = Destination(state, {"report.md", "other/report.md", "stray.txt", ".distributor.json"})
    policy = shared(takeover_mode="never", transfer=TransferPolicy(on_conflict="replace"))
    plan = run(destination, policy=policy, force=True)
    assert (plan.action, plan.reason) == (Action.FORCE_REPLACE, "destination source id differs from source")
    assert destination.requests == [ListFiles(BUNDLE, FORCE_WALK_LIMIT, include_reserved=True)]
    assert plan.deletes == ("other/report.md", "stray.txt")
    assert plan.other_owner_outputs == () and plan.owner_outputs_to_delete == ()


# --------------------------------------------------------------------------- outputs, links, modes


def test_html_outputs_come_from_the_bytes_handed_in():
    policy = DestinationPolicy(publish_html=True, markdown_enabled=True,
                               links=LinkPolicy("https://example.com/reports"))
    plan = run(Destination(), policy=policy, markdown={"report.md": b"# Report\n"})
    assert [(o.path, o.kind) for o in plan.outputs] == [
        ("report.md", "source"), ("summary.txt", "source"), ("report.html", "generated")
    ]
    assert plan.outputs[-1].content == b"<p># Report\n</p>"
    assert plan.primary_url == "https://example.com/reports/bundle/report.html"
    with pytest.raises(PlanError, match=re.escape("source file report.md changed after validation")):
        run(Destination(), policy=policy, markdown={"report.md": b"changed"})


def test_modes_are_enums_and_still_their_strings():
    plan = run(Destination(), policy=DestinationPolicy(state_mode="", reconciliation_mode="merge"))
    assert plan.state_mode is StateMode.SINGLE_OWNER and plan.state_mode == "single_owner"
    assert plan.reconciliation_mode is ReconciliationMode.MERGE and f"{plan.reconciliation_mode}" == "merge"
    refusal = "takeover.mode must be same_pipeline, same_source, any_managed or never"
    with pytest.raises(PlanError, match=re.escape(refusal)):
        run(Destination(), policy=DestinationPolicy(takeover_mode="sometimes"))

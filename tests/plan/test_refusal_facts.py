"""A refused plan says why as facts (issue 39 item 2): the kind of obstacle, the path and the owner.
The reason is worded from them, and the operator's refusal (root, paths, remedy) is built from
them too, never by reading the reason back: a path whose name reads like the reason's own words
still names the right file and owner."""

from __future__ import annotations

from pathlib import Path

from distributor_core.app import refusal
from distributor_core.config import LocalBackend
from distributor_core.plan import DestinationPolicy
from distributor_core.plan.model import Action, Blocker, Obstacle
from distributor_core.plan.modes import TakeoverMode
from distributor_core.state import OwnerScope
from tests.plan.test_decide import (
    BUNDLE,
    CREATED,
    HOUR,
    SOURCE,
    Destination,
    manifest,
    run,
    shared,
    shared_root,
    single_owner,
)

ROOT = LocalBackend(path="out", resolved_path=Path("/srv/out"))
#: a file name that holds the words the reason uses
TRICKY = "notes is owned by me.txt"


def test_an_owned_path_is_a_fact_and_its_refusal_names_the_path_and_owner() -> None:
    source = manifest({TRICKY: b"mine\n"})
    theirs = manifest({TRICKY: b"theirs\n"}, id="other.id", created=CREATED - HOUR)
    state = shared_root(("reports", "publisher", theirs, "replace"))
    plan = run(Destination(state, {TRICKY}), source, policy=shared(takeover_mode=TakeoverMode.NEVER))
    assert plan.action == Action.FAIL_CONFLICT
    assert plan.obstacle == Obstacle(Blocker.OWNED_PATH, TRICKY, OwnerScope("reports", "publisher"))
    assert plan.reason == f"destination output path {TRICKY} is owned by reports/publisher"
    found = refusal.for_plan(plan, ROOT)
    assert found is not None and found.failure == refusal.FOREIGN_OWNER
    assert found.paths == (f"/srv/out/{BUNDLE}/{TRICKY}",)
    assert "this is reports/publisher's publication" in found.remedy


def test_a_newer_owner_source_is_the_same_obstacle_worded_with_its_cause() -> None:
    theirs = manifest({"report.md": b"x"}, id="other.id", created=CREATED + HOUR)
    plan = run(Destination(shared_root(("reports", "publisher", theirs, "replace")), {"report.md"}), policy=shared())
    assert plan.obstacle == Obstacle(Blocker.OWNED_PATH, "report.md", OwnerScope("reports", "publisher"),
                                     source_newer=True)
    assert plan.reason.endswith(" and its source is newer than the current source")


def test_unmanaged_paths_are_facts_and_their_refusal_names_them() -> None:
    state = single_owner(SOURCE, mode="merge")
    source = manifest({"report.md": b"# new\n", TRICKY: b"x"}, created=CREATED + HOUR)
    plan = run(Destination(state, {"report.md", "summary.txt", TRICKY}), source,
               policy=DestinationPolicy(reconciliation_mode="merge"))
    assert plan.action == Action.FAIL_UNMANAGED
    assert plan.obstacle == Obstacle(Blocker.UNMANAGED_PATH, TRICKY)
    found = refusal.for_plan(plan, ROOT)
    assert found is not None and found.paths == (f"/srv/out/{BUNDLE}/{TRICKY}",)

    replace = run(Destination(single_owner(SOURCE), {"report.md", "summary.txt", "stray.txt"}),
                  manifest({"report.md": b"# new\n", "summary.txt": b"Summary\n"}, created=CREATED + HOUR))
    assert replace.obstacle == Obstacle(Blocker.UNMANAGED_CONTENT, "stray.txt")
    assert replace.reason == f"destination bundle path {BUNDLE} contains unmanaged content: stray.txt"


def test_plans_that_are_not_refused_carry_no_obstacle() -> None:
    assert run(Destination()).obstacle is None
    taken = run(Destination(shared_root(("reports", "publisher", manifest({"report.md": b"x"}, id="o"), "replace")),
                            {"report.md"}), policy=shared())
    assert taken.action == Action.REPLACE_TAKEOVER and taken.obstacle is None

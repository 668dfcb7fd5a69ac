"""Pure output helpers: lookups, removal (§7.1), projection and owner combination (§5.5, §5.6)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import msgspec
import pytest

from distributor_core.state import (
    OwnerRecord,
    OwnerScope,
    SharedRootState,
    SingleOwnerState,
    StateError,
    current_publication_outputs,
    find_output,
    managed_paths,
    marshal_state,
    merge_output_records,
    merge_owner_outputs,
    output_owner,
    outputs_of,
    owned_paths,
    parse_single_owner,
    project_outputs,
    project_shared_outputs,
    remove_missing_outputs,
    remove_outputs,
    replace_owner_outputs,
    upsert_owner,
    validate_shared_root,
    validate_single_owner,
)
from tests.state.fixtures import (
    ARCHIVE,
    HTML,
    MANIFEST,
    OTHER_DIGEST,
    REPORT,
    SINGLE_OWNER_TEXT,
    SUMMARY,
    T,
    hours,
    make_manifest,
    output,
    shared_output,
    shared_root,
    single_owner,
)

NOW = datetime(2026, 6, 8, 12, 0, tzinfo=UTC)


def _with_summary() -> SingleOwnerState:
    state = parse_single_owner(SINGLE_OWNER_TEXT.encode())
    return msgspec.structs.replace(state, outputs=(*state.outputs, output("summary.txt", sha256=OTHER_DIGEST, size=10)))


class TestLookups:
    def test_single_owner(self) -> None:
        state = _with_summary()
        assert managed_paths(state) == ("report.md", "summary.txt")
        assert owned_paths(state) == ("report.md", "summary.txt")
        assert owned_paths(state, ARCHIVE) == ("report.md", "summary.txt")
        assert outputs_of(state, ARCHIVE) == state.outputs
        assert outputs_of(state, OwnerScope("other", "archive")) == ()
        assert outputs_of(state, OwnerScope("reports", "html")) == ()
        found = find_output(state, "summary.txt")
        assert found is not None and found.path == "summary.txt"
        assert find_output(state, "missing.txt") is None

    def test_shared_root(self) -> None:
        state = shared_root()
        assert [o.path for o in outputs_of(state, HTML)] == ["report.html"]
        assert outputs_of(state, OwnerScope("missing", "archive")) == ()
        assert output_owner(state, "report.html") == HTML
        assert output_owner(state, "nope") is None
        assert state.owner(ARCHIVE) is not None and state.owner(OwnerScope("x", "y")) is None

    def test_scope_text(self) -> None:
        assert str(ARCHIVE) == "reports/archive"
        assert ARCHIVE.to_dict() == {"pipeline_id": "reports", "destination_id": "archive"}
        assert single_owner().scope == ARCHIVE and shared_root().outputs[1].scope == HTML

    def test_not_a_document(self) -> None:
        with pytest.raises(StateError, match="destination state document is empty"):
            managed_paths(None)  # type: ignore[arg-type]


class TestRemoveMissingOutputs:
    def test_go_case(self) -> None:
        state = _with_summary()
        updated, changed = remove_missing_outputs(state, ["summary.txt"], now=NOW)
        assert changed is True
        assert managed_paths(updated) == ("report.md",)

        unchanged, changed = remove_missing_outputs(updated, ["missing.txt"], now=NOW)
        assert changed is False
        assert managed_paths(unchanged) == ("report.md",)
        assert unchanged is updated

    def test_only_updated_at_changes(self) -> None:
        state = _with_summary()
        updated, _ = remove_missing_outputs(state, ["summary.txt"], now=NOW)
        assert isinstance(updated, SingleOwnerState)
        assert updated.updated_at == NOW
        assert (updated.published_at, updated.created_at) == (state.published_at, state.created_at)
        assert updated.outputs[0] == state.outputs[0]
        assert msgspec.structs.replace(updated, updated_at=state.updated_at, outputs=state.outputs) == state
        validate_single_owner(updated)
        assert state.updated_at == T  # input untouched

    def test_now_is_truncated_to_whole_seconds(self) -> None:
        updated, _ = remove_missing_outputs(_with_summary(), ["summary.txt"], now=NOW.replace(microsecond=999))
        assert updated.updated_at == NOW

    def test_empty_missing_list_returns_input(self) -> None:
        state = _with_summary()
        same, changed = remove_missing_outputs(state, [], now=NOW)
        assert same is state and changed is False

    def test_removing_everything_leaves_valid_empty_outputs(self) -> None:
        updated, changed = remove_missing_outputs(_with_summary(), ["report.md", "summary.txt"], now=NOW)
        assert changed and updated.outputs == ()
        assert b'"outputs": []' in marshal_state(updated)

    def test_single_owner_ignores_scope_and_all_owners(self) -> None:
        state = _with_summary()
        scoped, changed = remove_missing_outputs(state, ["summary.txt"], scope=HTML, now=NOW)
        assert changed and managed_paths(scoped) == ("report.md",)
        every, changed = remove_missing_outputs(state, ["summary.txt"], all_owners=True, now=NOW)
        assert changed and managed_paths(every) == ("report.md",)

    def test_shared_root_owner_scope(self) -> None:
        state = shared_root()
        updated, changed = remove_missing_outputs(state, ["report.md", "report.html"], scope=ARCHIVE, now=NOW)
        assert changed is True
        assert isinstance(updated, SharedRootState)
        assert managed_paths(updated) == ("report.html",)
        assert output_owner(updated, "report.html") == HTML
        assert updated.owners == state.owners
        assert updated.updated_at == NOW and updated.created_at == T
        validate_shared_root(updated)

    def test_shared_root_all_owners(self) -> None:
        state = shared_root()
        updated, changed = remove_missing_outputs(state, ["report.md", "report.html"], all_owners=True, now=NOW)
        assert changed is True
        assert managed_paths(updated) == ()
        assert isinstance(updated, SharedRootState)
        assert [owner.scope for owner in updated.owners] == [ARCHIVE, HTML]  # owners kept without outputs
        validate_shared_root(updated)

    def test_shared_root_scope_without_matching_records_is_unchanged(self) -> None:
        state = shared_root()
        same, changed = remove_missing_outputs(state, ["report.html"], scope=ARCHIVE, now=NOW)
        assert same is state and changed is False

    def test_shared_root_needs_a_scope(self) -> None:
        with pytest.raises(StateError, match="owner scope is required"):
            remove_missing_outputs(shared_root(), ["report.md"], now=NOW)


class TestRemoveOutputs:
    def test_single_owner(self) -> None:
        updated, changed = remove_outputs(_with_summary(), ["report.md"], scope=ARCHIVE, now=NOW)
        assert changed and managed_paths(updated) == ("summary.txt",) and updated.updated_at == NOW

    def test_shared_root_only_touches_the_scope(self) -> None:
        state = shared_root()
        same, changed = remove_outputs(state, ["report.html"], scope=ARCHIVE, now=NOW)
        assert same is state and not changed
        updated, changed = remove_outputs(state, ["report.html", "report.md"], scope=HTML, now=NOW)
        assert changed and managed_paths(updated) == ("report.md",)


@dataclasses.dataclass(frozen=True)
class _Planned:
    path: str
    kind: str
    source_path: str
    transform: str
    url: str
    sha256: str
    size: int


def planned(path: str, **changes: object) -> _Planned:
    values: dict[str, object] = {
        "path": path,
        "kind": "source",
        "source_path": path,
        "transform": "",
        "url": "",
        "sha256": OTHER_DIGEST,
        "size": 3,
    }
    values.update(changes)
    return _Planned(**values)


class TestSingleOwnerProjection:
    def test_go_output_helpers(self) -> None:
        retained = (output("old.md", updated_at=T), output("report.md", updated_at=T))
        later = T + hours(1)
        projected = project_outputs([planned("report.md"), planned("new.md")], retained, now=later)
        report = next(o for o in projected if o.path == "report.md")
        assert report.created_at == T and report.updated_at == later
        new = next(o for o in projected if o.path == "new.md")
        assert new.created_at == later and new.updated_at == later
        merged = merge_output_records(retained, projected)
        assert [o.path for o in merged] == ["old.md", "report.md", "new.md"]
        assert merged[1] == report

    def test_projection_copies_planned_fields(self) -> None:
        (record,) = project_outputs(
            [planned("r.html", kind="generated", source_path="r.md", transform="markdown_to_html", url="https://x/r")],
            (),
            now=NOW,
        )
        assert (record.kind, record.source_path, record.transform, record.url, record.size) == (
            "generated",
            "r.md",
            "markdown_to_html",
            "https://x/r",
            3,
        )

    def test_merge_rejects_duplicates(self) -> None:
        with pytest.raises(StateError, match=r'^state output path "a.txt" is duplicated$'):
            merge_output_records((output("a.txt"), output("a.txt")), ())
        with pytest.raises(StateError, match=r'^state output path "b.txt" is duplicated$'):
            merge_output_records((), (output("b.txt"), output("b.txt")))


class TestSharedRootCombination:
    def test_go_project_and_merge_owner_outputs(self) -> None:
        state = shared_root()
        owner = state.owner(ARCHIVE)
        assert owner is not None
        now = datetime(2026, 5, 30, 12, 30, tzinfo=UTC)
        records = project_shared_outputs(
            [
                planned("report.md", sha256=REPORT.sha256, size=REPORT.size),
                planned("summary.txt", sha256=SUMMARY.sha256, size=SUMMARY.size),
            ],
            state.outputs,
            scope=ARCHIVE,
            manifest=MANIFEST,
            now=now,
        )
        merged = merge_owner_outputs(state, owner, records)
        assert managed_paths(merged) == ("report.md", "report.html", "summary.txt")
        assert merged.outputs[0].created_at == T  # preserved
        assert merged.outputs[0].updated_at == now
        validate_shared_root(merged)

        replaced = replace_owner_outputs(state, owner, records)
        assert managed_paths(replaced) == ("report.html", "report.md", "summary.txt")
        validate_shared_root(replaced)

    def test_projection_uses_manifest_identity_and_only_own_created_at(self) -> None:
        state = shared_root()
        newer = make_manifest(created=T + hours(1))
        records = project_shared_outputs(
            [planned("report.html"), planned("report.md")], state.outputs, scope=ARCHIVE, manifest=newer, now=NOW
        )
        html, md = records
        assert html.created_at == NOW  # recorded under another owner: not inherited
        assert md.created_at == T
        assert {(r.source_id, r.source_digest, r.source_created) for r in records} == {
            (newer.id, newer.digest, newer.created)
        }
        assert {r.scope for r in records} == {ARCHIVE}

    def test_replace_keeps_other_owners_in_order_and_upserts_owner(self) -> None:
        state = shared_root()
        new_owner = OwnerRecord("reports", "archive", "merge", make_manifest(created=T + hours(2)))
        replaced = replace_owner_outputs(state, new_owner, [shared_output("x.txt", ARCHIVE, updated_at=NOW)])
        assert replaced.owners == (new_owner, state.owners[1])  # in place, links dropped
        assert managed_paths(replaced) == ("report.html", "x.txt")
        assert replaced.updated_at == state.updated_at  # the executor stamps the root

    def test_new_owner_is_appended(self) -> None:
        state = shared_root()
        newcomer = OwnerRecord("docs", "site", "replace", MANIFEST)
        scope = OwnerScope("docs", "site")
        result = merge_owner_outputs(state, newcomer, [shared_output("docs.txt", scope)])
        assert [o.scope for o in result.owners] == [ARCHIVE, HTML, scope]
        assert managed_paths(result) == ("report.md", "report.html", "docs.txt")
        validate_shared_root(result)

    def test_rejects_a_path_owned_by_another_owner(self) -> None:
        state = shared_root()
        owner = state.owners[0]
        records = [shared_output("report.html", ARCHIVE)]
        for combine in (merge_owner_outputs, replace_owner_outputs):
            with pytest.raises(StateError, match=r'^state output path "report.html" is owned by reports/html$'):
                combine(state, owner, records)

    def test_rejects_records_of_another_scope(self) -> None:
        state = shared_root()
        with pytest.raises(
            StateError, match=r'^state output path "new.txt" is owned by reports/html, not reports/archive$'
        ):
            replace_owner_outputs(state, state.owners[0], [shared_output("new.txt", HTML)])

    def test_rejects_duplicate_planned_paths(self) -> None:
        state = shared_root()
        with pytest.raises(StateError, match=r'^state output path "new.txt" is duplicated$'):
            merge_owner_outputs(state, state.owners[0], [shared_output("new.txt", ARCHIVE)] * 2)

    def test_upsert_owner(self) -> None:
        owners = shared_root().owners
        changed = OwnerRecord("reports", "html", "replace", MANIFEST, "https://x.example/")
        assert upsert_owner(owners, changed) == (owners[0], changed)
        extra = OwnerRecord("a", "b", "merge", MANIFEST)
        assert upsert_owner(owners, extra) == (*owners, extra)


class TestCurrentPublicationOutputs:
    def test_single_owner_uses_published_at(self) -> None:
        published = T + hours(5)
        state = single_owner(
            published_at=published,
            updated_at=published,
            outputs=(output("kept.txt", T), output("new.txt", published), output("rewritten.txt", published)),
        )
        assert [o.path for o in current_publication_outputs(state, ARCHIVE)] == ["new.txt", "rewritten.txt"]
        assert current_publication_outputs(state, HTML) == ()

    def test_shared_root_uses_the_owner_manifest_identity(self) -> None:
        base = shared_root()
        older = make_manifest("older.source", created=T - hours(1))
        outputs = (
            *base.outputs,
            shared_output("retained.txt", ARCHIVE, source_id=older.id, source_digest=older.digest),
        )
        state = msgspec.structs.replace(base, outputs=outputs)
        assert [o.path for o in current_publication_outputs(state, ARCHIVE)] == ["report.md"]
        assert [o.path for o in current_publication_outputs(state, HTML)] == ["report.html"]
        assert current_publication_outputs(state, OwnerScope("missing", "x")) == ()

"""Shared-root state parsing (core-semantics §2.5, §2.6, §2.8; Go internal/state/shared_root_test.go)."""

from __future__ import annotations

from typing import Any

import pytest

from distributor_core.state import (
    SharedRootState,
    managed_paths,
    marshal_state,
    owned_paths,
    parse_shared_root,
    parse_state_document,
    path_ownership_conflict,
)
from distributor_core.timefmt import format_seconds
from tests.state.fixtures import ARCHIVE, HTML, MANIFEST, SHARED_ROOT_TEXT, T, shared_root
from tests.state.helpers import expect_error, expect_error_prefix, mutate


class TestParseSharedRootState:
    def test_fixture(self) -> None:
        state = parse_shared_root(SHARED_ROOT_TEXT.encode())
        assert isinstance(state, SharedRootState)
        assert state.schema_version == 3
        assert state.state_mode == "shared_root"
        assert format_seconds(state.created_at) == "2026-05-30T11:12:00Z"
        assert len(state.owners) == 2
        assert len(state.outputs) == 2
        owner = state.owner(ARCHIVE)
        assert owner is not None
        assert owner.manifest.id == MANIFEST.id
        assert owner.primary_url == "https://reports.example.com/archive/report.md"
        html = state.owner(HTML)
        assert html is not None and html.primary_url == "" and html.reconciliation_mode == "merge"
        assert state == shared_root()

    def test_owner_helpers(self) -> None:
        state = parse_shared_root(SHARED_ROOT_TEXT.encode())
        assert owned_paths(state, ARCHIVE) == ("report.md",)
        assert owned_paths(state, HTML) == ("report.html",)
        assert managed_paths(state) == ("report.md", "report.html")
        assert owned_paths(state) == ("report.md", "report.html")
        assert path_ownership_conflict(state, ARCHIVE, ["report.md", "report.html"]) == ("report.html", HTML)
        assert path_ownership_conflict(state, ARCHIVE, ["report.md", "new.txt"]) is None

    def test_output_scope_and_identity(self) -> None:
        html = parse_shared_root(SHARED_ROOT_TEXT.encode()).outputs[1]
        assert html.scope == HTML
        assert (html.kind, html.transform) == ("generated", "markdown_to_html")
        assert (html.source_id, html.source_digest, html.source_created) == (MANIFEST.id, MANIFEST.digest, T)

    def test_empty_owners_and_outputs_are_valid(self) -> None:
        state = parse_shared_root(mutate(SHARED_ROOT_TEXT, lambda obj: obj.update(owners=[], outputs=[])))
        assert state.owners == () and state.outputs == ()

    def test_owner_without_outputs_is_valid(self) -> None:
        state = parse_shared_root(mutate(SHARED_ROOT_TEXT, lambda obj: obj["outputs"].pop()))
        assert len(state.owners) == 2 and owned_paths(state, HTML) == ()

    def test_output_source_id_need_not_match_owner_manifest(self) -> None:
        data = mutate(SHARED_ROOT_TEXT, lambda obj: obj["outputs"][0].update(source_id="older.source"))
        assert parse_shared_root(data).outputs[0].source_id == "older.source"

    def test_marshal_normalizes_timestamps(self) -> None:
        text = SHARED_ROOT_TEXT.replace("2026-05-30T11:12:00Z", "2026-05-30T13:12:00+02:00")
        assert "+02:00" in text
        data = marshal_state(parse_shared_root(text.encode())).decode()
        for key in ("created_at", "updated_at", "source_created"):
            assert f'"{key}": "2026-05-30T11:12:00Z"' in data
        assert "+02:00" not in data


class TestParseSharedRootRejectsInvalidMetadata:
    """The Go table test, each case with its exact message."""

    @pytest.mark.parametrize(
        ("change", "message"),
        [
            (lambda obj: obj.update(schema_version=2), "state schema_version must be 3"),
            (lambda obj: obj.update(state={"mode": "single_owner"}), "state state.mode must be shared_root"),
            (
                lambda obj: obj["owners"][1].update(destination_id="archive"),
                "state owners[1] duplicates owner reports/archive",
            ),
            (
                lambda obj: obj["outputs"][1].update(destination_id="missing"),
                "state outputs[1] references unknown owner reports/missing",
            ),
            (
                lambda obj: obj["outputs"][1].update(path="report.md"),
                'state outputs[1].path duplicates "report.md"',
            ),
            (
                lambda obj: obj["outputs"][0].update(source_digest=obj["outputs"][0]["source_digest"].upper()),
                "state outputs[0].source_digest: invalid digest ",
            ),
            (
                lambda obj: obj["owners"][0]["links"].update(primary_url="file:///tmp/report.md"),
                'state owners[0].links.primary_url: url "file:///tmp/report.md" must be an absolute http or https URL',
            ),
        ],
        ids=[
            "schema",
            "state mode",
            "duplicate owner",
            "unknown output owner",
            "duplicate output",
            "invalid source digest",
            "invalid owner link",
        ],
    )
    def test_go_cases(self, change: Any, message: str) -> None:
        data = mutate(SHARED_ROOT_TEXT, change)
        expect_error_prefix(parse_shared_root, data, message)
        if "schema_version" not in message:  # schema 2 dispatches to the single-owner parser
            expect_error_prefix(parse_state_document, data, message)

    def test_source_digest_prefix_must_be_lowercase(self) -> None:
        text = SHARED_ROOT_TEXT.replace('"source_digest": "sha256:', '"source_digest": "SHA256:', 1)
        expect_error_prefix(parse_shared_root, text, 'state outputs[0].source_digest: invalid digest "SHA256:')

    @pytest.mark.parametrize(
        ("change", "message"),
        [
            (lambda obj: obj.pop("schema_version"), "state schema_version is required"),
            (lambda obj: obj.pop("created_at"), "state created_at is required"),
            (lambda obj: obj.update(updated_at=None), "state updated_at is required"),
            (lambda obj: obj.update(created_at="0001-01-01T00:00:00Z"), "state created_at is required"),
            (lambda obj: obj.pop("state"), "state state.mode is required"),
            (lambda obj: obj.pop("owners"), "state owners is required"),
            (lambda obj: obj.update(owners=None), "state owners is required"),
            (lambda obj: obj.pop("outputs"), "state outputs is required"),
            (lambda obj: obj["owners"][0].pop("pipeline_id"), "state owners[0].pipeline_id is required"),
            (lambda obj: obj["owners"][1].update(destination_id=""), "state owners[1].destination_id is required"),
            (lambda obj: obj["owners"][0].pop("reconciliation"), "state owners[0].reconciliation.mode is required"),
            (
                lambda obj: obj["owners"][0].update(reconciliation={"mode": "append"}),
                "state owners[0].reconciliation.mode must be replace or merge",
            ),
            (lambda obj: obj["owners"][0].pop("source"), "state owners[0].source.manifest is required"),
            (
                lambda obj: obj["owners"][1]["source"]["manifest"].update(id=""),
                "state owners[1].source.manifest: manifest id is required",
            ),
            (lambda obj: obj["outputs"][0].pop("pipeline_id"), "state outputs[0].pipeline_id is required"),
            (lambda obj: obj["outputs"][0].pop("destination_id"), "state outputs[0].destination_id is required"),
            (lambda obj: obj["outputs"][0].pop("source_id"), "state outputs[0].source_id is required"),
            (lambda obj: obj["outputs"][0].pop("source_digest"), "state outputs[0].source_digest is required"),
            (lambda obj: obj["outputs"][0].pop("source_created"), "state outputs[0].source_created is required"),
            (
                lambda obj: obj["outputs"][0].update(source_created="0001-01-01T00:00:00Z"),
                "state outputs[0].source_created is required",
            ),
            (lambda obj: obj["outputs"][1].pop("created_at"), "state outputs[1].created_at is required"),
            (
                lambda obj: obj["outputs"][1].pop("transform"),
                "state outputs[1].transform is required for generated output",
            ),
            (lambda obj: obj["outputs"][1].update(size=-5), "state outputs[1].size must be non-negative"),
            (lambda obj: obj["outputs"][0].pop("size"), "state outputs[0].size is required"),
        ],
    )
    def test_other_rejections(self, change: Any, message: str) -> None:
        expect_error(parse_shared_root, mutate(SHARED_ROOT_TEXT, change), message)

    def test_malformed_source_created(self) -> None:
        data = mutate(SHARED_ROOT_TEXT, lambda obj: obj["outputs"][0].update(source_created="May 30"))
        expect_error_prefix(parse_shared_root, data, "state outputs[0].source_created must be RFC3339: ")

    def test_wrong_json_type(self) -> None:
        data = mutate(SHARED_ROOT_TEXT, lambda obj: obj["owners"][0].update(links="https://x"))
        expect_error(parse_shared_root, data, "parse distributor state: owners[0].links must be an object")

    def test_trailing_data(self) -> None:
        expect_error(parse_shared_root, SHARED_ROOT_TEXT + "}", "parse distributor state: trailing data")

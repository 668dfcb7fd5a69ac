"""Single-owner state parsing: schema 2 and legacy schema 1 (core-semantics §2.3, §2.4, §2.6, §2.8)."""

from __future__ import annotations

from typing import Any

import pytest

from distributor_core.state import (
    SharedRootState,
    SingleOwnerState,
    parse_single_owner,
    parse_state_document,
)
from distributor_core.timefmt import format_seconds
from tests.state.fixtures import MANIFEST, SHARED_ROOT_TEXT, SINGLE_OWNER_TEXT, T, legacy_text
from tests.state.helpers import expect_error, expect_error_prefix, mutate


def _output0(obj: dict[str, Any]) -> dict[str, Any]:
    return obj["outputs"][0]


class TestParseValidState:
    def test_fields(self) -> None:
        state = parse_single_owner(SINGLE_OWNER_TEXT.encode())
        assert isinstance(state, SingleOwnerState)
        assert format_seconds(state.published_at) == "2026-05-30T11:12:00Z"
        assert format_seconds(state.created_at) == "2026-05-30T11:12:00Z"
        assert format_seconds(state.updated_at) == "2026-05-30T11:12:00Z"
        assert state.state_mode == "single_owner"
        assert state.reconciliation_mode == "replace"
        assert state.schema_version == 2
        assert state.read_schema_version == 2
        assert state.distributor_version == "dev"
        assert state.manifest == MANIFEST
        assert len(state.outputs) == 1
        assert format_seconds(state.outputs[0].created_at) == "2026-05-30T11:12:00Z"
        assert state.outputs[0].transform == "" and state.outputs[0].url == ""
        assert state.primary_url == ""

    def test_accepts_str_input(self) -> None:
        assert parse_single_owner(SINGLE_OWNER_TEXT) == parse_single_owner(SINGLE_OWNER_TEXT.encode())

    def test_links_primary_url(self) -> None:
        def change(obj: dict[str, Any]) -> None:
            obj["links"] = {"primary_url": "https://reports.example.com/archive/report.md"}

        state = parse_single_owner(mutate(SINGLE_OWNER_TEXT, change))
        assert state.primary_url == "https://reports.example.com/archive/report.md"

    @pytest.mark.parametrize("links", [None, {}, {"primary_url": ""}, {"primary_url": None}])
    def test_empty_links_mean_no_primary_url(self, links: Any) -> None:
        state = parse_single_owner(mutate(SINGLE_OWNER_TEXT, lambda obj: obj.update(links=links)))
        assert state.primary_url == ""

    def test_normalizes_published_at_offset(self) -> None:
        text = SINGLE_OWNER_TEXT.replace(
            '"published_at": "2026-05-30T11:12:00Z"', '"published_at": "2026-05-30T13:12:00+02:00"', 1
        )
        state = parse_single_owner(text.encode())
        assert format_seconds(state.published_at) == "2026-05-30T11:12:00Z"
        assert state.published_at == T

    def test_fraction_is_kept_in_memory(self) -> None:
        text = SINGLE_OWNER_TEXT.replace(
            '"updated_at": "2026-05-30T11:12:00Z"', '"updated_at": "2026-05-30T11:12:00.123456789Z"', 1
        )
        state = parse_single_owner(text.encode())
        assert state.updated_at.microsecond == 123456

    def test_unknown_keys_are_ignored(self) -> None:
        def change(obj: dict[str, Any]) -> None:
            obj["extra"] = {"anything": [1, 2]}
            _output0(obj)["note"] = "x"
            obj["state"]["other"] = True

        assert parse_single_owner(mutate(SINGLE_OWNER_TEXT, change)) == parse_single_owner(SINGLE_OWNER_TEXT)

    def test_last_duplicate_key_wins(self) -> None:
        text = SINGLE_OWNER_TEXT.replace('"pipeline_id": "reports",', '"pipeline_id": "x", "pipeline_id": "reports",')
        assert parse_single_owner(text).pipeline_id == "reports"

    def test_keys_are_case_sensitive(self) -> None:
        def change(obj: dict[str, Any]) -> None:
            obj["Pipeline_ID"] = obj.pop("pipeline_id")

        expect_error(parse_single_owner, mutate(SINGLE_OWNER_TEXT, change), "state pipeline_id is required")

    def test_empty_outputs_are_valid(self) -> None:
        state = parse_single_owner(mutate(SINGLE_OWNER_TEXT, lambda obj: obj.update(outputs=[])))
        assert state.outputs == ()

    def test_generated_output_with_transform_and_url(self) -> None:
        def change(obj: dict[str, Any]) -> None:
            _output0(obj).update(
                kind="generated",
                path="report.html",
                transform="markdown_to_html",
                url="HTTPS://reports.example.com/archive/report.html",
            )

        output = parse_single_owner(mutate(SINGLE_OWNER_TEXT, change)).outputs[0]
        assert (output.kind, output.transform) == ("generated", "markdown_to_html")
        assert output.url == "HTTPS://reports.example.com/archive/report.html"


class TestParseRejectsMissingFields:
    @pytest.mark.parametrize(
        ("key", "message"),
        [
            ("schema_version", "state schema_version is required"),
            ("pipeline_id", "state pipeline_id is required"),
            ("destination_id", "state destination_id is required"),
            ("published_at", "state published_at is required"),
            ("created_at", "state created_at is required"),
            ("updated_at", "state updated_at is required"),
            ("state", "state state.mode is required"),
            ("reconciliation", "state reconciliation.mode is required"),
            ("source", "state source.manifest is required"),
            ("outputs", "state outputs is required"),
        ],
    )
    def test_absent_or_null(self, key: str, message: str) -> None:
        expect_error(parse_single_owner, mutate(SINGLE_OWNER_TEXT, lambda obj: obj.pop(key)), message)
        expect_error(parse_single_owner, mutate(SINGLE_OWNER_TEXT, lambda obj: obj.update({key: None})), message)

    @pytest.mark.parametrize(
        ("change", "message"),
        [
            ({"pipeline_id": ""}, "state pipeline_id is required"),
            ({"destination_id": ""}, "state destination_id is required"),
            ({"published_at": ""}, "state published_at is required"),
            ({"created_at": ""}, "state created_at is required"),
            ({"state": {}}, "state state.mode is required"),
            ({"state": {"mode": ""}}, "state state.mode is required"),
            ({"reconciliation": {"mode": None}}, "state reconciliation.mode is required"),
            ({"source": {}}, "state source.manifest is required"),
            ({"source": {"manifest": None}}, "state source.manifest is required"),
        ],
    )
    def test_empty_values(self, change: dict[str, Any], message: str) -> None:
        expect_error(parse_single_owner, mutate(SINGLE_OWNER_TEXT, lambda obj: obj.update(change)), message)

    @pytest.mark.parametrize("key", ["path", "kind", "source_path", "sha256", "size", "created_at", "updated_at"])
    def test_output_fields(self, key: str) -> None:
        message = f"state outputs[0].{key} is required"
        expect_error(parse_single_owner, mutate(SINGLE_OWNER_TEXT, lambda obj: _output0(obj).pop(key)), message)

    def test_null_output_element_is_an_empty_record(self) -> None:
        data = mutate(SINGLE_OWNER_TEXT, lambda obj: obj.update(outputs=[None]))
        expect_error(parse_single_owner, data, "state outputs[0].path is required")


class TestParseRejectsInvalidValues:
    def test_schema_version_3_with_single_owner_parser(self) -> None:
        text = SINGLE_OWNER_TEXT.replace('"schema_version": 2', '"schema_version": 3', 1)
        expect_error(parse_single_owner, text, "state schema_version must be 1 or 2")

    @pytest.mark.parametrize("version", [0, 4, -1])
    def test_other_schema_versions(self, version: int) -> None:
        data = mutate(SINGLE_OWNER_TEXT, lambda obj: obj.update(schema_version=version))
        expect_error(parse_single_owner, data, "state schema_version must be 1 or 2")

    def test_malformed_created_at(self) -> None:
        text = SINGLE_OWNER_TEXT.replace('"created_at": "2026-05-30T11:12:00Z"', '"created_at": "May 30"', 1)
        expect_error_prefix(parse_single_owner, text, "state created_at must be RFC3339: ")

    def test_malformed_published_at(self) -> None:
        data = mutate(SINGLE_OWNER_TEXT, lambda obj: obj.update(published_at="2026-05-30"))
        expect_error_prefix(parse_single_owner, data, "state published_at must be RFC3339: ")

    def test_malformed_output_timestamp(self) -> None:
        data = mutate(SINGLE_OWNER_TEXT, lambda obj: _output0(obj).update(updated_at="yesterday"))
        expect_error_prefix(parse_single_owner, data, "state outputs[0].updated_at must be RFC3339: ")

    @pytest.mark.parametrize(
        "value",
        [
            "2026-05-30 11:12:00Z",
            "2026-05-30t11:12:00Z",
            "2026-05-30T11:12:00z",
            "2026-05-30T11:12:00",
            "2026-05-30T11:12:00+0200",
            "2026-05-30T11:12Z",
            "2026-05-30T11:12:00.Z",
        ],
    )
    def test_timestamps_are_strict_rfc3339(self, value: str) -> None:
        data = mutate(SINGLE_OWNER_TEXT, lambda obj: obj.update(updated_at=value))
        expect_error_prefix(parse_single_owner, data, "state updated_at must be RFC3339: ")

    @pytest.mark.parametrize("key", ["published_at", "created_at", "updated_at"])
    def test_zero_top_level_timestamps(self, key: str) -> None:
        data = mutate(SINGLE_OWNER_TEXT, lambda obj: obj.update({key: "0001-01-01T00:00:00Z"}))
        expect_error(parse_single_owner, data, f"state {key} is required")

    def test_state_mode_must_be_single_owner(self) -> None:
        data = mutate(SINGLE_OWNER_TEXT, lambda obj: obj.update(state={"mode": "shared_root"}))
        expect_error(parse_single_owner, data, "state state.mode must be single_owner")

    def test_reconciliation_mode_must_be_replace_or_merge(self) -> None:
        data = mutate(SINGLE_OWNER_TEXT, lambda obj: obj.update(reconciliation={"mode": "Replace"}))
        expect_error(parse_single_owner, data, "state reconciliation.mode must be replace or merge")

    def test_merge_mode_is_accepted(self) -> None:
        data = mutate(SINGLE_OWNER_TEXT, lambda obj: obj.update(reconciliation={"mode": "merge"}))
        assert parse_single_owner(data).reconciliation_mode == "merge"

    def test_invalid_embedded_manifest(self) -> None:
        def change(obj: dict[str, Any]) -> None:
            obj["source"]["manifest"]["files"][0]["size"] = 10

        data = mutate(SINGLE_OWNER_TEXT, change)
        expect_error(parse_single_owner, data, "state source.manifest: manifest digest does not match files")

    @pytest.mark.parametrize(
        ("manifest", "message"),
        [
            ({}, "state source.manifest: manifest schema_version is required"),
            ("text", "state source.manifest: manifest must be a JSON object"),
            ([], "state source.manifest: manifest must be a JSON object"),
        ],
    )
    def test_embedded_manifest_shapes(self, manifest: Any, message: str) -> None:
        data = mutate(SINGLE_OWNER_TEXT, lambda obj: obj.update(source={"manifest": manifest}))
        expect_error(parse_single_owner, data, message)

    def test_invalid_primary_url(self) -> None:
        data = mutate(SINGLE_OWNER_TEXT, lambda obj: obj.update(links={"primary_url": "file:///tmp/report.md"}))
        expect_error(
            parse_single_owner,
            data,
            'state links.primary_url: url "file:///tmp/report.md" must be an absolute http or https URL',
        )

    @pytest.mark.parametrize(
        ("change", "message"),
        [
            ({"size": -1}, "state outputs[0].size must be non-negative"),
            ({"created_at": "0001-01-01T00:00:00Z"}, "state outputs[0].created_at is required"),
            ({"updated_at": "0001-01-01T00:00:00Z"}, "state outputs[0].updated_at is required"),
            (
                {"url": "file:///tmp/report.md"},
                'state outputs[0].url: url "file:///tmp/report.md" must be an absolute http or https URL',
            ),
            (
                {"url": "https:///no-host"},
                'state outputs[0].url: url "https:///no-host" must be an absolute http or https URL',
            ),
            (
                {"url": "/relative/report.md"},
                'state outputs[0].url: url "/relative/report.md" must be an absolute http or https URL',
            ),
            ({"kind": "copy"}, "state outputs[0].kind must be source or generated"),
            ({"kind": "generated"}, "state outputs[0].transform is required for generated output"),
            ({"path": "/abs"}, 'state outputs[0].path: path "/abs" must be relative'),
            ({"path": "a//b"}, 'state outputs[0].path: path "a//b" must not contain empty segments'),
            (
                {"path": ".distributor.json"},
                'state outputs[0].path: path ".distributor.json" must not use reserved name ".distributor.json"',
            ),
            (
                {"path": "d/.distributor-tmp-0123456789abcdef"},
                'state outputs[0].path: path "d/.distributor-tmp-0123456789abcdef" must not use reserved name '
                '".distributor-tmp-0123456789abcdef"',
            ),
            (
                {"source_path": "../report.md"},
                'state outputs[0].source_path: path "../report.md" must not contain "." or ".." segments',
            ),
            (
                {"sha256": "SHA256:" + "a" * 64},
                'state outputs[0].sha256: invalid digest "SHA256:' + "a" * 64 + '": must be sha256: followed by '
                "64 lowercase hex characters",
            ),
        ],
    )
    def test_invalid_output_metadata(self, change: dict[str, Any], message: str) -> None:
        data = mutate(SINGLE_OWNER_TEXT, lambda obj: _output0(obj).update(change))
        expect_error(parse_single_owner, data, message)

    def test_duplicate_output_path(self) -> None:
        data = mutate(SINGLE_OWNER_TEXT, lambda obj: obj["outputs"].append(dict(_output0(obj))))
        expect_error(parse_single_owner, data, 'state outputs[1].path duplicates "report.md"')


class TestParseRejectsMalformedJSON:
    @pytest.mark.parametrize(
        ("data", "message"),
        [
            (b"", "parse distributor state: EOF"),
            (b"   \n", "parse distributor state: EOF"),
            (SINGLE_OWNER_TEXT.encode() + b"{}", "parse distributor state: trailing data"),
            (SINGLE_OWNER_TEXT.encode() + b"x", "parse distributor state: trailing data"),
        ],
    )
    def test_exact_messages(self, data: bytes, message: str) -> None:
        expect_error(parse_single_owner, data, message)
        expect_error(parse_state_document, data, message)

    def test_trailing_whitespace_is_fine(self) -> None:
        assert parse_single_owner(SINGLE_OWNER_TEXT.encode() + b" \t\r\n").pipeline_id == "reports"

    @pytest.mark.parametrize("data", [b"[]", b"null", b"2", b'"x"', b"{", b"{'a': 1}", b"\xff", b'{"a": NaN}'])
    def test_not_a_json_object(self, data: bytes) -> None:
        expect_error_prefix(parse_single_owner, data, "parse distributor state: ")
        expect_error_prefix(parse_state_document, data, "parse distributor state: ")

    def test_byte_order_mark(self) -> None:
        expect_error_prefix(
            parse_single_owner, b"\xef\xbb\xbf" + SINGLE_OWNER_TEXT.encode(), "parse distributor state: "
        )

    @pytest.mark.parametrize(
        ("change", "message"),
        [
            (lambda obj: _output0(obj).update(size=9.0), "parse distributor state: outputs[0].size must be an integer"),
            (
                lambda obj: _output0(obj).update(size=True),
                "parse distributor state: outputs[0].size must be an integer",
            ),
            (lambda obj: _output0(obj).update(size="9"), "parse distributor state: outputs[0].size must be an integer"),
            (
                lambda obj: _output0(obj).update(size=2**63),
                "parse distributor state: outputs[0].size must be a 64-bit integer",
            ),
            (lambda obj: obj.update(schema_version=2.0), "parse distributor state: schema_version must be an integer"),
            (lambda obj: obj.update(schema_version=True), "parse distributor state: schema_version must be an integer"),
            (lambda obj: obj.update(pipeline_id=5), "parse distributor state: pipeline_id must be a string"),
            (lambda obj: obj.update(outputs={}), "parse distributor state: outputs must be an array"),
            (lambda obj: obj.update(outputs=[1]), "parse distributor state: outputs[0] must be an object"),
            (lambda obj: obj.update(state="single_owner"), "parse distributor state: state must be an object"),
            (
                lambda obj: obj.update(links={"primary_url": 1}),
                "parse distributor state: links.primary_url must be a string",
            ),
            (lambda obj: _output0(obj).update(url=False), "parse distributor state: outputs[0].url must be a string"),
            # a type error anywhere wins over missing fields, like Go's decoder
            (
                lambda obj: (obj.pop("pipeline_id"), _output0(obj).update(kind=1)),
                "parse distributor state: outputs[0].kind must be a string",
            ),
        ],
    )
    def test_wrong_json_types(self, change: Any, message: str) -> None:
        expect_error(parse_single_owner, mutate(SINGLE_OWNER_TEXT, change), message)


class TestLegacyState:
    def test_infers_single_owner_defaults(self) -> None:
        state = parse_single_owner(legacy_text().encode())
        assert state.schema_version == 2
        assert state.read_schema_version == 1
        assert format_seconds(state.created_at) == "2026-05-30T11:12:00Z"
        assert format_seconds(state.updated_at) == "2026-05-30T11:12:00Z"
        assert state.state_mode == "single_owner"
        assert state.reconciliation_mode == "replace"
        assert format_seconds(state.outputs[0].created_at) == "2026-05-30T11:12:00Z"
        assert format_seconds(state.outputs[0].updated_at) == "2026-05-30T11:12:00Z"

    def test_timestamps_come_from_published_at(self) -> None:
        text = legacy_text().replace(
            '"published_at": "2026-05-30T11:12:00Z"', '"published_at": "2026-06-01T08:00:00+02:00"'
        )
        state = parse_single_owner(text.encode())
        assert {format_seconds(v) for v in (state.created_at, state.updated_at, state.outputs[0].updated_at)} == {
            "2026-06-01T06:00:00Z"
        }

    def test_equals_the_v2_document(self) -> None:
        assert parse_single_owner(legacy_text()) == parse_single_owner(SINGLE_OWNER_TEXT)

    def test_v2_only_keys_are_ignored_even_when_invalid(self) -> None:
        def change(obj: dict[str, Any]) -> None:
            obj.update(created_at="May 30", updated_at="", state={"mode": "shared_root"}, reconciliation={"mode": "x"})
            _output0(obj)["created_at"] = "never"

        state = parse_single_owner(mutate(legacy_text(), change))
        assert state.created_at == T and state.reconciliation_mode == "replace"
        assert state.outputs[0].created_at == T

    def test_v2_only_keys_must_still_have_json_types(self) -> None:
        data = mutate(legacy_text(), lambda obj: obj.update(created_at=5))
        expect_error(parse_single_owner, data, "parse distributor state: created_at must be a string")

    def test_common_rules_still_apply(self) -> None:
        data = mutate(legacy_text(), lambda obj: obj.pop("outputs"))
        expect_error(parse_single_owner, data, "state outputs is required")
        data = mutate(legacy_text(), lambda obj: _output0(obj).update(size=-1))
        expect_error(parse_single_owner, data, "state outputs[0].size must be non-negative")


class TestParseDocument:
    def test_dispatches_on_schema_version(self) -> None:
        single = parse_state_document(SINGLE_OWNER_TEXT.encode())
        shared = parse_state_document(SHARED_ROOT_TEXT.encode())
        assert isinstance(single, SingleOwnerState) and not isinstance(single, SharedRootState)
        assert isinstance(shared, SharedRootState) and not isinstance(shared, SingleOwnerState)
        assert isinstance(parse_state_document(legacy_text().encode()), SingleOwnerState)

    def test_missing_schema_version(self) -> None:
        expect_error(parse_state_document, b"{}", "state schema_version is required")
        expect_error(parse_state_document, b'{"schema_version": null}', "state schema_version is required")

    def test_unknown_schema_version_goes_to_single_owner_parser(self) -> None:
        expect_error(parse_state_document, b'{"schema_version": 7}', "state schema_version must be 1 or 2")

    def test_non_integer_schema_version(self) -> None:
        expect_error(
            parse_state_document,
            b'{"schema_version": "3"}',
            "parse distributor state: schema_version must be an integer",
        )

    def test_trailing_data_after_shared_root(self) -> None:
        expect_error(parse_state_document, SHARED_ROOT_TEXT + "[]", "parse distributor state: trailing data")

    def test_go_reference_invalid_state(self) -> None:
        expect_error(
            parse_state_document, b'{"schema_version":2,"pipeline_id":"reports"}', "state destination_id is required"
        )

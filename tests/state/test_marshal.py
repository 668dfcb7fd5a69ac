"""Serialisation of state (core-semantics §0.3, §2.7): key order, omit-empty, timestamps, escaping."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

import msgspec
import pytest

from distributor_core.bundle import ManifestFile, bundle_digest
from distributor_core.state import (
    OutputRecord,
    SharedRootState,
    SingleOwnerState,
    StateError,
    marshal_state,
    parse_shared_root,
    parse_single_owner,
    parse_state_document,
    project_single_owner_outputs,
    shared_root_migration_base,
    state_to_obj,
)
from tests.state.fixtures import (
    ARCHIVE,
    MANIFEST,
    REPORT,
    SHARED_ROOT_TEXT,
    SINGLE_OWNER_TEXT,
    T,
    legacy_text,
    make_manifest,
    output,
    shared_root,
    single_owner,
)

PLUS_TWO = timezone(timedelta(hours=2))


class TestByteExactness:
    def test_single_owner_round_trip(self) -> None:
        assert marshal_state(parse_single_owner(SINGLE_OWNER_TEXT.encode())) == SINGLE_OWNER_TEXT.encode()

    def test_shared_root_round_trip(self) -> None:
        assert marshal_state(parse_shared_root(SHARED_ROOT_TEXT.encode())) == SHARED_ROOT_TEXT.encode()

    def test_model_values_marshal_to_the_fixtures(self) -> None:
        assert marshal_state(single_owner()) == SINGLE_OWNER_TEXT.encode()
        assert marshal_state(shared_root()) == SHARED_ROOT_TEXT.encode()

    def test_single_owner_key_order(self) -> None:
        state = single_owner(
            primary_url="https://reports.example.com/archive/report.html",
            outputs=(
                output(
                    "report.html",
                    kind="generated",
                    source_path="report.md",
                    transform="markdown_to_html",
                    url="https://reports.example.com/archive/report.html",
                ),
            ),
        )
        obj = json.loads(marshal_state(state))
        assert list(obj) == [
            "schema_version",
            "distributor_version",
            "pipeline_id",
            "destination_id",
            "published_at",
            "created_at",
            "updated_at",
            "state",
            "reconciliation",
            "source",
            "links",
            "outputs",
        ]
        assert list(obj["outputs"][0]) == [
            "path",
            "kind",
            "source_path",
            "transform",
            "url",
            "sha256",
            "size",
            "created_at",
            "updated_at",
        ]
        assert list(obj["source"]["manifest"]) == ["schema_version", "id", "digest", "created", "files"]
        assert obj["links"] == {"primary_url": "https://reports.example.com/archive/report.html"}

    def test_shared_root_key_order(self) -> None:
        obj = json.loads(marshal_state(shared_root()))
        assert list(obj) == [
            "schema_version",
            "distributor_version",
            "created_at",
            "updated_at",
            "state",
            "owners",
            "outputs",
        ]
        assert list(obj["owners"][0]) == ["pipeline_id", "destination_id", "reconciliation", "source", "links"]
        assert list(obj["owners"][1]) == ["pipeline_id", "destination_id", "reconciliation", "source"]
        assert list(obj["outputs"][1]) == [
            "path",
            "kind",
            "source_path",
            "transform",
            "url",
            "sha256",
            "size",
            "pipeline_id",
            "destination_id",
            "source_id",
            "source_digest",
            "source_created",
            "created_at",
            "updated_at",
        ]

    def test_layout_is_two_space_indent_with_trailing_newline(self) -> None:
        data = marshal_state(single_owner())
        assert data.endswith(b"}\n") and not data.endswith(b"\n\n")
        assert b'\n  "state": {\n    "mode": "single_owner"\n  },\n' in data


class TestOmitEmpty:
    def test_single_owner(self) -> None:
        obj = json.loads(marshal_state(single_owner(distributor_version="", primary_url="")))
        assert "distributor_version" not in obj
        assert "links" not in obj
        assert "transform" not in obj["outputs"][0] and "url" not in obj["outputs"][0]

    def test_empty_outputs_are_written_as_an_array(self) -> None:
        data = marshal_state(single_owner(outputs=()))
        assert b'\n  "outputs": []\n}\n' in data

    def test_shared_root(self) -> None:
        data = marshal_state(shared_root(distributor_version="", owners=shared_root().owners[1:], outputs=()))
        obj = json.loads(data)
        assert "distributor_version" not in obj
        assert "links" not in obj["owners"][0]
        assert b'"outputs": []' in data

    def test_read_schema_version_is_never_written(self) -> None:
        data = marshal_state(parse_single_owner(legacy_text().encode()))
        assert b"read_schema_version" not in data
        assert json.loads(data)["schema_version"] == 2


class TestTimestamps:
    def test_single_owner_offsets_become_utc(self) -> None:
        local = datetime(2026, 5, 30, 13, 12, tzinfo=PLUS_TWO)
        state = single_owner(
            published_at=local,
            created_at=local,
            updated_at=local,
            outputs=(output("report.md", created_at=local, updated_at=local),),
        )
        data = marshal_state(state).decode()
        assert data.count('"2026-05-30T11:12:00Z"') == 6  # 3 top level, 2 output, manifest created
        assert "+02:00" not in data

    def test_fractions_are_dropped_from_state_timestamps_but_kept_in_the_manifest(self) -> None:
        precise = datetime(2026, 5, 30, 11, 12, 0, 500000, tzinfo=UTC)
        manifest = make_manifest(created=precise)
        state = single_owner(manifest=manifest, updated_at=precise)
        obj = json.loads(marshal_state(state))
        assert obj["updated_at"] == "2026-05-30T11:12:00Z"
        assert obj["source"]["manifest"]["created"] == "2026-05-30T11:12:00.5Z"

    def test_source_created_is_whole_seconds(self) -> None:
        precise = datetime(2026, 5, 30, 11, 12, 0, 999999, tzinfo=UTC)
        base = shared_root()
        outputs = (msgspec.structs.replace(base.outputs[0], source_created=precise), base.outputs[1])
        obj = json.loads(marshal_state(msgspec.structs.replace(base, outputs=outputs)))
        assert obj["outputs"][0]["source_created"] == "2026-05-30T11:12:00Z"

    def test_model_stores_utc_and_rejects_naive_datetimes(self) -> None:
        local = datetime(2026, 5, 30, 13, 12, tzinfo=PLUS_TWO)
        assert single_owner(created_at=local).created_at.tzinfo is UTC
        with pytest.raises(StateError, match="must be timezone-aware"):
            single_owner(created_at=datetime(2026, 5, 30, 11, 12))
        with pytest.raises(StateError, match="must be a datetime"):
            output("x", updated_at="2026-05-30T11:12:00Z")  # type: ignore[arg-type]


class TestEscaping:
    def test_go_string_escaping(self) -> None:
        files = (ManifestFile("café/<r&d>.md", REPORT.sha256, REPORT.size),)
        manifest = msgspec.structs.replace(
            MANIFEST, id='r<&>\u2028\u2029é"\\\n', digest=bundle_digest(files), files=files
        )
        state = single_owner(
            manifest=manifest,
            distributor_version="v<1>&",
            outputs=(output("café/<r&d>.md", sha256=REPORT.sha256, size=REPORT.size),),
        )
        data = marshal_state(state)
        text = data.decode("utf-8")
        assert '"distributor_version": "v\\u003c1\\u003e\\u0026"' in text
        assert '"id": "r\\u003c\\u0026\\u003e\\u2028\\u2029é\\"\\\\\\n"' in text
        assert '"path": "café/\\u003cr\\u0026d\\u003e.md"' in text
        assert "é".encode() in data  # raw UTF-8, not \u00e9
        assert "<" not in text and ">" not in text and "&" not in text
        assert "\u2028" not in text and "\u2029" not in text
        assert parse_single_owner(data) == state

    def test_control_characters_use_lowercase_hex(self) -> None:
        data = marshal_state(single_owner(distributor_version="a\x01b\x1f"))
        assert b'"distributor_version": "a\\u0001b\\u001f"' in data


class TestMarshalValidatesFirst:
    @pytest.mark.parametrize(
        ("state", "message"),
        [
            (single_owner(pipeline_id=""), "state pipeline_id is required"),
            (single_owner(outputs=(output("a.txt", size=-1),)), "state outputs[0].size must be non-negative"),
            (single_owner(reconciliation_mode="append"), "state reconciliation.mode must be replace or merge"),
            (
                single_owner(primary_url="ftp://x/y"),
                'state links.primary_url: url "ftp://x/y" must be an absolute http or https URL',
            ),
            (
                single_owner(outputs=(output("a.txt"), output("a.txt"))),
                'state outputs[1].path duplicates "a.txt"',
            ),
            (
                single_owner(published_at=datetime(1, 1, 1, tzinfo=UTC)),
                "state published_at is required",
            ),
            (
                single_owner(manifest=msgspec.structs.replace(MANIFEST, digest="sha256:" + "0" * 64)),
                "state source.manifest: manifest digest does not match files",
            ),
            (
                shared_root(outputs=shared_root().outputs[:1], owners=shared_root().owners[1:]),
                "state outputs[0] references unknown owner reports/archive",
            ),
            (
                shared_root(owners=(*shared_root().owners, shared_root().owners[0])),
                "state owners[2] duplicates owner reports/archive",
            ),
        ],
    )
    def test_invalid_values_are_refused(self, state: SingleOwnerState | SharedRootState, message: str) -> None:
        with pytest.raises(StateError) as info:
            marshal_state(state)
        assert str(info.value) == message

    def test_not_a_document(self) -> None:
        with pytest.raises(StateError, match=r"^destination state document is empty$"):
            marshal_state(None)  # type: ignore[arg-type]


class TestStateToObj:
    @pytest.mark.parametrize("doc", [single_owner(), shared_root()])
    def test_matches_the_serialised_document(self, doc: SingleOwnerState | SharedRootState) -> None:
        assert state_to_obj(doc) == json.loads(marshal_state(doc))
        assert list(state_to_obj(doc)) == list(json.loads(marshal_state(doc)))


class TestSchemaConversions:
    def test_v1_is_written_as_schema_2(self) -> None:
        state = parse_single_owner(legacy_text().encode())
        assert marshal_state(state) == SINGLE_OWNER_TEXT.encode()

    def test_v1_normalised_then_updated_keeps_published_at(self) -> None:
        state = parse_single_owner(legacy_text().encode())
        later = T + timedelta(days=1)
        obj = json.loads(marshal_state(msgspec.structs.replace(state, updated_at=later)))
        assert (obj["published_at"], obj["created_at"], obj["updated_at"]) == (
            "2026-05-30T11:12:00Z",
            "2026-05-30T11:12:00Z",
            "2026-05-31T11:12:00Z",
        )
        assert obj["state"] == {"mode": "single_owner"} and obj["reconciliation"] == {"mode": "replace"}

    def test_v2_projects_to_v3(self) -> None:
        created = datetime(2026, 5, 1, 9, 0, tzinfo=UTC)
        touched = datetime(2026, 5, 20, 9, 0, tzinfo=UTC)
        state = single_owner(
            created_at=created,
            reconciliation_mode="merge",
            primary_url="https://reports.example.com/archive/report.md",
            outputs=(
                OutputRecord("report.md", "source", "report.md", REPORT.sha256, 9, created, touched),
                output("old.txt", created_at=created, updated_at=created),
            ),
        )
        now = datetime(2026, 6, 1, 12, 0, 0, 750000, tzinfo=UTC)
        migrated = shared_root_migration_base(state, now=now, distributor_version="1.2.3")

        data = marshal_state(migrated)
        parsed = parse_state_document(data)
        assert isinstance(parsed, SharedRootState)
        assert parsed == migrated
        obj = json.loads(data)
        assert obj["schema_version"] == 3
        assert obj["distributor_version"] == "1.2.3"
        assert obj["created_at"] == "2026-05-01T09:00:00Z"
        assert obj["updated_at"] == "2026-06-01T12:00:00Z"
        assert obj["owners"] == [
            {
                "pipeline_id": "reports",
                "destination_id": "archive",
                "reconciliation": {"mode": "merge"},
                "source": {"manifest": state_to_obj(state)["source"]["manifest"]},
                "links": {"primary_url": "https://reports.example.com/archive/report.md"},
            }
        ]
        assert [o["path"] for o in obj["outputs"]] == ["report.md", "old.txt"]
        first = obj["outputs"][0]
        assert (first["pipeline_id"], first["destination_id"]) == ("reports", "archive")
        assert (first["source_id"], first["source_digest"], first["source_created"]) == (
            MANIFEST.id,
            MANIFEST.digest,
            "2026-05-30T11:12:00Z",
        )
        assert (first["created_at"], first["updated_at"]) == ("2026-05-01T09:00:00Z", "2026-05-20T09:00:00Z")

    def test_projection_keeps_every_output_field(self) -> None:
        state = single_owner(
            outputs=(
                output(
                    "report.html",
                    kind="generated",
                    source_path="report.md",
                    transform="markdown_to_html",
                    url="https://x.example/report.html",
                    size=77,
                ),
            )
        )
        (record,) = project_single_owner_outputs(state)
        source = state.outputs[0]
        for name in ("path", "kind", "source_path", "sha256", "size", "created_at", "updated_at", "transform", "url"):
            assert getattr(record, name) == getattr(source, name)
        assert record.scope == ARCHIVE
        assert (record.source_id, record.source_digest, record.source_created) == (
            MANIFEST.id,
            MANIFEST.digest,
            MANIFEST.created,
        )

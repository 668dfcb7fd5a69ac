"""Manifest model, digest, parse/marshal and manifest-only validation (core-semantics §1.10,
interfaces §4.3 items 14 and 16)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

import pytest

from distributor_core.bundle import (
    MANIFEST_NAME,
    SCHEMA_VERSION,
    STATE_FILE_NAME,
    BundleError,
    BundlePathError,
    Manifest,
    ManifestError,
    ManifestFile,
    ValidManifest,
    bundle_digest,
    canonical_file_payload,
    file_digest,
    manifest_from_obj,
    manifest_identity,
    manifest_to_obj,
    manifests_equal,
    marshal_manifest,
    parse_manifest,
    validate_digest,
    validate_manifest,
    validate_source_path,
)

REPORT = b"# Report\n"
SUMMARY = b"Summary\n"
CREATED = datetime(2026, 6, 7, 15, 0, tzinfo=UTC)


def record(path: str, data: bytes) -> ManifestFile:
    return ManifestFile(path=path, sha256=file_digest(data), size=len(data))


def make_manifest(files: list[ManifestFile] | None = None, **changes: object) -> Manifest:
    files = files if files is not None else [record("report.md", REPORT), record("summary.txt", SUMMARY)]
    fields: dict[str, object] = {
        "schema_version": 1,
        "id": "reports.daily",
        "digest": bundle_digest(files),
        "created": CREATED,
        "files": files,
    }
    fields.update(changes)
    return Manifest(**fields)  # type: ignore[arg-type]


def manifest_obj(**changes: object) -> dict[str, object]:
    obj = manifest_to_obj(make_manifest())
    obj.update(changes)
    return obj


def encode(obj: object) -> bytes:
    return json.dumps(obj).encode()


# ---------------------------------------------------------------- constants and model


def test_constants() -> None:
    assert MANIFEST_NAME == "manifest.json"
    assert STATE_FILE_NAME == ".distributor.json"
    assert SCHEMA_VERSION == 1


def test_manifest_stores_files_as_tuple_and_created_in_utc() -> None:
    plus_two = timezone(timedelta(hours=2))
    manifest = make_manifest(created=datetime(2026, 6, 7, 17, 0, tzinfo=plus_two))
    assert isinstance(manifest.files, tuple)
    assert manifest.created == CREATED
    assert manifest.created.utcoffset() == timedelta(0)


def test_manifest_refuses_naive_created() -> None:
    with pytest.raises(ManifestError, match="manifest created must be timezone-aware"):
        make_manifest(created=datetime(2026, 6, 7, 15, 0))


def test_manifest_is_frozen() -> None:
    manifest = make_manifest()
    with pytest.raises(AttributeError):
        manifest.id = "other"  # type: ignore[misc]


# ---------------------------------------------------------------- golden digests


def test_worked_example_digest_and_payload() -> None:
    files = [record("report.md", REPORT), record("summary.txt", SUMMARY)]
    assert files[0].sha256 == "sha256:497b7725a00101d6cf82489ef502fb0918962b10aaa7279962ab5ec3edc62533"
    assert files[1].sha256 == "sha256:3cbb36aca330b3bd113955dfbada0adb7a5f95ad9f678bd61f175406c6a37e95"
    payload = canonical_file_payload(files)
    assert payload == (
        b'[{"path":"report.md","sha256":"sha256:497b7725a00101d6cf82489ef502fb0918962b10aaa7279962ab5ec3edc62533",'
        b'"size":9},{"path":"summary.txt","sha256":"sha256:3cbb36aca330b3bd113955dfbada0adb7a5f95ad9f678bd61f1754'
        b'06c6a37e95","size":8}]'
    )
    assert len(payload) == 229
    assert bundle_digest(files) == "sha256:4fa979918dea6530550a08607e0a4a49378d3fa6b2c4d75160392a18036f5440"


def test_digest_depends_on_order() -> None:
    files = [record("summary.txt", SUMMARY), record("report.md", REPORT)]
    assert bundle_digest(files) == "sha256:cb55378a20131502b2d05a30819c6bfcf4a817efeb7b8cad68dea0fea6e062d6"
    assert bundle_digest(files) != bundle_digest(list(reversed(files)))


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ([("report.md", REPORT)], "sha256:955c9706e5c8644f80741e3a1d743efc88d884f346497ca4bd84d21b389bc5e0"),
        ([("empty.txt", b"")], "sha256:f0bf8fe6302216590b600b11a3beb77750ab1b559e89842e524b8b293f31bd0c"),
    ],
)
def test_additional_vectors(files: list[tuple[str, bytes]], expected: str) -> None:
    assert bundle_digest([record(p, d) for p, d in files]) == expected


def test_escaped_path_vector() -> None:
    files = [record("café/<r&d>.md", b"x\n")]
    payload = canonical_file_payload(files)
    assert payload == (
        '[{"path":"café/\\u003cr\\u0026d\\u003e.md","sha256":"sha256:73cb3858a687a8494ca3323053016282f3dad39d'
        '42cf62ca4e79dda2aac7d9ac","size":2}]'
    ).encode()
    assert "é".encode() in payload
    assert len(payload) == 134
    assert bundle_digest(files) == "sha256:e463eb6808844f3f3371ad72be352a736bfac3cb3f3e3987c06c80713b76963c"


def test_default_fixture_golden_digest() -> None:
    report = b"# Report\nSunny.\n"
    assert len(report) == 16
    assert file_digest(report) == "sha256:3640fd37140ee4d2e0e93e78834f232ea67a50e7bc6279203690cc7de1975fa6"
    assert file_digest(SUMMARY) == "sha256:3cbb36aca330b3bd113955dfbada0adb7a5f95ad9f678bd61f175406c6a37e95"
    files = [record("report.md", report), record("summary.txt", SUMMARY)]
    assert canonical_file_payload(files) == (
        b'[{"path":"report.md","sha256":"sha256:3640fd37140ee4d2e0e93e78834f232ea67a50e7bc6279203690cc7de1975fa6",'
        b'"size":16},{"path":"summary.txt","sha256":"sha256:3cbb36aca330b3bd113955dfbada0adb7a5f95ad9f678bd61f1754'
        b'06c6a37e95","size":8}]'
    )
    assert bundle_digest(files) == "sha256:099b205780d2b050024868399961b05731729a548d5d6329c7b06a6740dd75fe"


def test_ampersand_and_line_separators_are_escaped_in_payload() -> None:
    payload = canonical_file_payload([record("r&d\u2028\u2029.md", b"")])
    assert b"\\u0026" in payload and b"&" not in payload
    assert b"\\u2028\\u2029" in payload


# ---------------------------------------------------------------- digest syntax


def test_validate_digest_accepts_lowercase() -> None:
    value = file_digest(b"x")
    assert validate_digest(value) == value


@pytest.mark.parametrize(
    "value",
    [
        "SHA256:" + "a" * 64,
        "sha256:" + "A" * 64,
        "a" * 64,
        "sha256:" + "a" * 63,
        "sha256:" + "a" * 65,
        "sha256:" + "g" * 64,
        "",
        "sha256:" + "a" * 64 + "\n",
    ],
)
def test_validate_digest_rejects(value: str) -> None:
    with pytest.raises(ManifestError, match="invalid digest"):
        validate_digest(value)


def test_uppercased_correct_digest_fails_on_syntax() -> None:
    good = make_manifest()
    bad = make_manifest(digest=good.digest.upper())
    with pytest.raises(ManifestError, match=r"^manifest digest: invalid digest"):
        validate_manifest(bad)
    upper_hex = make_manifest(digest="sha256:" + good.digest[7:].upper())
    with pytest.raises(ManifestError, match=r"^manifest digest: invalid digest"):
        validate_manifest(upper_hex)


# ---------------------------------------------------------------- path rules


@pytest.mark.parametrize(
    "path",
    [
        "",
        "/abs",
        "/a",
        "a\\b",
        "./a",
        "a/./b",
        "../a",
        "a/..",
        "a/../b",
        "a//b",
        "a/",
        "manifest.json",
        "x/manifest.json",
        "sub/.distributor.json",
        ".distributor.json",
        ".distributor.pending.json",
        "a/.distributor.lock",
        ".distributor-tmp-0123456789abcdef",
        "dir/.distributor-bak-0123456789abcdef/x",
        "tab\there",
        "del\x7f",
    ],
)
def test_invalid_source_paths(path: str) -> None:
    with pytest.raises(BundlePathError):
        validate_source_path(path)


@pytest.mark.parametrize(
    "path",
    ["report.md", "sub/Manifest.json", ".hidden/file", "C:/x", "café.md", "a/b/c.txt", "manifest.json.bak"],
)
def test_valid_source_paths(path: str) -> None:
    assert validate_source_path(path) == path


def test_path_error_names_the_path() -> None:
    with pytest.raises(BundlePathError, match=r'^path "/abs" must be relative$'):
        validate_source_path("/abs")
    reserved = r'^path "x/manifest.json" must not use reserved name "manifest.json"$'
    with pytest.raises(BundlePathError, match=reserved):
        validate_source_path("x/manifest.json")


def test_manifest_rejects_bad_file_path_with_index() -> None:
    files = [record("report.md", REPORT), record("a//b", SUMMARY)]
    expected = r'^manifest files\[1\]\.path: path "a//b" must not contain empty segments$'
    with pytest.raises(ManifestError, match=expected):
        validate_manifest(make_manifest(files))


def test_manifest_rejects_empty_path_as_required() -> None:
    with pytest.raises(ManifestError, match=r"^manifest files\[0\]\.path is required$"):
        validate_manifest(make_manifest([record("", REPORT)]))


# ---------------------------------------------------------------- validation rules


def test_valid_manifest_passes() -> None:
    manifest = make_manifest()
    valid = validate_manifest(manifest)
    assert valid == manifest and isinstance(valid, ValidManifest) and validate_manifest(valid) is valid


def test_duplicate_paths_rejected() -> None:
    files = [record("report.md", REPORT), record("report.md", SUMMARY)]
    with pytest.raises(ManifestError, match=r'^manifest files\[1\]\.path duplicates "report.md"$'):
        validate_manifest(make_manifest(files))


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"schema_version": 2}, "manifest schema_version must be 1"),
        ({"schema_version": True}, "manifest schema_version must be 1"),
        ({"id": ""}, "manifest id is required"),
        ({"digest": ""}, "manifest digest is required"),
        ({"created": datetime(1, 1, 1, tzinfo=UTC)}, "manifest created is required"),
        ({"files": []}, "manifest files is required"),
    ],
)
def test_manifest_rule_messages(changes: dict[str, object], message: str) -> None:
    with pytest.raises(ManifestError) as info:
        validate_manifest(make_manifest(**changes))
    assert str(info.value) == message


def test_negative_size_rejected() -> None:
    files = [ManifestFile("report.md", file_digest(REPORT), -1)]
    with pytest.raises(ManifestError, match=r"^manifest files\[0\]\.size must be non-negative$"):
        validate_manifest(make_manifest(files, digest="sha256:" + "0" * 64))


def test_bad_file_sha_rejected_before_size_and_digest() -> None:
    files = [ManifestFile("report.md", "SHA256:" + "0" * 64, -1)]
    with pytest.raises(ManifestError, match=r"^manifest files\[0\]\.sha256: invalid digest"):
        validate_manifest(make_manifest(files, digest="sha256:" + "0" * 64))


def test_digest_mismatch_rejected() -> None:
    manifest = make_manifest(digest="sha256:" + "0" * 64)
    with pytest.raises(ManifestError) as info:
        validate_manifest(manifest)
    assert str(info.value) == "manifest digest does not match files"


def test_all_manifest_errors_are_bundle_errors_and_value_errors() -> None:
    with pytest.raises(BundleError):
        validate_manifest(make_manifest(id=""))
    with pytest.raises(ValueError):
        validate_manifest(make_manifest(id=""))


# ---------------------------------------------------------------- parse


def test_parse_round_trip() -> None:
    manifest = make_manifest()
    assert parse_manifest(marshal_manifest(manifest)) == manifest


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        ({"schema_version": 1.0}, "manifest schema_version must be an integer"),
        ({"schema_version": True}, "manifest schema_version must be an integer"),
        ({"schema_version": "1"}, "manifest schema_version must be an integer"),
        ({"schema_version": 2}, "manifest schema_version must be 1"),
        ({"schema_version": None}, "manifest schema_version is required"),
        ({"id": None}, "manifest id is required"),
        ({"id": ""}, "manifest id is required"),
        ({"id": 5}, "manifest id must be a string"),
        ({"digest": None}, "manifest digest is required"),
        ({"created": None}, "manifest created is required"),
        ({"created": ""}, "manifest created is required"),
        ({"created": "0001-01-01T00:00:00Z"}, "manifest created is required"),
        ({"files": None}, "manifest files is required"),
        ({"files": []}, "manifest files is required"),
        ({"files": {}}, "manifest files must be an array"),
        ({"files": ["x"]}, "manifest files[0] must be an object"),
    ],
)
def test_parse_field_errors(obj: dict[str, object], message: str) -> None:
    with pytest.raises(ManifestError) as info:
        parse_manifest(encode(manifest_obj(**obj)))
    assert str(info.value) == message


@pytest.mark.parametrize("key", ["schema_version", "id", "digest", "created", "files"])
def test_parse_missing_field(key: str) -> None:
    obj = manifest_obj()
    del obj[key]
    with pytest.raises(ManifestError, match=rf"^manifest {key} is required$"):
        parse_manifest(encode(obj))


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("size", 1.0, r"manifest files\[0\]\.size must be an integer"),
        ("size", -1, r"manifest files\[0\]\.size must be non-negative"),
        ("size", True, r"manifest files\[0\]\.size must be an integer"),
        ("size", None, r"manifest files\[0\]\.size is required"),
        ("path", None, r"manifest files\[0\]\.path is required"),
        ("path", 3, r"manifest files\[0\]\.path must be a string"),
        ("sha256", None, r"manifest files\[0\]\.sha256 is required"),
    ],
)
def test_parse_file_field_errors(field: str, value: object, message: str) -> None:
    obj = manifest_obj()
    obj["files"][0][field] = value  # type: ignore[index]
    with pytest.raises(ManifestError, match=rf"^{message}$"):
        parse_manifest(encode(obj))


@pytest.mark.parametrize(
    ("place", "message"),
    [
        (("id",), "manifest id"),
        (("digest",), "manifest digest"),
        (("created",), "manifest created"),
        (("files", 0, "path"), r"manifest files\[0\]\.path"),
        (("files", 1, "sha256"), r"manifest files\[1\]\.sha256"),
        (("note",), "manifest note"),
        (("files", 0, "note"), r"manifest files\[0\]\.note"),
    ],
)
def test_parse_refuses_a_lone_surrogate_in_any_text_field(place: tuple[object, ...], message: str) -> None:
    """JSON's ``"\\ud800"`` escape is not UTF-8 text (issue 35, item 1): every string is checked
    before a rule quotes it back (``created`` quoted it into an error that could not be encoded)."""
    obj = manifest_obj()
    node: object = obj
    for step in place[:-1]:
        node = node[step]  # type: ignore[index]
    node[place[-1]] = "@S@"  # type: ignore[index]
    data = encode(obj).replace(b"@S@", b"ok\\udc00")
    with pytest.raises(ManifestError, match=rf"^{message} is not valid UTF-8: character 3 is an unpaired UTF-16 "
                                             r"surrogate \(\\udc00\)$"):
        parse_manifest(data)
    key = encode(manifest_obj()).replace(b'"files"', b'"\\ud800": 1, "files"')
    with pytest.raises(ManifestError, match=r"^manifest key is not valid UTF-8: character 1 "):
        parse_manifest(key)
    # an unknown key is named on one line, quoted when it is not a plain word
    odd = encode(manifest_obj(**{"a\nb": "@S@"})).replace(b"@S@", b"\\ud800")
    with pytest.raises(ManifestError, match=r'^manifest \["a\\nb"\] is not valid UTF-8: character 1 '):
        parse_manifest(odd)
    pair = encode(manifest_obj(id="@S@")).replace(b"@S@", b"ok\\ud83d\\ude00")  # a pair is one character
    assert parse_manifest(pair).id == "ok\U0001f600"


def test_parse_rejects_float_written_with_exponent_and_fraction() -> None:
    text = marshal_manifest(make_manifest()).decode().replace('"size": 9', '"size": 9.0')
    with pytest.raises(ManifestError, match="must be an integer"):
        parse_manifest(text.encode())
    text = marshal_manifest(make_manifest()).decode().replace('"schema_version": 1', '"schema_version": 1e0')
    with pytest.raises(ManifestError, match="schema_version must be an integer"):
        parse_manifest(text.encode())


@pytest.mark.parametrize(
    ("data", "detail"),
    [
        (b"", "EOF"),
        (b"[]", "top-level value must be an object"),
        (b'{"schema_version": 1} {}', "trailing data"),
        (b'{"schema_version": NaN}', "NaN"),
        (b"\xef\xbb\xbf{}", "BOM"),
    ],
)
def test_parse_rejects_bad_json(data: bytes, detail: str) -> None:
    with pytest.raises(ManifestError, match=r"^manifest is not valid JSON: .*" + detail):
        parse_manifest(data)


def test_parse_accepts_trailing_whitespace() -> None:
    manifest = parse_manifest(marshal_manifest(make_manifest()) + b" \t\r\n")
    assert manifest.id == "reports.daily"


def test_parse_ignores_unknown_keys_and_marshal_drops_them() -> None:
    obj = manifest_obj(routing={"destination": "x"}, ID="ignored")
    obj["files"][0]["mode"] = "0644"  # type: ignore[index]
    manifest = parse_manifest(encode(obj))
    out = json.loads(marshal_manifest(manifest))
    assert list(out) == ["schema_version", "id", "digest", "created", "files"]
    assert list(out["files"][0]) == ["path", "sha256", "size"]
    assert out["id"] == "reports.daily"


def test_parse_is_case_sensitive_on_keys() -> None:
    obj = manifest_obj()
    obj["Id"] = obj.pop("id")
    with pytest.raises(ManifestError, match=r"^manifest id is required$"):
        parse_manifest(encode(obj))


def test_parse_last_duplicate_key_wins() -> None:
    text = marshal_manifest(make_manifest()).decode()
    text = text.replace('"id": "reports.daily"', '"id": "x", "id": "reports.daily"')
    assert parse_manifest(text.encode()).id == "reports.daily"


def test_parse_normalises_created_offset() -> None:
    manifest = parse_manifest(encode(manifest_obj(created="2026-06-07T17:00:00+02:00")))
    assert manifest.created == CREATED
    assert b'"created": "2026-06-07T15:00:00Z"' in marshal_manifest(manifest)


@pytest.mark.parametrize(
    "value",
    [
        "2026-06-07 15:00:00Z",
        "2026-06-07T15:00:00",
        "2026-06-07t15:00:00z",
        "2026-06-07T15:00:00+0200",
        "May 30",
    ],
)
def test_parse_rejects_non_rfc3339_created(value: str) -> None:
    with pytest.raises(ManifestError, match=r"^manifest created must be RFC3339: "):
        parse_manifest(encode(manifest_obj(created=value)))


def test_fractional_created_is_kept_and_trimmed() -> None:
    # nanoseconds are kept end to end (resolutions G1), as Go's RFC3339Nano writes them
    manifest = parse_manifest(encode(manifest_obj(created="2026-06-07T15:00:00.123456789Z")))
    assert manifest.created > CREATED.replace(microsecond=123456)
    assert manifest.created < CREATED.replace(microsecond=123457)
    assert b'"created": "2026-06-07T15:00:00.123456789Z"' in marshal_manifest(manifest)
    trimmed = parse_manifest(encode(manifest_obj(created="2026-06-07T17:00:00.123456780+02:00")))
    assert trimmed.created < manifest.created
    assert b'"created": "2026-06-07T15:00:00.12345678Z"' in marshal_manifest(trimmed)
    half = make_manifest(created=CREATED.replace(microsecond=500000))
    assert b'"created": "2026-06-07T15:00:00.5Z"' in marshal_manifest(half)


# ---------------------------------------------------------------- marshal


def test_marshal_layout_is_go_compatible() -> None:
    files = [record("r<&>.md", REPORT)]
    data = marshal_manifest(make_manifest(files))
    text = data.decode()
    assert text.endswith("}\n") and not text.endswith("\n\n")
    assert text.startswith('{\n  "schema_version": 1,\n  "id": "reports.daily",\n  "digest": "sha256:')
    assert '"path": "r\\u003c\\u0026\\u003e.md"' in text
    assert '    {\n      "path"' in text


def test_marshal_refuses_invalid_manifest() -> None:
    with pytest.raises(ManifestError, match="manifest digest does not match files"):
        marshal_manifest(make_manifest(digest="sha256:" + "1" * 64))


def test_manifest_from_obj_does_not_validate_digest() -> None:
    manifest = manifest_from_obj(manifest_obj(digest="sha256:" + "1" * 64))
    assert manifest.digest == "sha256:" + "1" * 64


# ---------------------------------------------------------------- equality and identity


def test_equality_uses_instant_for_created() -> None:
    a = make_manifest()
    b = make_manifest(created=datetime(2026, 6, 7, 10, 0, tzinfo=timezone(timedelta(hours=-5))))
    assert manifests_equal(a, b)
    assert manifest_identity(a) == manifest_identity(b)


@pytest.mark.parametrize(
    "changes",
    [
        {"id": "other"},
        {"created": CREATED + timedelta(microseconds=1)},
        {"files": [record("summary.txt", SUMMARY), record("report.md", REPORT)]},
        {"files": [record("report.md", REPORT)]},
        {"files": [record("report.md", REPORT), record("summary.txt", b"Summary!\n")]},
    ],
)
def test_equality_detects_differences(changes: dict[str, object]) -> None:
    a = make_manifest()
    files = changes.pop("files", None)
    b = make_manifest(files, **changes)  # type: ignore[arg-type]
    assert not manifests_equal(a, b)
    assert manifest_identity(a) != manifest_identity(b)


def test_identity_is_hashable_and_ordered() -> None:
    identity = manifest_identity(make_manifest())
    assert hash(identity) == hash(manifest_identity(make_manifest()))
    assert identity[:3] == (1, "reports.daily", make_manifest().digest)
    assert identity[4][0] == ("report.md", file_digest(REPORT), len(REPORT))

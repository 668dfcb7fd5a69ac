"""The whole-column checks of the manifest and state rules (``bundle.columns``,
``state.validate.http_urls_valid``, ``paths.bundle_paths_valid``) never accept what the exact rules
refuse, and the digest of valid records is byte-for-byte the canonical one."""

from __future__ import annotations

from datetime import UTC, datetime

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from distributor_core import paths as lp
from distributor_core.bundle import (
    Manifest,
    ManifestError,
    ManifestFile,
    bundle_digest,
    columns,
    digest_problem,
    source_path_problem,
)
from distributor_core.bundle.validate import validate_manifest
from distributor_core.state.validate import check_http_url, http_urls_valid

_PIECES = [
    "a", "b", 'q"', "\u2029",
    ".", "..", "/", "\\", "\n", "\x00", "\x1f", "\x7f", "\ud800", "é", " ", "\u00a0", "\u2028",
    "<", "&", '"', "manifest.json", ".distributor.json", ".distributor-tmp-1", ".distributor-bak-1", "x.distributor",
]
_texts = st.lists(st.sampled_from(_PIECES), max_size=6).map("".join)


@settings(max_examples=3000, deadline=None)
@given(st.lists(_texts, min_size=1, max_size=4))
def test_bundle_paths_valid_only_for_valid_paths(paths: list[str]) -> None:
    if lp.bundle_paths_valid(paths):
        assert all(source_path_problem(p) is None for p in paths)


def test_bundle_paths_valid_accepts_ordinary_paths() -> None:
    assert lp.bundle_paths_valid(["report.md", "data/2026/part-01.csv", "é/x y.txt", ".github/a"])
    for bad in ["", "/a", "a/", "a//b", "a/./b", "a/..", "a\nb", "x/manifest.json", ".distributor.json"]:
        assert not lp.bundle_paths_valid(["ok", bad])


@settings(max_examples=2000, deadline=None)
@given(st.lists(st.sampled_from(["http", "HTTPS", "://", "a", ".", ":", "80", "99999", "/", "?", "#", " ", "\n", "[",
                                 "@", "é", "\t", "-"]), max_size=8).map("".join))
def test_http_urls_valid_only_for_valid_urls(url: str) -> None:
    if http_urls_valid([url]):
        assert check_http_url(url) is None


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(["sha256:", "0" * 64, "a" * 64, "A" * 64, "\n", "x", "0"]), max_size=4).map("".join))
def test_digests_valid_only_for_digests(value: str) -> None:
    if columns.digests_valid([value, "sha256:" + "0" * 64]):
        assert digest_problem(value) is None


@settings(max_examples=500, deadline=None)
@given(st.lists(st.tuples(_texts, st.integers(min_value=0, max_value=2**62)), min_size=1, max_size=4))
def test_fast_digest_is_the_canonical_digest(rows: list[tuple[str, int]]) -> None:
    files = [ManifestFile(path=p, sha256="sha256:" + "ab" * 32, size=n) for p, n in rows]
    try:
        expected = bundle_digest(files)
    except UnicodeEncodeError:  # surrogates cannot be hashed either way
        return
    assert columns.bundle_digest_valid_records(files) == expected
    if all(source_path_problem(p) is None for p, _ in rows):  # columns: valid records only
        assert columns._digest_of_columns([f.path for f in files], [f.sha256 for f in files],
                                            [f.size for f in files]) == expected


def test_manifest_valid_agrees_with_validate_manifest() -> None:
    files = (ManifestFile("a.md", "sha256:" + "1" * 64, 3), ManifestFile("b/c.txt", "sha256:" + "2" * 64, 0))
    good = Manifest(1, "id", bundle_digest(files), datetime(2026, 1, 1, tzinfo=UTC), files)
    validate_manifest(good)
    assert columns.manifest_valid(good)
    broken = [
        Manifest(1, "id", "sha256:" + "0" * 64, good.created, files),  # digest mismatch
        Manifest(1, "", good.digest, good.created, files),
        Manifest(2, "id", good.digest, good.created, files),
        Manifest(1, "id", good.digest, good.created, (files[0], files[0])),
        Manifest(1, "id", good.digest, good.created, (ManifestFile("a.md", "sha256:x", 3), files[1])),
        Manifest(1, "id", good.digest, good.created, (ManifestFile("a.md", files[0].sha256, -1), files[1])),
        Manifest(1, "id", good.digest, good.created, (ManifestFile("a.md", files[0].sha256, True), files[1])),
        Manifest(1, "id", good.digest, good.created, ()),
    ]
    for manifest in broken:
        assert not columns.manifest_valid(manifest)


# ---------------------------------------------------------------------------- parse parity


def _state_text(outputs: list[str]) -> str:
    files = [ManifestFile("a.md", "sha256:" + "1" * 64, 3)]
    digest = bundle_digest(files)
    return (
        '{"schema_version": 2, "pipeline_id": "p", "destination_id": "d",'
        ' "published_at": "2026-01-02T00:00:00Z", "created_at": "2026-01-01T00:00:00Z",'
        ' "updated_at": "2026-01-02T00:00:00Z", "state": {"mode": "single_owner"},'
        ' "reconciliation": {"mode": "replace"},'
        ' "source": {"manifest": {"schema_version": 1, "id": "b", "digest": "' + digest + '",'
        ' "created": "2026-01-01T00:00:00Z", "files": [{"path": "a.md", "sha256": "sha256:' + "1" * 64 + '",'
        ' "size": 3}]}},'
        ' "outputs": [' + ",".join(outputs) + "]}"
    )


_OUT = (
    '{"path": %s, "kind": "source", "source_path": "a.md", "sha256": "sha256:' + "1" * 64 + '", "size": %s,'
    ' "created_at": "2026-01-01T00:00:00Z", "updated_at": %s%s}'
)
_VARIANTS = [
    _OUT % ('"a.md"', "3", '"2026-01-02T00:00:00Z"', ""),
    _OUT % ('"a.md"', "3", '"2026-01-02T00:00:00+02:00"', ', "transform": null, "url": null'),
    _OUT % ('"a.md"', "3", '"2026-01-02T00:00:00Z"', ', "transform": "\\ud800x"'),
    _OUT % ('"a\\ud800.md"', "3", '"2026-01-02T00:00:00Z"', ""),
    _OUT % ('"a.md"', "3", '"2026-01-02T00:00:00Z"', ', "url": "https://h.example/\\udfff"'),
    _OUT % ('"a.md"', "3.0", '"2026-01-02T00:00:00Z"', ""),
    _OUT % ('"a.md"', "true", '"2026-01-02T00:00:00Z"', ""),
    _OUT % ('"a.md"', "-1", '"2026-01-02T00:00:00Z"', ""),
    _OUT % ('""', "3", '"2026-01-02T00:00:00Z"', ""),
    _OUT % ('"a.md"', "3", '"yesterday"', ""),
    _OUT % ('"a.md"', "3", '""', ""),
    _OUT % ('"a.md"', "3", '"2026-01-02T00:00:00Z"', ', "transform": 5'),
    _OUT % ('"a.md"', "3", '"2026-01-02T00:00:00Z"', ', "transform": false'),
    _OUT % ('"a.md"', "3", '"2026-01-02T00:00:00Z"', ', "url": "ftp://x"'),
    _OUT % ('"a.md"', "9223372036854775808", '"2026-01-02T00:00:00Z"', ""),
    "null",
    "[]",
    (_OUT % ('"a.md"', "3", '"2026-01-02T00:00:00Z"', "")).replace('"source",', '"bogus",'),
    (_OUT % ('"a.md"', "3", '"2026-01-02T00:00:00Z"', "")).replace('"source",', '"generated",'),
    (_OUT % ('"a.md"', "3", '"2026-01-02T00:00:00Z"', "")).replace('"sha256:1', '"sha256:X'),
    (_OUT % ('"b.md"', "3", '"2026-01-02T00:00:00Z"', "")).replace('"a.md"', '"a/../b"'),
]


def _outcome(fn, *args):
    from distributor_core.state import StateError

    try:
        return ("ok", fn(*args))
    except StateError as exc:
        return ("error", str(exc))


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_VARIANTS), min_size=0, max_size=3))
def test_a_document_reads_the_same_from_text_and_bytes_and_round_trips(outputs: list[str]) -> None:
    from distributor_core.state import marshal_state, parse_state_document

    text = _state_text(outputs)
    outcome = _outcome(parse_state_document, text)
    assert _outcome(parse_state_document, text.encode("utf-8", "surrogatepass")) == outcome
    if outcome[0] == "ok":
        assert parse_state_document(marshal_state(outcome[1])) == outcome[1]


_TOP_VARIANTS = [
    lambda text: text,
    lambda text: text.replace('"pipeline_id": "p"', '"pipeline_id": 5'),
    lambda text: text.replace('"pipeline_id": "p",', ""),
    lambda text: text.replace('{"mode": "single_owner"}', "null"),
    lambda text: text.replace('"size": 3}]}}', '"size": 3.5}]}}'),
    lambda text: text.replace('"id": "b"', '"id": ""'),
    lambda text: text.replace('"schema_version": 2', '"schema_version": 3'),
    lambda text: text.replace('"schema_version": 2', '"schema_version": 1'),
    lambda text: text + " x",
    lambda text: text.replace('"outputs": [', '"unknown": [1, {"a": NaN}], "outputs": ['),
    lambda text: text.replace('"outputs": [', '"outputs": [], "outputs": ['),
]


def test_every_variant_reads_the_same_with_or_without_the_expected_manifest() -> None:
    """The one decoder reads plain documents and words every refusal: the same state or the same
    error from text and from bytes, and whether or not the caller hands the manifest it expects
    the state to record (that only spares building an equal one)."""
    from itertools import product

    from distributor_core.state import parse_state_document

    texts = [_state_text(list(outputs)) for n in range(3) for outputs in product(_VARIANTS, repeat=n)]
    texts += [change(_state_text([_VARIANTS[0]])) for change in _TOP_VARIANTS]
    recorded = parse_state_document(_state_text([_VARIANTS[0]])).manifest
    expected = validate_manifest(Manifest(*(getattr(recorded, f) for f in recorded.__struct_fields__)))
    read = 0
    for text in texts:
        outcome = _outcome(parse_state_document, text)
        assert _outcome(parse_state_document, text.encode("utf-8", "surrogatepass")) == outcome, text
        assert _outcome(lambda: parse_state_document(text, source_manifest=expected)) == outcome, text  # noqa: B023
        read += outcome[0] == "ok"
    assert read >= 5  # the plain ones were read (most variants are invalid)
    state = parse_state_document(_state_text([_VARIANTS[0]]), source_manifest=expected)
    assert state.manifest is expected  # recorded exactly: that very manifest


def test_a_valid_manifest_is_reused_only_when_recorded_exactly() -> None:
    from datetime import timedelta

    from distributor_core.bundle import parse_manifest
    from distributor_core.state import parse_state_document

    text = _state_text([_VARIANTS[0]])
    plain = _outcome(parse_state_document, text)
    assert plain[0] == "ok"
    recorded = plain[1].manifest
    same = parse_manifest(
        b'{"schema_version": 1, "id": "b", "digest": "' + recorded.digest.encode() + b'", '
        b'"created": "2026-01-01T00:00:00Z", "files": [{"path": "a.md", "sha256": "sha256:' + b"1" * 64
        + b'", "size": 3}]}'
    )
    assert same == recorded and same is not recorded
    reused = _outcome(lambda: parse_state_document(text, source_manifest=same))
    assert reused == plain and reused[1].manifest is same
    later = Manifest(1, same.id, same.digest, same.created + timedelta(seconds=1), same.files)
    other = _outcome(lambda: parse_state_document(text, source_manifest=later))
    assert other == plain and other[1].manifest is not later
    # a recorded manifest that no valid one describes is validated: a broken one still fails
    broken_text = text.replace(recorded.digest, "sha256:" + "f" * 64)
    baseline = _outcome(parse_state_document, broken_text)
    assert baseline[0] == "error" and "digest" in baseline[1]
    assert _outcome(lambda: parse_state_document(broken_text, source_manifest=same)) == baseline


def test_a_parsed_manifest_is_a_valid_manifest_and_stays_one() -> None:
    """Validity is the manifest's type (issue 27): what a parse returns is a ``ValidManifest``,
    a copy of one is checked when it is made, and a state holding a plain manifest is checked
    when it is written."""
    from distributor_core.bundle import ValidManifest
    from distributor_core.state import StateError, marshal_state, parse_state_document

    state = parse_state_document(_state_text([_VARIANTS[0]]))
    assert isinstance(state.manifest, ValidManifest)
    with pytest.raises(ManifestError, match="digest does not match files"):
        msgspec.structs.replace(state.manifest, digest="sha256:" + "f" * 64)
    plain = Manifest(*(getattr(state.manifest, name) for name in state.manifest.__struct_fields__))
    assert plain == state.manifest and not isinstance(plain, ValidManifest)
    assert marshal_state(msgspec.structs.replace(state, manifest=plain)) == marshal_state(state)
    broken = Manifest(plain.schema_version, plain.id, "sha256:" + "f" * 64, plain.created, plain.files)
    with pytest.raises(StateError, match="digest"):
        marshal_state(msgspec.structs.replace(state, manifest=broken))


_MANIFEST_VARIANTS = [
    lambda text: text,
    lambda text: text.replace('"id": "b"', '"id": "other"'),
    lambda text: text.replace('"id": "b"', '"id": ""'),
    lambda text: text.replace('"id": "b",', ""),
    lambda text: text.replace('"schema_version": 1', '"schema_version": 2'),
    lambda text: text.replace('"schema_version": 1', '"schema_version": true'),
    lambda text: text.replace('"created": "2026-01-01T00:00:00Z"', '"created": "0001-01-01T00:00:00Z"'),
    lambda text: text.replace('"created": "2026-01-01T00:00:00Z"', '"created": "2026-01-01T01:00:00+01:00"'),
    lambda text: text.replace('"created": "2026-01-01T00:00:00Z"', '"created": "2026-01-05T00:00:00.5Z"'),
    lambda text: text.replace('"size": 3}]}}', '"size": 4}]}}'),
    lambda text: text.replace('"size": 3}]}}', '"size": 3}, {"path": "b.md", "sha256": "sha256:'
                              + "2" * 64 + '", "size": 1}]}}'),
]


def test_a_recorded_manifest_with_the_files_of_the_expected_one_reads_the_same() -> None:
    """A recorded manifest that lists exactly the files of a manifest the caller validated (a
    newer build of the same content: replace_older) is built around those files, and every
    other field still has to pass: the same state or error as without the expected manifest."""
    from datetime import timedelta

    from distributor_core.state import parse_state_document

    base = _state_text([_VARIANTS[0]])
    recorded = parse_state_document(base).manifest
    later = validate_manifest(Manifest(1, "b", recorded.digest, recorded.created + timedelta(days=1), recorded.files))
    shared = 0
    for change in _MANIFEST_VARIANTS:
        text = change(base)
        text = text.replace(recorded.digest, bundle_digest(_files_of(text))) if "b.md" in text else text
        exact = _outcome(lambda: parse_state_document(text))  # noqa: B023
        typed_result = _outcome(lambda: parse_state_document(text, source_manifest=later))  # noqa: B023
        assert typed_result == exact, text
        ok = typed_result[0] == "ok"
        if ok and typed_result[1].manifest.files == later.files and typed_result[1].manifest.created != later.created:
            assert typed_result[1].manifest.files is later.files
            shared += 1
    assert shared >= 3


def _files_of(text: str) -> list[ManifestFile]:
    import json

    files = json.loads(text)["source"]["manifest"]["files"]
    return [ManifestFile(f["path"], f["sha256"], f["size"]) for f in files]


def test_manifest_columns_valid_agrees_with_validate_manifest() -> None:
    files = (ManifestFile("a.md", "sha256:" + "1" * 64, 3), ManifestFile("b/c", "sha256:" + "2" * 64, 0))
    good = Manifest(1, "b", bundle_digest(files), datetime(2026, 1, 1, tzinfo=UTC), files)
    validate_manifest(good)
    assert columns.manifest_valid(good)
    for bad in (
        Manifest(2, "b", good.digest, good.created, files),
        Manifest(1, "", good.digest, good.created, files),
        Manifest(1, "b", "sha256:" + "f" * 64, good.created, files),
        Manifest(1, "b", good.digest, datetime(1, 1, 1, tzinfo=UTC), files),
        Manifest(1, "b", good.digest, good.created, files[:1]),
        Manifest(1, "b", good.digest, good.created, (files[0], files[0])),
        Manifest(1, "b", good.digest, good.created, ()),
    ):
        assert not columns.manifest_valid(bad)
        with pytest.raises(ManifestError):
            validate_manifest(bad)

"""Hostile input: property tests over manifest parsing, state parsing and upload archives
(issue 9).

For every generated input the parser either accepts it, and then what it accepted survives a
round trip through the writer, or rejects it with its documented error type and a clear one-line
message; no other exception escapes:

- ``parse_manifest`` → ``ManifestError`` (a ``BundleError``), messages ``manifest ...``;
- ``parse_state_document`` → ``StateError``;
- ``extract_bundle`` (the upload server's archive staging) → ``ArchiveError``,
  ``InvalidBundleError`` or ``TooLargeError`` (HTTP 400/413 texts), and nothing is ever written
  outside the fresh staging directory; what it accepts is a valid bundle holding exactly the files
  its manifest lists, all regular files.

Inputs are generated three ways: raw bytes, arbitrary JSON / tar structures, and small mutations
of valid documents (the most productive). CI runs a sample; ``DISTRIBUTOR_LONG=1`` runs the
dedicated long run (over 100,000 generated cases in total, reported at the end of the session).
Hypothesis derandomizes with a fixed seed (``derandomize=True``), so every run is reproducible.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import tarfile
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distributor_core.bundle import BundleError, ManifestError, manifest_to_obj, marshal_manifest, parse_manifest
from distributor_core.bundle import validate_bundle as validate_bundle_dir
from distributor_core.server.archive import (
    ArchiveError,
    InvalidBundleError,
    StagingError,
    TooLargeError,
    extract_bundle,
)
from distributor_core.state import StateError, marshal_state, parse_state_document

from .conftest import LONG, count

pytestmark = pytest.mark.slow

#: examples per property: CI sample / dedicated long run (six properties; > 100,000 in total)
EXAMPLES = {
    "manifest_bytes": 25_000 if LONG else 600,
    "manifest_mutation": 25_000 if LONG else 1_200,
    "state_bytes": 10_000 if LONG else 400,
    "state_mutation": 25_000 if LONG else 1_200,
    "archive_structure": 12_000 if LONG else 600,
    "archive_mutation": 8_000 if LONG else 400,
}


def _settings(name: str) -> settings:
    return settings(
        max_examples=EXAMPLES[name],
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    )


def _sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _one_line(message: str) -> None:
    assert message and "\n" not in message and "Traceback" not in message, message


# --------------------------------------------------------------------------- JSON building blocks

TEXT = st.text(max_size=12) | st.sampled_from([
    "", ".", "..", "../x", "/abs", "a//b", "a/./b", "a\\b", "manifest.json", ".distributor.json",
    ".distributor.lock", ".distributor-tmp-0123456789abcdef", "dir/.distributor-bak-x", "é/ü.txt",
    "\x00", "a\ud800b", "x" * 300, "sha256:" + "0" * 64, "sha256:" + "A" * 64, "2026-06-01T08:00:00Z",
    "2026-06-01T08:00:00.123456789+02:00", "2026-13-01T00:00:00Z", "1e3", "NaN",
])
SCALARS = (
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70) | st.floats(allow_nan=False) | TEXT
)
JSON = st.recursive(
    SCALARS,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(TEXT, children, max_size=4),
    max_leaves=12,
)


def _mutations(base: dict[str, Any]) -> st.SearchStrategy[list[tuple[list[Any], str, Any]]]:
    """Lists of (path into ``base``, operation, value): replace, delete or add under a key."""
    paths: list[list[Any]] = []

    def walk(node: Any, prefix: list[Any]) -> None:
        paths.append(prefix)
        if isinstance(node, dict):
            for key, value in node.items():
                walk(value, [*prefix, key])
        elif isinstance(node, list):
            for index, value in enumerate(node):
                walk(value, [*prefix, index])

    walk(base, [])
    op = st.sampled_from(["replace", "delete", "add", "duplicate"])
    return st.lists(st.tuples(st.sampled_from(paths), op, JSON), min_size=1, max_size=3)


def _apply(base: Any, mutations: list[tuple[list[Any], str, Any]]) -> Any:
    doc = json.loads(json.dumps(base))
    for path, op, value in mutations:
        parent: Any = None
        node = doc
        try:
            for step in path:
                parent, node = node, node[step]
        except (KeyError, IndexError, TypeError):
            continue
        if not path:
            if op == "replace":
                doc = value
            continue
        key = path[-1]
        if op == "replace":
            parent[key] = value
        elif op == "delete":
            del parent[key]
        elif op == "add" and isinstance(node, dict):
            node[str(value)[:8] or "k"] = value
        elif op == "add" and isinstance(node, list):
            node.append(value)
        elif op == "duplicate" and isinstance(parent, list):
            parent.append(json.loads(json.dumps(node)))
    return doc


def _encode(doc: Any, style: int) -> bytes:
    text = json.dumps(doc, ensure_ascii=bool(style & 1), indent=2 if style & 2 else None, allow_nan=True)
    data = text.encode("utf-8", errors="surrogatepass")
    if style & 4:
        data = b"\xef\xbb\xbf" + data
    if style & 8:
        data += b" {}"
    return data


# --------------------------------------------------------------------------- manifests

FILES = {"report.md": b"# Report\n", "data/table.csv": b"a,b\n1,2\n"}
def _valid_manifest_obj() -> dict[str, Any]:
    from distributor_core.bundle import Manifest, ManifestFile, bundle_digest

    records = [ManifestFile(p, _sha(d), len(d)) for p, d in FILES.items()]
    manifest = Manifest(1, "reports.daily", bundle_digest(records), datetime(2026, 6, 1, 8, tzinfo=UTC), records)
    return manifest_to_obj(manifest)


VALID_MANIFEST = _valid_manifest_obj()


def check_manifest(data: bytes) -> None:
    try:
        manifest = parse_manifest(data)
    except ManifestError as exc:
        _one_line(str(exc))
        assert str(exc).startswith("manifest "), str(exc)
        return
    except BundleError as exc:  # the family: still documented, still one line
        _one_line(str(exc))
        return
    again = parse_manifest(marshal_manifest(manifest))
    assert again == manifest


@_settings("manifest_bytes")
@given(st.binary(max_size=600) | JSON.map(lambda doc: json.dumps(doc).encode()))
def test_manifest_parser_on_arbitrary_input(data: bytes) -> None:
    count("generated cases: manifest (arbitrary)", 1)
    check_manifest(data)


@_settings("manifest_mutation")
@given(_mutations(VALID_MANIFEST), st.integers(0, 15))
def test_manifest_parser_on_mutated_manifests(mutations: list[Any], style: int) -> None:
    count("generated cases: manifest (mutated)", 1)
    check_manifest(_encode(_apply(VALID_MANIFEST, mutations), style))


def test_valid_manifest_sample_is_accepted() -> None:
    """The mutation base is valid, so the mutations start from a document the parser accepts."""
    assert parse_manifest(json.dumps(VALID_MANIFEST).encode()).id == "reports.daily"


# --------------------------------------------------------------------------- state


def _valid_states() -> list[dict[str, Any]]:
    from distributor_core.bundle import parse_manifest as pm
    from distributor_core.state import (
        OutputRecord,
        OwnerRecord,
        SharedOutputRecord,
        SharedRootState,
        SingleOwnerState,
    )

    manifest = pm(json.dumps(VALID_MANIFEST).encode())
    at = datetime(2026, 6, 1, 9, tzinfo=UTC)
    single = SingleOwnerState(
        pipeline_id="reports", destination_id="site", published_at=at, created_at=at, updated_at=at,
        reconciliation_mode="replace", manifest=manifest,
        outputs=tuple(OutputRecord(f.path, "source", f.path, f.sha256, f.size, at, at) for f in manifest.files),
        primary_url="https://example.org/report.md", distributor_version="test",
    )
    shared = SharedRootState(
        created_at=at, updated_at=at,
        owners=(OwnerRecord("reports", "site", "merge", manifest),),
        outputs=tuple(
            SharedOutputRecord(path=f.path, kind="source", source_path=f.path, sha256=f.sha256, size=f.size,
                               pipeline_id="reports", destination_id="site", source_id=manifest.id,
                               source_digest=manifest.digest, source_created=manifest.created,
                               created_at=at, updated_at=at)
            for f in manifest.files
        ),
        distributor_version="test",
    )
    return [json.loads(marshal_state(single)), json.loads(marshal_state(shared))]


VALID_STATES = _valid_states()


def check_state(data: bytes) -> None:
    try:
        doc = parse_state_document(data)
    except StateError as exc:
        _one_line(str(exc))
        return
    again = parse_state_document(marshal_state(doc))
    assert again == doc


@_settings("state_bytes")
@given(st.binary(max_size=600) | JSON.map(lambda doc: json.dumps(doc).encode()))
def test_state_parser_on_arbitrary_input(data: bytes) -> None:
    count("generated cases: state (arbitrary)", 1)
    check_state(data)


@_settings("state_mutation")
@given(st.sampled_from([0, 1]).flatmap(lambda i: st.tuples(st.just(i), _mutations(VALID_STATES[i]))),
       st.integers(0, 15))
def test_state_parser_on_mutated_states(case: tuple[int, list[Any]], style: int) -> None:
    count("generated cases: state (mutated)", 1)
    index, mutations = case
    check_state(_encode(_apply(VALID_STATES[index], mutations), style))


def test_valid_state_samples_are_accepted() -> None:
    for doc in VALID_STATES:
        parse_state_document(json.dumps(doc).encode())


# --------------------------------------------------------------------------- upload archives

NAMES = st.sampled_from([
    "report.md", "data/table.csv", "data", "data/", "./report.md", "./", ".", "manifest.json",
    "./manifest.json", "sub/manifest.json", "../escape.txt", "a/../../escape.txt", "/etc/passwd",
    "/abs/file", "a\\b.txt", "a//b.txt", ".distributor.json", "x/.distributor.lock",
    ".distributor-tmp-0000000000000000", "é.txt", "a" * 120 + "/" + "b" * 120, "n" * 300,
    "x\x00y", "line\nbreak", "data/table.csv/inner",
]) | st.text(min_size=1, max_size=20)
KINDS = st.sampled_from(["file", "file", "file", "dir", "symlink", "hardlink", "fifo", "chr", "blk", "sparse"])


SAFE_NAMES = st.sampled_from(["report.md", "summary.txt", "data/table.csv", "data/raw/2026.json", "é/ü.txt",
                              "notes/a b.txt", "x" * 100])


@st.composite
def archives(draw: Callable[..., Any]) -> tuple[bytes, bool]:
    """A tar (maybe gzip) of generated entries, usually with a manifest that lists some of them.

    A third are valid bundles, a third valid bundles with one hostile change (an extra entry of
    any name and type, a file left unlisted, a wrong digest or size), a third anything at all."""
    mode = draw(st.sampled_from(["valid", "nearly", "wild"]))
    entries: list[tuple[str, str, bytes, str]] = []
    if mode == "wild":
        for _ in range(draw(st.integers(0, 6))):
            name = draw(NAMES)
            kind = draw(KINDS)
            data = draw(st.binary(max_size=64)) if kind == "file" else b""
            target = draw(st.sampled_from(["report.md", "../../etc/passwd", "/etc/passwd", "data", "missing"]))
            entries.append((name, kind, data, target))
    else:
        for name in draw(st.lists(SAFE_NAMES, min_size=1, max_size=4, unique=True)):
            if "/" in name and draw(st.booleans()):
                entries.append((name.rsplit("/", 1)[0] + "/", "dir", b"", ""))
            entries.append((name, "file", draw(st.binary(max_size=64)), ""))
    files = {name: data for name, kind, data, _ in entries if kind == "file"}
    if mode != "wild" or draw(st.booleans()) or not files:
        listed = list(files)
        if mode == "wild":
            listed = [n for n in files if draw(st.booleans())] or listed[:1]
        perturb = draw(st.sampled_from(["extra", "unlisted", "sha", "size"])) if mode == "nearly" else ""
        if perturb == "unlisted" and len(listed) > 1:
            listed = listed[1:]
        records = []
        for path in listed:
            data = files[path]
            if mode == "wild":
                wrong = draw(st.sampled_from(["", "", "", "sha", "size"]))
            else:
                wrong = perturb if perturb in ("sha", "size") and path == listed[0] else ""
            records.append({"path": path.removeprefix("./"),
                            "sha256": _sha(data + b"!") if wrong == "sha" else _sha(data),
                            "size": len(data) + (1 if wrong == "size" else 0)})
        bundle_id = "reports.upload" if mode != "wild" else draw(st.sampled_from(["reports.upload", "", "bad id!"]))
        manifest = {"schema_version": 1, "id": bundle_id,
                    "digest": "", "created": "2026-06-01T08:00:00Z", "files": records}
        try:
            from distributor_core.bundle import ManifestFile, bundle_digest

            manifest["digest"] = bundle_digest([ManifestFile(r["path"], r["sha256"], r["size"]) for r in records])
        except Exception:
            manifest["digest"] = "sha256:" + "0" * 64
        position = draw(st.integers(0, len(entries)))
        names = ["manifest.json", "./manifest.json"] if mode != "wild" else [
            "manifest.json", "manifest.json", "./manifest.json", "sub/manifest.json"]
        entries.insert(position, (draw(st.sampled_from(names)), "file", json.dumps(manifest).encode(), ""))
        if perturb == "extra":
            kind = draw(KINDS)
            entries.insert(draw(st.integers(0, len(entries))), (
                draw(NAMES), kind, draw(st.binary(max_size=16)) if kind == "file" else b"",
                draw(st.sampled_from(["report.md", "../../etc/passwd", "/etc/passwd"]))))
    fmt = draw(st.sampled_from([tarfile.PAX_FORMAT, tarfile.GNU_FORMAT, tarfile.USTAR_FORMAT]))
    buffer = io.BytesIO()
    try:
        with tarfile.open(fileobj=buffer, mode="w", format=fmt, encoding="utf-8", errors="surrogateescape") as tar:
            for name, kind, data, target in entries:
                info = tarfile.TarInfo(name)
                info.mtime = 0
                if kind == "file":
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
                    continue
                info.type = {"dir": tarfile.DIRTYPE, "symlink": tarfile.SYMTYPE, "hardlink": tarfile.LNKTYPE,
                             "fifo": tarfile.FIFOTYPE, "chr": tarfile.CHRTYPE, "blk": tarfile.BLKTYPE,
                             "sparse": tarfile.GNUTYPE_SPARSE}[kind]
                info.linkname = target
                tar.addfile(info)
    except (ValueError, UnicodeError, tarfile.TarError):
        # the writer refuses some names in some formats; fall back to a name it takes
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
            info = tarfile.TarInfo("report.md")
            info.size = 1
            tar.addfile(info, io.BytesIO(b"x"))
    data = buffer.getvalue()
    compressed = draw(st.booleans())
    return (gzip.compress(data, mtime=0) if compressed else data), compressed


def _snapshot(base: Path) -> dict[str, tuple[str, bytes]]:
    result = {}
    for dirpath, dirs, names in os.walk(base):
        for name in dirs + names:
            full = Path(dirpath, name)
            rel = full.relative_to(base).as_posix()
            if full.is_symlink():
                result[rel] = ("link", os.readlink(full).encode())
            elif full.is_file():
                result[rel] = ("file", full.read_bytes())
            else:
                result[rel] = ("dir", b"")
    return result


def check_archive(data: bytes, compressed: bool, *, max_bytes: int = 64 * 1024) -> str:
    with tempfile.TemporaryDirectory() as scratch:
        base = Path(scratch)
        (base / "outside").mkdir()
        (base / "outside" / "sentinel.txt").write_bytes(b"untouched")
        staging = base / "staging"
        staging.mkdir()
        archive = staging / "upload.archive"
        archive.write_bytes(data)
        dest = staging / "bundle"
        before = _snapshot(base)
        try:
            manifest = extract_bundle(archive, dest, compressed=compressed, max_bytes=max_bytes)
        except StagingError as exc:
            text = str(exc)
            _one_line(text)
            if isinstance(exc, TooLargeError):
                assert exc.status_code == 413 and text == "upload exceeds maximum size"
            else:
                assert isinstance(exc, ArchiveError | InvalidBundleError) and exc.status_code == 400
                assert text.startswith(("invalid upload archive: ", "invalid source bundle: ")), text
            outcome = "rejected"
        else:
            validate_bundle_dir(dest, manifest)
            extracted = _snapshot(dest)
            files = {p for p, (kind, _) in extracted.items() if kind == "file"}
            assert all(kind != "link" for kind, _ in extracted.values())
            assert files == {"manifest.json"} | {f.path for f in manifest.files}
            outcome = "accepted"
        after = {p: v for p, v in _snapshot(base).items() if not (p == "staging/bundle" or p.startswith(
            "staging/bundle/"))}
        assert after == before, sorted(set(after) ^ set(before))
        return outcome


@_settings("archive_structure")
@given(archives())
def test_archive_staging_on_generated_archives(case: tuple[bytes, bool]) -> None:
    count("generated cases: upload archive (generated)", 1)
    check_archive(*case)


def test_generated_archives_reach_both_outcomes() -> None:
    """The generator exercises acceptance as well as every kind of rejection."""
    outcomes: list[str] = []

    @settings(max_examples=150, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(archives())
    def sample(case: tuple[bytes, bool]) -> None:
        outcomes.append(check_archive(*case))

    sample()
    assert outcomes.count("accepted") >= 15 and outcomes.count("rejected") >= 15, outcomes


def _valid_archive() -> bytes:
    manifest = _valid_manifest_obj()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in [("manifest.json", json.dumps(manifest).encode()), *FILES.items()]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = 0
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


VALID_ARCHIVE = _valid_archive()


@_settings("archive_mutation")
@given(
    st.lists(st.tuples(st.integers(0, len(VALID_ARCHIVE) - 1), st.integers(0, 255)), min_size=1, max_size=6),
    st.integers(1, len(VALID_ARCHIVE)),
    st.booleans(),
)
def test_archive_staging_on_mutated_archives(mutations: list[tuple[int, int]], cut: int, compressed: bool) -> None:
    count("generated cases: upload archive (mutated)", 1)
    data = bytearray(VALID_ARCHIVE[:cut])
    for offset, value in mutations:
        if offset < len(data):
            data[offset] = value
    payload = gzip.compress(bytes(data), mtime=0) if compressed else bytes(data)
    check_archive(payload, compressed)


def test_generated_archives_are_sometimes_accepted() -> None:
    """The generator is not only producing rejects: a valid archive passes the same check."""
    assert check_archive(VALID_ARCHIVE, False) == "accepted"
    assert check_archive(gzip.compress(VALID_ARCHIVE), True) == "accepted"

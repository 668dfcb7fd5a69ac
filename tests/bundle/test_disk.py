"""Bundles on disk: load_manifest, validate_bundle, build_manifest, write_manifest and
write_bundle (core-semantics §1.10, interfaces §4.3 items 13 and 15)."""

from __future__ import annotations

import json
import os
import socket
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from distributor_core import bundle as bundle_mod
from distributor_core.bundle import (
    BundleError,
    BundleFile,
    BundlePathError,
    BundleValidationError,
    ManifestError,
    build_manifest,
    bundle_digest,
    file_digest,
    load_manifest,
    marshal_manifest,
    validate_bundle,
    write_bundle,
    write_manifest,
)
from tests.bundle.conftest import CREATED, REPORT, SUMMARY, make_bundle


def entries(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


# ---------------------------------------------------------------- load_manifest


def test_load_manifest_reads_written_manifest(bundle_root: Path) -> None:
    manifest = load_manifest(bundle_root)
    assert manifest.id == "reports.daily"
    assert manifest.digest == "sha256:099b205780d2b050024868399961b05731729a548d5d6329c7b06a6740dd75fe"
    assert [f.path for f in manifest.files] == ["report.md", "summary.txt"]
    assert manifest.created == CREATED


def test_load_manifest_missing(tmp_path: Path) -> None:
    with pytest.raises(BundleValidationError, match=r"^manifest\.json does not exist$"):
        load_manifest(tmp_path)


def test_load_manifest_refuses_symlink(tmp_path: Path, bundle_root: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "manifest.json").symlink_to(bundle_root / "manifest.json")
    with pytest.raises(BundleValidationError, match=r"^manifest\.json is not a regular file \(symlink\)$"):
        load_manifest(other)


def test_load_manifest_reports_content_errors(bundle_root: Path) -> None:
    (bundle_root / "manifest.json").write_text('{"schema_version": 2}')
    with pytest.raises(ManifestError, match=r"^manifest schema_version must be 1$"):
        load_manifest(bundle_root)


# ---------------------------------------------------------------- validate_bundle


def test_validate_bundle_accepts_valid_bundle_and_ignores_unlisted(bundle_root: Path) -> None:
    (bundle_root / "unlisted.bin").write_bytes(b"ignored")
    (bundle_root / "link-unlisted").symlink_to(bundle_root / "report.md")
    manifest = load_manifest(bundle_root)
    assert validate_bundle(bundle_root, manifest) is manifest


def test_validate_bundle_reports_progress(bundle_root: Path) -> None:
    seen: list[int] = []
    validate_bundle(bundle_root, load_manifest(bundle_root), progress=seen.append)
    assert sum(seen) == len(REPORT) + len(SUMMARY)


def test_changed_content_same_size_fails_on_digest(bundle_root: Path) -> None:
    manifest = load_manifest(bundle_root)
    (bundle_root / "report.md").write_bytes(b"# Report\nRainy.\n")
    expected = r"^file report\.md sha256 sha256:[0-9a-f]{64} does not match manifest sha256 sha256:"
    with pytest.raises(BundleValidationError, match=expected):
        validate_bundle(bundle_root, manifest)


def test_changed_size_fails(bundle_root: Path) -> None:
    manifest = load_manifest(bundle_root)
    (bundle_root / "summary.txt").write_bytes(b"Summary, longer\n")
    with pytest.raises(BundleValidationError) as info:
        validate_bundle(bundle_root, manifest)
    assert str(info.value) == "file summary.txt size 16 does not match manifest size 8"


def test_missing_file_fails(bundle_root: Path) -> None:
    manifest = load_manifest(bundle_root)
    (bundle_root / "summary.txt").unlink()
    with pytest.raises(BundleValidationError, match=r"^file summary\.txt does not exist$"):
        validate_bundle(bundle_root, manifest)


def test_symlinked_file_fails(bundle_root: Path, tmp_path: Path) -> None:
    manifest = load_manifest(bundle_root)
    outside = tmp_path / "outside.md"
    outside.write_bytes(REPORT)
    (bundle_root / "report.md").unlink()
    (bundle_root / "report.md").symlink_to(outside)
    with pytest.raises(BundleValidationError, match=r"^file report\.md is not a regular file \(symlink\)$"):
        validate_bundle(bundle_root, manifest)


def test_symlinked_ancestor_fails(tmp_path: Path) -> None:
    root = tmp_path / "b"
    manifest = make_bundle(root, {"sub/report.md": REPORT})
    real = tmp_path / "real"
    (root / "sub").rename(real)
    (root / "sub").symlink_to(real)
    with pytest.raises(BundleValidationError, match=r"^file sub/report\.md has a symlinked ancestor sub$"):
        validate_bundle(root, manifest)


def test_directory_in_place_of_file_fails(bundle_root: Path) -> None:
    manifest = load_manifest(bundle_root)
    (bundle_root / "summary.txt").unlink()
    (bundle_root / "summary.txt").mkdir()
    expected = r"^file summary\.txt is not a regular file \(directory\)$"
    with pytest.raises(BundleValidationError, match=expected):
        validate_bundle(bundle_root, manifest)


def test_fifo_fails_without_blocking(bundle_root: Path) -> None:
    manifest = load_manifest(bundle_root)
    (bundle_root / "summary.txt").unlink()
    os.mkfifo(bundle_root / "summary.txt")
    with pytest.raises(BundleValidationError, match=r"^file summary\.txt is not a regular file \(fifo\)$"):
        validate_bundle(bundle_root, manifest)


def test_socket_fails(tmp_path: Path) -> None:
    root = tmp_path / "b"
    manifest = make_bundle(root, {"s": b""})
    (root / "s").unlink()
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(str(root / "s"))
        with pytest.raises(BundleValidationError, match=r"^file s is not a regular file \(socket\)$"):
            validate_bundle(root, manifest)
    finally:
        sock.close()


def test_validate_bundle_runs_manifest_rules_first(bundle_root: Path) -> None:
    manifest = load_manifest(bundle_root)
    broken = bundle_mod.Manifest(1, manifest.id, "sha256:" + "0" * 64, manifest.created, manifest.files)
    with pytest.raises(ManifestError, match="manifest digest does not match files"):
        validate_bundle(bundle_root, broken)


# ---------------------------------------------------------------- build_manifest


def test_scan_mode_order_dotfiles_and_reserved(tmp_path: Path) -> None:
    root = tmp_path / "scan"
    for rel, data in {
        "b.txt": b"b",
        "a/z.txt": b"z",
        ".dot": b"d",
        "manifest.json": b"{}",
        "sub/manifest.json": b"{}",
        ".distributor.json": b"{}",
        ".distributor-tmp-0123456789abcdef/x": b"t",
        "a/b.txt": b"ab",
    }.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    manifest = build_manifest(root, id="scan", scan=True, created=CREATED)
    assert [f.path for f in manifest.files] == [".dot", "a/b.txt", "a/z.txt", "b.txt"]
    assert manifest.files[1].sha256 == file_digest(b"ab")
    assert manifest.digest == bundle_digest(manifest.files)


def test_scan_sorts_by_utf8_bytes(tmp_path: Path) -> None:
    root = tmp_path / "scan"
    root.mkdir()
    for name in ["é.txt", "z.txt", "Z.txt", "a.txt"]:
        (root / name).write_bytes(b"x")
    manifest = build_manifest(root, id="scan", scan=True, created=CREATED)
    assert [f.path for f in manifest.files] == ["Z.txt", "a.txt", "z.txt", "é.txt"]


def test_scan_rejects_symlink(tmp_path: Path) -> None:
    root = tmp_path / "scan"
    root.mkdir()
    (root / "a.txt").write_bytes(b"a")
    (root / "link.txt").symlink_to(root / "a.txt")
    with pytest.raises(BundleError, match=r"scan found symlink link\.txt"):
        build_manifest(root, id="scan", scan=True)


def test_scan_rejects_symlinked_directory(tmp_path: Path) -> None:
    root = tmp_path / "scan"
    (root / "real").mkdir(parents=True)
    (root / "real" / "a.txt").write_bytes(b"a")
    (root / "dirlink").symlink_to(root / "real")
    with pytest.raises(BundleError, match="scan found symlink dirlink"):
        build_manifest(root, id="scan", scan=True)


def test_scan_rejects_special_file(tmp_path: Path) -> None:
    root = tmp_path / "scan"
    root.mkdir()
    os.mkfifo(root / "pipe")
    with pytest.raises(BundleError, match="scan found special file pipe"):
        build_manifest(root, id="scan", scan=True)


def test_scan_of_empty_root_fails(tmp_path: Path) -> None:
    with pytest.raises(BundleError, match="scan found no files"):
        build_manifest(tmp_path, id="scan", scan=True)


def test_explicit_mode_preserves_caller_order(tmp_path: Path) -> None:
    root = tmp_path / "b"
    root.mkdir()
    (root / "report.md").write_bytes(REPORT)
    (root / "summary.txt").write_bytes(SUMMARY)
    manifest = build_manifest(root, id="x", files=["summary.txt", "report.md"], created=CREATED)
    assert [f.path for f in manifest.files] == ["summary.txt", "report.md"]
    reverse = build_manifest(root, id="x", files=["report.md", "summary.txt"], created=CREATED)
    assert manifest.digest != reverse.digest


@pytest.mark.parametrize(("files", "scan"), [(None, False), (["report.md"], True)])
def test_exactly_one_selection_mode(bundle_root: Path, files: list[str] | None, scan: bool) -> None:
    with pytest.raises(BundleError, match=r"^exactly one of files or scan must be set$"):
        build_manifest(bundle_root, id="x", files=files, scan=scan)


def test_explicit_mode_rejects_duplicates_invalid_paths_and_symlinks(bundle_root: Path) -> None:
    with pytest.raises(BundlePathError, match=r'files\[1\]: path "report.md" is listed more than once'):
        build_manifest(bundle_root, id="x", files=["report.md", "report.md"])
    with pytest.raises(BundlePathError, match=r'files\[0\]: path "../x" must not contain'):
        build_manifest(bundle_root, id="x", files=["../x"])
    with pytest.raises(BundlePathError, match="reserved name"):
        build_manifest(bundle_root, id="x", files=["manifest.json"])
    (bundle_root / "link.md").symlink_to(bundle_root / "report.md")
    with pytest.raises(BundleValidationError, match=r"file link\.md is not a regular file \(symlink\)"):
        build_manifest(bundle_root, id="x", files=["link.md"])
    with pytest.raises(BundleValidationError, match=r"file nope\.md does not exist"):
        build_manifest(bundle_root, id="x", files=["nope.md"])


def test_build_rejects_empty_id(bundle_root: Path) -> None:
    with pytest.raises(ManifestError, match=r"^manifest id is required$"):
        build_manifest(bundle_root, id="", files=["report.md"])


def test_build_created_default_is_now_truncated(bundle_root: Path) -> None:
    before = datetime.now(UTC).replace(microsecond=0)
    manifest = build_manifest(bundle_root, id="x", files=["report.md"])
    after = datetime.now(UTC)
    assert manifest.created.microsecond == 0
    assert before <= manifest.created <= after
    assert manifest.created.tzinfo is not None


def test_build_keeps_supplied_created_instant(bundle_root: Path) -> None:
    created = datetime(2026, 6, 7, 17, 0, 0, 250000, tzinfo=timezone(timedelta(hours=2)))
    manifest = build_manifest(bundle_root, id="x", files=["report.md"], created=created)
    assert manifest.created == created
    assert b'"created": "2026-06-07T15:00:00.25Z"' in marshal_manifest(manifest)


# ---------------------------------------------------------------- write_manifest


def test_write_manifest_refuses_existing_without_overwrite(bundle_root: Path) -> None:
    before = (bundle_root / "manifest.json").read_bytes()
    manifest = build_manifest(bundle_root, id="other", files=["report.md"], created=CREATED)
    with pytest.raises(FileExistsError):
        write_manifest(bundle_root, manifest)
    assert (bundle_root / "manifest.json").read_bytes() == before
    write_manifest(bundle_root, manifest, overwrite=True)
    assert json.loads((bundle_root / "manifest.json").read_bytes())["id"] == "other"
    assert entries(bundle_root) == ["manifest.json", "report.md", "summary.txt"]


def test_write_manifest_refuses_invalid_manifest_and_writes_nothing(tmp_path: Path) -> None:
    files = [bundle_mod.ManifestFile("a", file_digest(b""), 0)]
    bad = bundle_mod.Manifest(1, "x", "sha256:" + "0" * 64, CREATED, files)
    with pytest.raises(ManifestError):
        write_manifest(tmp_path, bad)
    assert entries(tmp_path) == []


def test_write_manifest_bytes_are_marshal_output(bundle_root: Path) -> None:
    manifest = load_manifest(bundle_root)
    assert (bundle_root / "manifest.json").read_bytes() == marshal_manifest(manifest)


# ---------------------------------------------------------------- write_bundle


@pytest.fixture
def sources(tmp_path: Path) -> list[BundleFile]:
    src = tmp_path / "src"
    src.mkdir()
    (src / "report.md").write_bytes(REPORT)
    (src / "s.txt").write_bytes(SUMMARY)
    return [BundleFile(src / "report.md", "report.md"), BundleFile(str(src / "s.txt"), "nested/summary.txt")]


def test_write_bundle_creates_valid_bundle(tmp_path: Path, sources: list[BundleFile]) -> None:
    root = tmp_path / "spool" / "deep" / "bundle"
    manifest = write_bundle(root, id="reports.daily", files=sources, created=CREATED)
    assert [f.path for f in manifest.files] == ["report.md", "nested/summary.txt"]
    assert load_manifest(root) == manifest
    validate_bundle(root, manifest)
    assert (root / "nested" / "summary.txt").read_bytes() == SUMMARY
    assert entries(root.parent) == ["bundle"]
    assert (tmp_path / "src" / "report.md").read_bytes() == REPORT


def test_write_bundle_existing_root_without_overwrite(tmp_path: Path, sources: list[BundleFile]) -> None:
    root = tmp_path / "bundle"
    root.mkdir()
    (root / "keep.txt").write_bytes(b"keep")
    with pytest.raises(FileExistsError):
        write_bundle(root, id="x", files=sources)
    assert entries(root) == ["keep.txt"]
    assert entries(tmp_path) == ["bundle", "src"]


def test_write_bundle_overwrite_replaces_root(tmp_path: Path, sources: list[BundleFile]) -> None:
    root = tmp_path / "bundle"
    make_bundle(root, {"old.txt": b"old"}, bundle_id="old")
    manifest = write_bundle(root, id="new", files=sources, overwrite=True, created=CREATED)
    assert entries(root) == ["manifest.json", "nested", "report.md"]
    assert load_manifest(root).id == "new" == manifest.id
    assert entries(tmp_path) == ["bundle", "src"]


def test_write_bundle_failure_during_staging_leaves_no_temp_dirs(
    tmp_path: Path, sources: list[BundleFile], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "bundle"
    make_bundle(root, {"old.txt": b"old"}, bundle_id="old")
    from distributor_core.bundle import write as write_module

    def fail(*_args: object, **_kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(write_module, "write_manifest", fail)
    with pytest.raises(OSError, match="No space left"):
        write_bundle(root, id="new", files=sources, overwrite=True)
    assert entries(tmp_path) == ["bundle", "src"]
    assert load_manifest(root).id == "old"


def test_write_bundle_restores_backup_when_promotion_fails(
    tmp_path: Path, sources: list[BundleFile], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "bundle"
    make_bundle(root, {"old.txt": b"old"}, bundle_id="old")
    real_rename = os.rename
    calls: list[tuple[str, str]] = []

    def flaky_rename(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        calls.append((os.fspath(src), os.fspath(dst)))
        if len(calls) == 2:  # staging -> root
            raise OSError(5, "Input/output error")
        real_rename(src, dst)

    monkeypatch.setattr(os, "rename", flaky_rename)
    with pytest.raises(OSError, match="Input/output error"):
        write_bundle(root, id="new", files=sources, overwrite=True)
    monkeypatch.undo()
    assert load_manifest(root).id == "old"
    assert entries(root) == ["manifest.json", "old.txt"]
    assert entries(tmp_path) == ["bundle", "src"]


def test_write_bundle_validates_inputs_before_any_work(tmp_path: Path, sources: list[BundleFile]) -> None:
    root = tmp_path / "out" / "bundle"
    with pytest.raises(BundlePathError, match=r'files\[1\]\.path duplicates "report.md"'):
        write_bundle(root, id="x", files=[sources[0], BundleFile(sources[1].source_path, "report.md")])
    with pytest.raises(BundlePathError, match=r"files\[0\]\.path: path .*reserved name"):
        write_bundle(root, id="x", files=[BundleFile(sources[0].source_path, ".distributor.json")])
    with pytest.raises(BundleValidationError, match=r"files\[0\]\.source_path .* does not exist"):
        write_bundle(root, id="x", files=[BundleFile(tmp_path / "missing", "a")])
    link = tmp_path / "link"
    link.symlink_to(sources[0].source_path)
    with pytest.raises(BundleValidationError, match=r"files\[0\]\.source_path .* is a symlink"):
        write_bundle(root, id="x", files=[BundleFile(link, "a")])
    with pytest.raises(BundleValidationError, match="is not a regular file"):
        write_bundle(root, id="x", files=[BundleFile(tmp_path, "a")])
    with pytest.raises(BundleError, match="at least one"):
        write_bundle(root, id="x", files=[])
    assert not (tmp_path / "out").exists()


def test_write_bundle_rejects_empty_id_and_cleans_up(tmp_path: Path, sources: list[BundleFile]) -> None:
    with pytest.raises(ManifestError, match="manifest id is required"):
        write_bundle(tmp_path / "bundle", id="", files=sources)
    assert entries(tmp_path) == ["src"]

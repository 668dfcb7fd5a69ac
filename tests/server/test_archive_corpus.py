"""A corpus of malicious and malformed upload archives (interfaces §3.6, resolutions D1).

Each one is sent to a real server and must be refused with 400 or 413, leaving the staging tree
byte-identical and nothing written to the sentinel directory the archive aims at.
"""

from __future__ import annotations

import gzip
import io
import json
import tarfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.bundle.conftest import REPORT, SUMMARY
from tests.server.harness import (
    DEFAULT_FILES,
    TOKEN,
    Entry,
    Running,
    Setup,
    craft_tar,
    manifest_bytes,
    serve_setup,
    snapshot,
    upload,
    valid_entries,
    wait_idle,
    write_setup,
)

LIMIT = 16 * 1024 * 1024


@dataclass(frozen=True)
class Case:
    name: str
    build: Callable[[Path], bytes]
    status: int
    message: str
    content_type: str = "application/x-tar"


def _tar(*entries: Entry, fmt: int = tarfile.PAX_FORMAT) -> Callable[[Path], bytes]:
    return lambda _: craft_tar(list(entries), fmt=fmt)


def _with(*extra: Entry, first: bool = False) -> Callable[[Path], bytes]:
    def build(_: Path) -> bytes:
        entries = valid_entries()
        return craft_tar([*extra, *entries] if first else [*entries, *extra])

    return build


def _raw_member(info: tarfile.TarInfo, data: bytes = b"", fmt: int = tarfile.PAX_FORMAT) -> bytes:
    return info.tobuf(fmt, "utf-8", "strict") + data + b"\0" * (-len(data) % 512)


def _members(entries: list[Entry]) -> bytes:
    """Regular-file members without an end-of-archive marker."""
    out = b""
    for entry in entries:
        info = tarfile.TarInfo(entry.name)
        info.size = len(entry.data)
        out += _raw_member(info, entry.data)
    return out


def _end() -> bytes:
    return b"\0" * 1024


def _claims_huge_size(_: Path) -> bytes:
    info = tarfile.TarInfo("report.md")
    info.size = 10 * 1024 ** 3
    return _members(valid_entries()[:1]) + _raw_member(info, b"x" * 512)


def _pax_huge_size(_: Path) -> bytes:
    info = tarfile.TarInfo("report.md")
    info.size = 16
    info.pax_headers = {"size": str(50 * 1024 ** 3)}
    return _members(valid_entries()[:1]) + _raw_member(info, REPORT) + _end()


def _gzip_bomb(_: Path) -> bytes:
    """A small gzip body whose tar holds far more content than the limit."""
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as gz, tarfile.open(fileobj=gz, mode="w|") as tar:
        info = tarfile.TarInfo("report.md")
        info.size = LIMIT * 2
        tar.addfile(info, _Zeros(info.size))
    return buf.getvalue()


def _pax_header_bomb(_: Path) -> bytes:
    """A PAX extended header whose record is larger than the whole limit (decompressed)."""
    record = b"x" * (LIMIT + 24 * 1024 * 1024)
    text = b" comment=" + record + b"\n"
    length = len(text) + len(str(len(text)))
    length = len(text) + len(str(length))
    body = b"%d" % length + text
    header = tarfile.TarInfo("././@PaxHeader")
    header.type = tarfile.XHDTYPE
    header.size = len(body)
    padded = body + b"\0" * (-len(body) % 512)
    raw = _raw_member(header, padded, tarfile.USTAR_FORMAT) + craft_tar(valid_entries())
    return gzip.compress(raw, mtime=0)


class _Zeros(io.RawIOBase):
    def __init__(self, size: int) -> None:
        self.left = size

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        n = min(len(buffer), self.left)
        buffer[:n] = b"\0" * n
        self.left -= n
        return n


def _too_many_entries(_: Path) -> bytes:
    entries = valid_entries() + [Entry(f"d{i}", type=tarfile.DIRTYPE) for i in range(9_990)]
    entries += [Entry(f"f{i}", b"") for i in range(10)]
    return gzip.compress(craft_tar(entries), mtime=0)


def _truncated(_: Path) -> bytes:
    data = craft_tar(valid_entries({"report.md": REPORT * 200, "summary.txt": SUMMARY}))
    return data[: 512 * 3 + 100]


def _truncated_gzip(_: Path) -> bytes:
    data = gzip.compress(craft_tar(valid_entries()), mtime=0)
    return data[: len(data) // 2]


def _gnu_longname(target: str) -> Callable[[Path], bytes]:
    return lambda _: craft_tar([*valid_entries(), Entry(target, b"owned\n")], fmt=tarfile.GNU_FORMAT)


def _latin1_name(_: Path) -> bytes:
    entries = [*valid_entries(), Entry("\xff\xfe.txt", b"x")]
    return craft_tar(entries, fmt=tarfile.USTAR_FORMAT, encoding="latin-1")


def _sparse(_: Path) -> bytes:
    info = tarfile.TarInfo("sparse.bin")
    info.type = tarfile.GNUTYPE_SPARSE
    info.size = 0
    return _members(valid_entries()) + _raw_member(info, fmt=tarfile.GNU_FORMAT) + _end()


def _wrapped_in_directory(_: Path) -> bytes:
    entries = [Entry("bundle", type=tarfile.DIRTYPE)]
    entries += [Entry(f"bundle/{e.name}", e.data) for e in valid_entries()]
    return craft_tar(entries)


def _wrong_digest() -> bytes:
    manifest = json.loads(manifest_bytes(DEFAULT_FILES))
    manifest["digest"] = "sha256:" + "0" * 64
    return json.dumps(manifest).encode()


def _manifest_for(files: dict[str, bytes]) -> Entry:
    return Entry("manifest.json", manifest_bytes(files))


# --- shapes of issue 14: depth, length, per-entry headers, CPU ---------------------------------


def _deep_unlisted(_: Path) -> bytes:
    """One unlisted entry 1,100 directories deep (421 bytes gzipped): used to answer 500."""
    return gzip.compress(craft_tar([*valid_entries(), Entry("a/" * 1100 + "f", b"x")]), mtime=0)


def _deep_listed(_: Path) -> bytes:
    """A *listed* file at depth 1,000: used to pass extraction and fail after promotion."""
    files = {**DEFAULT_FILES, "a/" * 999 + "f": b"deep\n"}
    return gzip.compress(craft_tar(valid_entries(files)), mtime=0)


def _many_deep_entries(_: Path) -> bytes:
    """3,000 entries at depth 900 (38 KB gzipped): used to cost 43 s of server CPU before its 400."""
    entries = [Entry("d/" * 899 + f"f{i}", b"") for i in range(3000)]
    return gzip.compress(craft_tar([*valid_entries(), *entries]), mtime=0)


def _pax_records_on_one_entry(_: Path) -> bytes:
    """A valid bundle whose report.md carries 20 MB of PAX records (20 KB gzipped): was accepted."""
    entries = valid_entries()
    entries[1] = Entry(entries[1].name, entries[1].data, pax={"comment": "x" * 20_000_000})
    return gzip.compress(craft_tar(entries), mtime=0)


def _pax_record(keyword: str, value: str) -> bytes:
    text = f" {keyword}={value}\n".encode()
    length = len(text) + len(str(len(text)))
    length = len(text) + len(str(length))
    return str(length).encode() + text


def _extension(kind: bytes, body: bytes) -> bytes:
    header = tarfile.TarInfo("././@PaxHeader" if kind != tarfile.GNUTYPE_LONGNAME else "././@LongLink")
    header.type = kind
    header.size = len(body)
    return _raw_member(header, body, tarfile.USTAR_FORMAT)


def _chained_pax_headers(_: Path) -> bytes:
    """Three extended headers of 30 KB each in front of one member: 90 KB for one entry."""
    chain = b"".join(_extension(tarfile.XHDTYPE, _pax_record(f"comment{i}", "y" * 30_000)) for i in range(3))
    return gzip.compress(_members(valid_entries()[:1]) + chain + _members(valid_entries()[1:]) + _end(), mtime=0)


def _global_pax_headers(_: Path) -> bytes:
    """A 30 KB global header before each entry: tarfile merges them into every later member."""
    out = b""
    for i, entry in enumerate(valid_entries()):
        out += _extension(tarfile.XGLTYPE, _pax_record(f"comment{i}", "z" * 30_000)) + _members([entry])
    return gzip.compress(out + _end(), mtime=0)


def _gnu_long_name_header(_: Path) -> bytes:
    """A 70 KB GNU long-name header."""
    body = ("n" * 70_000).encode() + b"\0"
    member = _raw_member(tarfile.TarInfo("placeholder"), b"", tarfile.USTAR_FORMAT)
    return _members(valid_entries()) + _extension(tarfile.GNUTYPE_LONGNAME, body) + member + _end()


def _too_many_directories(_: Path) -> bytes:
    """5,001 files each in a fresh three-level directory chain: 15,003 directories to create."""
    entries = [Entry(f"t{i}/u/v/f", b"") for i in range(5001)]
    return gzip.compress(craft_tar([*valid_entries(), *entries]), mtime=0)


def _huge_manifest(_: Path) -> bytes:
    manifest = manifest_bytes(DEFAULT_FILES)
    padded = manifest[:-2] + b" " * (LIMIT + 1 - len(manifest)) + manifest[-2:]
    return gzip.compress(craft_tar([Entry("manifest.json", padded), *valid_entries()[1:]]), mtime=0)


def corpus(sentinel: Path, ups: str) -> list[Case]:
    target = f"{ups}{sentinel.name}/pwned"
    absolute = str(sentinel / "pwned")
    return [
        Case("traversal", _with(Entry(target, b"owned\n")), 400, "invalid upload archive: entry"),
        Case("nested traversal", _with(Entry(f"a/../{target}", b"x")), 400, 'must not contain "." or ".."'),
        Case("dot-slash traversal", _with(Entry(f"./{target}", b"x")), 400, 'must not contain "." or ".."'),
        Case("absolute path", _with(Entry(absolute, b"owned\n")), 400, "must be relative"),
        Case("double-slash absolute", _with(Entry("//" + absolute.lstrip("/"), b"x")), 400, "must be relative"),
        Case("backslash traversal", _with(Entry("..\\..\\evil.txt", b"x")), 400, "must not contain backslashes"),
        Case("backslash name", _with(Entry("a\\b.txt", b"x")), 400, "must not contain backslashes"),
        Case("symlink to sentinel", _with(Entry("link", type=tarfile.SYMTYPE, linkname=str(sentinel))),
             400, "is a symbolic link"),
        Case("relative symlink", _with(Entry("up", type=tarfile.SYMTYPE, linkname=ups)), 400, "symbolic link"),
        Case("symlink plant then write through it",
             _with(Entry("plant", type=tarfile.SYMTYPE, linkname=str(sentinel)), Entry("plant/pwned", b"owned\n"),
                   first=True), 400, "symbolic link"),
        Case("symlinked manifest", _tar(Entry("manifest.json", type=tarfile.SYMTYPE, linkname="/etc/passwd")),
             400, "symbolic link"),
        Case("hard link outside", _with(Entry("hard", type=tarfile.LNKTYPE, linkname=absolute)), 400, "hard link"),
        Case("hard link inside", _with(Entry("copy.md", type=tarfile.LNKTYPE, linkname="report.md")), 400,
             "hard link"),
        Case("character device", _with(Entry("null", type=tarfile.CHRTYPE)), 400, "character device"),
        Case("block device", _with(Entry("disk", type=tarfile.BLKTYPE)), 400, "block device"),
        Case("fifo", _with(Entry("pipe", type=tarfile.FIFOTYPE)), 400, "fifo"),
        Case("sparse file", _sparse, 400, "sparse file"),
        Case("unknown entry type", _with(Entry("volume", type=b"V")), 400, "unsupported entry type"),
        Case("duplicate file", _with(Entry("report.md", b"# Evil\n")), 400, "duplicate entry"),
        Case("duplicate manifest", _with(Entry("manifest.json", manifest_bytes(DEFAULT_FILES))), 400, "duplicate"),
        Case("file below a file", _with(Entry("report.md/x", b"x")), 400, "conflicts with file"),
        Case("file over a directory", _with(Entry("dir/a", b"a"), Entry("dir", b"x")), 400,
             "conflicts with a directory"),
        Case("gzip bomb", _gzip_bomb, 413, "upload exceeds maximum size", "application/gzip"),
        Case("PAX header bomb", _pax_header_bomb, 400,
             "entry 1: extended headers of 41943058 bytes; the limit is 65536 (server.http.limits.max_header_size)",
             "application/gzip"),
        Case("tar bomb size claim", _claims_huge_size, 413, "upload exceeds maximum size"),
        Case("PAX size override", _pax_huge_size, 413, "upload exceeds maximum size"),
        Case("too many entries", _too_many_entries, 400, "too many entries (more than 10000)", "application/gzip"),
        Case("bundle wrapped in a directory", _wrapped_in_directory, 400, 'reserved name "manifest.json"'),
        Case("nested manifest", _with(Entry("sub/manifest.json", manifest_bytes(DEFAULT_FILES))), 400,
             'reserved name "manifest.json"'),
        Case("manifest directory", _tar(Entry("manifest.json", type=tarfile.DIRTYPE)), 400,
             'reserved name "manifest.json"'),
        Case("state file", _with(Entry(".distributor.json", b"{}")), 400, 'reserved name ".distributor.json"'),
        Case("temp file name", _with(Entry("a/.distributor-tmp-0011", b"x")), 400, "reserved name"),
        Case("unlisted file", _with(Entry("extra.txt", b"extra\n")), 400,
             'invalid upload archive: file "extra.txt" is not listed in manifest.json'),
        Case("missing listed file", _tar(_manifest_for(DEFAULT_FILES), Entry("report.md", REPORT)), 400,
             'invalid upload archive: listed file "summary.txt" is missing'),
        Case("no manifest", _tar(Entry("report.md", REPORT)), 400, "archive has no root-level manifest.json"),
        Case("content mismatch",
             _tar(_manifest_for(DEFAULT_FILES), Entry("report.md", b"# Report\nStorm.\n"),
                  Entry("summary.txt", SUMMARY)),
             400, "invalid source bundle: file report.md sha256"),
        Case("size mismatch",
             _tar(_manifest_for(DEFAULT_FILES), Entry("report.md", REPORT + b"!"), Entry("summary.txt", SUMMARY)),
             400, "invalid source bundle: file report.md size 17 does not match manifest size 16"),
        Case("manifest not JSON", _tar(Entry("manifest.json", b"{not json"), Entry("report.md", REPORT)), 400,
             "invalid source bundle: manifest is not valid JSON"),
        Case("manifest digest wrong", _tar(Entry("manifest.json", _wrong_digest()), *valid_entries()[1:]), 400,
             "invalid source bundle: manifest digest does not match files"),
        Case("directory below a file", _with(Entry("report.md/sub/", type=tarfile.DIRTYPE)), 400,
             "conflicts with file \"report.md\""),
        Case("truncated tar", _truncated, 400, "invalid upload archive:"),
        Case("truncated gzip", _truncated_gzip, 400, "invalid upload archive: archive is truncated",
             "application/gzip"),
        Case("not gzip", lambda _: b"\x1f\x8bnot really", 400, "invalid upload archive:", "application/gzip"),
        Case("empty body", lambda _: b"", 400, "invalid upload archive:"),
        Case("only end-of-archive blocks", lambda _: b"\0" * 10240, 400, "archive has no root-level manifest.json"),
        Case("PAX path traversal", _with(Entry("innocent.txt", b"x", pax={"path": target})), 400,
             'must not contain "." or ".."'),
        Case("PAX absolute path", _with(Entry("innocent.txt", b"x", pax={"path": absolute})), 400, "must be relative"),
        Case("PAX symlink linkpath", _with(Entry("l", type=tarfile.SYMTYPE, pax={"linkpath": absolute})), 400,
             "symbolic link"),
        Case("GNU long name traversal", _gnu_longname("a" * 120 + "/" + target), 400, 'must not contain "." or ".."'),
        Case("GNU long absolute name", _gnu_longname("/" + "b" * 120 + absolute), 400, "must be relative"),
        Case("control character name", _with(Entry("a\nb.txt", b"x")), 400, "control characters"),
        Case("non-UTF-8 name", _latin1_name, 400, "invalid upload archive: entry name is not valid UTF-8"),
        Case("dot file entry", _with(Entry(".", b"x")), 400, 'must not contain "." or ".."'),
        Case("empty segment", _with(Entry("a//b.txt", b"x")), 400, "must not contain empty segments"),
        Case("deep unlisted entry", _deep_unlisted, 400,
             "path is 1101 levels deep; the limit is 64 (server.http.limits.max_path_depth)", "application/gzip"),
        Case("deep listed file", _deep_listed, 400,
             "path is 1000 levels deep; the limit is 64 (server.http.limits.max_path_depth)", "application/gzip"),
        Case("many deep entries", _many_deep_entries, 400,
             "path is 900 levels deep; the limit is 64 (server.http.limits.max_path_depth)", "application/gzip"),
        Case("long path segment", _with(Entry("n" * 256 + ".md", b"x")), 400,
             "path segment of 259 bytes; the limit is 255 (server.http.limits.max_name_length)"),
        Case("long multibyte segment", _with(Entry("é" * 128, b"x")), 400,
             "path segment of 256 bytes; the limit is 255 (server.http.limits.max_name_length)"),
        Case("long path", _with(Entry("/".join(["p" * 200] * 21), b"x")), 400,
             "path is 4220 bytes; the limit is 4096 (server.http.limits.max_path_length)"),
        Case("20 MB of PAX records on one entry", _pax_records_on_one_entry, 400,
             "entry 2: extended headers of 20000018 bytes; the limit is 65536 (server.http.limits.max_header_size)",
             "application/gzip"),
        Case("chained PAX headers", _chained_pax_headers, 400,
             "entry 2: extended headers of 90048 bytes; the limit is 65536", "application/gzip"),
        Case("global PAX headers", _global_pax_headers, 400,
             "entry 3: extended headers of 90048 bytes; the limit is 65536", "application/gzip"),
        Case("GNU long name header", _gnu_long_name_header, 400,
             "entry 4: extended headers of 70001 bytes; the limit is 65536 (server.http.limits.max_header_size)"),
        Case("too many directories", _too_many_directories, 400,
             "too many directories (more than 10000): server.http.limits.max_directories", "application/gzip"),
        Case("manifest over its limit", _huge_manifest, 400,
             "manifest.json is 16777217 bytes; the limit is 16777216 (server.http.limits.max_manifest_size)",
             "application/gzip"),
    ]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Setup, Running, Path]]:
    base = tmp_path_factory.mktemp("corpus")
    sentinel = base / "sentinel"
    sentinel.mkdir()
    (sentinel / "keep.txt").write_text("do not touch\n")
    setup = write_setup(base / "site", max_upload_size={"reports": "16MB"})
    with serve_setup(setup) as running:
        yield setup, running, sentinel


def _ups(setup: Setup, sentinel: Path) -> str:
    # from <staging>/reports/.incoming/<id>/bundle/ up to the directory holding the sentinel
    depth = len((setup.staging("reports") / ".incoming" / "x" / "bundle").relative_to(sentinel.parent).parts)
    return "../" * depth


_SENTINEL_PLACEHOLDER = Path("/nonexistent/sentinel")
CASES = corpus(_SENTINEL_PLACEHOLDER, "../" * 7)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_malicious_archive_is_refused_without_a_trace(served: tuple[Setup, Running, Path], case: Case,
                                                      tmp_path: Path) -> None:
    setup, running, sentinel = served
    real = {c.name: c for c in corpus(sentinel, _ups(setup, sentinel))}[case.name]
    body = real.build(tmp_path)
    wait_idle(running.service)
    before_staging = snapshot(setup.staging_root)
    before_site = snapshot(setup.root.parent)
    with httpx.Client(base_url=running.url, timeout=60) as http:
        response = upload(http, "reports", body, content_type=real.content_type, key=f"corpus-{len(body)}")
    assert response.status_code == real.status, response.text
    assert real.message in response.json()["error"], response.json()
    assert set(response.json()) == {"error"}
    assert TOKEN not in response.text and str(setup.root) not in response.text
    assert snapshot(setup.staging_root) == before_staging
    assert snapshot(setup.root.parent) == before_site  # nothing escaped anywhere, sentinel included
    assert sorted(p.name for p in sentinel.iterdir()) == ["keep.txt"]
    assert running.service.pending_count() == 0


def test_corpus_is_large_enough() -> None:
    assert len(CASES) >= 30
    assert {c.status for c in CASES} == {400, 413}


def test_valid_archive_with_dot_slash_prefixes_and_directories_is_accepted(
    served: tuple[Setup, Running, Path], tmp_path: Path
) -> None:
    """The rules refuse the tricks above, not ordinary tar layouts (GNU tar's ``./`` prefixes and
    directory entries, PAX long names)."""
    _, running, _ = served
    long_name = "deep/" + "n" * 150 + ".md"
    files = {"report.md": REPORT, "sub/summary.txt": SUMMARY, long_name: b"long\n"}
    entries = [Entry("./", type=tarfile.DIRTYPE), Entry(".", type=tarfile.DIRTYPE),
               Entry("./manifest.json", manifest_bytes(files)), Entry("./sub/", type=tarfile.DIRTYPE),
               Entry("./report.md", REPORT), Entry("./sub/summary.txt", SUMMARY),
               Entry("empty-dir", type=tarfile.DIRTYPE), Entry(long_name, b"long\n")]
    with httpx.Client(base_url=running.url, timeout=60) as http:
        response = upload(http, "reports", craft_tar(entries), content_type="application/x-tar")
        assert response.status_code == 202, response.text
    wait_idle(running.service)

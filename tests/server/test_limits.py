"""Archive limits of ``server.http.limits`` (issue 14): checked while the archive streams, each
breach a 400 naming the limit and its knob; archives right at the limits are accepted; the knobs
are validated like every other config field."""

from __future__ import annotations

import gzip
import tarfile
from pathlib import Path

import msgspec
import pytest

from distributor_core.config import parse_config
from tests.config.helpers import messages
from tests.server.harness import (
    DEFAULT_FILES,
    Entry,
    craft_tar,
    published,
    serve_setup,
    upload,
    valid_entries,
    wait_status,
    write_setup,
)


def _at_the_limits() -> dict[str, bytes]:
    files = dict(DEFAULT_FILES)
    files["/".join(["d"] * 63 + ["deepest.txt"])] = b"64 levels\n"  # 64 segments
    files["n" * 251 + ".txt"] = b"a 255-byte name\n"
    files["/".join(["p" * 200] * 14 + ["last.txt"])] = b"2,823 bytes of path\n"
    files["é" * 125 + ".md"] = b"255 bytes of UTF-8\n"
    return files


def test_archives_at_the_limits_are_accepted_and_published(tmp_path: Path) -> None:
    setup = write_setup(tmp_path / "site")
    files = _at_the_limits()
    entries = valid_entries(files)
    # a git-archive style global header and a PAX header close to the per-entry limit
    entries[1] = Entry(entries[1].name, entries[1].data, pax={"comment": "c" * 60_000})
    body = gzip.compress(craft_tar(entries), mtime=0)
    with serve_setup(setup) as server, server.client() as http:
        response = upload(http, "reports", body)
        assert response.status_code == 202, response.text
        wait_status(http, response.json()["run_id"], "succeeded")
    assert published(setup.destinations["reports/dest1"]) == files


@pytest.mark.parametrize(
    ("limits", "entry", "message"),
    [
        ({"max_path_depth": 3}, Entry("a/b/c/d.txt", b"x"),
         'entry "a/b/c/d.txt": path is 4 levels deep; the limit is 3 (server.http.limits.max_path_depth)'),
        ({"max_name_length": 13}, Entry("dir/12345678901234", b"x"),
         'entry "dir/12345678901234": path segment of 14 bytes; the limit is 13 (server.http.limits.max_name_length)'),
        ({"max_path_length": 14}, Entry("abcde/fghijklmn", b"x"),
         'entry "abcde/fghijklmn": path is 15 bytes; the limit is 14 (server.http.limits.max_path_length)'),
        ({"max_header_size": "1KB"}, Entry("x.txt", b"x", pax={"comment": "c" * 2000}),
         "entry 4: extended headers of 2014 bytes; the limit is 1024 (server.http.limits.max_header_size)"),
        ({"max_entries": 3}, Entry("x.txt", b"x"),
         "too many entries (more than 3): server.http.limits.max_entries"),
        ({"max_manifest_size": "100B"}, None,
         "manifest.json is 489 bytes; the limit is 100 (server.http.limits.max_manifest_size)"),
    ],
    ids=["depth", "name", "path", "header", "entries", "manifest"],
)
def test_each_limit_is_a_knob_and_its_breach_names_it(
    tmp_path: Path, limits: dict[str, object], entry: Entry | None, message: str
) -> None:
    setup = write_setup(tmp_path / "site", http={"limits": limits})
    entries = valid_entries() + ([entry] if entry is not None else [])
    with serve_setup(setup) as server, server.client() as http:
        response = upload(http, "reports", craft_tar(entries, fmt=tarfile.PAX_FORMAT),
                          content_type="application/x-tar")
        assert (response.status_code, response.json()) == (400, {"error": f"invalid upload archive: {message}"})
        assert server.service.pending_count() == 0


def test_limit_defaults_and_validation(tmp_path: Path) -> None:
    http = parse_config("pipelines: [{id: r, source: {backend: local, path: s}, destinations: "
                        "[{id: d, backend: local, path: o}]}]", base_dir=tmp_path).server.http
    assert (http.header_timeout.total_seconds(), http.max_connections, http.body_idle_timeout.total_seconds(),
            http.body_min_rate, http.max_queue_per_token) == (10, 256, 60, 64 * 1024, 0)
    assert msgspec.structs.asdict(http.limits) == {
        "max_entries": 10_000, "max_path_depth": 64, "max_name_length": 255, "max_path_length": 4096,
        "max_header_size": 64 * 1024, "max_manifest_size": 16 * 1024 * 1024, "max_directories": 10_000,
        "max_header_count": 8}
    assert (http.max_head_size, http.max_connections_per_client, http.reserved_connections, http.reserved_slots(),
            http.max_failed_bytes, http.max_failed_bytes_per_token) == (64 * 1024, 32, 0, 64, 4 << 30, 1 << 30)
    assert (http.queue_share(1), http.queue_share(3)) == (16, 8)
    bad = ("server: {http: {header_timeout: 0s, body_idle_timeout: -1s, max_connections: 0, "
           "max_queue_per_token: 17, limits: {max_path_depth: 0, max_header_size: 0B, max_entries: -1}}}\n"
           "pipelines: [{id: r, source: {backend: local, path: s}, destinations: [{id: d, backend: local, path: o}]}]")
    assert messages(bad) == [
        "server.http.header_timeout must be greater than zero",
        "server.http.body_idle_timeout must be greater than zero",
        "server.http.max_connections must be greater than zero",
        "server.http.max_queue_per_token must not be greater than server.http.queue_size",
        "server.http.limits.max_entries must be greater than zero",
        "server.http.limits.max_path_depth must be greater than zero",
        "server.http.limits.max_header_size must be greater than zero",
    ]
    assert messages("server: {http: {limits: {max_depth: 3}}}\n" + bad.split("\n")[1]) == [
        "server.http.limits.max_depth: unknown field"]
    bad_connections = ("server: {http: {max_connections: 8, reserved_connections: 8, max_connections_per_client: -1, "
                       "max_head_size: 0B, limits: {max_directories: 0, max_header_count: 0}}}\n" + bad.split("\n")[1])
    assert messages(bad_connections) == [
        "server.http.max_head_size must be greater than zero",
        "server.http.max_connections_per_client must be zero or greater",
        "server.http.reserved_connections must be less than server.http.max_connections",
        "server.http.limits.max_directories must be greater than zero",
        "server.http.limits.max_header_count must be greater than zero",
    ]

"""Directory entries are counted (issue 26, item 1).

An archive of 3,900 directory entries, each 64 levels deep with a ~4 KB path (118 KB gzipped),
was accepted and cost the server +517 MB: the extractor remembered every ancestor path of every
directory entry and nothing counted them. Every directory an archive names or implies now counts
against ``server.http.limits.max_directories`` (10,000), remembered by its own segment name in a
tree, and a breach is a 400 naming the limit and its knob.
"""

from __future__ import annotations

import gzip
import tarfile
from pathlib import Path

from distributor_core import staging as sg
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

SEGMENT = 62  # 64 segments of 62 bytes and their slashes: a 4,031-byte path


def _chain(index: int, depth: int = 64) -> str:
    """Chains differ in their first segment, so each entry implies ``depth`` new directories."""
    return "/".join([f"{index:06d}" + "d" * (SEGMENT - 6)] + ["d" * SEGMENT] * (depth - 1))


def _directory_archive(count: int, depth: int = 64) -> bytes:
    """A valid bundle followed by ``count`` directory entries, each ``depth`` levels deep in its
    own chain (so each one implies ``depth`` directories)."""
    dirs = [Entry(_chain(index, depth), type=tarfile.DIRTYPE) for index in range(count)]
    return gzip.compress(craft_tar([*valid_entries(), *dirs]), mtime=0)


def test_the_issues_directory_archive_is_refused_naming_the_limit(tmp_path: Path) -> None:
    setup = write_setup(tmp_path / "site")
    body = _directory_archive(3900)
    assert len(body) < 200_000
    with serve_setup(setup) as server, server.client() as http:
        response = upload(http, "reports", body)
        assert (response.status_code, response.json()) == (400, {
            "error": "invalid upload archive: too many directories (more than 10000): "
                     "server.http.limits.max_directories"})
        assert server.service.pending_count() == 0
        assert server.service.records() == []
        # the server goes on serving, and the next honest upload is published
        accepted = upload(http, "reports", gzip.compress(craft_tar(valid_entries()), mtime=0))
        assert accepted.status_code == 202, accepted.text
        wait_status(http, accepted.json()["run_id"], "succeeded")
    assert list((setup.staging("reports") / sg.INCOMING_DIR).iterdir()) == []
    assert published(setup.destinations["reports/dest1"]) == DEFAULT_FILES


def test_max_directories_is_a_knob_counting_every_directory_once(tmp_path: Path) -> None:
    """Ancestors shared by several entries, and a directory both named and implied, count once."""
    setup = write_setup(tmp_path / "site", http={"limits": {"max_directories": 6}})
    within = [Entry("a/b/c", type=tarfile.DIRTYPE), Entry("a/b", type=tarfile.DIRTYPE),
              Entry("a/x/y", type=tarfile.DIRTYPE), Entry("a/b/c/d", type=tarfile.DIRTYPE)]  # a, a/b, a/b/c,
    files = {**DEFAULT_FILES, "a/b/c/d/e.txt": b"deep\n"}                                   # a/b/c/d, a/x, a/x/y
    with serve_setup(setup) as server, server.client() as http:
        accepted = upload(http, "reports", craft_tar([*valid_entries(files), *within]),
                          content_type="application/x-tar")
        assert accepted.status_code == 202, accepted.text
        wait_status(http, accepted.json()["run_id"], "succeeded")
        refused = upload(http, "reports", craft_tar([*valid_entries(files), *within,
                                                     Entry("a/x/z", type=tarfile.DIRTYPE)]),
                         content_type="application/x-tar")
        assert (refused.status_code, refused.json()) == (400, {
            "error": "invalid upload archive: too many directories (more than 6): server.http.limits.max_directories"})
        # directories implied by files count too: a, a/b, a/b/c, a/b/c/d, q, q/r, q/r/t
        implied = upload(http, "reports", craft_tar(valid_entries({**files, "q/r/t/s.txt": b"x\n"})),
                         content_type="application/x-tar")
        assert implied.status_code == 400
        assert "(more than 6): server.http.limits.max_directories" in implied.json()["error"]
    assert published(setup.destinations["reports/dest1"]) == files

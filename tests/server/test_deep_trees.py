"""Deep trees never take the upload service down (issue 14, first finding).

An archive entry nested ~1,100 directories deep used to answer 500 (a recursive delete hit
Python's recursion limit), leak its queue slot and idempotency key, leave its tree behind, and
after 16 such requests every upload to every pipeline got 503; the server then failed to restart
until ``.incoming`` was emptied by hand. Every walk and delete of the staging area is iterative
now, a request frees its slot and key before any cleanup, and startup sweeps any leftover tree.
"""

from __future__ import annotations

import gzip
import os
from pathlib import Path

from distributor_core import staging as sg
from distributor_core.server import create_app
from distributor_core.staging.fsio import remove_tree, sync_tree
from tests.server.harness import (
    TOKEN,
    Entry,
    bundle_archive,
    craft_tar,
    run_server,
    serve_setup,
    upload,
    valid_entries,
    wait_idle,
    wait_status,
    write_setup,
)

DEPTH = 1100


def deep_archive(depth: int = DEPTH) -> bytes:
    """A valid bundle plus one unlisted file ``a/`` × ``depth`` + ``f`` (gzip, a few hundred bytes)."""
    return gzip.compress(craft_tar([*valid_entries(), Entry("a/" * depth + "f", b"x")]), mtime=0)


def plant_deep_tree(parent: Path, name: str, depth: int = DEPTH) -> Path:
    """``parent/name/a/a/.../f``, built through directory descriptors (no path is that long)."""
    top = parent / name
    top.mkdir(parents=True)
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir("a", dir_fd=fd)
            child = os.open("a", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = child
        os.close(os.open("f", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd))
    finally:
        os.close(fd)
    return top


def test_deep_entries_are_refused_and_free_their_slot_and_key(tmp_path: Path) -> None:
    setup = write_setup(tmp_path / "site", pipelines={"reports": 1, "weekly": 1}, http={"queue_size": 16})
    body = deep_archive()
    assert len(body) < 1024
    with serve_setup(setup) as server, server.client() as http:
        for attempt in range(20):  # more than queue_size: a leaked slot would turn into 503
            response = upload(http, "reports", body, key="deep-key")
            assert response.status_code == 400, (attempt, response.text)
            assert response.json()["error"].startswith("invalid upload archive: "), response.json()
            assert response.json()["error"].endswith(
                "path is 1101 levels deep; the limit is 64 (server.http.limits.max_path_depth)"), response.json()
            assert TOKEN not in response.text and str(setup.root) not in response.text
            assert server.service.pending_count() == 0
        assert list((setup.staging("reports") / sg.INCOMING_DIR).iterdir()) == []
        for pipeline in ("reports", "weekly"):
            accepted = upload(http, pipeline, bundle_archive(tmp_path), key="deep-key")
            assert accepted.status_code == 202, accepted.text  # the key is free again too
            wait_status(http, accepted.json()["run_id"], "succeeded")
        wait_idle(server.service)


def test_startup_sweeps_leftover_trees_of_any_depth(tmp_path: Path) -> None:
    setup = write_setup(tmp_path / "site")
    with serve_setup(setup):
        pass
    staging = setup.staging("reports")
    plant_deep_tree(staging / sg.INCOMING_DIR, "0123456789abcdef", DEPTH)
    plant_deep_tree(staging / sg.INCOMING_DIR, "expired-0011223344556677", 2 * DEPTH)
    (staging / sg.INCOMING_DIR / "stray-file").write_bytes(b"x")
    app = create_app(setup.config, env=setup.env)  # used to fail: maximum recursion depth exceeded
    with run_server(app) as server, server.client() as http:
        assert list((staging / sg.INCOMING_DIR).iterdir()) == []
        accepted = upload(http, "reports", bundle_archive(tmp_path))
        assert accepted.status_code == 202
        wait_status(http, accepted.json()["run_id"], "succeeded")


def test_tree_helpers_handle_depth_and_length_beyond_path_max(tmp_path: Path) -> None:
    """1,200 levels of 200-byte names: 240 KB of path, far past PATH_MAX and the recursion limit."""
    top = tmp_path / "tree"
    top.mkdir()
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    for level in range(1200):
        os.mkdir("n" * 200, dir_fd=fd)
        child = os.open("n" * 200, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = child
        if level % 400 == 0:
            os.symlink("/etc/passwd", f"link{level}", dir_fd=fd)
            os.close(os.open(f"file{level}", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd))
    os.close(fd)
    sync_tree(top)
    remove_tree(top)
    assert not top.exists()
    assert Path("/etc/passwd").exists()  # links are removed, never followed
    remove_tree(top)  # a missing tree is fine

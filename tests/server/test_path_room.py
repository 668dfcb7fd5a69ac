"""Paths that could not be staged or published are refused at upload (issue 26, item 6).

A 4,095-byte path within every archive limit was accepted (202); its publication then failed
with "File name too long" (the publisher opens absolute paths longer than the OS allows), and the
failed bundle it left in the staging tree broke tools that walk it. Now a file whose staged path,
or published path in any destination (with the temporary name it is written under, and its
generated HTML page), would exceed ``PATH_MAX`` (4,095 bytes) or ``NAME_MAX`` (255 bytes) is
refused with a 400 naming the path, the limit and the remedy, before anything of it is written.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import yaml

from distributor_core import staging as sg
from tests.server.harness import (
    DEFAULT_FILES,
    Setup,
    craft_tar,
    published,
    serve_setup,
    upload,
    valid_entries,
    wait_status,
    write_setup,
)


def _long_path(total: int) -> str:
    """A bundle path of ``total`` bytes in 255-byte segments (within every archive limit)."""
    segments = []
    left = total
    while left > 0:
        size = min(255, left)
        segments.append("s" * size)
        left -= size + 1
    path = "/".join(segments)
    return path[: total - 4] + ".txt" if len(path) >= total else path


def _tar(files: dict[str, bytes]) -> bytes:
    return craft_tar(valid_entries(files))


def _walk_errors(root: Path) -> list[str]:
    errors: list[str] = []
    for _ in os.walk(root, onerror=lambda exc: errors.append(str(exc))):
        pass
    return errors


def test_a_path_too_long_to_stage_is_refused_and_nothing_is_left(setup: Setup) -> None:
    path = _long_path(4090)
    assert len(path.encode()) == 4090 and path.count("/") < 64
    with serve_setup(setup) as server, server.client() as http:
        response = upload(http, "reports", _tar({**DEFAULT_FILES, path: b"x\n"}), content_type="application/x-tar")
        assert response.status_code == 400
        error = response.json()["error"]
        assert error.startswith(f'invalid upload archive: entry "{path[:100]}...": path would be staged on this '
                                "server as a path of ")
        assert error.endswith(" bytes; the limit is 4095 (PATH_MAX); shorten the path")
        assert str(setup.root) not in error
        assert server.service.records() == [] and server.service.pending_count() == 0
    assert list((setup.staging("reports") / sg.INCOMING_DIR).iterdir()) == []
    assert _walk_errors(setup.staging_root) == []
    find = subprocess.run(["find", str(setup.staging_root)], capture_output=True, text=True)
    assert find.returncode == 0, find.stderr


def _with_destination(root: Path, destination: dict[str, Any]) -> Setup:
    setup = write_setup(root)
    doc = yaml.safe_load(setup.config_path.read_text())
    doc["pipelines"][0]["destinations"].append(destination)
    setup.config_path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return setup


def test_a_path_too_long_for_a_destination_is_refused_naming_it(tmp_path: Path) -> None:
    deep = Path("/".join(["r" * 200] * 9))  # a destination root of about 1,850 bytes below the config dir
    setup = _with_destination(tmp_path / "site", {"id": "deep-archive", "backend": "local", "path": str(deep)})
    fits = _long_path(2000)  # fits the staging path and the first destination
    over = _long_path(2300)
    with serve_setup(setup) as server, server.client() as http:
        refused = upload(http, "reports", _tar({**DEFAULT_FILES, over: b"x\n"}), content_type="application/x-tar")
        assert refused.status_code == 400
        error = refused.json()["error"]
        assert " path would be published in destination deep-archive as a path of " in error
        assert error.endswith(" (with its temporary name); the limit is 4095 (PATH_MAX); shorten the path")
        assert str(tmp_path) not in error
        accepted = upload(http, "reports", _tar({**DEFAULT_FILES, fits: b"y\n"}), content_type="application/x-tar")
        assert accepted.status_code == 202, accepted.text
        wait_status(http, accepted.json()["run_id"], "succeeded")
    files = {**DEFAULT_FILES, fits: b"y\n"}
    assert published(setup.destinations["reports/dest1"]) == files
    fd = os.open(setup.root, os.O_RDONLY | os.O_DIRECTORY)
    try:  # the deep root is read through relative paths: its absolute paths are too long for open()
        assert _read_relative(fd, str(deep) + "/" + fits) == b"y\n"
    finally:
        os.close(fd)


def _read_relative(root_fd: int, path: str) -> bytes:
    fd = root_fd
    parts = path.split("/")
    try:
        for part in parts[:-1]:
            child = os.open(part, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            if fd != root_fd:
                os.close(fd)
            fd = child
        file_fd = os.open(parts[-1], os.O_RDONLY, dir_fd=fd)
        with os.fdopen(file_fd, "rb") as stream:
            return stream.read()
    finally:
        if fd != root_fd:
            os.close(fd)


def test_a_markdown_file_whose_html_page_name_is_too_long_is_refused(tmp_path: Path) -> None:
    setup = _with_destination(tmp_path / "site", {
        "id": "site", "backend": "local", "path": "out/site", "publish": {"source": True, "html": True},
        "transform": {"markdown_to_html": {"enabled": True, "mode": "sidecar"}},
    })
    name = "n" * 252 + ".md"  # 255 bytes: fine as a source file, its sidecar would be 257
    with serve_setup(setup) as server, server.client() as http:
        refused = upload(http, "reports", _tar({**DEFAULT_FILES, name: b"# x\n"}), content_type="application/x-tar")
        assert (refused.status_code, refused.json()["error"]) == (
            400, f'invalid upload archive: entry "{name[:100]}...": HTML page "{"n" * 100}..." in destination site '
                 "would have a name of 257 bytes; the limit is 255 (NAME_MAX); shorten the path")
        shorter = "n" * 250 + ".md"
        accepted = upload(http, "reports", _tar({**DEFAULT_FILES, shorter: b"# x\n"}),
                          content_type="application/x-tar")
        assert accepted.status_code == 202, accepted.text
        wait_status(http, accepted.json()["run_id"], "succeeded")
    assert ("n" * 250 + ".html") in published(tmp_path / "site" / "out" / "site")

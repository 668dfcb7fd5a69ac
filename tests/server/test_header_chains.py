"""Chained extension headers are counted (issue 26, item 2).

600 chained empty PAX or GNU long-name headers (1.7 KB gzipped) made tarfile's reader call
itself once per header until ``RecursionError``: the upload got a 500 and the server logged a
~172 KB traceback for each such request. Extension headers chained in front of one entry now
count against ``server.http.limits.max_header_count`` (8), checked before tarfile reads the
next one: a 400 naming the limit and its knob, and nothing in the log.
"""

from __future__ import annotations

import gzip
import logging
import tarfile
from pathlib import Path

import pytest

from tests.server.harness import (
    DEFAULT_FILES,
    Entry,
    craft_tar,
    published,
    serve_setup,
    start_serve,
    upload,
    valid_entries,
    wait_status,
    write_setup,
)
from tests.server.test_archive_corpus import _end, _members, _raw_member

KINDS = {"pax": tarfile.XHDTYPE, "global-pax": tarfile.XGLTYPE, "gnu-long-name": tarfile.GNUTYPE_LONGNAME,
         "gnu-long-link": tarfile.GNUTYPE_LONGLINK}


def _empty_header(kind: bytes) -> bytes:
    info = tarfile.TarInfo("././@PaxHeader" if kind in (tarfile.XHDTYPE, tarfile.XGLTYPE) else "././@LongLink")
    info.type = kind
    info.size = 0
    return _raw_member(info, b"", tarfile.USTAR_FORMAT)


def chained(kind: bytes, count: int) -> bytes:
    """A valid bundle whose second entry has ``count`` empty extension headers of ``kind`` in front."""
    entries = valid_entries()
    body = _members(entries[:1]) + _empty_header(kind) * count + _members(entries[1:]) + _end()
    return gzip.compress(body, mtime=0)


@pytest.mark.parametrize("kind", list(KINDS), ids=list(KINDS))
def test_six_hundred_chained_headers_are_a_400_without_a_traceback(
    tmp_path: Path, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    setup = write_setup(tmp_path / "site")
    body = chained(KINDS[kind], 600)
    assert len(body) < 4000
    with caplog.at_level(logging.DEBUG), serve_setup(setup) as server, server.client() as http:
        for _ in range(3):
            response = upload(http, "reports", body)
            assert (response.status_code, response.json()) == (400, {
                "error": "invalid upload archive: entry 2: more than 8 extended headers in a row; the limit is 8 "
                         "(server.http.limits.max_header_count)"})
        assert server.service.pending_count() == 0
    assert [r for r in caplog.records if r.levelno >= logging.WARNING or r.exc_info] == []


def test_a_chain_at_the_limit_is_accepted_and_the_limit_is_a_knob(tmp_path: Path) -> None:
    setup = write_setup(tmp_path / "site")
    with serve_setup(setup) as server, server.client() as http:
        accepted = upload(http, "reports", chained(tarfile.XHDTYPE, 8))
        assert accepted.status_code == 202, accepted.text
        wait_status(http, accepted.json()["run_id"], "succeeded")
    assert published(setup.destinations["reports/dest1"]) == DEFAULT_FILES
    tight = write_setup(tmp_path / "tight", http={"limits": {"max_header_count": 2}})
    with serve_setup(tight) as server, server.client() as http:
        # a PAX header and a GNU long name in front of one entry: two, within the knob
        entries = valid_entries()
        entries[1] = Entry(entries[1].name, entries[1].data, pax={"comment": "fine"})
        assert upload(http, "reports", craft_tar(entries), content_type="application/x-tar").status_code == 202
        refused = upload(http, "reports", chained(tarfile.GNUTYPE_LONGNAME, 3))
        assert (refused.status_code, refused.json()["error"]) == (
            400, "invalid upload archive: entry 2: more than 2 extended headers in a row; the limit is 2 "
                 "(server.http.limits.max_header_count)")


def test_serve_logs_nothing_for_hostile_chains(tmp_path: Path) -> None:
    """Through ``distributor serve``: ten such requests, and stderr holds only the startup line."""
    import httpx

    setup = write_setup(tmp_path / "site")
    process = start_serve(setup)
    try:
        with httpx.Client(base_url=process.url, timeout=30) as http:
            for kind in (tarfile.XHDTYPE, tarfile.GNUTYPE_LONGNAME) * 5:
                assert upload(http, "reports", chained(kind, 600)).status_code == 400
    finally:
        code, rest = process.stop()
    assert code == 0
    assert "Traceback" not in rest and "RecursionError" not in rest
    assert rest.strip() == ""

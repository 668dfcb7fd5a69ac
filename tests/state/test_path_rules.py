"""The compiled path checks of ``paths`` agree with the exact rules (issue 16 item 5).

``is_valid_path``, ``is_valid_bundle_path``, the fast paths inside ``check_path`` /
``check_bundle_path`` and the column check ``bundle_paths_valid`` are the one place path validity
is written for storage adapters, state validation and the executor; here they are checked
against an independent, literal reading of core-semantics §1.3 on many generated paths.
"""

from __future__ import annotations

import random

from distributor_core import paths as lp

PIECES = ["a", "b", ".", "/", "\\", "\n", "\x00", "\x1f", "\x7f", "\ud800", " ", "é", "\u00a0",
          "manifest.json", "Manifest.json", ".distributor.json", ".distributor-tmp-x", ".distributor-bak-",
          ".distributor.lock", ".distributor.pending.json", ".distributorx", "..", "x.md"]


def literal_problem(path: str) -> bool:
    """True when §1.3 refuses ``path`` as a storage path."""
    if path == "" or path.startswith("/") or "\\" in path:
        return True
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F or 0xD800 <= ord(ch) <= 0xDFFF for ch in path):
        return True
    return any(segment in ("", ".", "..") for segment in path.split("/"))


def literal_bundle_problem(path: str) -> bool:
    if literal_problem(path):
        return True
    segments = path.split("/")
    reserved = {".distributor.json", ".distributor.pending.json", ".distributor.lock"}
    if segments[-1] == "manifest.json":
        return True
    return any(s in reserved or s.startswith((".distributor-tmp-", ".distributor-bak-")) for s in segments)


def generated(count: int = 30_000):
    rng = random.Random(16)
    for _ in range(count):
        yield "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 5)))


def test_single_path_checks_agree_with_the_rules():
    for path in generated():
        bad, bundle_bad = literal_problem(path), literal_bundle_problem(path)
        assert lp.is_valid_path(path) is not bad, repr(path)
        assert (lp.check_path(path) is None) is not bad, repr(path)
        assert lp.is_valid_bundle_path(path) is not bundle_bad, repr(path)
        assert (lp.check_bundle_path(path) is None) is not bundle_bad, repr(path)


def test_column_check_never_accepts_a_refused_path():
    paths = list(generated(5_000))
    for path in paths:
        if lp.bundle_paths_valid(["data/a.csv", path]):
            assert not literal_bundle_problem(path), repr(path)
    # conservative (a ".distributor" anywhere sends the column to the exact check), yet it
    # accepts a column of ordinary valid paths in one go
    valid = [p for p in paths if not literal_bundle_problem(p) and ".distributor" not in p]
    assert len(valid) > 100 and lp.bundle_paths_valid(valid)


def test_messages_are_the_exact_ones():
    assert lp.check_bundle_path("a/manifest.json") == 'path must not use reserved name "manifest.json"'
    assert lp.check_bundle_path("a/.distributor-tmp-1") == 'path must not use reserved name ".distributor-tmp-1"'
    assert lp.check_path("a//b") == "path must not contain empty segments"
    assert lp.check_path("a/\x7f") == "path must not contain control characters"
    assert lp.check_path(".distributor.json") is None

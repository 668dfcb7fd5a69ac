"""The manifest rules checked a whole column at a time, for large manifests (and the state's output
records, which carry the same paths, digests, sizes and times).

Each function answers one question conservatively: ``True`` means the exact, record-by-record
validation (``paths.check_bundle_path``, ``bundle.digest_problem``, ``validate_manifest``, the
state rules) would find nothing wrong; ``False`` means "maybe not", and the caller then runs that
exact validation, which reports the first problem with its contract message. So these checks
never change a result, only how fast a valid document is accepted: they join a column of values
with newlines and let one compiled regular expression look at all of them at once.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from operator import attrgetter
from typing import Any

from distributor_core import paths as lp
from distributor_core.bundle.model import Manifest, ManifestFile
from distributor_core.jsonfmt import go_escape
from distributor_core.timefmt import ZERO_TIME

#: the string encoder json.dumps(ensure_ascii=False) uses (the C one when available)
_encode_string = json.encoder.encode_basestring

_DIGESTS = re.compile(r"(?:sha256:[0-9a-f]{64}\n)*sha256:[0-9a-f]{64}")
_DIGEST_LEN = len("sha256:") + 64


def _joined(values: Sequence[Any]) -> str | None:
    """Values joined by newlines when every value is a string free of newlines, else None."""
    try:
        text = "\n".join(values)
    except TypeError:
        return None
    if text.count("\n") != len(values) - 1:
        return None
    return text


def digests_valid(values: Sequence[Any]) -> bool:
    """True when every value is ``sha256:`` + 64 lowercase hex characters."""
    if not values:
        return True
    text = _joined(values)
    if text is None or len(text) != len(values) * (_DIGEST_LEN + 1) - 1:
        return False
    return _DIGESTS.fullmatch(text) is not None


def sizes_valid(sizes: Sequence[Any]) -> bool:
    """True when every value is a non-negative JSON integer (bool excluded)."""
    return not sizes or (set(map(type, sizes)) == {int} and min(sizes) >= 0)


def times_set(values: Sequence[Any]) -> bool:
    """True when no value is missing or the zero time (``timefmt.is_zero``)."""
    try:
        unique = set(values)
    except TypeError:
        return False
    for value in unique:
        if value is None or getattr(value, "tzinfo", None) is None:
            return False
        if value == ZERO_TIME:
            return False
    return True


_PATH, _SHA256, _SIZE = attrgetter("path"), attrgetter("sha256"), attrgetter("size")
_RECORD = '{{"path":"{}","sha256":"{}","size":{}}}'.format


def _digest_of_columns(paths: list[str], shas: list[str], sizes: list[int]) -> str:
    """The canonical digest of valid records given as columns. A valid path has no backslash or
    control character, so its JSON string is the path in quotes unless it holds a quote; Go's
    escapes then apply to the whole payload as ``bundle_digest_valid_records`` does."""
    if any('"' in path for path in paths):
        return bundle_digest_valid_records([ManifestFile(*row) for row in zip(paths, shas, sizes, strict=True)])
    payload = go_escape("[" + ",".join(map(_RECORD, paths, shas, sizes)) + "]")
    return "sha256:" + hashlib.sha256(payload.encode("utf-8")).hexdigest()


def bundle_digest_valid_records(files: Sequence[ManifestFile]) -> str:
    """``bundle.bundle_digest`` for records already known valid (plain-int sizes, digests of
    lowercase hex, so only paths need JSON string encoding)."""
    encode = _encode_string
    body = ",".join([f'{{"path":{encode(f.path)},"sha256":"{f.sha256}","size":{f.size}}}' for f in files])
    payload = go_escape(f"[{body}]")
    return "sha256:" + hashlib.sha256(payload.encode("utf-8")).hexdigest()


def manifest_valid(manifest: Any) -> bool:
    """True when ``manifest`` passes every manifest rule (``False``: maybe not, the exact rules of
    ``bundle.validate`` then word the problem)."""
    try:
        if not isinstance(manifest, Manifest):
            return False
        files = manifest.files
        if not files or set(map(type, files)) != {ManifestFile}:
            return False
        return manifest_columns_valid(
            manifest.schema_version,
            manifest.id,
            manifest.digest,
            manifest.created,
            list(map(_PATH, files)),
            list(map(_SHA256, files)),
            list(map(_SIZE, files)),
        )
    except Exception:  # anything unexpected: let the exact validation decide
        return False


def manifest_columns_valid(
    schema_version: Any, manifest_id: Any, digest: Any, created: Any, paths: list, shas: list, sizes: list
) -> bool:
    """:func:`manifest_valid` for a manifest given as its fields and its files' three columns
    (checked before any ``ManifestFile`` is built)."""
    try:
        if type(schema_version) is not int or schema_version != 1:
            return False
        if not isinstance(manifest_id, str) or manifest_id == "":
            return False
        if not digests_valid([digest]):
            return False
        if not times_set([created]):
            return False
        if not paths or not len(paths) == len(shas) == len(sizes):
            return False
        if len(set(paths)) != len(paths) or not lp.bundle_paths_valid(paths):
            return False
        if not digests_valid(shas) or not sizes_valid(sizes):
            return False
        return _digest_of_columns(paths, shas, sizes) == digest
    except Exception:  # anything unexpected: let the exact validation decide
        return False

"""Logical path rules shared by bundles, state and storage (core-semantics §1.3, §8.1; resolutions A1).

A logical path is slash-separated and relative to a backend root. Storage paths may name the
state file itself; source bundle and output paths may not use reserved names.

This module is the one place the rules are written. :func:`check_path` / :func:`check_bundle_path`
give the first broken rule in the contract's words; :func:`is_valid_path`,
:func:`is_valid_bundle_path` (one compiled expression) and :func:`bundle_paths_valid` (a whole
column of paths at once) are the fast answers for the common, valid case, and never accept what
the exact checks refuse. Storage adapters, state validation and the executor all call these.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from typing import Any

MANIFEST_NAME = "manifest.json"
STATE_FILE_NAME = ".distributor.json"
JOURNAL_NAME = ".distributor.pending.json"
LOCK_NAME = ".distributor.lock"
TEMP_PREFIX = ".distributor-tmp-"
BACKUP_PREFIX = ".distributor-bak-"

#: Names distributor owns inside destinations. They are invisible to has-any, unmanaged-content
#: checks and unmanaged reports, and are never valid output or source bundle paths.
INTERNAL_NAMES = frozenset({STATE_FILE_NAME, JOURNAL_NAME, LOCK_NAME})
_INTERNAL_PREFIXES = (TEMP_PREFIX, BACKUP_PREFIX)
#: every reserved name starts with this, so a path without it uses none
_RESERVED_STEM = ".distributor"
assert all(name.startswith(_RESERVED_STEM) for name in (*INTERNAL_NAMES, *_INTERNAL_PREFIXES))

#: characters no path may hold, newline aside: backslash, control characters, DEL, surrogates
_FORBIDDEN = r"\\\x00-\x09\x0b-\x1f\x7f\ud800-\udfff"
#: a segment: neither empty, "." nor "..", of allowed characters (newline is a control character)
_SEGMENT = rf"(?!\.\.?(?:/|\Z))[^/\n{_FORBIDDEN}]+"
#: the compiled form of :func:`check_path`'s rules
_VALID_PATH = re.compile(rf"{_SEGMENT}(?:/{_SEGMENT})*")
#: newline-joined paths hold only allowed characters (newline is the joiner)
_COLUMN_CHARS = re.compile(rf"[^{_FORBIDDEN}]*")
#: an empty, "." or ".." segment in newline-joined paths (a leading or trailing "/" makes an empty one)
_COLUMN_BAD_SEGMENT = re.compile(r"(?:\A|[/\n])\.{0,2}(?=[/\n]|\Z)")
#: a final segment "manifest.json" in newline-joined paths
_COLUMN_MANIFEST_LAST = re.compile(rf"(?:\A|[/\n]){re.escape(MANIFEST_NAME)}(?=\n|\Z)")


class PathError(ValueError):
    """A logical path breaks the path rules; the message says which rule."""


def is_reserved_name(name: str) -> bool:
    """True for a single path segment that distributor reserves inside destinations."""
    return name in INTERNAL_NAMES or name.startswith(_INTERNAL_PREFIXES)


def is_reserved_path(path: str) -> bool:
    """True when any segment of ``path`` is a reserved name."""
    return any(is_reserved_name(seg) for seg in path.split("/"))


def is_temp_or_backup_name(name: str) -> bool:
    return name.startswith(_INTERNAL_PREFIXES)


def _has_bad_character(path: str) -> str | None:
    for ch in path:
        code = ord(ch)
        if code < 0x20 or code == 0x7F:
            return "path must not contain control characters"
        if 0xD800 <= code <= 0xDFFF:
            return "path must not contain unpaired surrogates"
    return None


def is_valid_path(path: Any) -> bool:
    """True when :func:`check_path` finds nothing wrong (one compiled match)."""
    return type(path) is str and _VALID_PATH.fullmatch(path) is not None


def is_valid_bundle_path(path: Any) -> bool:
    """True when :func:`check_bundle_path` finds nothing wrong."""
    if not is_valid_path(path):
        return False
    if _RESERVED_STEM in path:
        return check_bundle_path(path) is None
    return path != MANIFEST_NAME and not path.endswith("/" + MANIFEST_NAME)


def bundle_paths_valid(paths: Sequence[Any]) -> bool:
    """True when every value is a valid bundle path (:func:`check_bundle_path` is ``None``).

    The whole column is joined with newlines and looked at in a few passes in C, so a large
    manifest or state is accepted without a Python step per path; anything unusual answers
    ``False`` and the caller runs the exact per-path check, which words the problem.
    """
    if not paths:
        return True
    try:
        text = "\n".join(paths)
    except TypeError:
        return False
    if text.count("\n") != len(paths) - 1 or _RESERVED_STEM in text:
        return False
    # characters: printable (no control character, DEL or surrogate) and no backslash; text that
    # is not printable for another reason (say a no-break space) gets the character expression
    if "\\" in text or not (text.replace("\n", "").isprintable() or _COLUMN_CHARS.fullmatch(text)):
        return False
    # segments: none empty ("//", a leading or trailing "/", an empty path), "." or ".."
    if text[:1] in ("", "/", "\n") or text[-1] in ("/", "\n"):
        return False
    if "//" in text or "/\n" in text or "\n/" in text or "\n\n" in text:
        return False
    if (text[0] == "." or "/." in text or "\n." in text) and _COLUMN_BAD_SEGMENT.search(text) is not None:
        return False
    return MANIFEST_NAME not in text or _COLUMN_MANIFEST_LAST.search(text) is None


def check_path(path: str) -> str | None:
    """Return the first broken rule of a storage logical path, or ``None`` when it is valid."""
    if type(path) is str and _VALID_PATH.fullmatch(path) is not None:
        return None
    if not isinstance(path, str):
        return "path must be a string"
    if path == "":
        return "path is required"
    if path.startswith("/"):
        return "path must be relative"
    if "\\" in path:
        return "path must not contain backslashes"
    bad = _has_bad_character(path)
    if bad:
        return bad
    for segment in path.split("/"):
        if segment == "":
            return "path must not contain empty segments"
        if segment in (".", ".."):
            return 'path must not contain "." or ".." segments'
    return None


def validate_path(path: str) -> str:
    """Validate a storage logical path (reserved names allowed) and return it."""
    problem = check_path(path)
    if problem:
        raise PathError(problem)
    return path


def validate_prefix(prefix: str) -> str:
    """``""`` (the backend root) or a valid logical path."""
    if prefix == "":
        return prefix
    return validate_path(prefix)


def check_bundle_path(path: str) -> str | None:
    """Rules for a source bundle file path or a destination output path."""
    if type(path) is str and _RESERVED_STEM not in path and _VALID_PATH.fullmatch(path) is not None:
        return None if path != MANIFEST_NAME and not path.endswith("/" + MANIFEST_NAME) else (
            f'path must not use reserved name "{MANIFEST_NAME}"'
        )
    problem = check_path(path)
    if problem:
        return problem
    segments = path.split("/")
    if segments[-1] == MANIFEST_NAME:
        return f'path must not use reserved name "{MANIFEST_NAME}"'
    for segment in segments:
        if is_reserved_name(segment):
            return f'path must not use reserved name "{segment}"'
    return None


def validate_bundle_path(path: str) -> str:
    problem = check_bundle_path(path)
    if problem:
        raise PathError(problem)
    return path


def join(prefix: str, path: str) -> str:
    """Join a validated prefix and path (``join("", "a") == "a"``)."""
    validate_prefix(prefix)
    validate_path(path)
    return path if prefix == "" else f"{prefix}/{path}"


def join_prefix(prefix: str, path: str) -> str:
    """Like :func:`join` but ``path`` may be ``""`` (returns the prefix)."""
    validate_prefix(prefix)
    validate_prefix(path)
    if path == "":
        return prefix
    return path if prefix == "" else f"{prefix}/{path}"


def display_path(path: str) -> str:
    return "." if path == "" else path


def state_path(bundle: str) -> str:
    return join(bundle, STATE_FILE_NAME)


def journal_path(bundle: str) -> str:
    return join(bundle, JOURNAL_NAME)


def lock_path(bundle: str) -> str:
    return join(bundle, LOCK_NAME)


def parent(path: str) -> str:
    """Parent logical directory (``""`` for a top-level entry)."""
    head, _, _ = path.rpartition("/")
    return head


def basename(path: str) -> str:
    return path.rpartition("/")[2]


def is_under(path: str, prefix: str) -> bool:
    """True when ``path`` is ``prefix`` or below it, by whole segments (``""`` covers all)."""
    if prefix == "":
        return True
    return path == prefix or path.startswith(prefix + "/")


def relative_to(path: str, prefix: str) -> str:
    if prefix == "":
        return path
    if path == prefix:
        return ""
    if not path.startswith(prefix + "/"):
        raise PathError(f"{path} is not under {prefix}")
    return path[len(prefix) + 1 :]


def sibling_temp_path(final_path: str) -> str:
    """A reserved temporary name in the directory of ``final_path``."""
    return _sibling(final_path, TEMP_PREFIX)


def sibling_backup_path(final_path: str) -> str:
    return _sibling(final_path, BACKUP_PREFIX)


def _sibling(final_path: str, prefix: str) -> str:
    name = prefix + os.urandom(8).hex()
    directory = parent(final_path)
    return name if directory == "" else f"{directory}/{name}"


def managed_output_targets(bundle: str, outputs: Iterable[str]) -> list[str]:
    """Storage targets of managed outputs (never the state file). Any invalid path fails the call."""
    validate_prefix(bundle)
    return [join(bundle, output) for output in list(outputs)]


def managed_bundle_targets(bundle: str, outputs: Iterable[str]) -> list[str]:
    """Managed outputs followed by the bundle's state file."""
    targets = managed_output_targets(bundle, outputs)
    targets.append(state_path(bundle))
    return targets

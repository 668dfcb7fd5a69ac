"""Source bundle path rules (core-semantics §1.3, resolutions A1).

The rules themselves live in :mod:`distributor_core.paths`; this module words them for bundle
files and raises the bundle error family.
"""

from __future__ import annotations

from typing import Any

from distributor_core import paths as lp
from distributor_core.bundle.errors import BundlePathError
from distributor_core.jsonfmt import go_json_string


def source_path_problem(path: Any) -> str | None:
    """Why ``path`` is not a valid source bundle file path, naming it; ``None`` when valid.

    Examples: ``path is required``, ``path "/a" must be relative``,
    ``path "x/manifest.json" must not use reserved name "manifest.json"``.
    """
    if not isinstance(path, str):
        return "path must be a string"
    if path == "":
        return "path is required"
    problem = lp.check_bundle_path(path)
    if problem is None:
        return None
    if problem.startswith("path "):
        return f"path {go_json_string(path)} {problem[len('path '):]}"
    return f"path {go_json_string(path)}: {problem}"


def validate_source_path(path: str) -> str:
    """Return ``path`` when it is a valid source bundle file path; raise ``BundlePathError``."""
    problem = source_path_problem(path)
    if problem:
        raise BundlePathError(problem)
    return path


__all__ = [
    "source_path_problem",
    "validate_source_path",
]

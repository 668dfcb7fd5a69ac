"""Host paths that must never reach an upload record or status (resolutions D2).

Both publishers pass :func:`host_redactions` to ``mark_finished(..., redact=...)``; the staging
path and the upload's own directory (:func:`staging_redactions`) are always scrubbed as well.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from distributor_core.config import Config
from distributor_core.staging.layout import bundle_dir, record_dir


def host_redactions(config: Config) -> list[tuple[str, str]]:
    """``(host path, placeholder)`` pairs: the config directory, staging root and paths, the
    secrets directory and every root that is a directory of this host (each backend config says
    whether its root is one: ``local_root``)."""
    pairs: list[tuple[str, str]] = [(str(config.base_dir), "<config dir>")]
    pairs.append((str(config.server.http.staging_root), "<staging>"))
    if config.secrets.resolved_directory is not None:
        pairs.append((str(config.secrets.resolved_directory), "<secrets>"))
    for pipeline in config.pipelines:
        if pipeline.source.local_root is not None:
            placeholder = "<staging>" if pipeline.is_upload else f"<source of {pipeline.id}>"
            pairs.append((str(pipeline.source.local_root), placeholder))
        for destination in pipeline.destinations:
            if destination.storage.local_root is not None:
                pairs.append((str(destination.storage.local_root), f"<destination {destination.id}>"))
    return pairs


def staging_redactions(staging_path: str | os.PathLike[str], run_id: str | None = None) -> list[tuple[str, str]]:
    """The pairs for a staging path and, with ``run_id``, the upload's own directories."""
    pairs: list[tuple[str, str]] = []
    if run_id is not None:
        pairs.append((str(bundle_dir(staging_path, run_id)), "<upload>"))
        pairs.append((str(record_dir(staging_path, run_id)), "<upload>"))
    pairs.append((str(Path(staging_path)), "<staging>"))
    return pairs


def scrub(value: Any, pairs: Iterable[tuple[str, str]]) -> Any:
    """Replace host paths in every string of ``value`` (longest path first)."""
    ordered = sorted({(p, r) for p, r in pairs if p and p != "/"}, key=lambda item: -len(item[0]))
    if not ordered:
        return value
    return _scrub(value, ordered)


def _scrub(value: Any, pairs: list[tuple[str, str]]) -> Any:
    if isinstance(value, str):
        for path, placeholder in pairs:
            if path in value:
                value = value.replace(path, placeholder)
        return value
    if isinstance(value, dict):
        return {k: _scrub(v, pairs) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub(v, pairs) for v in value]
    return value

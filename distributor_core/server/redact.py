"""Host paths that must never reach an upload record or status (resolutions D2).

Both publishers pass :func:`host_redactions` to ``staging.mark_finished(..., redact=...)``; the
staging path and the upload's own directory are always scrubbed as well.
"""

from __future__ import annotations

from distributor_core.config import Config


def host_redactions(config: Config) -> list[tuple[str, str]]:
    """``(host path, placeholder)`` pairs: the config directory, staging root and paths, the
    secrets directory and every local destination root."""
    pairs: list[tuple[str, str]] = [(str(config.base_dir), "<config dir>")]
    pairs.append((str(config.server.http.staging_root), "<staging>"))
    if config.secrets.resolved_directory is not None:
        pairs.append((str(config.secrets.resolved_directory), "<secrets>"))
    for pipeline in config.pipelines:
        source = pipeline.source
        if source.backend == "http_upload":
            pairs.append((str(source.staging_path), "<staging>"))
        for destination in pipeline.destinations:
            resolved = getattr(destination.storage, "resolved_path", None)
            if resolved is not None:
                pairs.append((str(resolved), f"<destination {destination.id}>"))
    return pairs

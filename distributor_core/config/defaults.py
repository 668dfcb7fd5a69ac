"""Defaults (interfaces §1.9) and path resolution (resolutions D4) on the decoded tree.

The result has the shape of :class:`distributor_core.config.models.Config`: backend fields of a
destination move under ``storage``, every default is filled in, and every local filesystem path
is made absolute against the config file's directory. Like Go's zero values, an empty string
for a field that has a default means "use the default"; an explicit ``0`` for a number does not.

Values are not checked here: ``validate.py`` reports what is wrong with the filled tree.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from distributor_core.config.fields import (
    BACKEND_KEY_OWNERS,
    DEFAULT_BIND,
    DEFAULT_BODY_IDLE_TIMEOUT,
    DEFAULT_BODY_MIN_RATE,
    DEFAULT_HEADER_TIMEOUT,
    DEFAULT_KNOWN_HOSTS_FILE,
    DEFAULT_LOCK_LEASE,
    DEFAULT_MAX_CONCURRENCY,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_CONNECTIONS_PER_CLIENT,
    DEFAULT_MAX_DIRECTORIES,
    DEFAULT_MAX_ENTRIES,
    DEFAULT_MAX_FAILED_BYTES,
    DEFAULT_MAX_FAILED_BYTES_PER_TOKEN,
    DEFAULT_MAX_HEAD_SIZE,
    DEFAULT_MAX_HEADER_COUNT,
    DEFAULT_MAX_HEADER_SIZE,
    DEFAULT_MAX_MANIFEST_SIZE,
    DEFAULT_MAX_NAME_LENGTH,
    DEFAULT_MAX_PARTITIONS,
    DEFAULT_MAX_PATH_DEPTH,
    DEFAULT_MAX_PATH_LENGTH,
    DEFAULT_MAX_UPLOAD_SIZE,
    DEFAULT_QUEUE_SIZE,
    DEFAULT_RESERVED_CONNECTIONS,
    DEFAULT_RETENTION,
    DEFAULT_S3_REGION,
    DEFAULT_SSH_PORT,
    DEFAULT_STAGING_DIR,
    TRANSFER_CHOICES,
)
from distributor_core.config.units import parse_byte_size, parse_duration

Tree = dict[str, Any]


def resolve_path(base_dir: Path, text: str, *, expand_user: bool = False) -> Path:
    """``text`` made absolute against ``base_dir`` and normalised (``a/../b`` → ``b``)."""
    value = os.path.expanduser(text) if expand_user else text
    return Path(os.path.normpath(os.path.join(base_dir, value)))


def apply_defaults(tree: Tree, base_dir: Path) -> Tree:
    """Fill every default of §1.9 into a decoded tree and resolve paths against ``base_dir``."""
    http = _server_http(tree.get("server", {}).get("http", {}), base_dir)
    directory = tree.get("secrets", {}).get("directory", "")
    return {
        "server": {"http": http},
        "secrets": {
            "directory": directory,
            "resolved_directory": resolve_path(base_dir, directory) if directory else None,
        },
        "upload_tokens": [
            {
                "id": token.get("id", ""),
                "token_env": token.get("token_env", ""),
                "allow_pipelines": list(token.get("allow_pipelines", [])),
            }
            for token in tree.get("upload_tokens", [])
        ],
        "pipelines": [_pipeline(pipeline, http, base_dir) for pipeline in tree.get("pipelines", [])],
        "base_dir": base_dir,
    }


#: this host's scratch directory (under the system temp directory) when staging is in S3
SCRATCH_DIR_NAME = "distributor-staging"


def staging_store_location(value: Any) -> tuple[str, str] | None:
    """``(bucket, prefix)`` of an ``s3://bucket/prefix`` staging root, ``None`` for anything else
    (a local path; other URL schemes are refused before defaults are applied)."""
    if not isinstance(value, str) or not value.startswith("s3://"):
        return None
    bucket, _, prefix = value.removeprefix("s3://").partition("/")
    return bucket, prefix.strip("/")


def _server_http(raw: Tree, base_dir: Path) -> Tree:
    staging_root = raw.get("staging_root", "")
    store = staging_store_location(staging_root)
    if store is not None:  # shared staging in S3; the local root is this host's scratch space
        staging_store: Tree | None = _backend(
            {**raw.get("staging_s3", {}), "backend": "s3", "bucket": store[0], "prefix": store[1]}, base_dir
        )
        local_root = Path(tempfile.gettempdir()) / SCRATCH_DIR_NAME
    else:
        staging_store = None
        local_root = resolve_path(base_dir, staging_root or DEFAULT_STAGING_DIR)
    return {
        "bind": raw.get("bind") or DEFAULT_BIND,
        "staging_root": local_root,
        "staging_store": staging_store,
        "publication_lease": raw.get("publication_lease", parse_duration("60s")),
        "admission_lease": raw.get("admission_lease", parse_duration("120s")),
        "max_upload_size": raw.get("max_upload_size", parse_byte_size(DEFAULT_MAX_UPLOAD_SIZE)),
        "queue_size": raw.get("queue_size", DEFAULT_QUEUE_SIZE),
        "max_concurrency": raw.get("max_concurrency", DEFAULT_MAX_CONCURRENCY),
        "retention": raw.get("retention", parse_duration(DEFAULT_RETENTION)),
        "header_timeout": raw.get("header_timeout", parse_duration(DEFAULT_HEADER_TIMEOUT)),
        "max_connections": raw.get("max_connections", DEFAULT_MAX_CONNECTIONS),
        "body_idle_timeout": raw.get("body_idle_timeout", parse_duration(DEFAULT_BODY_IDLE_TIMEOUT)),
        "body_min_rate": raw.get("body_min_rate", parse_byte_size(DEFAULT_BODY_MIN_RATE)),
        "max_queue_per_token": raw.get("max_queue_per_token", 0),
        "max_connections_per_client": raw.get("max_connections_per_client", DEFAULT_MAX_CONNECTIONS_PER_CLIENT),
        "reserved_connections": raw.get("reserved_connections", DEFAULT_RESERVED_CONNECTIONS),
        "max_head_size": raw.get("max_head_size", parse_byte_size(DEFAULT_MAX_HEAD_SIZE)),
        "max_failed_bytes": raw.get("max_failed_bytes", parse_byte_size(DEFAULT_MAX_FAILED_BYTES)),
        "max_failed_bytes_per_token": raw.get(
            "max_failed_bytes_per_token", parse_byte_size(DEFAULT_MAX_FAILED_BYTES_PER_TOKEN)
        ),
        "limits": _upload_limits(raw.get("limits", {})),
    }


def _upload_limits(raw: Tree) -> Tree:
    return {
        "max_entries": raw.get("max_entries", DEFAULT_MAX_ENTRIES),
        "max_path_depth": raw.get("max_path_depth", DEFAULT_MAX_PATH_DEPTH),
        "max_name_length": raw.get("max_name_length", DEFAULT_MAX_NAME_LENGTH),
        "max_path_length": raw.get("max_path_length", DEFAULT_MAX_PATH_LENGTH),
        "max_header_size": raw.get("max_header_size", parse_byte_size(DEFAULT_MAX_HEADER_SIZE)),
        "max_manifest_size": raw.get("max_manifest_size", parse_byte_size(DEFAULT_MAX_MANIFEST_SIZE)),
        "max_directories": raw.get("max_directories", DEFAULT_MAX_DIRECTORIES),
        "max_header_count": raw.get("max_header_count", DEFAULT_MAX_HEADER_COUNT),
    }


def _pipeline(raw: Tree, http: Tree, base_dir: Path) -> Tree:
    pipeline_id = raw.get("id", "")
    return {
        "id": pipeline_id,
        "source": _backend(raw.get("source", {}), base_dir, http=http, pipeline_id=pipeline_id),
        "validation": {"cache": raw.get("validation", {}).get("cache", True)},
        "dagster": {
            **_dagster(raw.get("dagster", {})),
            "max_partitions": raw.get("dagster", {}).get("max_partitions", DEFAULT_MAX_PARTITIONS),
        },
        "destinations": [_destination(item, base_dir) for item in raw.get("destinations", [])],
    }


def _dagster(raw: Tree) -> Tree:
    """The ``dagster`` block as written (absent keys: nothing set; the Dagster layer fills in)."""
    return {
        "description": raw.get("description"),
        "group": raw.get("group"),
        "owners": raw.get("owners", []),
        "tags": raw.get("tags", []),
        "kinds": raw.get("kinds", []),
        "deps": raw.get("deps", []),
    }


def _backend(raw: Tree, base_dir: Path, *, http: Tree | None = None, pipeline_id: str = "") -> Tree:
    name = raw.get("backend", "")
    if name == "local":
        path = raw.get("path", "")
        return {"backend": name, "path": path, "resolved_path": resolve_path(base_dir, path) if path else None}
    if name == "ssh":
        key_file = raw.get("private_key_file", "")
        config_file = raw.get("ssh_config_file", "")
        return {
            "backend": name,
            "host": raw.get("host", ""),
            "port": raw.get("port", DEFAULT_SSH_PORT),
            "user": raw.get("user", ""),
            "path": raw.get("path", ""),
            "private_key_file": resolve_path(base_dir, key_file, expand_user=True) if key_file else None,
            "known_hosts_file": resolve_path(
                base_dir, raw.get("known_hosts_file") or DEFAULT_KNOWN_HOSTS_FILE, expand_user=True
            ),
            "host_key_policy": raw.get("host_key_policy") or "strict",
            "transport": raw.get("transport") or "paramiko",
            "ssh_config_file": resolve_path(base_dir, config_file, expand_user=True) if config_file else None,
            "ssh_options": raw.get("ssh_options") or [],
        }
    if name == "s3":
        credentials = raw.get("credentials")
        access = secret = ""
        if credentials is not None:
            access = credentials.get("access_key_id_env", "")
            secret = credentials.get("secret_access_key_env", "")
        return {
            "backend": name,
            "bucket": raw.get("bucket", ""),
            "prefix": raw.get("prefix", ""),
            "region": raw.get("region") or DEFAULT_S3_REGION,
            "endpoint": raw.get("endpoint") or None,
            "force_path_style": raw.get("force_path_style", False),
            # AWS S3 enforces conditional writes; an S3-compatible endpoint is pre-checked unless told
            "conditional_writes": raw.get("conditional_writes") or ("precheck" if raw.get("endpoint") else "trusted"),
            "credentials": (
                {"access_key_id_env": access, "secret_access_key_env": secret} if access or secret else None
            ),
        }
    if name == "http_upload" and http is not None:
        staging = raw.get("staging_path", "")
        if staging:
            staging_path: Path | None = resolve_path(base_dir, staging)
        else:
            staging_path = http["staging_root"] / pipeline_id if pipeline_id else http["staging_root"]
        root_store = http.get("staging_store")
        store = None
        if root_store is not None:  # each pipeline under <prefix>/<pipeline id> of the shared store
            store = {**root_store, "prefix": "/".join(p for p in (root_store["prefix"], pipeline_id) if p)}
        return {
            "backend": name,
            "staging_path": staging_path,
            "staging_store": store,
            "max_upload_size": raw.get("max_upload_size", http["max_upload_size"]),
        }
    # No (valid) backend: keep what was written; validation reports the backend.
    return {"backend": name, **{k: v for k, v in raw.items() if k != "backend"}}


def _bundle_retention(raw: Tree | None) -> Tree | None:
    if raw is None:
        return None
    return {"keep_latest": raw.get("keep_latest"), "older_than": raw.get("older_than")}


def _destination(raw: Tree, base_dir: Path) -> Tree:
    storage_raw = {k: v for k, v in raw.items() if k == "backend" or k in BACKEND_KEY_OWNERS}
    publish = raw.get("publish")
    transform = raw.get("transform", {})
    markdown = transform.get("markdown_to_html")
    links = raw.get("links")
    prune = raw.get("retention", {}).get("prune", {})
    transfer = raw.get("transfer", {})
    return {
        "id": raw.get("id", ""),
        "storage": _backend(storage_raw, base_dir),
        "publish": (
            {"source": True, "html": False}
            if publish is None
            else {"source": publish.get("source", False), "html": publish.get("html", False)}
        ),
        "transform": {
            "markdown_to_html": (
                None
                if markdown is None
                else {"enabled": markdown.get("enabled", False), "mode": markdown.get("mode") or "sidecar"}
            )
        },
        "path_mapping": {"mode": raw.get("path_mapping", {}).get("mode") or "preserve_relative"},
        "links": (
            None
            if links is None
            else {"base_url": links.get("base_url", ""), "primary": links.get("primary") or "auto"}
        ),
        "state": {"mode": raw.get("state", {}).get("mode") or "single_owner"},
        "reconciliation": {"mode": raw.get("reconciliation", {}).get("mode") or "replace"},
        "retention": {
            "prune": {
                "enabled": prune.get("enabled", False),
                "older_than": prune.get("older_than"),
                "keep_latest": prune.get("keep_latest"),
                "bundles": _bundle_retention(prune.get("bundles")),
            }
        },
        "takeover": {"mode": raw.get("takeover", {}).get("mode") or "same_pipeline"},
        "lock_lease": raw.get("lock_lease", parse_duration(DEFAULT_LOCK_LEASE)),
        "dagster": _dagster(raw.get("dagster", {})),
        "transfer": {name: transfer.get(name) or choices[0] for name, choices in TRANSFER_CHOICES.items()},
    }

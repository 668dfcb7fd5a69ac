"""The validation message catalogue (interfaces §1.10, resolutions C5, spec README #2 and #3).

:func:`validate_tree` checks a tree that went through decoding and defaults and returns every
message in discovery order: ``server.http``, then pipelines in file order (each pipeline's id,
source, destinations; each destination's id, backend, publish/transform, path_mapping, links,
state, reconciliation, retention, takeover, transfer), then upload tokens. The wording of every
message is part of the contract; tests assert them exactly.

This module owns the order of the checks and every rule between keys. What one key allows (its
bounds, documented values, id pattern) is declared with the key in :mod:`.models`;
:func:`bound_problem` and :func:`_choice` word it from there.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import PurePath
from typing import Any

import msgspec

from distributor_core import paths
from distributor_core.config import models as m
from distributor_core.config import shape
from distributor_core.config.addresses import has_query_or_fragment, is_http_url, split_host_port
from distributor_core.config.shape import Key
from distributor_core.config.ssh_options import host_problem, option_problems, user_problem

Tree = dict[str, Any]
_SLUG = re.compile(m.SLUG_PATTERN, re.ASCII)


def is_slug_like_id(value: str) -> bool:
    """``[a-zA-Z0-9][a-zA-Z0-9._-]*`` over the whole string (interfaces §0.2)."""
    return _SLUG.fullmatch(value) is not None


def bound_problem(key: Key, value: Any) -> str | None:
    """What ``value`` breaks of ``key``'s declared bounds, worded (``must be greater than zero``),
    or ``None``. A duration's bound is in seconds."""
    number = value.total_seconds() if isinstance(value, timedelta) else value
    if key.le is not None and key.ge is not None and not key.ge <= number <= key.le:
        return f"must be between {key.ge} and {key.le}"
    if key.gt == 0 and number <= 0:
        return "must be greater than zero"
    if key.ge == 0 and number < 0:
        return "must be zero or greater"
    if key.ge is not None and key.le is None and number < key.ge:
        return f"must be {key.ge} or greater"
    return None


def _bounded(model: type[msgspec.Struct], values: Tree, names: Sequence[str], context: str, errs: list[str]) -> None:
    """Each named value of ``values`` within the bounds ``model`` declares for it."""
    for name in names:
        problem = bound_problem(shape.field(model, name), values[name])
        if problem:
            errs.append(f"{context}.{name} {problem}")


def _choices(model: type[msgspec.Struct], name: str) -> tuple[str, ...]:
    return shape.field(model, name).choices


def one_of(choices: Sequence[str]) -> str:
    """``a or b`` for two values, ``a, b, or c`` for more."""
    if len(choices) == 1:
        return choices[0]
    if len(choices) == 2:
        return f"{choices[0]} or {choices[1]}"
    return ", ".join(choices[:-1]) + f", or {choices[-1]}"


#: ``scheme://`` at the start of a value: a URL, never a directory path
_URL_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


def staging_location_messages(tree: Tree) -> list[str]:
    """Staging locations given as URLs, checked on the decoded tree (before relative paths are
    resolved, which would turn ``gs://bucket/x`` into a local directory named ``gs:/bucket/x``).
    ``server.http.staging_root`` is a local directory or ``s3://bucket/prefix`` (shared staging,
    issue 29); a pipeline's ``staging_path`` is a local directory, and only without an ``s3://``
    root (each pipeline then stages under ``<prefix>/<pipeline id>``)."""
    messages: list[str] = []
    http = tree.get("server", {}).get("http", {})
    root = http.get("staging_root", "") if isinstance(http, dict) else ""
    shared = False
    match = _URL_SCHEME.match(root) if isinstance(root, str) else None
    if match and match[1] != "s3":
        messages.append(
            f"server.http.staging_root: {match[1]}:// URLs are not supported for staging; use a local "
            "directory path (one server) or s3://bucket/prefix (any number of serve replicas)"
        )
    elif match:
        shared = True
        bucket, _, _prefix = root.removeprefix("s3://").partition("/")
        if not bucket:
            messages.append("server.http.staging_root must name a bucket: s3://bucket/prefix")
    if isinstance(http, dict) and "staging_s3" in http and not shared:
        messages.append("server.http.staging_s3 is only used with an s3:// staging_root")
    for index, pipeline in enumerate(tree.get("pipelines", [])):
        source = pipeline.get("source", {}) if isinstance(pipeline, dict) else {}
        if not (isinstance(source, dict) and source.get("backend") == "http_upload"):
            continue
        field = f"{pipeline_context(index)}.source.staging_path"
        value = source.get("staging_path", "")
        match = _URL_SCHEME.match(value) if isinstance(value, str) else None
        if match:
            messages.append(
                f"{field} must be a local directory path: {match[1]}:// URLs are not supported there "
                "(to stage in S3, set server.http.staging_root to s3://bucket/prefix)"
            )
        elif shared and value:
            messages.append(
                f"{field} cannot be set with an s3:// server.http.staging_root: every pipeline stages under "
                "<staging_root>/<pipeline id> in the shared store; remove it"
            )
    return messages


def pipeline_context(pipeline_index: int) -> str:
    return f"pipelines[{pipeline_index}]"


def destination_context(pipeline_index: int, destination_index: int) -> str:
    """The message context of a destination: ``pipelines[i].destinations[j]``."""
    return f"{pipeline_context(pipeline_index)}.destinations[{destination_index}]"


def validate_tree(tree: Tree) -> list[str]:
    """Every rule violation of a defaulted tree, in discovery order."""
    errs: list[str] = []
    _server_http(tree["server"]["http"], errs)

    pipelines = tree["pipelines"]
    if not pipelines:
        errs.append("pipelines is required")
    pipeline_ids: set[str] = set()
    upload_pipeline_ids: dict[str, None] = {}  # ordered set, file order
    staging_paths: list[tuple[PurePath, str]] = []
    for index, pipeline in enumerate(pipelines):
        context = pipeline_context(index)
        pipeline_id = pipeline["id"]
        if pipeline_id == "":
            errs.append(f"{context}.id is required")
        elif not is_slug_like_id(pipeline_id):
            errs.append(f"{context}.id must be a slug-like identifier")
        elif pipeline_id in pipeline_ids:
            errs.append(f"pipeline id {pipeline_id} is duplicated")
        else:
            pipeline_ids.add(pipeline_id)

        _backend(pipeline["source"], f"{context}.source", errs, source=True)
        if pipeline["source"].get("backend") == "http_upload" and pipeline_id != "":
            upload_pipeline_ids[pipeline_id] = None
            _staging_overlap(pipeline["source"].get("staging_path"), pipeline_id, context, staging_paths, errs)

        _bounded(m.PipelineDagster, pipeline["dagster"], ("max_partitions",), f"{context}.dagster", errs)
        if not pipeline["destinations"]:
            errs.append(f"{context}.destinations is required")
        destination_ids: set[str] = set()
        for position, destination in enumerate(pipeline["destinations"]):
            _destination(destination, destination_context(index, position), pipeline_id, destination_ids, errs)
            _bundle_retention(
                destination, destination_context(index, position), pipeline["source"].get("backend"), errs
            )

    _upload_tokens(tree["upload_tokens"], pipeline_ids, upload_pipeline_ids, errs)
    return errs


def _staging_overlap(
    staging: PurePath | None, pipeline_id: str, context: str, seen: list[tuple[PurePath, str]], errs: list[str]
) -> None:
    """Two upload pipelines must not share (or nest) staging paths: their records would mix."""
    if staging is None or str(staging) == "":
        return
    for other, other_id in seen:
        if staging == other or other in staging.parents or staging in other.parents:
            errs.append(f"{context}.source.staging_path overlaps the staging path of pipeline {other_id}")
            break
    seen.append((staging, pipeline_id))


def _server_http(http: Tree, errs: list[str]) -> None:
    try:
        split_host_port(http["bind"])
    except ValueError:
        errs.append("server.http.bind must be a host:port address such as 127.0.0.1:8080")
    if str(http["staging_root"]) == "":
        errs.append("server.http.staging_root is required")
    store = http.get("staging_store")
    if store is not None and store["bucket"]:  # a missing bucket is reported with the URL
        _s3(store, "server.http.staging_s3", errs)
    _bounded(m.ServerHTTP, http, _SERVER_BOUNDED, "server.http", errs)
    if http["reserved_connections"] >= http["max_connections"] > 0:
        errs.append("server.http.reserved_connections must be less than server.http.max_connections")
    problem = bound_problem(shape.field(m.ServerHTTP, "max_queue_per_token"), http["max_queue_per_token"])
    if problem:
        errs.append(f"server.http.max_queue_per_token {problem}")
    elif http["max_queue_per_token"] > http["queue_size"] > 0:
        errs.append("server.http.max_queue_per_token must not be greater than server.http.queue_size")
    _bounded(m.UploadLimits, http["limits"], tuple(http["limits"]), "server.http.limits", errs)


#: the keys of ``server.http`` whose declared bounds are checked, in the catalogue's order
_SERVER_BOUNDED = (
    "max_upload_size", "queue_size", "max_concurrency", "retention", "header_timeout", "body_idle_timeout",
    "publication_lease", "admission_lease", "max_connections", "max_head_size", "max_connections_per_client",
    "reserved_connections",
)


def _backend(storage: Tree, context: str, errs: list[str], *, source: bool) -> None:
    name = storage.get("backend", "")
    if name == "":
        errs.append(f"{context}.backend is required")
        return
    if not source and name == "http_upload":
        errs.append(f"{context}.backend http_upload is valid only as a source backend")
        return
    allowed = shape.source_backends() if source else shape.destination_backends()
    if name not in allowed:
        errs.append(f"{context}.backend must be {one_of(allowed)}")
        return
    _BACKEND_CHECKS[name](storage, context, errs)


def _local(storage: Tree, context: str, errs: list[str]) -> None:
    if storage["path"] == "":
        errs.append(f"{context}.path is required for local backend")


def _ssh(storage: Tree, context: str, errs: list[str]) -> None:
    if storage["host"] == "":
        errs.append(f"{context}.host is required for ssh backend")
    elif problem := host_problem(storage["host"]):
        errs.append(f"{context}.host {problem}")
    _bounded(m.SSHBackend, storage, ("port",), context, errs)
    if storage["user"] == "":
        errs.append(f"{context}.user is required for ssh backend")
    elif problem := user_problem(storage["user"]):
        errs.append(f"{context}.user {problem}")
    if storage["path"] == "":
        errs.append(f"{context}.path is required for ssh backend")
    elif not storage["path"].startswith("/"):
        errs.append(f"{context}.path must be an absolute remote path for ssh backend")
    _choice(storage["host_key_policy"], _choices(m.SSHBackend, "host_key_policy"), f"{context}.host_key_policy", errs)
    refused = _choice(storage["transport"], _choices(m.SSHBackend, "transport"), f"{context}.transport", errs)
    if not refused and storage["transport"] != "openssh":
        for name in ("ssh_config_file", "ssh_options"):
            if storage[name]:
                errs.append(f"{context}.{name} is only used with transport: openssh")
    errs.extend(f"{context}.{problem}" for problem in option_problems(storage["ssh_options"]))


def _s3(storage: Tree, context: str, errs: list[str]) -> None:
    if storage["bucket"] == "":
        errs.append(f"{context}.bucket is required for s3 backend")
    if storage["prefix"] != "" and paths.check_path(storage["prefix"]) is not None:
        errs.append(f"{context}.prefix must be a clean relative slash-separated path")
    if storage["endpoint"] is not None and not is_http_url(storage["endpoint"]):
        errs.append(f"{context}.endpoint must be an absolute http or https URL")
    _choice(storage["conditional_writes"], _choices(m.S3Backend, "conditional_writes"), f"{context}.conditional_writes",
            errs)
    credentials = storage["credentials"]
    if credentials is not None and not (credentials["access_key_id_env"] and credentials["secret_access_key_env"]):
        errs.append(f"{context}.credentials.access_key_id_env and secret_access_key_env must be set together")


def _http_upload(storage: Tree, context: str, errs: list[str]) -> None:
    if storage["staging_path"] is None or str(storage["staging_path"]) == "":
        errs.append(f"{context}.staging_path is required for http_upload backend")
    _bounded(m.HTTPUploadSource, storage, ("max_upload_size",), context, errs)


_BACKEND_CHECKS: dict[str, Callable[[Tree, str, list[str]], None]] = {
    "local": _local,
    "ssh": _ssh,
    "s3": _s3,
    "http_upload": _http_upload,
}


def _destination(
    destination: Tree, context: str, pipeline_id: str, destination_ids: set[str], errs: list[str]
) -> None:
    destination_id = destination["id"]
    if destination_id == "":
        errs.append(f"{context}.id is required")
    elif not is_slug_like_id(destination_id):
        errs.append(f"{context}.id must be a slug-like identifier")
    elif destination_id in destination_ids:
        errs.append(f"destination id {destination_id} is duplicated in pipeline {pipeline_id}")
    else:
        destination_ids.add(destination_id)

    _backend(destination["storage"], context, errs, source=False)
    _publish_transform(destination, context, errs)
    _mode(destination, m.PathMappingPolicy, "path_mapping", context, errs)
    _links(destination["links"], f"{context}.links", errs)
    _mode(destination, m.StatePolicy, "state", context, errs)
    _mode(destination, m.ReconciliationPolicy, "reconciliation", context, errs)
    _retention(destination["retention"]["prune"], f"{context}.retention", errs)
    _mode(destination, m.TakeoverPolicy, "takeover", context, errs)
    _bounded(m.Destination, destination, ("lock_lease",), context, errs)
    for name in destination["transfer"]:
        _choice(destination["transfer"][name], _choices(m.TransferPolicy, name), f"{context}.transfer.{name}", errs)


def _mode(destination: Tree, model: type[msgspec.Struct], block: str, context: str, errs: list[str]) -> None:
    _choice(destination[block]["mode"], _choices(model, "mode"), f"{context}.{block}.mode", errs)


def _choice(value: str, choices: Sequence[str], path: str, errs: list[str]) -> bool:
    """Whether ``value`` is not one of ``choices`` (and the message is added)."""
    if value not in choices:
        errs.append(f"{path} must be {one_of(choices)}")
        return True
    return False


def _publish_transform(destination: Tree, context: str, errs: list[str]) -> None:
    publish = destination["publish"]
    markdown = destination["transform"]["markdown_to_html"]
    if not publish["source"] and not publish["html"]:
        errs.append(f"{context}.publish must enable source or html")
    if publish["html"] and (markdown is None or not markdown["enabled"]):
        errs.append(f"{context}.transform.markdown_to_html must be enabled when publish.html is true")
    if markdown is not None:
        where = f"{context}.transform.markdown_to_html.mode"
        _choice(markdown["mode"], _choices(m.MarkdownToHTML, "mode"), where, errs)


def _links(links: Tree | None, context: str, errs: list[str]) -> None:
    if links is None:
        return
    base_url = links["base_url"]
    if base_url == "":
        errs.append(f"{context}.base_url is required")
    elif not is_http_url(base_url):
        errs.append(f"{context}.base_url must be an absolute http or https URL")
    elif has_query_or_fragment(base_url):
        errs.append(f"{context}.base_url must not have a query or fragment")
    _choice(links["primary"], _choices(m.LinksPolicy, "primary"), f"{context}.primary", errs)


def _retention(prune: Tree, context: str, errs: list[str]) -> None:
    if not prune["enabled"]:
        return
    older_than, keep_latest = prune["older_than"], prune["keep_latest"]
    if older_than is None and keep_latest is None and prune["bundles"] is None:
        errs.append(f"{context}.prune must set older_than or keep_latest when enabled is true")
    if older_than is not None and older_than.total_seconds() <= 0:
        errs.append(f"{context}.prune.older_than must be greater than zero")
    if keep_latest is not None and keep_latest < 0:
        errs.append(f"{context}.prune.keep_latest must be zero or greater")


def _bundle_retention(destination: Tree, context: str, source_backend: str | None, errs: list[str]) -> None:
    """``retention.prune.bundles`` (issue 37): whole bundle paths of a ``preserve_relative``
    destination; checked, like the rest of ``retention.prune``, only when ``enabled`` is true."""
    prune = destination["retention"]["prune"]
    bundles = prune["bundles"]
    if not prune["enabled"] or bundles is None:
        return
    where = f"{context}.retention.prune.bundles"
    if bundles["keep_latest"] is None and bundles["older_than"] is None:
        errs.append(f"{where} must set keep_latest or older_than")
    if bundles["keep_latest"] is not None and bundles["keep_latest"] < 1:
        errs.append(f"{where}.keep_latest must be 1 or greater")
    if bundles["older_than"] is not None and bundles["older_than"].total_seconds() <= 0:
        errs.append(f"{where}.older_than must be greater than zero")
    if prune["older_than"] is not None or prune["keep_latest"] is not None:
        errs.append(
            f"{where} cannot be combined with retention.prune.older_than or keep_latest (those prune the outputs "
            "of each bundle path; bundles removes whole bundle paths): choose one"
        )
    if destination["path_mapping"]["mode"] == "fixed":
        errs.append(
            f"{where} needs path_mapping.mode preserve_relative (a fixed destination holds one bundle at its root; "
            "use retention.prune.older_than or keep_latest there)"
        )
    elif source_backend == "http_upload":
        errs.append(
            f"{where} is not supported for destinations of http_upload pipelines (every upload is published at the "
            "destination root)"
        )


def _upload_tokens(
    tokens: list[Tree], pipeline_ids: set[str], upload_pipeline_ids: dict[str, None], errs: list[str]
) -> None:
    if not upload_pipeline_ids:
        if tokens:
            errs.append("upload_tokens must reference configured http_upload pipelines")
        return
    if not tokens:
        errs.append("upload_tokens is required when any pipeline source backend is http_upload")
        return

    token_ids: set[str] = set()
    allowed_upload_ids: set[str] = set()
    for index, token in enumerate(tokens):
        context = f"upload_tokens[{index}]"
        token_id = token["id"]
        if token_id == "":
            errs.append(f"{context}.id is required")
        elif not is_slug_like_id(token_id):
            errs.append(f"{context}.id must be a slug-like identifier")
        elif token_id in token_ids:
            errs.append(f"upload token id {token_id} is duplicated")
        else:
            token_ids.add(token_id)

        if token["token_env"] == "":
            errs.append(f"{context}.token_env is required")
        if not token["allow_pipelines"]:
            errs.append(f"{context}.allow_pipelines is required")

        seen: set[str] = set()
        for position, allowed in enumerate(token["allow_pipelines"]):
            entry = f"{context}.allow_pipelines[{position}]"
            if allowed == "":
                errs.append(f"{entry} is required")
                continue
            if allowed in seen:
                errs.append(f"{context}.allow_pipelines contains duplicate pipeline id {allowed}")
                continue
            seen.add(allowed)
            if allowed not in pipeline_ids:
                errs.append(f"{entry} references unknown pipeline {allowed}")
                continue
            if allowed not in upload_pipeline_ids:
                errs.append(f"{entry} references non-http_upload pipeline {allowed}")
                continue
            allowed_upload_ids.add(allowed)

    for pipeline_id in upload_pipeline_ids:
        if pipeline_id not in allowed_upload_ids:
            errs.append(f"http_upload pipeline {pipeline_id} is not allowed by any upload token")

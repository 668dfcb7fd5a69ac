"""Validation of state values (core-semantics §2.6) and the http(s) URL rule.

The first broken rule is raised as a :class:`StateError` whose message is the contract text.
Checks run in the Go reference's order so a document with several problems reports the same one.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from operator import attrgetter
from urllib.parse import urlsplit

from distributor_core import paths as lp
from distributor_core.bundle import (
    Manifest,
    ManifestError,
    ValidManifest,
    columns,
    digest_problem,
    source_path_problem,
    validate_manifest,
)
from distributor_core.jsonfmt import go_json_string, is_json_int
from distributor_core.state.errors import StateError, go_quote
from distributor_core.state.model import (
    OUTPUT_KIND_GENERATED,
    OUTPUT_KINDS,
    RECONCILIATION_MODES,
    STATE_MODE_SHARED_ROOT,
    STATE_MODE_SINGLE_OWNER,
    OutputRecord,
    OwnerRecord,
    OwnerScope,
    SharedOutputRecord,
    SharedRootState,
    SingleOwnerState,
)
from distributor_core.timefmt import is_zero

_HTTP_SCHEMES = ("http", "https")


def check_http_url(url: str) -> str | None:
    """Why ``url`` is not an absolute http(s) URL with a host, or ``None`` when it is one.

    A URL is valid iff it parses, its scheme is ``http`` or ``https`` (any case) and it has a
    non-empty host (core-semantics §2.6, decision). Control characters anywhere and whitespace in
    the authority make it unparsable, as they do for Go's ``url.Parse``.
    """
    problem = f"url {go_json_string(url)} must be an absolute http or https URL"
    if not isinstance(url, str) or any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in url):
        return problem
    try:
        parts = urlsplit(url)
        _ = parts.port  # raises ValueError for a malformed port
    except ValueError:
        return problem
    if parts.scheme.lower() not in _HTTP_SCHEMES or not parts.hostname:
        return problem
    if any(ch.isspace() for ch in parts.netloc):
        return problem
    return None


#: absolute http(s) URLs with a plain ASCII host (and optional small port) and no whitespace
#: or control character anywhere: urlsplit parses them and finds the scheme and a host
_URL_TEXT = r"(?i:https?)://[A-Za-z0-9._-]+(?::[0-9]{1,4})?(?:[/?#][^\n\x00-\x20\x7f]*)?"
_URLS = re.compile(rf"{_URL_TEXT}(?:\n{_URL_TEXT})*")


def http_urls_valid(urls: Sequence[object]) -> bool:
    """True when every value is an absolute http(s) URL :func:`check_http_url` accepts (checked
    as one newline-joined text); ``False`` means "maybe not"."""
    if not urls:
        return True
    try:
        text = "\n".join(urls)  # type: ignore[arg-type]
    except TypeError:
        return False
    return text.count("\n") == len(urls) - 1 and _URLS.fullmatch(text) is not None


def _required_time(value: datetime, context: str) -> None:
    if is_zero(value):
        raise StateError(f"{context} is required")


def _check_manifest(manifest: Manifest | None, context: str) -> None:
    if isinstance(manifest, ValidManifest):
        return
    if manifest is None:
        raise StateError(f"{context} is required")
    if not isinstance(manifest, Manifest):
        raise StateError(f"{context}: manifest must be a manifest value")
    try:
        validate_manifest(manifest)
    except ManifestError as exc:
        raise StateError(f"{context}: {exc}") from None


def _check_url(url: str, context: str) -> None:
    if url:
        problem = check_http_url(url)
        if problem:
            raise StateError(f"{context}: {problem}")


def _check_output_common(index: int, output: OutputRecord | SharedOutputRecord) -> None:
    prefix = f"state outputs[{index}]"
    problem = source_path_problem(output.path)
    if problem:
        raise StateError(f"{prefix}.path: {problem}")
    if output.kind not in OUTPUT_KINDS:
        raise StateError(f"{prefix}.kind must be source or generated")
    problem = source_path_problem(output.source_path)
    if problem:
        raise StateError(f"{prefix}.source_path: {problem}")
    if output.kind == OUTPUT_KIND_GENERATED and not output.transform:
        raise StateError(f"{prefix}.transform is required for generated output")
    _check_url(output.url, f"{prefix}.url")
    problem = digest_problem(output.sha256)
    if problem:
        raise StateError(f"{prefix}.sha256: {problem}")
    if not is_json_int(output.size):
        raise StateError(f"{prefix}.size must be an integer")
    if output.size < 0:
        raise StateError(f"{prefix}.size must be non-negative")


#: an output record's fields as columns: ``{field name: [value of each record]}``
Columns = dict[str, list]


def record_columns(outputs: Sequence[object], record_type: type) -> Columns | None:
    """The records' fields as columns, or ``None`` when one is not a ``record_type``."""
    if set(map(type, outputs)) - {record_type}:
        return None
    return {name: list(map(attrgetter(name), outputs)) for name in record_type.__struct_fields__}


def _outputs_valid_columns(
    table: Columns | None, owners: set[OwnerScope] | None = None, manifest: ValidManifest | None = None
) -> bool:
    """True when every output of ``table`` (:func:`record_columns`) passes the per-record rules
    below, checked a column at a time; the loops then need not run. ``owners`` given: the
    shared-root rules too. ``manifest``: the state's validated manifest, whose paths and digests
    are valid, so equal columns need no rescan."""
    if table is None:
        return False
    try:
        if not output_columns_valid(
            paths=table["path"],
            kinds=table["kind"],
            sources=table["source_path"],
            shas=table["sha256"],
            sizes=table["size"],
            times=list({*table["created_at"], *table["updated_at"]}),
            transforms=table["transform"],
            urls=table["url"],
            manifest=manifest,
        ):
            return False
        if owners is None:
            return True
        if not (all(table["pipeline_id"]) and all(table["destination_id"]) and all(table["source_id"])):
            return False
        scopes = {(scope.pipeline_id, scope.destination_id) for scope in owners}
        if not set(zip(table["pipeline_id"], table["destination_id"], strict=True)) <= scopes:
            return False
        if not columns.digests_valid(table["source_digest"]):
            return False
        return columns.times_set(table["source_created"])
    except Exception:  # anything unexpected: the record-by-record loop decides
        return False


def output_columns_valid(
    *,
    paths: list,
    kinds: list,
    sources: list,
    shas: list,
    sizes: list,
    times: list,
    transforms: list,
    urls: list,
    manifest: ValidManifest | None = None,
    unique: bool = False,
) -> bool:
    """True when outputs with these columns pass every per-record rule of
    :func:`_check_output_common` plus unique paths and set times (``times``: every created and
    updated value, in any order; duplicates may be left out). ``manifest``: a validated
    manifest; a column of paths or digests equal to its own needs no rescan. ``unique``: the
    caller has already checked that no path repeats."""
    manifest_paths = list(map(_PATH, manifest.files)) if manifest is not None else None
    manifest_shas = list(map(_SHA256, manifest.files)) if manifest is not None else None
    try:
        if not unique and len(set(paths)) != len(paths):
            return False
        if paths != manifest_paths and not lp.bundle_paths_valid(paths):
            return False
        if sources != manifest_paths and sources != paths and not lp.bundle_paths_valid(sources):
            return False
        kind_set = set(kinds)
        if not kind_set <= set(OUTPUT_KINDS):
            return False
        if OUTPUT_KIND_GENERATED in kind_set and not all(
            transform for kind, transform in zip(kinds, transforms, strict=True) if kind == OUTPUT_KIND_GENERATED
        ):
            return False
        if not http_urls_valid([url for url in urls if url]):
            return False
        if shas != manifest_shas and not columns.digests_valid(shas):
            return False
        if not columns.sizes_valid(sizes):
            return False
        return columns.times_set(times)
    except Exception:  # anything unexpected: the record-by-record loop decides
        return False


_PATH, _SOURCE_PATH, _KIND, _URL, _TRANSFORM = (
    attrgetter(name) for name in ("path", "source_path", "kind", "url", "transform")
)
_SHA256, _SIZE, _CREATED, _UPDATED = (attrgetter(name) for name in ("sha256", "size", "created_at", "updated_at"))


def _check_unique_path(index: int, path: str, seen: set[str]) -> None:
    if path in seen:
        raise StateError(f"state outputs[{index}].path duplicates {go_quote(path)}")
    seen.add(path)


def _validate_single_owner(
    state: SingleOwnerState, *, state_mode: str, table: Columns | None = None
) -> SingleOwnerState:
    """``table``: the outputs' columns as the decoder built the records from them (otherwise
    taken from the records)."""
    if not isinstance(state, SingleOwnerState):
        raise StateError("destination state document is empty")
    if not state.pipeline_id:
        raise StateError("state pipeline_id is required")
    if not state.destination_id:
        raise StateError("state destination_id is required")
    _required_time(state.published_at, "state published_at")
    _required_time(state.created_at, "state created_at")
    _required_time(state.updated_at, "state updated_at")
    if state_mode != STATE_MODE_SINGLE_OWNER:
        raise StateError("state state.mode must be single_owner")
    if state.reconciliation_mode not in RECONCILIATION_MODES:
        raise StateError("state reconciliation.mode must be replace or merge")
    _check_manifest(state.manifest, "state source.manifest")
    _check_url(state.primary_url, "state links.primary_url")
    manifest = state.manifest if isinstance(state.manifest, ValidManifest) else None
    if table is None:
        table = record_columns(state.outputs, OutputRecord)
    if not _outputs_valid_columns(table, manifest=manifest):
        seen: set[str] = set()
        for index, output in enumerate(state.outputs):
            if not isinstance(output, OutputRecord):
                raise StateError(f"state outputs[{index}] must be an output record")
            _check_output_common(index, output)
            _required_time(output.created_at, f"state outputs[{index}].created_at")
            _required_time(output.updated_at, f"state outputs[{index}].updated_at")
            _check_unique_path(index, output.path, seen)
    return state


def validate_single_owner(state: SingleOwnerState) -> SingleOwnerState:
    """Check every single-owner rule; return ``state`` unchanged when it is valid (a recorded
    :class:`~distributor_core.bundle.ValidManifest` is not checked again)."""
    return _validate_single_owner(state, state_mode=STATE_MODE_SINGLE_OWNER)


def _check_owner(index: int, owner: OwnerRecord) -> None:
    prefix = f"state owners[{index}]"
    if not isinstance(owner, OwnerRecord):
        raise StateError(f"{prefix} must be an owner record")
    if not owner.pipeline_id:
        raise StateError(f"{prefix}.pipeline_id is required")
    if not owner.destination_id:
        raise StateError(f"{prefix}.destination_id is required")
    if owner.reconciliation_mode not in RECONCILIATION_MODES:
        raise StateError(f"{prefix}.reconciliation.mode must be replace or merge")
    _check_manifest(owner.manifest, f"{prefix}.source.manifest")
    _check_url(owner.primary_url, f"{prefix}.links.primary_url")


def _check_shared_output(index: int, output: SharedOutputRecord, owners: set[OwnerScope]) -> None:
    prefix = f"state outputs[{index}]"
    if not isinstance(output, SharedOutputRecord):
        raise StateError(f"{prefix} must be a shared-root output record")
    _check_output_common(index, output)
    if not output.pipeline_id:
        raise StateError(f"{prefix}.pipeline_id is required")
    if not output.destination_id:
        raise StateError(f"{prefix}.destination_id is required")
    if output.scope not in owners:
        raise StateError(f"{prefix} references unknown owner {output.scope}")
    if not output.source_id:
        raise StateError(f"{prefix}.source_id is required")
    problem = digest_problem(output.source_digest)
    if problem:
        raise StateError(f"{prefix}.source_digest: {problem}")
    _required_time(output.source_created, f"{prefix}.source_created")
    _required_time(output.created_at, f"{prefix}.created_at")
    _required_time(output.updated_at, f"{prefix}.updated_at")


def _validate_shared_root(
    state: SharedRootState, *, state_mode: str, table: Columns | None = None
) -> SharedRootState:
    """``table`` as for :func:`_validate_single_owner`."""
    if not isinstance(state, SharedRootState):
        raise StateError("destination state document is empty")
    _required_time(state.created_at, "state created_at")
    _required_time(state.updated_at, "state updated_at")
    if state_mode != STATE_MODE_SHARED_ROOT:
        raise StateError("state state.mode must be shared_root")
    owners: set[OwnerScope] = set()
    for index, owner in enumerate(state.owners):
        _check_owner(index, owner)
        if owner.scope in owners:
            raise StateError(f"state owners[{index}] duplicates owner {owner.scope}")
        owners.add(owner.scope)
    if table is None:
        table = record_columns(state.outputs, SharedOutputRecord)
    if not _outputs_valid_columns(table, owners):
        seen: set[str] = set()
        for index, output in enumerate(state.outputs):
            _check_shared_output(index, output, owners)
            _check_unique_path(index, output.path, seen)
    return state


def validate_shared_root(state: SharedRootState) -> SharedRootState:
    """Check every shared-root rule; return ``state`` unchanged when it is valid (as
    :func:`validate_single_owner`)."""
    return _validate_shared_root(state, state_mode=STATE_MODE_SHARED_ROOT)


def validate_state(doc: SingleOwnerState | SharedRootState | None) -> SingleOwnerState | SharedRootState:
    """Validate either document shape (``destination state document is empty`` for ``None``)."""
    if isinstance(doc, SingleOwnerState):
        return validate_single_owner(doc)
    if isinstance(doc, SharedRootState):
        return validate_shared_root(doc)
    raise StateError("destination state document is empty")


__all__ = [
    "check_http_url",
    "validate_shared_root",
    "validate_single_owner",
    "validate_state",
]

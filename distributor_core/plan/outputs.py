"""Output planning: source copies, generated HTML, collisions, link URLs (core-semantics §4.4).

Pure: the Markdown sources to render are named by :func:`markdown_sources`, and their bytes are
handed to :func:`render_markdown` by whoever read them (``execute.facts``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from enum import StrEnum
from itertools import repeat
from operator import attrgetter
from urllib.parse import quote, urlsplit

import msgspec

from distributor_core import paths as lp
from distributor_core.bundle import Manifest, ManifestFile, ValidManifest
from distributor_core.plan.model import (
    DestinationPolicy,
    LinkPolicy,
    PlanError,
    PlannedOutput,
    Renderer,
    TransferPolicy,
)
from distributor_core.plan.modes import (
    ConflictChoice,
    LinkPrimary,
    MarkdownMode,
    NewerChoice,
    OlderChoice,
    PathMapping,
    ReconciliationMode,
    SameChoice,
    StateMode,
    TakeoverMode,
    coerce,
)

MARKDOWN_TRANSFORM = "markdown_to_html"
_URL_SAFE = "-_.~$&+,;=:@!'()*"


def is_markdown(path: str) -> bool:
    lower = path.lower()
    return lower.endswith(".md") or lower.endswith(".markdown")


def html_path(source_path: str, mode: str) -> str:
    directory = lp.parent(source_path)
    if mode == MarkdownMode.INDEX:
        name = "index.html"
    else:
        stem = lp.basename(source_path).rsplit(".", 1)[0]
        name = f"{stem}.html"
    return name if directory == "" else f"{directory}/{name}"


def bundle_path_for(policy: DestinationPolicy, source_bundle_path: str) -> str:
    """The destination bundle path: the source bundle path, or ``""`` under fixed mapping (§4.4.4)."""
    return "" if policy.path_mapping == PathMapping.FIXED else source_bundle_path


def normalize_policy(policy: DestinationPolicy) -> DestinationPolicy:
    """The request validation of core-semantics §4.1, returning the policy with every mode as
    its enum member (empty modes take their defaults).

    Checks run in the contract's order (publish/transform, then reconciliation, then state
    mode); the other modes are refused by the config layer first, and a request built by hand
    gets the same rule here (``<field> must be <choices>``).
    """
    if not policy.publish_source and not policy.publish_html:
        raise PlanError("publish/transform policy: publish must enable source or html")
    if policy.publish_html and not policy.markdown_enabled:
        raise PlanError(
            "publish/transform policy: transform.markdown_to_html must be enabled when publish.html is true"
        )
    markdown_mode = policy.markdown_mode or MarkdownMode.SIDECAR
    if markdown_mode not in _values(MarkdownMode):
        if policy.publish_html:
            raise PlanError("publish/transform policy: transform.markdown_to_html.mode must be sidecar or index")
        markdown_mode = MarkdownMode.SIDECAR  # unused without HTML publication
    reconciliation = policy.reconciliation_mode or ReconciliationMode.REPLACE
    if reconciliation not in _values(ReconciliationMode):
        raise PlanError("reconciliation.mode must be replace or merge")
    state = policy.state_mode or StateMode.SINGLE_OWNER
    if state not in _values(StateMode):
        raise PlanError("state.mode must be single_owner or shared_root")
    transfer, links = policy.transfer, policy.links
    try:
        return msgspec.structs.replace(
            policy,
            path_mapping=coerce(PathMapping, policy.path_mapping or PathMapping.PRESERVE_RELATIVE, "path_mapping.mode"),
            markdown_mode=MarkdownMode(markdown_mode),
            state_mode=StateMode(state),
            reconciliation_mode=ReconciliationMode(reconciliation),
            takeover_mode=coerce(TakeoverMode, policy.takeover_mode or TakeoverMode.SAME_PIPELINE, "takeover.mode"),
            transfer=TransferPolicy(
                on_destination_same=coerce(SameChoice, transfer.on_destination_same, "transfer.on_destination_same"),
                on_destination_older=coerce(
                    OlderChoice, transfer.on_destination_older, "transfer.on_destination_older"
                ),
                on_destination_newer=coerce(
                    NewerChoice, transfer.on_destination_newer, "transfer.on_destination_newer"
                ),
                on_conflict=coerce(ConflictChoice, transfer.on_conflict, "transfer.on_conflict"),
            ),
            links=None
            if links is None
            else LinkPolicy(links.base_url, coerce(LinkPrimary, links.primary or LinkPrimary.AUTO, "links.primary")),
        )
    except ValueError as exc:
        raise PlanError(str(exc)) from None


def _values(kind: type[StrEnum]) -> frozenset[str]:
    return frozenset(member.value for member in kind)


def _default_renderer() -> Renderer:
    from distributor_core.transform.markdown import markdown_to_html

    def render(data: bytes, source_path: str) -> bytes:
        return markdown_to_html(data, source_path=source_path)

    return render


def markdown_sources(manifest_files: Sequence[ManifestFile], policy: DestinationPolicy) -> list[ManifestFile]:
    """The manifest records whose bytes HTML publication renders, in manifest order (§4.4.2);
    ``[]`` unless the policy publishes HTML. Index mode needs exactly one."""
    if not policy.publish_html:
        return []
    markdown = [record for record in manifest_files if is_markdown(record.path)]
    if policy.markdown_mode == MarkdownMode.INDEX and len(markdown) != 1:
        raise PlanError(
            f"markdown_to_html index mode requires exactly one Markdown source file, found {len(markdown)}"
        )
    return markdown


def render_markdown(
    record: ManifestFile, data: bytes, policy: DestinationPolicy, renderer: Renderer | None = None
) -> PlannedOutput:
    """The generated HTML output of one Markdown source whose bytes were read as ``data``; the
    bytes must still be the validated ones."""
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    if len(data) != record.size or digest != record.sha256:
        raise PlanError(f"source file {record.path} changed after validation")
    content = (renderer or _default_renderer())(data, record.path)
    target = html_path(record.path, policy.markdown_mode)
    problem = lp.check_bundle_path(target)
    if problem:
        raise PlanError(f"generated output path {target}: {problem}")
    return PlannedOutput(
        path=target,
        kind="generated",
        source_path=record.path,
        transform=MARKDOWN_TRANSFORM,
        sha256="sha256:" + hashlib.sha256(content).hexdigest(),
        size=len(content),
        content=content,
    )


def build_outputs(
    *,
    manifest: Manifest,
    policy: DestinationPolicy,
    generated: Iterable[PlannedOutput] = (),
) -> list[PlannedOutput]:
    """Plan order: every source copy in manifest order, then the generated outputs (in manifest
    order of their Markdown sources, as :func:`render_markdown` made them). A
    :class:`~distributor_core.bundle.ValidManifest`'s paths are unique, so only generated outputs
    can collide with them."""
    manifest_files = manifest.files
    outputs: list[PlannedOutput] = []
    paths: list[str] = []
    if policy.publish_source:
        paths = list(map(_PATH, manifest_files))
        count = len(paths)
        # PlannedOutput(path, "source", path, sha256, size), built in C (a msgspec Struct)
        outputs = list(
            map(
                PlannedOutput,
                paths,
                repeat("source", count),
                paths,
                map(_SHA256, manifest_files),
                map(_SIZE, manifest_files),
            )
        )
    extra = list(generated)
    outputs.extend(extra)
    may_collide = bool(extra) or not isinstance(manifest, ValidManifest)
    if may_collide and len(set(paths).union([output.path for output in extra])) != len(outputs):
        seen: set[str] = set()
        for output in outputs:
            if output.path in seen:
                raise PlanError(f"destination output path collision: {output.path}")
            seen.add(output.path)
    return outputs


_PATH, _SHA256, _SIZE = attrgetter("path"), attrgetter("sha256"), attrgetter("size")


def output_url(base_url: str, logical_path: str) -> str:
    """``base_url`` + the per-segment percent-encoded logical path; ``index.html`` maps to its
    directory URL with a trailing slash."""
    base = base_url if base_url.endswith("/") else base_url + "/"
    segments = logical_path.split("/")
    if segments[-1] == "index.html":
        segments = segments[:-1]
        suffix = "/" if segments else ""
    else:
        suffix = ""
    encoded = "/".join(quote(segment, safe=_URL_SAFE) for segment in segments)
    return base + encoded + suffix


def check_http_url(url: str) -> str | None:
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        return str(exc)
    if parts.scheme.lower() not in ("http", "https"):
        return f"url {url!r} must use http or https"
    if not parts.hostname:
        return f"url {url!r} must have a host"
    return None


def apply_links(
    outputs: list[PlannedOutput], *, bundle_path: str, policy: DestinationPolicy
) -> tuple[list[PlannedOutput], str]:
    """Attach per-output URLs and choose the primary URL (core-semantics §4.4.5)."""
    links = policy.links
    if links is None:
        return outputs, ""
    with_urls: list[PlannedOutput] = []
    for output in outputs:
        logical = lp.join(bundle_path, output.path)
        url = output_url(links.base_url, logical)
        problem = check_http_url(url)
        if problem:
            raise PlanError(f"invalid output URL for {output.path}: {problem}")
        with_urls.append(
            PlannedOutput(
                path=output.path,
                kind=output.kind,
                source_path=output.source_path,
                sha256=output.sha256,
                size=output.size,
                transform=output.transform,
                url=url,
                content=output.content,
            )
        )
    first_source = next((o.url for o in with_urls if o.kind == "source"), "")
    first_generated = next((o.url for o in with_urls if o.kind == "generated"), "")
    primary = links.primary
    if primary == LinkPrimary.SOURCE:
        chosen = first_source
    elif primary in (LinkPrimary.HTML, LinkPrimary.GENERATED):
        chosen = first_generated
    else:
        chosen = first_generated or first_source
    return with_urls, chosen


__all__ = [
    "bundle_path_for",
    "markdown_sources",
    "render_markdown",
]

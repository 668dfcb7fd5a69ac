"""Output planning: source copies, generated HTML, collisions, link URLs (core-semantics §4.4)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import replace
from itertools import repeat
from operator import attrgetter
from urllib.parse import quote, urlsplit

from distributor_core import paths as lp
from distributor_core.plan.model import DestinationPolicy, PlanError, PlannedOutput, Renderer
from distributor_core.storage.base import Storage

MARKDOWN_TRANSFORM = "markdown_to_html"
_URL_SAFE = "-_.~$&+,;=:@!'()*"


def is_markdown(path: str) -> bool:
    lower = path.lower()
    return lower.endswith(".md") or lower.endswith(".markdown")


def html_path(source_path: str, mode: str) -> str:
    directory = lp.parent(source_path)
    if mode == "index":
        name = "index.html"
    else:
        stem = lp.basename(source_path).rsplit(".", 1)[0]
        name = f"{stem}.html"
    return name if directory == "" else f"{directory}/{name}"


def normalize_policy(policy: DestinationPolicy) -> DestinationPolicy:
    """Empty modes take their defaults (core-semantics §4.1)."""
    changes = {}
    if not policy.reconciliation_mode:
        changes["reconciliation_mode"] = "replace"
    if not policy.state_mode:
        changes["state_mode"] = "single_owner"
    if not policy.path_mapping:
        changes["path_mapping"] = "preserve_relative"
    if not policy.takeover_mode:
        changes["takeover_mode"] = "same_pipeline"
    return replace(policy, **changes) if changes else policy


def check_policy(policy: DestinationPolicy) -> None:
    """Request validation of core-semantics §4.1."""
    if not policy.publish_source and not policy.publish_html:
        raise PlanError("publish/transform policy: publish must enable source or html")
    if policy.publish_html and not policy.markdown_enabled:
        raise PlanError(
            "publish/transform policy: transform.markdown_to_html must be enabled when publish.html is true"
        )
    if policy.publish_html and policy.markdown_mode not in ("sidecar", "index"):
        raise PlanError("publish/transform policy: transform.markdown_to_html.mode must be sidecar or index")
    if policy.reconciliation_mode not in ("replace", "merge"):
        raise PlanError("reconciliation.mode must be replace or merge")
    if policy.state_mode not in ("single_owner", "shared_root"):
        raise PlanError("state.mode must be single_owner or shared_root")


def _default_renderer() -> Renderer:
    from distributor_core.transform.markdown import markdown_to_html

    def render(data: bytes, source_path: str) -> bytes:
        return markdown_to_html(data, source_path=source_path)

    return render


def build_outputs(
    *,
    manifest_files: Sequence,
    source: Storage,
    source_bundle_path: str,
    policy: DestinationPolicy,
    renderer: Renderer | None,
) -> list[PlannedOutput]:
    """Plan order: every source copy in manifest order, then generated outputs in manifest order."""
    outputs: list[PlannedOutput] = []
    if policy.publish_source:
        paths = list(map(attrgetter("path"), manifest_files))
        # map() builds the records from C (PlannedOutput(path, "source", path, sha256, size))
        outputs.extend(
            map(
                PlannedOutput,
                paths,
                repeat("source", len(paths)),
                paths,
                map(attrgetter("sha256"), manifest_files),
                map(attrgetter("size"), manifest_files),
            )
        )
    if policy.publish_html:
        markdown = [record for record in manifest_files if is_markdown(record.path)]
        if policy.markdown_mode == "index" and len(markdown) != 1:
            raise PlanError(
                f"markdown_to_html index mode requires exactly one Markdown source file, found {len(markdown)}"
            )
        render = renderer or _default_renderer()
        for record in markdown:
            data = source.read_bytes(lp.join(source_bundle_path, record.path))
            digest = "sha256:" + hashlib.sha256(data).hexdigest()
            if len(data) != record.size or digest != record.sha256:
                raise PlanError(f"source file {record.path} changed after validation")
            content = render(data, record.path)
            target = html_path(record.path, policy.markdown_mode)
            problem = lp.check_bundle_path(target)
            if problem:
                raise PlanError(f"generated output path {target}: {problem}")
            outputs.append(
                PlannedOutput(
                    path=target,
                    kind="generated",
                    source_path=record.path,
                    transform=MARKDOWN_TRANSFORM,
                    sha256="sha256:" + hashlib.sha256(content).hexdigest(),
                    size=len(content),
                    content=content,
                )
            )
    if len({output.path for output in outputs}) != len(outputs):
        seen: set[str] = set()
        for output in outputs:
            if output.path in seen:
                raise PlanError(f"destination output path collision: {output.path}")
            seen.add(output.path)
    return outputs


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
    if primary == "source":
        chosen = first_source
    elif primary in ("html", "generated"):
        chosen = first_generated
    else:
        chosen = first_generated or first_source
    return with_urls, chosen

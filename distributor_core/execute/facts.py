"""Read a destination's facts and drive :func:`distributor_core.plan.decide` to a plan.

The only place planning meets storage. Order of reads (the same for dry runs and real runs,
which call this under the destination lock):

1. the Markdown sources HTML publication renders, from the source storage;
2. ``stat`` then ``read_bytes`` of ``<bundle path>/.distributor.json`` (the revision is taken
   first, so a conditional state write based on it can never overwrite a newer state);
3. whatever :func:`~distributor_core.plan.decide` asks next, one request at a time: has-any when
   there is no state file, the bounded listing of the replace pre-check or of a forced
   replacement, the stats of planned paths not recorded as managed (stopping at the first that
   exists).

Storage errors propagate (they fail the destination); planning errors are ``PlanError``.
"""

from __future__ import annotations

from distributor_core import paths as lp
from distributor_core.bundle import Manifest, ManifestError, validate_manifest
from distributor_core.execute.request import PlanRequest
from distributor_core.gcpause import gc_paused
from distributor_core.plan import (
    DestinationFacts,
    FactRequest,
    FirstExisting,
    HasAny,
    ListFiles,
    Listing,
    Plan,
    Publication,
    StateFacts,
    check_request,
    decide,
    markdown_sources,
    prepare,
    render_markdown,
)
from distributor_core.storage.base import Storage
from distributor_core.storage.errors import ErrorKind, StorageError

#: manifests with at least this many files are planned with the cyclic garbage collector paused
LARGE_MANIFEST = 10_000


def read_state(storage: Storage, bundle_path: str, source_manifest: Manifest | None = None) -> StateFacts:
    """Stat and read ``<bundle>/.distributor.json`` and parse it (core-semantics §3.1).

    ``source_manifest``, the manifest about to be planned, is reused when the state records it
    exactly; a plain ``Manifest`` is validated here first (an invalid one is never taken as the
    recorded manifest)."""
    path = lp.state_path(bundle_path)
    try:
        revision = storage.stat(path).revision or ""
        data = storage.read_bytes(path)
    except StorageError as exc:
        if exc.kind != ErrorKind.NOT_FOUND:
            raise
        return StateFacts.absent()
    expected = None
    if source_manifest is not None:
        try:
            expected = validate_manifest(source_manifest)
        except ManifestError:
            expected = None  # not valid: the state's manifest is parsed and checked itself
    return StateFacts.from_bytes(data, revision, source_manifest=expected)


def _relative(paths: list[str], bundle_path: str) -> tuple[str, ...]:
    if bundle_path == "":
        return tuple(paths)
    prefix = bundle_path + "/"
    if all(p.startswith(prefix) for p in paths):
        cut = len(prefix)
        return tuple(p[cut:] for p in paths)
    return tuple(lp.relative_to(p, bundle_path) for p in paths)  # raises, naming the stray path


def answer(storage: Storage, request: FactRequest) -> bool | Listing | str | None:
    """Answer one fact request from the destination storage."""
    if isinstance(request, HasAny):
        return storage.has_any(request.bundle_path)
    if isinstance(request, ListFiles):
        scan = storage.scan(
            request.bundle_path, limit=request.limit, include_dirs=False, include_reserved=request.include_reserved
        )
        paths = _relative([entry.path for entry in scan.entries], request.bundle_path)
        return Listing(paths, truncated=scan.truncated)
    if isinstance(request, FirstExisting):
        for path in request.paths:
            if storage.exists(lp.join(request.bundle_path, path)):  # stat; not-found is False
                return path
        return None
    raise TypeError(f"unknown fact request {request!r}")


def publication_of(request: PlanRequest) -> Publication:
    """The request's publication: policy checked, Markdown sources read and rendered."""
    policy = check_request(request.pipeline_id, request.destination_id, request.policy)
    generated = [
        render_markdown(
            record,
            request.source.read_bytes(lp.join(request.source_bundle_path, record.path)),
            policy,
            request.renderer,
        )
        for record in markdown_sources(request.manifest.files, policy)
    ]
    return prepare(
        request.manifest,
        policy,
        pipeline_id=request.pipeline_id,
        destination_id=request.destination_id,
        source_bundle_path=request.source_bundle_path,
        generated=generated,
        force=request.force,
        republish=request.republish,
        source_content=request.source_content,
    )


def plan_destination(publication: Publication, destination: Storage) -> Plan:
    """Gather ``destination``'s facts for ``publication`` until :func:`decide` returns a plan."""
    facts = DestinationFacts(
        read_state(destination, publication.bundle_path, publication.manifest)
    )
    while True:
        result = decide(publication, facts)
        if isinstance(result, Plan):
            return result
        facts = facts.with_answer(result, answer(destination, result))


def build_plan(request: PlanRequest) -> Plan:
    """Plan one destination publication (reads only): the whole of a dry run."""
    with gc_paused(len(request.manifest.files) >= LARGE_MANIFEST):
        return plan_destination(publication_of(request), request.destination)

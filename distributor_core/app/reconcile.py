"""``reconcile-state``: drop records of managed outputs that no longer exist (core-semantics §7.1,
interfaces §2.6, resolutions A1, A3, B2), and with issue 18's options:

- ``audit``: re-read every output in scope (:mod:`distributor_core.app.output_check`) and also drop
  the records of outputs whose bytes no longer match (size, sha256, or no longer a regular file),
  the file itself staying as unmanaged content;
- ``adopt``: record as managed the unmanaged files that are exactly what the current source
  would publish there (:mod:`distributor_core.app.adopt`);
- whole config (:func:`reconcile_config`): every destination of a config.

It never deletes, restores or rewrites files, never repairs invalid state and never rewrites
mismatched state. Applying holds the destination lock, settles a crashed writer's journal first,
and rewrites ``.distributor.json`` atomically and conditionally on the revision it read under
the lock (no revision: the write fails if a state file appeared meanwhile). It writes only the
state file, in one atomic step, so it needs no journal of its own.
"""

from __future__ import annotations

from datetime import datetime
from functools import partial
from typing import Any

from distributor_core import paths as lp
from distributor_core.app.adopt import (
    Adoption,
    SourceView,
    adopt_into,
    annotate_unmanaged,
    check_candidates,
    open_source_view,
    plan_adoption,
)
from distributor_core.app.bundle_set import BundleSetReport
from distributor_core.app.bundles import ReportedError, destination_storage, run_bundle_set
from distributor_core.app.config_walk import ConfigSetReport, walk_config
from distributor_core.app.guard import LoadedState, enter_bundle, read_state
from distributor_core.app.output_check import MISSING, check_outputs, outputs_in_scope
from distributor_core.app.policy import holds_bundle
from distributor_core.app.repair_report import MissingOutput, ReconcileStateReport
from distributor_core.app.selection import (
    DISCOVERY_WALK_LIMIT,
    ConfigSource,
    Target,
    check_bundle_selection,
    discover_state_bundles,
    require_ids,
    resolve_target,
)
from distributor_core.app.unmanaged import UNMANAGED_WALK_LIMIT, unmanaged_entries
from distributor_core.config import Config, Environment, load_config
from distributor_core.execute.lock import DEFAULT_WAIT
from distributor_core.execute.publish import default_holder
from distributor_core.state import (
    AnyOutputRecord,
    SharedOutputRecord,
    StateDocument,
    managed_paths,
    marshal_state,
    outputs_of,
    remove_missing_outputs,
)
from distributor_core.storage.base import BytesCallback, Storage
from distributor_core.storage.errors import ErrorKind, StorageError
from distributor_core.timefmt import now_seconds


class ReconcileStateError(ReportedError):
    """Some bundle paths of an ``all_bundles`` repair failed; ``report`` is the
    :class:`BundleSetReport` with every section (failed ones carry their ``error``)."""


def _missing(storage: Storage, bundle_path: str, outputs: tuple[AnyOutputRecord, ...]) -> list[MissingOutput]:
    """Stat each output: not found is missing, a directory counts as present, any other error aborts."""
    missing = []
    for output in outputs:
        try:
            storage.stat(lp.join(bundle_path, output.path))
        except StorageError as exc:
            if exc.kind != ErrorKind.NOT_FOUND:
                raise
            owner = output.scope if isinstance(output, SharedOutputRecord) else None
            missing.append(MissingOutput(output.path, owner))
    return missing


def _read_optional(storage: Storage, bundle_path: str) -> LoadedState | None:
    """The bundle path's state, ``None`` when it has no state file (adoption may create one)."""
    try:
        return read_state(storage, bundle_path)
    except StorageError as exc:
        if exc.kind == ErrorKind.NOT_FOUND and not storage.exists(lp.state_path(bundle_path)):
            return None
        raise


def reconcile_bundle(
    target: Target,
    storage: Storage,
    bundle_path: str,
    *,
    all_owners: bool = False,
    dry_run: bool = False,
    now: datetime | None = None,
    holder: str | None = None,
    lock_wait: float = DEFAULT_WAIT,
    walk_limit: int = UNMANAGED_WALK_LIMIT,
    audit: bool = False,
    source: SourceView | None = None,
    on_bytes: BytesCallback | None = None,
) -> ReconcileStateReport:
    """Repair the state of one bundle path of an open destination root. ``source`` (the
    pipeline's source) turns adoption on; ``audit`` checks bytes instead of existence."""
    scope = target.scope
    stamp = now if now is not None else now_seconds()
    adopt = source is not None
    with enter_bundle(
        storage,
        bundle_path,
        dry_run=dry_run,
        holder=holder or default_holder("reconcile-state"),
        lock_wait=lock_wait,
        require_state=not adopt,
    ) as guard:
        loaded = _read_optional(storage, bundle_path) if adopt else read_state(storage, bundle_path)
        document: StateDocument | None = loaded.document if loaded is not None else None
        outputs = outputs_in_scope(document, scope, all_owners=all_owners) if document is not None else ()
        mismatched = []
        if audit:
            checks = check_outputs(storage, bundle_path, outputs, on_bytes=on_bytes)
            missing = [MissingOutput(c.path, c.owner) for c in checks if c.status == MISSING]
            mismatched = [c for c in checks if not c.ok and c.status != MISSING]
        else:
            missing = _missing(storage, bundle_path, outputs)
        managed = managed_paths(document) if document is not None else ()
        unmanaged, truncated = unmanaged_entries(storage, bundle_path, managed, limit=walk_limit)
        report = ReconcileStateReport(
            pipeline_id=target.pipeline.id,
            destination_id=target.destination.id,
            backend=target.backend,
            root_path=target.root_path,
            root_text=target.root_text,
            bundle_path=bundle_path,
            recovery=guard.recovery,
            warnings=list(guard.warnings),
            state_schema=document.schema_version if document is not None else 0,
            owner_scope=scope,
            all_owners=document is not None and document.schema_version == 3 and all_owners,
            checked_count=len(outputs),
            missing_managed_outputs=missing,
            unmanaged_entries=unmanaged,
            dry_run=dry_run,
            truncated=truncated,
            audit=audit,
            mismatched_managed_outputs=mismatched,
            adopt=adopt,
        )
        repaired, changed = document, False
        dropped = [item.path for item in missing] + [item.path for item in mismatched]
        if document is not None and dropped:
            repaired, changed = remove_missing_outputs(document, dropped, scope=scope, all_owners=all_owners, now=stamp)
        if source is not None:
            adoption = _adopt(storage, bundle_path, repaired, target, source, on_bytes=on_bytes)
            report.adoption = adoption
            report.unmanaged_entries = annotate_unmanaged(unmanaged, adoption)
            if adoption.adopted:
                assert adoption.plan is not None
                repaired = adopt_into(repaired, scope, adoption.plan, adoption.adopted, now=stamp)
                changed = True
                if document is None and repaired is not None:
                    report.state_schema = repaired.schema_version
        report.holds = _holds(target, document, repaired, dropped, report)
        report.would_change = dry_run and changed
        if dry_run or not changed or repaired is None:
            return report
        data = marshal_state(repaired)  # validates first
        guard.ensure_held()
        revision = loaded.revision if loaded is not None else ""  # "": there must still be none
        guard.storage.write_bytes(lp.state_path(bundle_path), data, overwrite=True, if_revision=revision)
        report.changed = True
        return report


def _holds(target: Target, document: StateDocument | None, repaired: StateDocument | None, dropped: list[str],
           report: ReconcileStateReport) -> bool:
    """Whether the bundle path holds the owner's publication by what this repair found: the
    owner's recorded outputs less those missing or changed, plus any it adopts."""
    scope = target.scope
    final = repaired if repaired is not None else document
    if final is None:
        return False
    mine = {output.path for output in outputs_of(document, scope)} if document is not None else set()
    remaining = len(mine - set(dropped)) + len(report.adopted_outputs)
    return holds_bundle(final, scope, target.destination, remaining)


def _adopt(
    storage: Storage,
    bundle_path: str,
    document: StateDocument | None,
    target: Target,
    source: SourceView,
    *,
    on_bytes: BytesCallback | None,
) -> Adoption:
    plan = source.plan_for(bundle_path)
    if plan is None:
        return Adoption(reason=f"the source of pipeline {target.pipeline.id} has no bundle for this bundle path")
    adoption = check_candidates(
        storage, bundle_path, plan_adoption(document, target.scope, plan), plan, on_bytes=on_bytes
    )
    adoption.plan = plan
    return adoption


def _with_source_bundles(bundles: list[str], source: SourceView) -> list[str]:
    """Bundle paths an adoption over many works on: those with state and those the source
    publishes to (a copy that never had state can be adopted too)."""
    return sorted(set(bundles) | set(source.bundle_paths()))


def reconcile_state(
    config_or_path: ConfigSource,
    *,
    pipeline_id: str,
    destination_id: str,
    all_owners: bool = False,
    dry_run: bool = False,
    bundle_path: str | None = "",
    all_bundles: bool = False,
    audit: bool = False,
    adopt: bool = False,
    now: datetime | None = None,
    environment: Environment | None = None,
    storage: Storage | None = None,
    source_storage: Storage | None = None,
    holder: str | None = None,
    lock_wait: float = DEFAULT_WAIT,
    walk_limit: int = UNMANAGED_WALK_LIMIT,
    discovery_limit: int = DISCOVERY_WALK_LIMIT,
    on_bytes: BytesCallback | None = None,
) -> ReconcileStateReport | BundleSetReport[ReconcileStateReport]:
    """Repair destination state records (interfaces §2.6; issue 18 ``audit`` and ``adopt``).

    ``config_or_path`` is a loaded :class:`~distributor_core.config.Config` or a config file.
    ``bundle_path`` (default the destination root) selects one bundle path; ``all_bundles``
    every bundle path holding a ``.distributor.json`` (with ``adopt`` also every bundle path the
    source publishes to) and returns a :class:`BundleSetReport` (raising
    :class:`ReconcileStateError` carrying it when any bundle failed). ``audit`` drops the records
    of outputs whose bytes no longer match too; ``adopt`` records matching unmanaged files
    (:mod:`distributor_core.app.adopt`). ``now`` stamps ``updated_at`` (default: the current UTC
    time). ``storage`` / ``source_storage`` replace the destination / source storage the config
    describes (tests, fault injection); they are not closed. Errors: ``pipeline id is required`` /
    ``destination id is required`` before any I/O, config lookup errors, the storage error of a
    missing state file (not with ``adopt``), the parse error of invalid state, ``state owner is
    <sp>/<sd>, not <p>/<d>``, a lock ``conflict``, ``AdoptError`` for an upload pipeline.
    """
    require_ids(pipeline_id, destination_id)
    bundle = check_bundle_selection(bundle_path, all_bundles)
    target = resolve_target(config_or_path, pipeline_id, destination_id, environment)
    stamp = now if now is not None else now_seconds()
    view: SourceView | None = None
    opened_source: Storage | None = None
    if adopt:
        if source_storage is not None:
            view = SourceView(target, source_storage)
        else:
            view, opened_source = open_source_view(target)
    options: dict[str, Any] = {
        "all_owners": all_owners,
        "dry_run": dry_run,
        "now": stamp,
        "holder": holder,
        "lock_wait": lock_wait,
        "walk_limit": walk_limit,
        "audit": audit,
        "on_bytes": on_bytes,
    }
    try:
        with destination_storage(target, dry_run=dry_run, storage=storage) as opened:
            one = partial(reconcile_bundle, target, opened, source=view, **options)
            if not all_bundles:
                return one(bundle)
            bundles = None
            if view is not None:
                bundles = _with_source_bundles(discover_state_bundles(opened, limit=discovery_limit), view)
            report = run_bundle_set(
                target, opened, dry_run=dry_run, one=one, discovery_limit=discovery_limit, bundles=bundles
            )
    finally:
        if opened_source is not None:
            opened_source.close()
    if not report.ok:
        raise ReconcileStateError(report.error_message(), report)
    return report


def reconcile_config(
    config_or_path: ConfigSource,
    *,
    all_owners: bool = False,
    dry_run: bool = False,
    audit: bool = False,
    adopt: bool = False,
    now: datetime | None = None,
    environment: Environment | None = None,
    holder: str | None = None,
    lock_wait: float = DEFAULT_WAIT,
    walk_limit: int = UNMANAGED_WALK_LIMIT,
    discovery_limit: int = DISCOVERY_WALK_LIMIT,
    on_bytes: BytesCallback | None = None,
) -> ConfigSetReport[ReconcileStateReport]:
    """``reconcile-state --all``: repair every destination of every pipeline of a config, each
    destination's bundle paths with state (``fixed``: the root's; ``preserve_relative``: every
    one under the root; with ``adopt`` also those the source publishes to). One failing
    destination or bundle path does not stop the others; the report says which failed.
    With ``adopt``, destinations of ``http_upload`` pipelines fail (no source to plan from)."""
    config = config_or_path if isinstance(config_or_path, Config) else load_config(config_or_path)
    env = environment or Environment.from_config(config)
    options: dict[str, Any] = {
        "all_owners": all_owners,
        "dry_run": dry_run,
        "now": now if now is not None else now_seconds(),
        "holder": holder,
        "lock_wait": lock_wait,
        "walk_limit": walk_limit,
        "audit": audit,
        "on_bytes": on_bytes,
    }

    def one(target: Target, storage: Storage, bundles: list[str]) -> BundleSetReport[ReconcileStateReport]:
        view, source = open_source_view(target) if adopt else (None, None)
        try:
            if view is not None:
                bundles = _with_source_bundles(bundles, view)
            bundle = partial(reconcile_bundle, target, storage, source=view, **options)
            return run_bundle_set(
                target, storage, dry_run=dry_run, one=bundle, discovery_limit=discovery_limit, bundles=bundles
            )
        finally:
            if source is not None:
                source.close()

    return walk_config(config, env, dry_run=dry_run, one=one, discovery_limit=discovery_limit)

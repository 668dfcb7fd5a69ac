"""Publish one bundle to one destination: lock, recover, plan, execute (resolutions A1–A3, B1).

This is the single code path the CLI, the upload server and Dagster use for a destination.
Planning is :func:`execute.facts.build_plan`: the destination's facts are read and handed to the
pure ``plan.decide``. Dry runs plan without the lock and write nothing.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Callable

import msgspec

from distributor_core.bundle import BundleError
from distributor_core.execute.executor import ExecutionError, ExecutionResult, ProgressCallback, execute_plan
from distributor_core.execute.facts import build_plan
from distributor_core.execute.journal import JournalError, Recovery, recover
from distributor_core.execute.lock import DEFAULT_LEASE, DEFAULT_WAIT, DestinationLock
from distributor_core.execute.request import PlanRequest
from distributor_core.plan.model import Plan, PlanError
from distributor_core.state import StateError
from distributor_core.storage.errors import ErrorKind, StorageError
from distributor_core.timefmt import Clock, now_seconds

#: Errors that fail one destination without stopping the others.
DESTINATION_ERRORS = (PlanError, ExecutionError, StorageError, StateError, JournalError, BundleError)


class PublishOutcome(msgspec.Struct):
    """What happened to one (bundle, destination) pair.

    ``status`` is ``planned`` (dry run), ``completed``, ``skipped`` or ``failed``. ``plan`` is the
    plan that was executed (re-made under the lock); ``first_plan`` the one made before the lock
    when a caller planned first (Dagster's plan step) and its action differed.
    """

    request: PlanRequest
    status: str
    plan: Plan | None = None
    execution: ExecutionResult | None = None
    recovery: Recovery | None = None
    error: str = ""
    warnings: list[str] = msgspec.field(default_factory=list)
    first_plan: Plan | None = None
    #: the storage error kind of a failure (``unavailable``, ``conflict``, ...; "" otherwise)
    error_kind: str = ""

    @property
    def failed(self) -> bool:
        return self.status == "failed"


def default_holder(purpose: str = "run") -> str:
    return f"distributor {purpose} (pid {os.getpid()} on {socket.gethostname()})"


def destination_bundle_path(request: PlanRequest) -> str:
    return request.bundle_path


def plan_only(request: PlanRequest) -> PublishOutcome:
    try:
        plan = build_plan(request)
    except DESTINATION_ERRORS as exc:
        return PublishOutcome(request, "failed", error=str(exc), error_kind=_kind(exc))
    if plan.action.failed:
        return PublishOutcome(request, "failed", plan=plan, error=plan.error or "")
    return PublishOutcome(request, "skipped" if plan.action.skipped else "planned", plan=plan)


def publish(
    request: PlanRequest,
    *,
    dry_run: bool = False,
    clock: Clock | None = None,
    version: str = "",
    holder: str | None = None,
    progress: ProgressCallback | None = None,
    lock_wait: float = DEFAULT_WAIT,
    lock_lease: float = DEFAULT_LEASE,
    first_plan: Plan | None = None,
    on_plan: Callable[[Plan], None] | None = None,
) -> PublishOutcome:
    """Plan and (unless ``dry_run``) execute one destination publication."""
    if dry_run:
        return plan_only(request)
    destination = request.destination
    bundle_path = destination_bundle_path(request)
    who = holder or default_holder()
    recovery: Recovery | None = None
    plan: Plan | None = None
    try:
        with DestinationLock(
            destination, bundle_path, holder=who, wait=lock_wait, lease=lock_lease, clock=clock
        ) as lock:
            recovery = recover(lock.fenced(), bundle_path, deep_sweep=lock.took_over, grant=lock.grant)
            plan = build_plan(request)
            if on_plan is not None:
                on_plan(plan)
            outcome = PublishOutcome(request, "completed", plan=plan, recovery=recovery)
            if first_plan is not None and first_plan.action != plan.action:
                outcome.first_plan = first_plan
            if plan.action.failed:
                outcome.status = "failed"
                outcome.error = plan.error or ""
                return outcome
            if plan.action.skipped:
                outcome.status = "skipped"
                return outcome
            try:
                execution = execute_plan(
                    plan,
                    source=request.source,
                    destination=destination,
                    now=now_seconds(clock),
                    version=version or request.distributor_version,
                    holder=who,
                    lock=lock,
                    progress=progress,
                )
            except DESTINATION_ERRORS as exc:
                with contextlib.suppress(StorageError):
                    lock.check()  # whether it is still held
                if lock.lost is None or str(exc) == lock.lost:
                    raise
                # the lock expired while this run stalled and another writer took it: that is
                # the cause to report, not whichever step then tripped over the other's work
                raise StorageError(
                    "lock", destination.backend, lock.path, ErrorKind.CONFLICT, message=f"{lock.lost} ({exc})"
                ) from exc
            outcome.execution = execution
            outcome.warnings.extend(execution.warnings)
            return outcome
    except DESTINATION_ERRORS as exc:
        return PublishOutcome(request, "failed", plan=plan, recovery=recovery, error=str(exc), error_kind=_kind(exc))


def _kind(exc: Exception) -> str:
    kind = getattr(exc, "kind", None) if isinstance(exc, StorageError) else None
    return str(kind.value) if kind is not None else ""

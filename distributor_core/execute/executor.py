"""Execute a write plan with the protocol of resolutions A1–A2.

1. Build the new state (pure) and write the intent journal.
2. Stage every output under a reserved temporary name next to its final path, hashing while
   writing and verifying size and sha256 (written ``in_place`` where the destination declares
   ``IN_PLACE_WRITES``). Destinations without ``ATOMIC_RENAME`` (object stores) skip staging:
   their writes are atomic.
3. Move each existing file that will be overwritten to a reserved backup name.
4. Rename staged files into place (object stores write them now, never clobbering).
5. Write ``.distributor.json`` atomically, conditional on the revision read at planning.
6. Delete omitted outputs and backups, then the journal.

Any failure before the state is written rolls the attempt back from the journal: backups are
restored, files this attempt placed are removed, temporaries are deleted. A failure after it
leaves the journal for the next writer to roll forward; the publication itself stands.

Under a destination lock every write goes through :meth:`DestinationLock.fenced`: a writer that
lost the lock (it stalled past its lease and another writer took over) stops at its next storage
call, its state write re-reads the lock first, and it then puts back only what it did itself
(:func:`journal.abandon`), never its successor's files.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from datetime import datetime

import msgspec

from distributor_core import paths as lp
from distributor_core.execute import journal as jr
from distributor_core.execute.lock import DestinationLock
from distributor_core.execute.statebuild import build_state
from distributor_core.parallel import run_ordered
from distributor_core.plan.model import Action, Plan, PlannedOutput
from distributor_core.state import marshal_state
from distributor_core.storage.base import CHUNK_SIZE, Storage, iter_chunks
from distributor_core.storage.capabilities import Feature
from distributor_core.storage.errors import ErrorKind, StorageError


class ExecutionError(Exception):
    """A plan could not be executed; the destination was rolled back where possible."""


class Progress(msgspec.Struct):
    """Counts reported to an optional callback while outputs are written."""

    files_total: int = 0
    bytes_total: int = 0
    files_done: int = 0
    bytes_done: int = 0


ProgressCallback = Callable[[Progress], None]


class ExecutionResult(msgspec.Struct):
    plan: Plan
    written: list[PlannedOutput] = msgspec.field(default_factory=list)
    bytes_written: int = 0
    deleted: list[str] = msgspec.field(default_factory=list)
    state_path: str = ""
    warnings: list[str] = msgspec.field(default_factory=list)


class _Step(msgspec.Struct):
    output: PlannedOutput
    final: str
    temp: str | None
    backup: str | None
    #: storage path of the source file in the source storage
    source: str = ""


def _joined(prefix: str, paths: list[str]) -> list[str]:
    """``lp.join(prefix, p)`` for every path: when all of them are valid bundle paths (always,
    for a plan build_plan made) the prefix is checked once and the rest is string joining."""
    lp.validate_prefix(prefix)
    if lp.bundle_paths_valid(paths):
        return list(paths) if prefix == "" else [f"{prefix}/{p}" for p in paths]
    return [lp.join(prefix, p) for p in paths]


def _chunks(source: Storage, path: str, output: PlannedOutput, content=None) -> Iterator[bytes]:
    if output.content is not None:
        yield output.content
        return
    if content is not None:
        validated = content.get(path)
        if validated is not None:  # the bytes validation hashed; the write verifies them again
            yield validated
            return
    stream = source.open_read(path)
    try:
        # a small file in one read of its size + 1 (no 4 MiB buffer per file); EOF still ends it
        yield from iter_chunks(stream, output.size + 1 if output.size < CHUNK_SIZE else CHUNK_SIZE)
    finally:
        stream.close()


def _source_paths(plan: Plan) -> list[str]:
    """Where each output's bytes come from; generated outputs carry theirs (no source read)."""
    copies = [o.source_path for o in plan.outputs if o.content is None]
    joined = iter(_joined(plan.source_bundle_path, copies) if copies else ())
    return [next(joined) if o.content is None else "" for o in plan.outputs]


def _output_error(exc: StorageError, step: _Step, target: str, source_bundle: str) -> StorageError | None:
    """``exc``, raised by the destination writing ``step``'s output to ``target``, worded for the
    operator, or ``None`` when it already is: the error names the final output path rather than
    the staging temporary the bytes went to (which the failed write removed again), and for an
    ``integrity`` mismatch of copied bytes also the source file they were read from (a source
    changed after validation, or one the validation cache trusted). Errors of the source read
    (op ``read``, naming the source path) and fixed texts pass unchanged."""
    if exc.op != "write" or exc.path != target or exc.message is not None:
        return None
    if exc.kind != ErrorKind.INTEGRITY or step.output.content is not None:
        return None if target == step.final else StorageError(exc.op, exc.backend, step.final, exc.kind, exc.cause)
    source = f"read from source bundle {lp.display_path(source_bundle)} file {step.output.source_path}"
    problem = None if exc.cause is None else str(exc.cause) or type(exc.cause).__name__
    return StorageError(exc.op, exc.backend, step.final, exc.kind, f"{problem} ({source})" if problem else source)


def _without_temporaries(journal: jr.Journal) -> jr.Journal:
    """The journal as the success path's cleanup sees it: temporaries all renamed into place."""
    writes = tuple(jr.JournalWrite(w.path, None, w.backup, w.sha256) for w in journal.writes if w.backup)
    return msgspec.structs.replace(journal, writes=writes)


def _exists(storage: Storage, path: str) -> bool:
    return storage.exists(path)


def _omitted_deletes(plan: Plan) -> list[str]:
    """Bundle-relative paths a successful write removes afterwards."""
    planned = {o.path for o in plan.outputs}
    if plan.action == Action.FORCE_REPLACE:
        return list(plan.deletes)
    if plan.state_mode == "shared_root":
        return [r.path for r in plan.owner_outputs_to_delete]
    existing = plan.existing_state
    if existing is None or plan.merge_retention:
        return []
    if plan.action in (Action.REPLACE_OLDER, Action.REPLACE_TAKEOVER):
        return [o.path for o in existing.outputs if o.path not in planned]
    return []


def _possibly_existing(plan: Plan) -> set[str]:
    """Planned paths that may already hold a file (so must be backed up before overwriting)."""
    if plan.action == Action.FORCE_REPLACE:
        return {o.path for o in plan.outputs}
    recorded: set[str] = set()
    if plan.existing_state is not None:
        recorded.update(o.path for o in plan.existing_state.outputs)
    if plan.existing_shared_root is not None:
        recorded.update(o.path for o in plan.existing_shared_root.outputs)
    return recorded


def _lost(lock: DestinationLock | None) -> bool:
    """Whether the lock was lost, as far as can be told without asking (a renewal after a stall)."""
    if lock is None:
        return False
    with contextlib.suppress(StorageError):
        lock.ensure()
    return lock.lost is not None


def _settle(destination: Storage, journal: jr.Journal, committed: set[str], *, lost: bool) -> jr.Recovery | None:
    try:
        if lost:
            return jr.abandon(destination, journal, committed=committed)
        return jr.finish(destination, journal, committed=committed)
    except Exception:
        return None


def execute_plan(
    plan: Plan,
    *,
    source: Storage,
    destination: Storage,
    now: datetime,
    version: str,
    holder: str = "",
    lock: DestinationLock | None = None,
    workers: int | None = None,
    progress: ProgressCallback | None = None,
) -> ExecutionResult:
    if not plan.action.executable:
        raise ExecutionError(f"cannot execute action {plan.action.value}: {plan.reason}")
    capabilities = destination.capabilities
    if Feature.CONDITIONAL_WRITES not in capabilities:
        raise ExecutionError(
            f"{destination.backend} destination {destination.root_display} cannot write "
            f"{lp.STATE_FILE_NAME} conditionally (the storage does not declare conditional_writes)"
        )
    bundle = plan.bundle_path
    raw, destination = destination, lock.fenced(destination) if lock is not None else destination
    state = build_state(plan, now=now, version=version)
    state_bytes = marshal_state(state)
    state_path = lp.state_path(bundle)

    candidates = _possibly_existing(plan)
    stage = Feature.ATOMIC_RENAME in capabilities
    in_place = stage and Feature.IN_PLACE_WRITES in capabilities
    steps: list[_Step] = []
    finals = _joined(bundle, [o.path for o in plan.outputs])
    sources = _source_paths(plan)
    for output, final, source_path in zip(plan.outputs, finals, sources, strict=True):
        existing = output.path in candidates and _exists(destination, final)
        steps.append(
            _Step(
                output=output,
                final=final,
                temp=lp.sibling_temp_path(final) if stage else None,
                backup=lp.sibling_backup_path(final) if existing else None,
                source=source_path,
            )
        )
    deletes = [lp.join(bundle, p) for p in _omitted_deletes(plan)]
    journal = jr.new_journal(
        bundle,
        state_bytes=state_bytes,
        writes=[jr.JournalWrite(s.final, s.temp, s.backup, s.output.sha256) for s in steps],
        deletes=deletes,
        holder=holder,
        now=now,
        grant=lock.grant if lock is not None else ("", 0),
    )
    result = ExecutionResult(plan=plan, state_path=state_path)
    counts = Progress(files_total=len(steps), bytes_total=sum(s.output.size for s in steps))
    counts_lock = threading.Lock()

    def write_one(step: _Step, target: str, staged: bool) -> None:
        try:
            destination.write_stream(
                target,
                _chunks(source, step.source, step.output, plan.source_content),
                overwrite=False,
                expected_size=step.output.size,
                expected_sha256=step.output.sha256,
                in_place=staged and in_place,
            )
        except StorageError as exc:
            if exc.kind == ErrorKind.ALREADY_EXISTS:
                committed.discard(target)  # someone else's file: never ours to remove
                raise
            worded = _output_error(exc, step, target, plan.source_bundle_path)
            if worded is None:
                raise
            raise worded from exc
        with counts_lock:
            counts.files_done += 1
            counts.bytes_done += step.output.size
            if progress is not None:
                progress(counts)

    def run_writes(pairs: list[tuple[_Step, str]], *, staged: bool) -> None:
        limit = workers
        if limit is None:
            limit = capabilities.write_threads(len(pairs), sum(step.output.size for step, _ in pairs))
        run_ordered(len(pairs), lambda index: write_one(*pairs[index], staged), threads=limit, name="distributor-write")

    committed: set[str] = set()
    try:
        destination.write_bytes(journal.path, journal.to_bytes(), overwrite=True)
        if stage:
            run_writes([(s, s.temp) for s in steps if s.temp], staged=True)
        for step in steps:
            if step.backup:
                try:
                    destination.rename(step.final, step.backup, overwrite=False)
                except StorageError as exc:
                    if exc.kind != ErrorKind.NOT_FOUND:
                        raise
        if stage:
            for step in steps:
                committed.add(step.final)  # before the call: a rename may land and still report failure
                destination.rename(step.temp, step.final, overwrite=False)
        else:
            committed.update(s.final for s in steps)
            run_writes([(s, s.final) for s in steps], staged=False)
        destination.write_bytes(
            state_path,
            state_bytes,
            overwrite=True,
            if_revision=plan.state_revision,
        )
    except BaseException as failure:
        # The state file decides: if it holds the new state (an ambiguous failure after the
        # write landed) the publication stands and is rolled forward, otherwise it is undone.
        settled = _settle(raw, journal, committed, lost=_lost(lock))
        if settled is None or settled.direction != "forward":
            raise failure
        delete_set = set(deletes)
        result.deleted = [p for p in settled.removed if p in delete_set]
    else:
        try:
            settled = jr.Recovery(bundle, "forward")
            # every temporary was renamed into place, so only deletes, backups and the journal
            # are left to remove (roll_forward would probe each temporary in vain)
            jr.roll_forward(destination, _without_temporaries(journal), settled)
            delete_set = set(deletes)
            result.deleted = [p for p in settled.removed if p in delete_set]
        except StorageError as exc:
            result.warnings.append(
                f"published, but cleanup of replaced files did not finish ({exc}); the next run completes it"
            )
    result.written = [s.output for s in steps]
    result.bytes_written = counts.bytes_total
    return result

"""Shared helpers of the reliability suites (issue 9).

Destinations are checked from the outside, by reading the files a real backend left on disk (a
local root, or the directory an OpenSSH sshd serves): :func:`check_consistent` holds the rules
every settled destination obeys, :func:`check_never_lies` the weaker rules that hold at *every*
moment, even right after a ``SIGKILL``.
"""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import sys
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from distributor_core import jsonfmt
from distributor_core import paths as lp
from distributor_core.bundle import build_manifest, write_manifest
from distributor_core.cli import main
from distributor_core.state import SharedRootState, parse_state_document

HOOK_DIR = Path(__file__).parent / "hook"
DISTRIBUTOR = Path(sys.executable).with_name("distributor")
#: set to run the long variants (100,000 generated cases, more rounds)
LONG = os.environ.get("DISTRIBUTOR_LONG", "") not in ("", "0")


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


# --------------------------------------------------------------------------- sources


def write_source(root: Path, files: dict[str, bytes], *, bundle_id: str, created: datetime) -> None:
    """Make ``root`` a source bundle holding exactly ``files`` (previous files removed)."""
    root.mkdir(parents=True, exist_ok=True)
    for path in sorted(root.rglob("*"), reverse=True):
        if path.is_file():
            path.unlink()
        elif path.is_dir():
            path.rmdir()
    for rel, data in files.items():
        target = root.joinpath(*rel.split("/"))
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    manifest = build_manifest(root, id=bundle_id, files=list(files), created=created)
    write_manifest(root, manifest, overwrite=True)


# --------------------------------------------------------------------------- running


@dataclass
class Result:
    code: int
    stdout: str
    stderr: str


def run_inprocess(*argv: str) -> Result:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err)
    return Result(code, out.getvalue(), err.getvalue())


def hook_env(**variables: str) -> dict[str, str]:
    """The environment of a ``distributor`` subprocess with the kill hook loaded."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DISTRIBUTOR_TEST_")}
    env["PYTHONPATH"] = os.pathsep.join([str(HOOK_DIR), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.update(variables)
    return env


def run_cli(*argv: str, env: dict[str, str] | None = None, timeout: float = 120) -> Result:
    proc = subprocess.run(
        [str(DISTRIBUTOR), *argv],
        env=env if env is not None else hook_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)


# --------------------------------------------------------------------------- destinations


def tree(root: Path) -> dict[str, bytes]:
    """Every file below ``root`` (root-relative path → bytes), reserved names included."""
    files: dict[str, bytes] = {}
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            full = Path(dirpath, name)
            files[full.relative_to(root).as_posix()] = full.read_bytes()
    return files


def is_working_file(path: str) -> bool:
    """Journal, lock, temporaries and backups: what a settled destination never holds."""
    name = lp.basename(path)
    return name in (lp.JOURNAL_NAME, lp.LOCK_NAME) or lp.is_temp_or_backup_name(name)


def state_files(files: dict[str, bytes]) -> dict[str, str]:
    """State path → bundle path of every ``.distributor.json`` in ``files``."""
    return {p: lp.parent(p) for p in files if lp.basename(p) == lp.STATE_FILE_NAME}


def records(state: bytes) -> list[tuple[str, str, int, str]]:
    """``(path, sha256, size, owner)`` of every output record, in state order."""
    doc = parse_state_document(state)
    owner = "" if isinstance(doc, SharedRootState) else f"{doc.pipeline_id}/{doc.destination_id}"
    return [
        (o.path, o.sha256, o.size, f"{o.pipeline_id}/{o.destination_id}" if hasattr(o, "pipeline_id") else owner)
        for o in doc.outputs
    ]


def owners(state: bytes) -> dict[str, str]:
    """Owner → manifest digest of the publication it records."""
    doc = parse_state_document(state)
    if isinstance(doc, SharedRootState):
        return {f"{o.pipeline_id}/{o.destination_id}": o.manifest.digest for o in doc.owners}
    return {f"{doc.pipeline_id}/{doc.destination_id}": doc.manifest.digest}


def semantic(files: dict[str, bytes]) -> dict[str, Any]:
    """A destination with its state files reduced to what must match (no timestamps)."""
    out: dict[str, Any] = {}
    for path, data in files.items():
        if lp.basename(path) == lp.STATE_FILE_NAME:
            out[path] = (records(data), owners(data))
        else:
            out[path] = data
    return out


def check_consistent(files: dict[str, bytes], *, unmanaged: dict[str, bytes], label: str = "") -> None:
    """A settled destination: no working file; every state parses and every record holds its
    bytes; every other file is recorded by the state of its bundle path or a known unmanaged one."""
    working = sorted(p for p in files if is_working_file(p))
    assert not working, f"{label}: working files left: {working}"
    recorded: set[str] = set()
    for state_path, bundle in state_files(files).items():
        for path, digest, size, _owner in records(files[state_path]):
            full = lp.join(bundle, path) if bundle else path
            assert full in files, f"{label}: {state_path} records {full}, which is missing"
            assert sha(files[full]) == digest and len(files[full]) == size, f"{label}: {full} bytes differ"
            recorded.add(full)
    for path, data in files.items():
        if path in recorded or lp.basename(path) == lp.STATE_FILE_NAME:
            continue
        assert unmanaged.get(path) == data, f"{label}: {path} is neither recorded nor a pre-existing unmanaged file"


def owner_views(state: bytes) -> dict[str, tuple[str, frozenset[tuple[str, str, int]]]]:
    """Owner → (manifest digest, its output records) of one state file."""
    views = {owner: (digest, set()) for owner, digest in owners(state).items()}
    for path, digest, size, owner in records(state):
        views.setdefault(owner, ("", set()))[1].add((path, digest, size))
    return {owner: (digest, frozenset(recs)) for owner, (digest, recs) in views.items()}


def check_never_lies(
    files: dict[str, bytes], *, previous: dict[str, bytes], new: dict[str, bytes], label: str
) -> None:
    """What holds at every moment, even right after a SIGKILL (spec README "state never lies").

    - each state file parses, and records each owner either with its previous publication or
      with its new one, never a mixture (state is written atomically, last);
    - every output a state records holds its recorded bytes, or (to be rolled back by the next
      writer) was moved to a backup the journal lists that holds them;
    - every other file under a final name is unchanged from before, already the new file, or a
      file the journal lists as written (recovery removes or keeps it).
    """
    for state_path, bundle in state_files(files).items():
        data = files[state_path]
        views = owner_views(data)
        before = owner_views(previous[state_path]) if state_path in previous else {}
        after = owner_views(new[state_path])
        assert set(views) <= set(before) | set(after), f"{label}: unknown owners in {state_path}"
        for owner, view in views.items():
            assert view in (before.get(owner), after.get(owner)), (
                f"{label}: {state_path} records {owner} with neither its previous nor its new publication"
            )
        for owner in before:
            assert owner in views, f"{label}: {state_path} lost owner {owner}"
        journal_path = lp.journal_path(bundle) if bundle else lp.JOURNAL_NAME
        journal = jsonfmt.loads_object(files[journal_path]) if journal_path in files else None
        backups = {w["path"]: w.get("backup") for w in journal["writes"]} if journal else {}
        for path, digest, _size, _owner in records(data):
            full = lp.join(bundle, path) if bundle else path
            if full in files and sha(files[full]) == digest:
                continue
            backup = backups.get(full)
            assert backup and backup in files and sha(files[backup]) == digest, (
                f"{label}: {state_path} records {full} but it is neither there nor restorable"
            )
    journaled: set[str] = set()
    for path, data in files.items():
        if lp.basename(path) == lp.JOURNAL_NAME:
            journal = jsonfmt.loads_object(data)
            journaled.update(w["path"] for w in journal["writes"])
    for path, data in files.items():
        if is_working_file(path) or lp.basename(path) == lp.STATE_FILE_NAME:
            continue
        if previous.get(path) == data or new.get(path) == data or path in journaled:
            continue
        raise AssertionError(f"{label}: {path} appeared or changed outside the protocol")


# --------------------------------------------------------------------------- reporting

#: what the suites exercised in this session (kill points, rounds, fault indexes, cases), by
#: name; printed at the end of the run so the counts quoted in docs/operations.md can be checked
COUNTS: dict[str, int] = {}


def count(name: str, value: int) -> None:
    COUNTS[name] = COUNTS.get(name, 0) + value


def pytest_terminal_summary(terminalreporter) -> None:  # type: ignore[no-untyped-def]
    if COUNTS:
        terminalreporter.section("reliability counts")
        for name in sorted(COUNTS):
            terminalreporter.write_line(f"{name}: {COUNTS[name]}")

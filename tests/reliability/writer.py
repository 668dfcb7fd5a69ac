"""One concurrent writer of the concurrency suite (run as a script, one process per owner).

    python writer.py <config> <source dir> <owner> <rounds> <gate file> <result file>

Each round rewrites the owner's source bundle (a file whose name changes every round, so replace
mode also deletes) with ``created`` = T0 + round seconds and runs ``distributor run`` in-process
(``main(argv)``). An owner named ``maint...`` publishes in merge mode (a new file each round) and
then runs ``prune --apply`` and ``reconcile-state`` on its own records. A command that fails
because another writer holds the lock is retried (counted as a conflict); any other failure ends
the writer. After every successful round the writer reads the
shared state and checks that

- its own owner record is this round's publication and its outputs hold exactly their bytes (only
  this process ever writes them, so any difference is another writer's doing);
- no other owner went back to an older round than this writer saw before (a lost update).

The result file gets JSON: ``{"owner", "rounds", "conflicts", "error"}``.
"""

from __future__ import annotations

import hashlib
import io
import json
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from distributor_core.bundle import build_manifest, write_manifest
from distributor_core.cli import main
from distributor_core.state import parse_state_document

T0 = datetime(2026, 6, 1, 8, 0, tzinfo=UTC)
LOCKED = "is locked by"


def source_files(owner: str, round_no: int) -> dict[str, bytes]:
    return {
        f"{owner}/static.txt": f"{owner} static\n".encode(),
        f"{owner}/round.txt": f"{owner} round {round_no}\n".encode(),
        f"{owner}/r{round_no % 3}.txt": f"{owner} rotating {round_no}\n".encode() * (round_no % 5 + 1),
    }


def write_source(root: Path, files: dict[str, bytes], bundle_id: str, created: datetime) -> None:
    root.mkdir(parents=True, exist_ok=True)
    for path in sorted(root.rglob("*"), reverse=True):
        if path.is_file():
            path.unlink()
        else:
            path.rmdir()
    for rel, data in files.items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    write_manifest(root, build_manifest(root, id=bundle_id, files=list(files), created=created), overwrite=True)


def read_state(read) -> object:  # type: ignore[no-untyped-def]
    return parse_state_document(read(".distributor.json"))


def command(argv: list[str]) -> tuple[int, str]:
    """Run ``distributor <argv>`` in-process until it is not refused by the lock."""
    conflicts = 0
    while True:
        out, err = io.StringIO(), io.StringIO()
        code = main(argv, stdout=out, stderr=err)
        if code == 0 or LOCKED not in err.getvalue():
            return conflicts, "" if code == 0 else err.getvalue()
        conflicts += 1


def main_loop(config: str, source: Path, owner: str, rounds: int, read) -> dict[str, object]:  # type: ignore[no-untyped-def]
    conflicts = 0
    seen: dict[str, datetime] = {}
    scope = f"{owner}/site"
    maintainer = owner.startswith("maint")
    for round_no in range(1, rounds + 1):
        files = source_files(owner, round_no)
        if maintainer:  # merge mode: a new file each round, older ones pruned below
            # newer rounds sort first by name, so keep_latest keeps the newest on an updated_at tie
            files = {f"{owner}/file-{100_000 - round_no:06d}.txt": f"{owner} {round_no}\n".encode()}
        created = T0 + timedelta(seconds=round_no)
        write_source(source, files, f"{owner}.bundle", created)
        retried, error = command(["run", "--config", config])
        conflicts += retried
        if error:
            return {"owner": owner, "rounds": round_no - 1, "conflicts": conflicts, "error": error}
        if maintainer:
            for argv in (["prune", "--apply"], ["reconcile-state"]):
                retried, error = command([*argv, "--config", config, "--pipeline", owner, "--destination", "site"])
                conflicts += retried
                if error:
                    return {"owner": owner, "rounds": round_no, "conflicts": conflicts, "error": error}
        state = read_state(read)
        current = {f"{o.pipeline_id}/{o.destination_id}": o.manifest.created for o in state.owners}
        if current.get(scope) != created:
            return {"owner": owner, "rounds": round_no, "conflicts": conflicts,
                    "error": f"round {round_no}: state records {scope} at {current.get(scope)}"}
        mine = {o.path: o.sha256 for o in state.outputs if f"{o.pipeline_id}/{o.destination_id}" == scope}
        expected = {path: "sha256:" + hashlib.sha256(data).hexdigest() for path, data in files.items()}
        if maintainer:  # the newest file stays (keep_latest), older ones may be pruned
            mine = {path: digest for path, digest in mine.items() if path in expected}
        if mine != expected:
            return {"owner": owner, "rounds": round_no, "conflicts": conflicts,
                    "error": f"round {round_no}: records {sorted(mine)} != {sorted(expected)}"}
        for path, digest in expected.items():
            if "sha256:" + hashlib.sha256(read(path)).hexdigest() != digest:
                return {"owner": owner, "rounds": round_no, "conflicts": conflicts,
                        "error": f"round {round_no}: {path} does not hold this writer's bytes"}
        for other, stamp in seen.items():
            if other not in current or current[other] < stamp:
                return {"owner": owner, "rounds": round_no, "conflicts": conflicts,
                        "error": f"round {round_no}: {other} went back from {stamp} to {current.get(other)}"}
        seen = current
    return {"owner": owner, "rounds": rounds, "conflicts": conflicts, "error": ""}


def run(argv: list[str]) -> int:
    config, source, owner, rounds, gate, result = argv
    # the destination root is read back through the same storage the config opens
    from distributor_core.config import Environment, load_config
    from distributor_core.storage.factory import open_destination_storage

    loaded = load_config(config)
    destination = loaded.pipeline(owner).destinations[0]
    storage = open_destination_storage(destination, Environment.from_config(loaded))
    deadline = time.monotonic() + 60
    while not Path(gate).exists() and time.monotonic() < deadline:
        time.sleep(0.005)
    try:
        outcome = main_loop(config, Path(source), owner, int(rounds), storage.read_bytes)
    except Exception as exc:  # reported, never hidden
        outcome = {"owner": owner, "rounds": -1, "conflicts": 0, "error": f"{type(exc).__name__}: {exc}"}
    finally:
        storage.close()
    Path(result).write_text(json.dumps(outcome))
    return 0 if not outcome["error"] else 1


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))

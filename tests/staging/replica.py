"""One staging replica as its own OS process, for tests/staging/test_replica_processes.py.

``python -m tests.staging.replica <settings JSON>`` admits the uploads it is given (each after
claiming its idempotency key, as ``serve`` answers a request), prints ``accepted <run id> <key>``
for each admission that completed (what a ``202`` promises), then publishes: it takes unfinished
uploads through the store's publication leases, prints ``publishing <run id>``, "publishes" by
creating ``published/<run id>`` (If-None-Match; an existing one is printed as ``republished``),
renews its lease while it works (the lease's renew loop), and marks the upload ``succeeded``
(fenced by the lease). It stops once nothing was
left to take for ``idle`` seconds.
"""

from __future__ import annotations

import json
import sys
import time
from datetime import UTC, datetime, timedelta

from distributor_core import staging as sg
from distributor_core.lease import LeaseLost
from distributor_core.staging.objectstore import ObjectStagingStore
from distributor_core.storage import StorageError, is_already_exists
from distributor_core.storage.s3 import S3Storage


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def main(settings: dict[str, object]) -> int:
    storage = S3Storage(
        str(settings["bucket"]), prefix=str(settings["prefix"]), endpoint_url=str(settings["endpoint"]),
        force_path_style=True, access_key_id=str(settings["key_id"]), secret_access_key=str(settings["secret"]),
        conditional_writes="trusted", max_attempts=2,
    )
    store = ObjectStagingStore(storage, str(settings["pipeline"]))
    owner = str(settings["name"])
    lease = timedelta(seconds=float(settings["lease"]))  # type: ignore[arg-type]
    work = float(settings["work"])  # type: ignore[arg-type]
    for n, key in settings["uploads"]:  # type: ignore[attr-defined]
        run_id = f"{settings['pipeline']}.20261202T090000Z.{int(n):08x}"
        claim = store.claim_key("reporter", key, run_id)
        if not claim.claimed:
            _say(f"replay {claim.holder} {key}" if claim.record is not None else f"inflight {claim.holder} {key}")
            continue
        record = sg.UploadRecord(
            run_id=run_id, seq=store.next_number(), pipeline_id=str(settings["pipeline"]), token_id="reporter",
            idempotency_key=key, manifest={"id": key}, response={"run_id": run_id}, status=sg.ACCEPTED,
            accepted_at=datetime.now(UTC).replace(microsecond=0),
        )
        store.admit(record, claim=claim.lease)
        _say(f"accepted {run_id} {key}")
    idle_since = time.monotonic()
    while time.monotonic() - idle_since < float(settings["idle"]):  # type: ignore[arg-type]
        claimed = store.claim_next(owner, lease)
        if claimed is None:
            time.sleep(0.2)
            continue
        held, started = claimed
        run_id = started.record.run_id
        _say(f"publishing {run_id}")
        try:
            storage.write_bytes(f"published/{run_id}", owner.encode(), overwrite=False)
        except StorageError as exc:
            if not is_already_exists(exc):
                raise
            _say(f"republished {run_id}")
        with held.kept():
            time.sleep(work)
        try:
            store.transition(run_id, fence=held.check, status=sg.SUCCEEDED,
                             finished_at=datetime.now(UTC).replace(microsecond=0))
            _say(f"succeeded {run_id}")
        except LeaseLost:
            _say(f"lost {run_id}")
        idle_since = time.monotonic()
    storage.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))

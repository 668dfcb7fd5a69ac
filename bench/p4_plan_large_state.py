"""P4: plan against a ``.distributor.json`` with 100,000 outputs.

A local destination holds the single-owner state a publication of a 100,000-file bundle wrote
(the files themselves are not needed for planning and are not created). Ours:
``execute.facts.build_plan``, the function ``distributor run`` calls under the lock (stat + read
of the state file, parse and full validation, then ``plan.decide`` with the facts it asks for:
comparison, outputs, the replace pre-check's listing), for

* the same manifest again (``skip_same``: the usual re-run), and
* a newer manifest of the same bundle (``replace_older``: state and manifest both walked).

Peer: ``json.loads`` of the same state file bytes (read from memory). Target: <= 1.5x (issue 17; issue 8 had <= 3x).
"""

from __future__ import annotations

import gc
import hashlib
import json
import time
from datetime import UTC, datetime, timedelta

import msgspec

from bench import common as c

OUTPUTS = 100_000


def _manifest(created: datetime):
    from distributor_core.bundle import Manifest, ManifestFile, bundle_digest, validate_manifest

    files = tuple(
        ManifestFile(
            path=f"data/d{i // 1000:03d}/file-{i:06d}.csv",
            sha256="sha256:" + hashlib.sha256(str(i).encode()).hexdigest(),
            size=1000 + i,
        )
        for i in range(OUTPUTS)
    )
    # validated once, as source loading does before planning (the PlanRequest contract)
    return validate_manifest(
        Manifest(schema_version=1, id="bench-large", digest=bundle_digest(files), created=created, files=files)
    )


def _request(manifest, source, destination):
    from distributor_core.execute.request import PlanRequest
    from distributor_core.plan.model import DestinationPolicy

    return PlanRequest(
        pipeline_id="bench",
        destination_id="local",
        source=source,
        source_bundle_path="b1",
        manifest=manifest,
        destination=destination,
        policy=DestinationPolicy(),
        distributor_version="bench",
    )


def _best(fn, repeat: int) -> tuple[float, list[float]]:
    samples = []
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return min(samples), samples


def main() -> c.Report:
    from distributor_core.bundle import validate_manifest
    from distributor_core.execute.facts import build_plan
    from distributor_core.execute.statebuild import build_state
    from distributor_core.state import marshal_state
    from distributor_core.storage.local import LocalStorage

    work = c.workdir("p4")
    try:
        quiet = c.wait_for_quiet()
        created = datetime(2026, 6, 1, 12, 0, 0, tzinfo=UTC)
        manifest = _manifest(created)
        source = LocalStorage(work / "src", create=True)
        destination = LocalStorage(work / "dst", create=True)
        first = build_plan(_request(manifest, source, destination))
        assert first.action.value == "publish_new", first.action
        state_bytes = marshal_state(build_state(first, now=created + timedelta(hours=1), version="bench"))
        destination.write_bytes("b1/.distributor.json", state_bytes, overwrite=True)

        same = _request(manifest, source, destination)
        newer_manifest = validate_manifest(msgspec.structs.replace(manifest, created=created + timedelta(days=1)))
        newer = _request(newer_manifest, source, destination)
        assert build_plan(same).action.value == "skip_same"
        assert build_plan(newer).action.value == "replace_older"

        repeat = max(c.REPEAT, 5)
        loads, loads_samples = _best(lambda: json.loads(state_bytes), repeat)
        plan_same, same_samples = _best(lambda: build_plan(same), repeat)
        plan_newer, newer_samples = _best(lambda: build_plan(newer), repeat)

        report = c.Report(
            "P4", f"plan against .distributor.json with {OUTPUTS:,} outputs ({len(state_bytes) / c.MIB:.1f} MiB)"
        )
        report.add(
            "build_plan, unchanged source (skip_same)",
            plan_same,
            loads,
            "s",
            "<= 1.5x",
            plan_same <= 1.5 * loads,
            "json.loads",
        )
        report.add(
            "build_plan, newer source (replace_older)",
            plan_newer,
            loads,
            "s",
            "<= 1.5x",
            plan_newer <= 1.5 * loads,
            "json.loads",
        )
        c.add_samples(report, {"json.loads": loads_samples, "skip_same": same_samples, "replace_older": newer_samples})
        report.notes.append(quiet)
        c.save(report)
        return report
    finally:
        c.cleanup(work)


if __name__ == "__main__":
    main()

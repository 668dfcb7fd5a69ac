#!/usr/bin/env python3
"""Submit producer files (or an existing bundle) to a distributor ``http_upload`` pipeline.

A copyable producer: adapt ``submit`` to your job. Try it against the example server::

    export DISTRIBUTOR_EXAMPLE_UPLOAD_TOKEN="$(openssl rand -hex 32)"
    distributor serve --config examples/http-upload-local.yml &

    export DISTRIBUTOR_UPLOAD_ENDPOINT=http://127.0.0.1:8080
    export DISTRIBUTOR_UPLOAD_TOKEN="$DISTRIBUTOR_EXAMPLE_UPLOAD_TOKEN"
    python examples/upload_client.py --pipeline example-http-upload --id reports.example --wait \\
        report.md=examples/source-bundle/report.md summary.txt=examples/source-bundle/summary.txt
    python examples/upload_client.py --pipeline example-http-upload --bundle examples/source-bundle

The bundle id (``--id``) names the artifact: keep it stable across runs that should replace the
same publication. The idempotency key names one producer run: derive it from something your job
knows (here the bundle id and a run timestamp) and reuse it only when retrying that run.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from distributor_core.bundle import BundleFile
from distributor_core.upload import IdempotencyConflictError, UploadClient, UploadError


def submit(
    client: UploadClient,
    *,
    pipeline_id: str,
    bundle_id: str,
    files: list[BundleFile],
    run_stamp: str,
) -> str:
    """Upload ``files`` as one bundle; return the run id. Safe to call again for the same run."""
    try:
        result = client.upload_files(
            pipeline_id=pipeline_id,
            id=bundle_id,
            idempotency_key=f"{bundle_id}.{run_stamp}",
            files=files,
        )
    except IdempotencyConflictError as exc:
        if exc.retryable:  # the same run is being uploaded right now (another attempt of this job)
            raise
        raise SystemExit(f"idempotency key {bundle_id}.{run_stamp} was used for different content: {exc}") from exc
    return result.run_id


def wait_for(client: UploadClient, run_id: str, timeout: float) -> int:
    """Poll the run until it finishes; 0 when it succeeded."""
    deadline = time.monotonic() + timeout
    while True:
        status = client.status(run_id)
        if status.status in ("succeeded", "failed"):
            print(f"run {run_id} {status.status}" + (f": {status.error}" if status.error else ""))
            return 0 if status.status == "succeeded" else 1
        if time.monotonic() > deadline:
            print(f"run {run_id} still {status.status} after {timeout:.0f} s", file=sys.stderr)
            return 1
        time.sleep(1)


def _file_argument(value: str) -> BundleFile:
    """``bundle/path=local/path``, or a local path published under its file name."""
    bundle_path, sep, source = value.partition("=")
    if not sep:
        source, bundle_path = value, Path(value).name
    return BundleFile(source, bundle_path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pipeline", required=True, help="the http_upload pipeline id")
    parser.add_argument("--id", help="bundle id (with files)")
    parser.add_argument("--bundle", help="upload this existing bundle directory instead of files")
    parser.add_argument("--run-stamp", default=datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ"),
                        help="identifies this producer run in the idempotency key (default: now)")
    parser.add_argument("--wait", action="store_true", help="wait until the run finished")
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("files", nargs="*", type=_file_argument, metavar="[BUNDLE_PATH=]FILE")
    args = parser.parse_args(argv)
    endpoint = os.environ.get("DISTRIBUTOR_UPLOAD_ENDPOINT", "")
    token = os.environ.get("DISTRIBUTOR_UPLOAD_TOKEN", "")
    if not endpoint or not token:
        parser.error("set DISTRIBUTOR_UPLOAD_ENDPOINT and DISTRIBUTOR_UPLOAD_TOKEN")
    if bool(args.bundle) == bool(args.files):
        parser.error("give either --bundle or files")
    if args.files and not args.id:
        parser.error("--id is required with files")

    with UploadClient(endpoint, token) as client:
        try:
            if args.bundle:
                run_id = client.upload_bundle(
                    pipeline_id=args.pipeline, root=args.bundle,
                    idempotency_key=f"{Path(args.bundle).name}.{args.run_stamp}",
                ).run_id
            else:
                run_id = submit(client, pipeline_id=args.pipeline, bundle_id=args.id, files=args.files,
                                run_stamp=args.run_stamp)
        except (UploadError, ValueError) as exc:
            print(f"upload failed: {exc}", file=sys.stderr)
            return 1
        print(f"distributor accepted run {run_id}")
        return wait_for(client, run_id, args.timeout) if args.wait else 0


if __name__ == "__main__":
    sys.exit(main())

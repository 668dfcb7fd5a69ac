"""Upload servers on shared S3 staging (issue 29): configs whose ``server.http.staging_root`` is
``s3://<bucket>/<prefix>`` on the moto test peer, ``distributor serve`` replicas as subprocesses
(stderr to a log file, so a busy replica never blocks on a full pipe), and what the tests read
behind the server's back: the staging bucket's objects, the destination bucket's object versions.

Used by tests/server/test_replicas.py, tests/server/test_archive_corpus_s3.py,
tests/production/test_shared_staging_replicas.py and bench/p15_shared_staging.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from distributor_core.lease import LeaseRecord
from tests.peers.moto import MotoServer
from tests.server.harness import Setup, write_setup

BIN = Path(sys.executable).parent
#: names of the secrets the configs give the S3 credentials under
KEY_ENV = "STAGING_S3_KEY_ID"
SECRET_ENV = "STAGING_S3_SECRET"
STAGING_PREFIX = "staging"
DESTINATION_PREFIX = "published"


@dataclass
class SharedSetup(Setup):
    """A :class:`Setup` whose staging is ``s3://<bucket>/staging`` (and, with an S3 destination,
    whose pipelines publish to ``s3://<destination bucket>/published/<pipeline>``)."""

    moto: MotoServer | None = None
    bucket: str = ""
    destination_bucket: str = ""
    secrets: dict[str, str] = field(default_factory=dict)

    @property
    def environ(self) -> dict[str, str]:
        return {**super().environ, **self.secrets}

    def staging_objects(self, pipeline_id: str = "reports") -> list[str]:
        """Every object key below the pipeline's staging prefix, relative to it, sorted."""
        return list_keys(self.moto_server, self.bucket, f"{STAGING_PREFIX}/{pipeline_id}/")

    def destination_versions(self, pipeline_id: str = "reports") -> dict[str, int]:
        """How many times each object below the pipeline's destination prefix was written
        (object versions of the versioned destination bucket; delete markers not counted)."""
        return count_versions(self.moto_server, self.destination_bucket, f"{DESTINATION_PREFIX}/{pipeline_id}/")

    def destination_state(self, pipeline_id: str = "reports") -> dict[str, Any]:
        client = self.moto_server.client()
        try:
            body = client.get_object(Bucket=self.destination_bucket,
                                     Key=f"{DESTINATION_PREFIX}/{pipeline_id}/.distributor.json")["Body"].read()
        finally:
            client.close()
        state: dict[str, Any] = json.loads(body)
        return state

    @property
    def moto_server(self) -> MotoServer:
        assert self.moto is not None
        return self.moto


def list_keys(moto: MotoServer, bucket: str, prefix: str) -> list[str]:
    client = moto.client()
    try:
        keys: list[str] = []
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            keys.extend(item["Key"].removeprefix(prefix) for item in page.get("Contents", []))
        return sorted(keys)
    finally:
        client.close()


def count_versions(moto: MotoServer, bucket: str, prefix: str) -> dict[str, int]:
    client = moto.client()
    counts: dict[str, int] = {}
    try:
        for page in client.get_paginator("list_object_versions").paginate(Bucket=bucket, Prefix=prefix):
            for version in page.get("Versions", []):
                key = version["Key"].removeprefix(prefix)
                counts[key] = counts.get(key, 0) + 1
    finally:
        client.close()
    return counts


def s3_connection(moto: MotoServer) -> dict[str, Any]:
    """The keys of an ``s3`` backend that reach the moto peer (credentials by secret name)."""
    return {
        "region": moto.region,
        "endpoint": moto.endpoint_url,
        "force_path_style": True,
        "conditional_writes": "trusted",
        "credentials": {"access_key_id_env": KEY_ENV, "secret_access_key_env": SECRET_ENV},
    }


def write_shared_setup(
    root: Path,
    moto: MotoServer,
    *,
    pipelines: dict[str, int] | None = None,
    http: dict[str, Any] | None = None,
    s3_destination: bool = False,
    max_upload_size: dict[str, str] | None = None,
    lock_lease: float | None = None,
) -> SharedSetup:
    """:func:`~tests.server.harness.write_setup` on a fresh staging bucket. With
    ``s3_destination`` every pipeline's destinations become one ``s3`` destination
    ``dest1`` in a fresh bucket with versioning on, so each write stays visible as a version.
    ``lock_lease`` (seconds) sets every destination's ``lock_lease``."""
    bucket = moto.create_bucket()
    plain = write_setup(root, pipelines=pipelines, max_upload_size=max_upload_size, http={
        "staging_root": f"s3://{bucket}/{STAGING_PREFIX}",
        "staging_s3": s3_connection(moto),
        **(http or {}),
    })
    destination_bucket = ""
    doc = yaml.safe_load(plain.config_path.read_text())
    if s3_destination:
        destination_bucket = moto.create_bucket()
        client = moto.client()
        try:
            client.put_bucket_versioning(Bucket=destination_bucket,
                                         VersioningConfiguration={"Status": "Enabled"})
        finally:
            client.close()
        for pipeline in doc["pipelines"]:
            pipeline["destinations"] = [{
                "id": "dest1", "backend": "s3", "bucket": destination_bucket,
                "prefix": f"{DESTINATION_PREFIX}/{pipeline['id']}", **s3_connection(moto),
            }]
    if lock_lease is not None:
        for pipeline in doc["pipelines"]:
            for destination in pipeline["destinations"]:
                destination["lock_lease"] = f"{lock_lease}s"
    if s3_destination or lock_lease is not None:
        plain.config_path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return SharedSetup(
        plain.root, plain.config_path, plain.tokens, plain.destinations if not s3_destination else {},
        moto=moto, bucket=bucket, destination_bucket=destination_bucket,
        secrets={KEY_ENV: moto.access_key_id, SECRET_ENV: moto.secret_access_key},
    )


# --- replicas as processes ----------------------------------------------------------------------


@dataclass
class Replica:
    """One ``distributor serve`` process; its stdout and stderr go to ``log``."""

    name: str
    process: subprocess.Popen[bytes]
    log: Path
    url: str = ""

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def kill9(self) -> None:
        """``kill -9``: no shutdown, no drain, leases and objects left as they are."""
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(30)

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM, then SIGKILL if it does not exit in ``timeout`` seconds; the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(30)
        return self.process.returncode


def launch_replica(setup: Setup, name: str, *args: str, env: dict[str, str] | None = None,
                   host: str | None = None) -> Replica:
    """``distributor serve --config <setup> <args>`` as a subprocess (this interpreter's
    ``distributor`` script, ``PYTHONPATH`` inherited); see :func:`wait_replica`. With ``host``
    it runs in a UTS namespace of its own under that host name (``unshare --uts``, needs root),
    as a replica on another machine would: what it records as its host (destination locks) is
    not this host, so no process here can tell whether it is alive."""
    log = setup.root / f"{name}.log"
    # its scratch directory ($TMPDIR/distributor-staging/serve-<pid>-...) in the test's directory:
    # a replica killed with -9 leaves it behind
    scratch = setup.root / f"tmp-{name}"
    scratch.mkdir(mode=0o700, exist_ok=True)
    command = [str(BIN / "distributor"), "serve", "--config", str(setup.config_path), *args]
    if host is not None:
        command = ["unshare", "--uts", "sh", "-c", 'hostname "$0" && exec "$@"', host, *command]
    with open(log, "wb") as sink:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL, stdout=sink, stderr=sink, cwd=setup.root,
            env={**os.environ, **setup.environ, "TMPDIR": str(scratch), **(env or {})},
        )
    return Replica(name, process, log)


def wait_replica(replica: Replica, timeout: float = 60.0) -> Replica:
    """Wait until the replica printed the address it listens on (its ``url``)."""
    marker = "serving HTTP upload API on "
    deadline = time.monotonic() + timeout
    while True:
        text = replica.text()
        if marker in text:
            replica.url = "http://" + text.split(marker, 1)[1].split()[0]
            return replica
        if replica.process.poll() is not None or time.monotonic() > deadline:
            replica.stop(5)
            raise AssertionError(f"{replica.name}: distributor serve did not start: {text[-3000:]}")
        time.sleep(0.05)


def start_replicas(setup: Setup, names: list[str], *args: str, env: dict[str, str] | None = None) -> list[Replica]:
    """Several replicas started side by side; returns once every one listens."""
    launched = [launch_replica(setup, name, *args, env=env) for name in names]
    try:
        return [wait_replica(replica) for replica in launched]
    except BaseException:
        for replica in launched:
            replica.kill9()
        raise


def start_replica(setup: Setup, name: str, *args: str, env: dict[str, str] | None = None,
                  host: str | None = None) -> Replica:
    return wait_replica(launch_replica(setup, name, *args, env=env, host=host))


def hold_destination_lock(setup: SharedSetup, pipeline_id: str = "reports") -> Callable[[], None]:
    """Put a lock on the S3 destination as a process on another host would have left it (one
    that stopped renewing it, with a lease of 10 minutes), so a publication waits for it while
    holding its publication lease; returns the release."""
    key = f"{DESTINATION_PREFIX}/{pipeline_id}/.distributor.lock"
    body = LeaseRecord(holder="test holder", host="elsewhere.invalid", pid=1, epoch="0badcafe", generation=1,
                       lease_seconds=600, acquired_at="2026-01-01T00:00:00Z").to_bytes().decode()
    client = setup.moto_server.client()
    try:
        client.put_object(Bucket=setup.destination_bucket, Key=key, Body=body.encode())
    finally:
        client.close()

    def release() -> None:
        closing = setup.moto_server.client()
        try:
            closing.delete_object(Bucket=setup.destination_bucket, Key=key)
        finally:
            closing.close()

    return release

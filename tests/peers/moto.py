"""moto S3 server test peer (session fixture).

Starts a real ``moto_server`` subprocess on 127.0.0.1 (a separate process, so the client side
is measured alone and talks HTTP to a real peer) with authentication enforced
(``INITIAL_NO_AUTH_ACTION_COUNT=0``), as described in ``shared/notes/test-peers.md``. With auth
enforced moto only accepts keys of IAM users it knows, so the fixture briefly lifts enforcement
through moto's ``/moto-api/reset-auth`` endpoint, creates one IAM user with an access key and an
``s3:*`` policy, enforces auth again and checks that a wrong key is refused. moto missing is a
hard failure, never a skip.

Use the ``moto_server`` fixture, then ``make_s3_storage(server)`` for an :class:`S3Storage` on a
fresh bucket (``bucket=`` and ``prefix=`` to choose). The ``s3_storage`` fixture does that for
one test; ``server.client()`` is a plain boto3 client for assertions behind the backend's back.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.peers.process import free_port, stop_process

REGION = "us-east-1"
_START_TIMEOUT = 20.0
_SETUP_DUMMY_KEY = ("AKIDSETUPONLY0000000", "setup-only-secret")
#: the session user may do anything in S3 and create further IAM users (see ``create_user``)
_POLICY = {
    "Version": "2012-10-17",
    "Statement": [{"Effect": "Allow", "Action": ["s3:*", "iam:*"], "Resource": "*"}],
}


@dataclass(frozen=True)
class MotoServer:
    """A running moto server and the credentials of the one IAM user it accepts."""

    endpoint_url: str
    access_key_id: str
    secret_access_key: str = field(repr=False)
    region: str
    #: directory holding the server log (removed at the end of the session)
    workdir: Path
    pid: int

    def client(self, **overrides: Any) -> Any:
        """A plain boto3 S3 client for the server (path style; checksums only when required)."""
        import boto3
        from botocore.config import Config

        kwargs: dict[str, Any] = {
            "endpoint_url": self.endpoint_url,
            "aws_access_key_id": self.access_key_id,
            "aws_secret_access_key": self.secret_access_key,
            "region_name": self.region,
            "config": Config(
                s3={"addressing_style": "path"},
                request_checksum_calculation="when_required",
                response_checksum_validation="when_required",
                retries={"mode": "standard", "max_attempts": 2},
            ),
        }
        kwargs.update(overrides)
        return boto3.client("s3", **kwargs)

    def create_bucket(self, name: str | None = None) -> str:
        """Create a bucket (a fresh random name unless ``name``; an existing one is kept)."""
        bucket = name or f"test-{secrets.token_hex(6)}"
        client = self.client()
        try:
            client.create_bucket(Bucket=bucket)
        except client.exceptions.BucketAlreadyOwnedByYou:
            pass
        finally:
            client.close()
        return bucket

    def create_user(self, policy: dict[str, Any], name: str | None = None) -> tuple[str, str]:
        """A further IAM user with ``policy`` as its only (inline) policy; returns its
        ``(access_key_id, secret_access_key)``. moto enforces the policy on its requests."""
        import boto3

        user = name or f"user-{secrets.token_hex(4)}"
        iam = boto3.client(
            "iam",
            endpoint_url=self.endpoint_url,
            region_name=self.region,
            aws_access_key_id=self.access_key_id,
            aws_secret_access_key=self.secret_access_key,
        )
        try:
            iam.create_user(UserName=user)
            iam.put_user_policy(UserName=user, PolicyName="policy", PolicyDocument=json.dumps(policy))
            key = iam.create_access_key(UserName=user)["AccessKey"]
        finally:
            iam.close()
        return key["AccessKeyId"], key["SecretAccessKey"]

    def log_text(self) -> str:
        try:
            return (self.workdir / "moto.log").read_text(errors="replace")
        except OSError:
            return ""


def make_s3_storage(server: MotoServer, bucket: str | None = None, prefix: str = "", **overrides: Any):
    """An :class:`S3Storage` on ``bucket`` (a fresh bucket when ``None``; created when missing)
    under ``prefix``, with the server's credentials and path-style addressing. ``overrides``
    replace any constructor argument (``part_size``, ``max_concurrency``, ``client``...)."""
    from distributor_core.storage.s3 import S3Storage

    name = server.create_bucket(bucket)
    kwargs: dict[str, Any] = {
        "prefix": prefix,
        "region": server.region,
        "endpoint_url": server.endpoint_url,
        "force_path_style": True,
        "access_key_id": server.access_key_id,
        "secret_access_key": server.secret_access_key,
        "max_attempts": 2,
    }
    kwargs.update(overrides)
    return S3Storage(name, **kwargs)


# ---------------------------------------------------------------------------- setup helpers


def _moto_api(endpoint: str, path: str, data: bytes | None = None) -> bytes:
    request = urllib.request.Request(
        f"{endpoint}/moto-api/{path}",
        data=data,
        method="POST" if data else "GET",
        headers={"Content-Type": "text/plain"},  # a form content type would hide the body from moto
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        return response.read()


def _wait_ready(endpoint: str, proc: subprocess.Popen[bytes], deadline: float) -> bool:
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            _moto_api(endpoint, "data.json")
            return True
        except OSError:
            time.sleep(0.05)
    return False


def _create_user(endpoint: str) -> tuple[str, str]:
    """With auth lifted: one IAM user with an ``s3:*`` inline policy and an access key."""
    import boto3

    iam = boto3.client(
        "iam",
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id=_SETUP_DUMMY_KEY[0],
        aws_secret_access_key=_SETUP_DUMMY_KEY[1],
    )
    try:
        iam.create_user(UserName="distributor-test")
        iam.put_user_policy(UserName="distributor-test", PolicyName="s3-all", PolicyDocument=json.dumps(_POLICY))
        key = iam.create_access_key(UserName="distributor-test")["AccessKey"]
    finally:
        iam.close()
    return key["AccessKeyId"], key["SecretAccessKey"]


def _check_auth_enforced(server: MotoServer) -> None:
    from botocore.exceptions import ClientError

    client = server.client(aws_access_key_id="AKIDWRONGKEY00000000", aws_secret_access_key="wrong")
    try:
        client.list_buckets()
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") == "InvalidAccessKeyId":
            return
        raise
    finally:
        client.close()
    pytest.fail("the moto server accepted an unknown access key: authentication is not enforced", pytrace=False)


#: moto's server with one request handled at a time (connections stay concurrent). moto 5.2.5
#: checks ``If-None-Match``/``If-Match`` and then stores the object without a lock, so two
#: concurrent conditional writes can both pass; on S3 they are atomic. Tests that race replicas
#: against one key (the shared staging store, issue 29) use this server.
_SERIAL_LAUNCHER = """
import sys, threading
from werkzeug.serving import run_simple
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
app = DomainDispatcherApplication(create_backend_app)
lock = threading.Lock()
def serial(environ, start_response):
    with lock:
        return list(app(environ, start_response))
run_simple(sys.argv[1], int(sys.argv[2]), serial, threaded=True, request_handler=MotoRequestHandler)
"""


def start_moto(workdir: Path, *, serial: bool = False) -> tuple[MotoServer, subprocess.Popen[bytes]]:
    """Start ``moto_server`` on a free loopback port with auth enforced and one IAM user; with
    ``serial``, one request at a time (atomic conditional writes, see ``_SERIAL_LAUNCHER``)."""
    try:
        import moto.server  # noqa: F401
    except ImportError:
        pytest.fail("moto[server] is missing: install the test extras (pip install -e '.[test]')", pytrace=False)
    env = dict(os.environ)
    env["INITIAL_NO_AUTH_ACTION_COUNT"] = "0"
    env.pop("MOTO_PORT", None)
    last_log = ""
    for _attempt in range(3):
        port = free_port()
        endpoint = f"http://127.0.0.1:{port}"
        log = open(workdir / "moto.log", "ab")  # noqa: SIM115 - kept open for the child
        try:
            proc = subprocess.Popen(
                [sys.executable, "-c", _SERIAL_LAUNCHER, "127.0.0.1", str(port)] if serial
                else [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env=env,
            )
        finally:
            log.close()
        if _wait_ready(endpoint, proc, time.monotonic() + _START_TIMEOUT):
            try:
                _moto_api(endpoint, "reset-auth", b"inf")
                access_key_id, secret_access_key = _create_user(endpoint)
                _moto_api(endpoint, "reset-auth", b"0")
            except BaseException:
                stop_process(proc)
                raise
            server = MotoServer(
                endpoint_url=endpoint,
                access_key_id=access_key_id,
                secret_access_key=secret_access_key,
                region=REGION,
                workdir=workdir,
                pid=proc.pid,
            )
            _check_auth_enforced(server)
            return server, proc
        stop_process(proc)
        last_log = (workdir / "moto.log").read_text(errors="replace")
    pytest.fail(f"moto_server did not start on 127.0.0.1; its log:\n{last_log[-4000:]}", pytrace=False)



# ---------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="session")
def moto_server() -> Iterator[MotoServer]:
    """A running moto S3 server on 127.0.0.1 with authentication enforced, for the session."""
    workdir = Path(tempfile.mkdtemp(prefix="distributor-moto-"))
    proc: subprocess.Popen[bytes] | None = None
    try:
        server, proc = start_moto(workdir)
        yield server
    finally:
        if proc is not None:
            stop_process(proc)
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture(scope="session")
def moto_serial_server() -> Iterator[MotoServer]:
    """Like ``moto_server``, handling one request at a time: conditional writes are atomic, as
    on S3, however many clients race for one key."""
    workdir = Path(tempfile.mkdtemp(prefix="distributor-moto-serial-"))
    proc: subprocess.Popen[bytes] | None = None
    try:
        server, proc = start_moto(workdir, serial=True)
        yield server
    finally:
        if proc is not None:
            stop_process(proc)
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture
def s3_storage(moto_server: MotoServer) -> Iterator[Any]:
    """An :class:`S3Storage` on a fresh bucket (empty prefix), closed after the test."""
    storage = make_s3_storage(moto_server)
    try:
        yield storage
    finally:
        storage.close()

"""Self-checks of the test peers: a peer's own regression is named as such.

The suite relies on its peers behaving like the services they stand in for. When a new release of a
peer changes that behaviour (``make test-latest`` resolves the newest releases), these checks fail
first and say it is the peer, not distributor, that changed, so nobody chases a bug in the backend.
"""

from __future__ import annotations

from importlib.metadata import version

import pytest
from botocore.exceptions import ClientError

from tests.peers.moto import MotoServer


def test_moto_head_is_authorised_by_get_object(moto_server: MotoServer) -> None:
    """AWS authorises ``HeadObject`` with ``s3:GetObject``; moto 5.2.6 answers ``403`` instead
    (a ``GET`` of the same key is allowed), which breaks every restricted-user S3 test."""
    bucket = moto_server.create_bucket()
    admin = moto_server.client()
    admin.put_object(Bucket=bucket, Key="site/a.txt", Body=b"a")
    key, secret = moto_server.create_user(
        {
            "Version": "2012-10-17",
            "Statement": [
                {"Effect": "Allow", "Action": "s3:GetObject", "Resource": f"arn:aws:s3:::{bucket}/site/*"}
            ],
        }
    )
    user = moto_server.client(aws_access_key_id=key, aws_secret_access_key=secret)
    assert user.get_object(Bucket=bucket, Key="site/a.txt")["Body"].read() == b"a"
    try:
        user.head_object(Bucket=bucket, Key="site/a.txt")
    except ClientError as error:
        status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        pytest.fail(
            f"test peer regression: moto {version('moto')} answers {status} to a HEAD of an existing key that "
            "s3:GetObject allows (AWS and moto 5.2.5 answer 200). This is moto's bug, not distributor's: "
            "install from the lock (make test) or exclude this moto release in pyproject.toml, then make lock."
        )


def test_faketime_shifts_a_childs_wall_clock_and_leaves_its_monotonic_clock() -> None:
    """The lease tests rely on it: a child under ``faketime.skewed`` sees its wall clock moved and
    its monotonic clock (what leases are judged by) as it is."""
    import os
    import subprocess
    import sys
    import time

    from tests.peers.faketime import skewed

    script = "import time; print(time.time(), time.monotonic())"
    before = time.time(), time.monotonic()
    out = subprocess.run([sys.executable, "-c", script], env={**os.environ, **skewed(-600)},
                         capture_output=True, text=True, check=True).stdout.split()
    after = time.time(), time.monotonic()
    wall, monotonic = float(out[0]), float(out[1])
    assert before[0] - 600 - 5 < wall < after[0] - 600 + 5
    assert before[1] - 1 < monotonic < after[1] + 1

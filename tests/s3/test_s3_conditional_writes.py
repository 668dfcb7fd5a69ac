"""``conditional_writes`` of the S3 backend against moto, which enforces ``If-None-Match: *`` and
``If-Match`` on PutObject (and ``If-None-Match`` on CompleteMultipartUpload), as AWS S3 does.

``trusted`` sends no HeadObject before a conditional write and relies on the store's 412;
``precheck`` asks HeadObject first. The requests each mode sends are read off the wire (botocore's
``before-send`` event: method, key and conditional headers of every request)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from distributor_core.storage.errors import ErrorKind, StorageError
from distributor_core.storage.s3 import S3Storage
from tests.peers.moto import MotoServer, make_s3_storage

pytestmark = pytest.mark.s3

PART = 5 * 1024 * 1024


def wire_log(storage: S3Storage) -> list[tuple[str, str, str]]:
    """Every request the storage sends from now on: (method, path, conditional header)."""
    sent: list[tuple[str, str, str]] = []

    def record(request: Any, **_: Any) -> None:
        headers = request.headers
        condition = ""
        for name in ("If-None-Match", "If-Match"):
            if name in headers:
                value = headers[name]
                condition = f"{name}: {value.decode() if isinstance(value, bytes) else value}"
        sent.append((request.method, request.url.split("?", 1)[0].rsplit(f"/{storage.bucket}/", 1)[-1], condition))

    storage.client.meta.events.register("before-send.s3", record)
    return sent


def raw_put(server: MotoServer, bucket: str, key: str, data: bytes) -> str:
    client = server.client()
    try:
        return client.put_object(Bucket=bucket, Key=key, Body=data)["ETag"]
    finally:
        client.close()


@pytest.fixture
def trusted(moto_server: MotoServer) -> Iterator[S3Storage]:
    storage = make_s3_storage(moto_server, prefix="t", conditional_writes="trusted", part_size=PART)
    try:
        yield storage
    finally:
        storage.close()


def test_trusted_create_only_is_one_put_and_the_store_refuses_an_existing_key(trusted: S3Storage) -> None:
    sent = wire_log(trusted)
    trusted.write_bytes("a.txt", b"first", overwrite=False)
    with pytest.raises(StorageError) as info:
        trusted.write_bytes("a.txt", b"second", overwrite=False)
    assert info.value.kind == ErrorKind.ALREADY_EXISTS
    assert sent == [("PUT", "t/a.txt", "If-None-Match: *")] * 2
    assert trusted.read_bytes("a.txt") == b"first"


def test_trusted_if_revision_relies_on_if_match(moto_server: MotoServer, trusted: S3Storage) -> None:
    first = trusted.write_bytes("s.json", b"v1", overwrite=False)
    sent = wire_log(trusted)
    second = trusted.write_bytes("s.json", b"v2", overwrite=True, if_revision=first.revision)
    assert sent == [("PUT", "t/s.json", f"If-Match: {first.revision}")]
    assert second.revision == trusted.stat("s.json").revision
    sent.clear()
    for path, revision in (("s.json", first.revision), ("gone.json", first.revision), ("s.json", "")):
        with pytest.raises(StorageError) as info:  # stale, vanished, "there was none"
            trusted.write_bytes(path, b"v3", overwrite=True, if_revision=revision)
        assert info.value.kind == ErrorKind.CONFLICT, path
    assert [method for method, _, _ in sent] == ["PUT"] * 3
    assert trusted.read_bytes("s.json") == b"v2"
    assert not trusted.exists("gone.json")


def test_trusted_multipart_create_only_is_refused_at_completion(moto_server: MotoServer, trusted: S3Storage) -> None:
    raw_put(moto_server, trusted.bucket, "t/big.bin", b"theirs")
    sent = wire_log(trusted)
    data = b"m" * (PART + 1024)
    with pytest.raises(StorageError) as info:
        trusted.write_bytes("big.bin", data, overwrite=False)
    assert info.value.kind == ErrorKind.ALREADY_EXISTS
    assert ("HEAD", "t/big.bin", "") not in sent
    assert ("POST", "t/big.bin", "If-None-Match: *") in sent  # CompleteMultipartUpload
    assert trusted.read_bytes("big.bin") == b"theirs"
    client = moto_server.client()
    try:
        assert client.list_multipart_uploads(Bucket=trusted.bucket).get("Uploads", []) == []  # aborted
    finally:
        client.close()


def test_precheck_asks_head_first_and_sends_no_bytes_for_an_existing_key(moto_server: MotoServer) -> None:
    with make_s3_storage(moto_server, prefix="p", conditional_writes="precheck") as storage:
        storage.write_bytes("a.txt", b"first", overwrite=False)
        sent = wire_log(storage)
        with pytest.raises(StorageError) as info:
            storage.write_bytes("a.txt", b"second", overwrite=False)
        assert info.value.kind == ErrorKind.ALREADY_EXISTS
        assert sent == [("HEAD", "p/a.txt", "")]
        sent.clear()
        storage.write_bytes("b.txt", b"new", overwrite=False)
        assert sent == [("HEAD", "p/b.txt", ""), ("PUT", "p/b.txt", "If-None-Match: *")]


def test_default_is_trusted_for_aws_and_precheck_for_other_endpoints(moto_server: MotoServer) -> None:
    aws = S3Storage("bucket", access_key_id="AKIDEXAMPLE000000000", secret_access_key="secret")
    assert aws.conditional_writes == "trusted"
    aws.close()
    with make_s3_storage(moto_server) as custom:
        assert custom.conditional_writes == "precheck"
    client = moto_server.client()
    injected = S3Storage("bucket", client=client)  # where it points is unknown: pre-check
    assert injected.conditional_writes == "precheck"
    client.close()
    with pytest.raises(ValueError, match="conditional_writes must be trusted or precheck"):
        S3Storage("bucket", conditional_writes="always")

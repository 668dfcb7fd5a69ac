"""``S3Storage.sha256``: an object's stored ``ChecksumSHA256`` is the answer (nothing read) only when
it is the sha256 of the whole object (single part / ``FULL_OBJECT``), never a multipart checksum
of checksums; every other object is streamed."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterator

import pytest

from distributor_core.storage.base import ContentDigest
from distributor_core.storage.capabilities import Feature
from distributor_core.storage.errors import ErrorKind, StorageError
from distributor_core.storage.faults import FaultInjectingStorage
from distributor_core.storage.s3 import S3Storage, full_object_sha256
from tests.peers.moto import MotoServer, make_s3_storage

PART = 5 * 1024 * 1024


def _b64(data: bytes) -> str:
    return base64.b64encode(hashlib.sha256(data).digest()).decode()


def _hex(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


@pytest.mark.parametrize(
    ("head", "expected"),
    [
        ({"ChecksumSHA256": _b64(b"x"), "ETag": '"abc"'}, _hex(b"x")),
        ({"ChecksumSHA256": _b64(b"x"), "ChecksumType": "FULL_OBJECT", "ETag": '"abc-2"'}, _hex(b"x")),
        ({"ChecksumSHA256": _b64(b"x"), "ChecksumType": "COMPOSITE", "ETag": '"abc"'}, None),
        ({"ChecksumSHA256": _b64(b"x") + "-3", "ETag": '"abc-3"'}, None),
        ({"ChecksumSHA256": _b64(b"x"), "ETag": '"abc-3"'}, None),  # a store that drops the suffix
        ({"ETag": '"abc"'}, None),
        ({"ChecksumSHA256": "not base64!", "ETag": '"abc"'}, None),
        ({"ChecksumSHA256": base64.b64encode(b"short").decode(), "ETag": '"abc"'}, None),
    ],
)
def test_full_object_sha256_rules(head: dict, expected: str | None) -> None:
    assert full_object_sha256(head) == expected


@pytest.fixture
def s3(moto_server: MotoServer) -> Iterator[S3Storage]:
    storage = make_s3_storage(moto_server, prefix="site")
    try:
        yield storage
    finally:
        storage.close()


@pytest.mark.s3
def test_against_moto(s3: S3Storage, moto_server: MotoServer) -> None:
    client = moto_server.client()
    try:
        data = b"hello world\n"
        client.put_object(Bucket=s3.bucket, Key="site/with.txt", Body=data, ChecksumAlgorithm="SHA256")
        client.put_object(Bucket=s3.bucket, Key="site/plain.txt", Body=data)
        upload = client.create_multipart_upload(Bucket=s3.bucket, Key="site/multi.bin", ChecksumAlgorithm="SHA256")
        parts = []
        for number in (1, 2):
            body = bytes([number]) * PART
            answer = client.upload_part(
                Bucket=s3.bucket, Key="site/multi.bin", UploadId=upload["UploadId"], PartNumber=number, Body=body,
                ChecksumSHA256=_b64(body),
            )
            parts.append({"PartNumber": number, "ETag": answer["ETag"], "ChecksumSHA256": _b64(body)})
        client.complete_multipart_upload(
            Bucket=s3.bucket, Key="site/multi.bin", UploadId=upload["UploadId"], MultipartUpload={"Parts": parts}
        )
        # what moto stores for the multipart object is a checksum of the part checksums
        head = client.head_object(Bucket=s3.bucket, Key="site/multi.bin", ChecksumMode="ENABLED")
        whole = hashlib.sha256(bytes([1]) * PART + bytes([2]) * PART).digest()
        assert base64.b64decode(head["ChecksumSHA256"]) != whole
    finally:
        client.close()

    assert Feature.STORED_SHA256 in s3.capabilities
    seen: list[int] = []
    assert s3.sha256("with.txt", on_bytes=seen.append) == ContentDigest(len(data), _hex(data), stored=True)
    assert seen == [len(data)]  # vouched for, not read
    assert s3.sha256("plain.txt") == ContentDigest(len(data), _hex(data), stored=False)
    whole = bytes([1]) * PART + bytes([2]) * PART
    assert s3.sha256("multi.bin") == ContentDigest(2 * PART, _hex(whole), stored=False)
    # the fault injector runs the generic hash on its failable reads, never the stored checksum
    wrapped = FaultInjectingStorage(s3)
    assert Feature.STORED_SHA256 not in wrapped.capabilities
    assert wrapped.sha256("with.txt") == ContentDigest(len(data), _hex(data), stored=False)
    assert wrapped.count("read") == 1
    s3.write_bytes("dir/inner.txt", b"x", overwrite=True)
    with pytest.raises(StorageError) as info:
        s3.sha256("dir")
    assert info.value.kind == ErrorKind.UNSUPPORTED
    with pytest.raises(StorageError) as info:
        s3.sha256("missing.txt")
    assert info.value.kind == ErrorKind.NOT_FOUND

"""``S3Storage.stat_with_sha256``: an object's stored ``ChecksumSHA256`` is used only when it is the
sha256 of the whole object (single part / ``FULL_OBJECT``), never a multipart checksum of checksums."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterator

import pytest

from distributor_core.storage.capabilities import Feature
from distributor_core.storage.errors import ErrorKind, StorageError
from distributor_core.storage.faults import FaultInjectingStorage
from distributor_core.storage.local import LocalStorage
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


def test_backends_without_the_feature_refuse_stored_digests(tmp_path) -> None:
    (tmp_path / "a.txt").write_bytes(b"abc")
    local = LocalStorage(tmp_path)
    assert Feature.STORED_SHA256 not in local.capabilities
    for storage in (local, FaultInjectingStorage(local)):
        with pytest.raises(StorageError) as info:
            storage.stat_with_sha256("a.txt")
        assert info.value.kind == ErrorKind.UNSUPPORTED


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
    entry, digest = s3.stat_with_sha256("with.txt")
    assert (entry.type, entry.size, digest) == ("file", len(data), _hex(data))
    wrapped = FaultInjectingStorage(s3)  # passes the feature through, counted as a stat
    assert Feature.STORED_SHA256 in wrapped.capabilities
    assert wrapped.stat_with_sha256("with.txt") == (entry, _hex(data))
    assert wrapped.count("stat") == 1
    wrapped.fail("stat", path="with.txt")
    with pytest.raises(StorageError):
        wrapped.stat_with_sha256("with.txt")
    assert entry.revision == s3.stat("with.txt").revision
    assert s3.stat_with_sha256("plain.txt")[1] is None
    entry, digest = s3.stat_with_sha256("multi.bin")
    assert (entry.size, digest) == (2 * PART, None)
    assert s3.stat_with_sha256("")[0].type == "directory"
    s3.write_bytes("dir/inner.txt", b"x", overwrite=True)
    assert s3.stat_with_sha256("dir") == (s3.stat("dir"), None)
    with pytest.raises(StorageError) as info:
        s3.stat_with_sha256("missing.txt")
    assert info.value.kind == ErrorKind.NOT_FOUND

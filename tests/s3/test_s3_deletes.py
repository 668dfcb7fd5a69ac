"""Listings past one ListObjectsV2 page, batched deletes and prefix boundaries against moto."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from distributor_core.storage.errors import ErrorKind, StorageError
from distributor_core.storage.s3 import S3Storage
from tests.peers.moto import MotoServer, make_s3_storage

pytestmark = pytest.mark.s3

MANY = 1105  # more than one ListObjectsV2 page and one DeleteObjects batch


def put_many(server: MotoServer, bucket: str, keys: list[str]) -> None:
    client = server.client()
    try:
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda key: client.put_object(Bucket=bucket, Key=key, Body=b"x"), keys))
    finally:
        client.close()


def raw_keys(server: MotoServer, bucket: str) -> list[str]:
    client = server.client()
    try:
        keys: list[str] = []
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
            keys.extend(obj["Key"] for obj in page.get("Contents", ()))
        return sorted(keys)
    finally:
        client.close()


def count_calls(storage: S3Storage, operation: str) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []
    storage.client.meta.events.register(
        f"before-parameter-build.s3.{operation}", lambda params, **_: calls.append(dict(params))
    )
    return calls


@pytest.fixture
def storage(moto_server: MotoServer) -> Iterator[S3Storage]:
    s = make_s3_storage(moto_server, prefix="root")
    try:
        yield s
    finally:
        s.close()


def many_paths() -> list[str]:
    return [f"bundle/d{i % 3}/f{i:05d}.txt" for i in range(MANY)]


def test_listing_past_one_page(moto_server: MotoServer, storage: S3Storage) -> None:
    paths = many_paths()
    put_many(moto_server, storage.bucket, [f"root/{p}" for p in paths] + ["root/bundle/.distributor.json"])
    pages = count_calls(storage, "ListObjectsV2")
    files = storage.walk("bundle", limit=5000, include_dirs=False)
    assert [e.path for e in files] == sorted(paths)
    assert len(pages) == 2
    assert all(e.size == 1 and e.type == "file" for e in files)
    everything = storage.walk("bundle", limit=5000, include_reserved=True)
    assert len(everything) == MANY + 1 + 3  # files, the state file, three directories
    assert [e.path for e in storage.list("bundle")] == [
        "bundle/.distributor.json",
        "bundle/d0",
        "bundle/d1",
        "bundle/d2",
    ]
    scan = storage.scan("bundle", limit=1000, include_dirs=False)
    assert scan.truncated and len(scan.entries) == 1000
    with pytest.raises(StorageError) as info:
        storage.walk("bundle", limit=1000)
    assert info.value.kind == ErrorKind.LIMIT_EXCEEDED


def test_delete_prefix_batches_and_keeps_locks(moto_server: MotoServer, storage: S3Storage) -> None:
    paths = many_paths()
    extra = ["bundle/.distributor.lock", "bundle/.distributor.pending.json", "bundle/.distributor.json"]
    siblings = ["bundle-sibling/keep.txt", "bundle.txt"]
    put_many(moto_server, storage.bucket, [f"root/{p}" for p in paths + extra + siblings] + ["outside.txt"])
    batches = count_calls(storage, "DeleteObjects")
    heads = count_calls(storage, "HeadObject")
    deleted = storage.delete_prefix("bundle")
    assert deleted == sorted([*paths, "bundle/.distributor.json"])
    assert [len(b["Delete"]["Objects"]) for b in batches] == [1000, MANY + 1 - 1000]
    assert heads == []  # listed objects need no per-key existence check
    assert raw_keys(moto_server, storage.bucket) == sorted(
        [
            "outside.txt",
            "root/bundle-sibling/keep.txt",
            "root/bundle.txt",
            "root/bundle/.distributor.lock",
            "root/bundle/.distributor.pending.json",
        ]
    )


def test_delete_prefix_root_clears_only_this_prefix(moto_server: MotoServer, storage: S3Storage) -> None:
    put_many(moto_server, storage.bucket, ["root/a.txt", "root/b/c.txt", "root-sibling/x.txt", "other/y.txt"])
    assert storage.delete_prefix("") == ["a.txt", "b/c.txt"]
    assert raw_keys(moto_server, storage.bucket) == ["other/y.txt", "root-sibling/x.txt"]


def test_prefix_boundary_bundle_vs_bundle_sibling(moto_server: MotoServer) -> None:
    storage = make_s3_storage(moto_server)
    with storage:
        for path in ("bundle/a.txt", "bundle/x/b.txt", "bundle-sibling/keep.txt", "bundlex.txt"):
            storage.write_bytes(path, b"1", overwrite=False)
        assert [e.path for e in storage.walk("bundle", include_dirs=False)] == ["bundle/a.txt", "bundle/x/b.txt"]
        assert not storage.has_any("bundle-sib")
        assert storage.delete_prefix("bundle") == ["bundle/a.txt", "bundle/x/b.txt"]
        assert raw_keys(moto_server, storage.bucket) == ["bundle-sibling/keep.txt", "bundlex.txt"]
        assert not storage.has_any("bundle")


def test_delete_managed_outputs_batches_in_planned_order(moto_server: MotoServer, storage: S3Storage) -> None:
    outputs = [f"o{i:04d}.txt" for i in range(1200)]
    present = outputs[:1100]
    put_many(moto_server, storage.bucket, [f"root/b/{o}" for o in present] + ["root/b/.distributor.json"])
    batches = count_calls(storage, "DeleteObjects")
    deleted = storage.delete_managed_bundle("b", list(reversed(outputs)))
    # missing outputs are skipped and not reported; the state file goes last
    assert deleted == [f"b/{o}" for o in reversed(present)] + ["b/.distributor.json"]
    assert [len(b["Delete"]["Objects"]) for b in batches] == [900, 201]
    assert raw_keys(moto_server, storage.bucket) == []


def test_delete_paths_base_semantics(moto_server: MotoServer, storage: S3Storage) -> None:
    put_many(moto_server, storage.bucket, ["root/b/one.txt", "root/b/two.txt", "root/b/dir/inner.txt"])
    with pytest.raises(StorageError) as info:
        storage.delete_managed_outputs("b", ["one.txt", "missing.txt"], ignore_missing=False)
    assert (info.value.kind, info.value.path, info.value.op) == (
        ErrorKind.NOT_FOUND,
        "b/missing.txt",
        "delete managed outputs",
    )
    assert info.value.deleted == ["b/one.txt"]  # type: ignore[attr-defined]
    # a directory target stops the batch: earlier targets are deleted, later ones untouched
    with pytest.raises(StorageError) as info:
        storage.delete_managed_outputs("b", ["dir", "two.txt"])
    assert (info.value.kind, info.value.path) == (ErrorKind.UNSUPPORTED, "b/dir")
    assert raw_keys(moto_server, storage.bucket) == ["root/b/dir/inner.txt", "root/b/two.txt"]
    with pytest.raises(StorageError) as info:
        storage.delete_paths(["b/two.txt", ""], op="delete prefix")
    assert info.value.kind == ErrorKind.INVALID_PATH
    assert raw_keys(moto_server, storage.bucket) == ["root/b/dir/inner.txt"]
    with pytest.raises(StorageError) as info:
        storage.delete_managed_outputs("b", ["ok.txt", "../escape.txt"])
    assert info.value.kind == ErrorKind.INVALID_PATH
    assert storage.delete_managed_outputs("b", ["gone.txt"]) == []


def test_per_key_delete_error_reports_first_failure_in_planned_order(
    moto_server: MotoServer, storage: S3Storage
) -> None:
    """DeleteObjects refuses one key (as a bucket policy would): the error names that key with
    kind ``permission``; ``deleted`` lists what S3 confirmed, in planned order."""
    put_many(moto_server, storage.bucket, [f"root/b/{n}.txt" for n in ("a", "b", "c", "d")])
    real = storage.client.delete_objects

    def refuse_c(**kwargs: Any) -> dict[str, Any]:
        objects = kwargs["Delete"]["Objects"]
        kwargs["Delete"]["Objects"] = [o for o in objects if o["Key"] != "root/b/c.txt"]
        response = real(**kwargs)
        response.setdefault("Errors", []).append(
            {"Key": "root/b/c.txt", "Code": "AccessDenied", "Message": "Access Denied"}
        )
        return response

    storage.client.delete_objects = refuse_c  # type: ignore[method-assign]
    with pytest.raises(StorageError) as info:
        storage.delete_managed_outputs("b", ["b.txt", "c.txt", "a.txt", "d.txt"])
    assert (info.value.kind, info.value.path) == (ErrorKind.PERMISSION, "b/c.txt")
    assert "AccessDenied" in str(info.value)
    assert info.value.deleted == ["b/b.txt", "b/a.txt", "b/d.txt"]  # type: ignore[attr-defined]
    assert raw_keys(moto_server, storage.bucket) == ["root/b/c.txt"]


def test_delete_file(moto_server: MotoServer, storage: S3Storage) -> None:
    storage.write_bytes("x/y.txt", b"1", overwrite=False)
    storage.delete_file("x/y.txt")
    assert raw_keys(moto_server, storage.bucket) == []
    with pytest.raises(StorageError) as info:
        storage.delete_file("x/y.txt")
    assert info.value.kind == ErrorKind.NOT_FOUND


def test_delete_objects_sends_content_md5_not_crc32(moto_server: MotoServer, storage: S3Storage) -> None:
    """boto3 ≥ 1.36 would send ``x-amz-checksum-crc32`` on DeleteObjects even with
    ``when_required``; the backend sends the universally accepted ``Content-MD5`` instead."""
    import base64
    import hashlib

    put_many(moto_server, storage.bucket, ["root/a.txt", "root/b.txt"])
    sent: list[dict[str, str]] = []

    def capture(request: Any, **_: Any) -> None:
        headers = {k.lower(): (v.decode() if isinstance(v, bytes) else v) for k, v in request.headers.items()}
        headers["body-md5"] = base64.b64encode(hashlib.md5(request.body).digest()).decode()
        sent.append(headers)

    storage.client.meta.events.register("before-send.s3.DeleteObjects", capture)
    assert storage.delete_prefix("") == ["a.txt", "b.txt"]
    assert len(sent) == 1
    assert not [name for name in sent[0] if name.startswith("x-amz-checksum-")]
    assert sent[0]["content-md5"] == sent[0]["body-md5"]
    assert raw_keys(moto_server, storage.bucket) == []

"""S3 backend against a real moto server with authentication enforced (interfaces §5.4, §5.5 case 4)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

import pytest

from distributor_core.config.errors import SecretError
from distributor_core.config.models import S3Backend, S3Credentials
from distributor_core.storage.base import iter_chunks
from distributor_core.storage.errors import ErrorKind, StorageError
from distributor_core.storage.s3 import S3Storage
from tests.peers.moto import MotoServer, make_s3_storage

pytestmark = pytest.mark.s3


class DictEnv:
    def __init__(self, values: dict[str, str]) -> None:
        self.values = values

    def lookup(self, name: str) -> str | None:
        return self.values.get(name)


def raw_keys(server: MotoServer, bucket: str) -> list[str]:
    client = server.client()
    try:
        keys: list[str] = []
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
            keys.extend(obj["Key"] for obj in page.get("Contents", ()))
        return sorted(keys)
    finally:
        client.close()


def raw_get(server: MotoServer, bucket: str, key: str) -> dict[str, Any]:
    client = server.client()
    try:
        response = client.get_object(Bucket=bucket, Key=key)
        response["Data"] = response["Body"].read()
        return response
    finally:
        client.close()


def raw_put(server: MotoServer, bucket: str, key: str, data: bytes = b"x") -> str:
    client = server.client()
    try:
        return client.put_object(Bucket=bucket, Key=key, Body=data)["ETag"]
    finally:
        client.close()


@pytest.fixture
def prefixed(moto_server: MotoServer) -> Iterator[S3Storage]:
    storage = make_s3_storage(moto_server, prefix="team/reports")
    try:
        yield storage
    finally:
        storage.close()


def s3_config(server: MotoServer, bucket: str, **fields: Any) -> S3Backend:
    values: dict[str, Any] = {
        "bucket": bucket,
        "prefix": "",
        "region": server.region,
        "endpoint": server.endpoint_url,
        "force_path_style": True,
        "credentials": None,
    }
    values.update(fields)
    return S3Backend(**values)


# ---------------------------------------------------------------------------- keys


def test_key_shape_without_prefix(moto_server: MotoServer, s3_storage: S3Storage) -> None:
    s3_storage.write_bytes("bundle/report.html", b"<p>hi</p>", overwrite=False)
    s3_storage.write_bytes(".distributor.json", b"{}", overwrite=False)
    assert raw_keys(moto_server, s3_storage.bucket) == [".distributor.json", "bundle/report.html"]
    assert raw_get(moto_server, s3_storage.bucket, "bundle/report.html")["Data"] == b"<p>hi</p>"


def test_key_shape_with_prefix(moto_server: MotoServer, prefixed: S3Storage) -> None:
    prefixed.write_bytes("bundle/report.md", b"# hi", overwrite=False)
    assert raw_keys(moto_server, prefixed.bucket) == ["team/reports/bundle/report.md"]
    # objects outside the prefix, including a sibling sharing its first characters, are invisible
    raw_put(moto_server, prefixed.bucket, "team/other.txt")
    raw_put(moto_server, prefixed.bucket, "team/reports-sibling/x.txt")
    assert [e.path for e in prefixed.walk("")] == ["bundle", "bundle/report.md"]
    assert prefixed.read_bytes("bundle/report.md") == b"# hi"
    with pytest.raises(StorageError) as info:
        prefixed.stat("../other.txt")
    assert info.value.kind == ErrorKind.INVALID_PATH


# ---------------------------------------------------------------------------- content types


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("page.html", "text/html; charset=utf-8"),
        ("notes.md", "text/markdown; charset=utf-8"),
        ("notes.txt", "text/plain; charset=utf-8"),
        ("data.json", "application/json"),
        ("blob.bin", "application/octet-stream"),
    ],
)
def test_content_type_inferred_from_path(
    moto_server: MotoServer, s3_storage: S3Storage, path: str, expected: str
) -> None:
    s3_storage.write_bytes(path, b"content", overwrite=True)
    assert raw_get(moto_server, s3_storage.bucket, path)["ContentType"] == expected


def test_explicit_content_type_wins(moto_server: MotoServer, s3_storage: S3Storage) -> None:
    s3_storage.write_bytes("page.html", b"x", overwrite=True, content_type="text/plain")
    assert raw_get(moto_server, s3_storage.bucket, "page.html")["ContentType"] == "text/plain"


# ---------------------------------------------------------------------------- stat and read


def test_stat_file_directory_root_and_missing(s3_storage: S3Storage) -> None:
    written = s3_storage.write_bytes("a/b/c.txt", b"12345", overwrite=False)
    entry = s3_storage.stat("a/b/c.txt")
    assert (entry.type, entry.size, entry.revision) == ("file", 5, written.revision)
    assert entry.revision and entry.revision.startswith('"')
    assert entry.mtime is not None and entry.mtime.utcoffset() is not None
    assert s3_storage.stat("a").type == "directory"
    assert s3_storage.stat("a/b").type == "directory"
    assert s3_storage.stat("").type == "directory"
    with pytest.raises(StorageError) as info:
        s3_storage.stat("a/b/missing.txt")
    assert info.value.kind == ErrorKind.NOT_FOUND
    assert str(info.value) == "stat s3 a/b/missing.txt: not_found"
    # "a/b/c" is a prefix of a key but not a directory: whole segments only
    with pytest.raises(StorageError):
        s3_storage.stat("a/b/c")
    assert s3_storage.exists("a/b/c.txt") and not s3_storage.exists("a/b/c")


def test_missing_key_is_not_found_everywhere(s3_storage: S3Storage) -> None:
    for call in (
        lambda: s3_storage.open_read("missing.txt"),
        lambda: s3_storage.read_bytes("missing.txt"),
        lambda: s3_storage.delete_file("missing.txt"),
        lambda: s3_storage.rename("missing.txt", "other.txt", overwrite=True),
    ):
        with pytest.raises(StorageError) as info:
            call()
        assert info.value.kind == ErrorKind.NOT_FOUND
        assert info.value.path == "missing.txt"


def test_directory_is_not_a_file(s3_storage: S3Storage) -> None:
    s3_storage.write_bytes("dir/file.txt", b"x", overwrite=False)
    for call in (
        lambda: s3_storage.open_read("dir"),
        lambda: s3_storage.delete_file("dir"),
        lambda: s3_storage.rename("dir", "moved", overwrite=True),
    ):
        with pytest.raises(StorageError) as info:
            call()
        assert info.value.kind == ErrorKind.UNSUPPORTED
    assert s3_storage.read_bytes("dir/file.txt") == b"x"


def test_missing_bucket_is_not_found_naming_it(moto_server: MotoServer) -> None:
    storage = S3Storage(
        "no-such-bucket-here",
        endpoint_url=moto_server.endpoint_url,
        force_path_style=True,
        access_key_id=moto_server.access_key_id,
        secret_access_key=moto_server.secret_access_key,
        max_attempts=1,
    )
    with storage:
        for call in (
            lambda: storage.stat("x.txt"),
            lambda: storage.read_bytes("x.txt"),
            lambda: storage.write_bytes("x.txt", b"x", overwrite=True),
            lambda: storage.walk(""),
        ):
            with pytest.raises(StorageError) as info:
                call()
            assert info.value.kind == ErrorKind.NOT_FOUND
            assert "bucket no-such-bucket-here does not exist" in str(info.value)


def test_open_read_streams_in_chunks(s3_storage: S3Storage) -> None:
    data = bytes(range(256)) * 4096  # 1 MiB
    s3_storage.write_bytes("blob.bin", data, overwrite=False)
    with s3_storage.open_read("blob.bin") as stream:
        chunks = list(iter_chunks(stream, 100_000))
    assert b"".join(chunks) == data
    assert [len(c) for c in chunks[:-1]] == [100_000] * (len(chunks) - 1)
    with s3_storage.open_read("blob.bin") as stream:
        buffer = bytearray(10)
        assert stream.readinto(buffer) == 10
        assert bytes(buffer) == data[:10]
    assert stream.closed
    for call in (lambda: stream.read(1), stream.read, lambda: stream.readinto(bytearray(1))):
        with pytest.raises(ValueError):
            call()


def test_read_bytes_limit(s3_storage: S3Storage) -> None:
    s3_storage.write_bytes("state.json", b"x" * 100, overwrite=False)
    assert s3_storage.read_bytes("state.json", max_size=100) == b"x" * 100
    with pytest.raises(StorageError) as info:
        s3_storage.read_bytes("state.json", max_size=99)
    assert info.value.kind == ErrorKind.LIMIT_EXCEEDED


# ---------------------------------------------------------------------------- credentials


def test_wrong_access_key_is_permission(moto_server: MotoServer, s3_storage: S3Storage) -> None:
    s3_storage.write_bytes("x.txt", b"x", overwrite=False)
    wrong = S3Storage(
        s3_storage.bucket,
        endpoint_url=moto_server.endpoint_url,
        force_path_style=True,
        access_key_id="AKIDNOTAREALKEY00000",
        secret_access_key="not-the-secret-value",
        max_attempts=1,
    )
    with wrong:
        for call in (
            lambda: wrong.read_bytes("x.txt"),
            lambda: wrong.write_bytes("y.txt", b"y", overwrite=True),
            lambda: wrong.walk(""),
        ):
            with pytest.raises(StorageError) as info:
                call()
            assert info.value.kind == ErrorKind.PERMISSION
            assert "InvalidAccessKeyId" in str(info.value)
            assert "not-the-secret-value" not in str(info.value)
    assert raw_keys(moto_server, s3_storage.bucket) == ["x.txt"]


def test_wrong_secret_is_permission(moto_server: MotoServer, s3_storage: S3Storage) -> None:
    s3_storage.write_bytes("x.txt", b"x", overwrite=False)
    wrong = S3Storage(
        s3_storage.bucket,
        endpoint_url=moto_server.endpoint_url,
        force_path_style=True,
        access_key_id=moto_server.access_key_id,
        secret_access_key="definitely-wrong-secret",
        max_attempts=1,
    )
    with wrong, pytest.raises(StorageError) as info:
        wrong.read_bytes("x.txt")
    assert info.value.kind == ErrorKind.PERMISSION
    assert "SignatureDoesNotMatch" in str(info.value)
    assert "definitely-wrong-secret" not in str(info.value)


def test_explicit_credential_names_resolve_through_injected_env(
    moto_server: MotoServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    bucket = moto_server.create_bucket()
    # the default chain would fail: explicit names must win over it
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDFROMDEFAULTCHAIN")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "default-chain-secret")
    env = DictEnv({"DIST_S3_KEY": moto_server.access_key_id, "DIST_S3_SECRET": moto_server.secret_access_key})
    cfg = s3_config(
        moto_server,
        bucket,
        prefix="out",
        credentials=S3Credentials(access_key_id_env="DIST_S3_KEY", secret_access_key_env="DIST_S3_SECRET"),
    )
    with S3Storage.from_config(cfg, env) as storage:
        storage.write_bytes("a.txt", b"a", overwrite=False)
        assert storage.read_bytes("a.txt") == b"a"
    assert raw_keys(moto_server, bucket) == ["out/a.txt"]


def test_config_model_credentials_from_secrets_directory(moto_server: MotoServer, tmp_path: Any) -> None:
    """The real config model and resolver: names looked up in the environment, then as files in
    ``secrets.directory`` (whitespace stripped)."""
    from distributor_core.config.secrets import Environment

    bucket = moto_server.create_bucket()
    secrets_dir = tmp_path / "secrets"
    secrets_dir.mkdir()
    (secrets_dir / "DIST_S3_SECRET").write_text(moto_server.secret_access_key + "\n")
    env = Environment({"DIST_S3_KEY": moto_server.access_key_id}, secrets_directory=secrets_dir)
    cfg = S3Backend(
        bucket=bucket,
        prefix="site",
        endpoint=moto_server.endpoint_url,
        force_path_style=True,
        credentials=S3Credentials(access_key_id_env="DIST_S3_KEY", secret_access_key_env="DIST_S3_SECRET"),
    )
    with S3Storage.from_config(cfg, env) as storage:
        storage.write_bytes("index.html", b"<p>ok</p>", overwrite=False)
    assert raw_keys(moto_server, bucket) == ["site/index.html"]


def test_explicit_credential_name_unresolved_fails_naming_it(moto_server: MotoServer) -> None:
    cfg = s3_config(
        moto_server,
        "any-bucket",
        credentials=S3Credentials(access_key_id_env="DIST_S3_KEY", secret_access_key_env="DIST_S3_SECRET"),
    )
    env = DictEnv({"DIST_S3_KEY": moto_server.access_key_id})
    with pytest.raises(SecretError) as info:
        S3Storage.from_config(cfg, env, context="pipelines[0].destinations[0]")
    assert str(info.value) == (
        "pipelines[0].destinations[0]: s3 secret access key environment variable DIST_S3_SECRET is not set"
    )
    assert moto_server.access_key_id not in str(info.value)


def test_omitted_credential_names_use_default_chain(
    moto_server: MotoServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    bucket = moto_server.create_bucket()
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none-config"))
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_DEFAULT_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", moto_server.access_key_id)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", moto_server.secret_access_key)
    empty_env = DictEnv({})
    for credentials in (None, S3Credentials(access_key_id_env="", secret_access_key_env="")):
        with S3Storage.from_config(s3_config(moto_server, bucket, credentials=credentials), empty_env) as storage:
            storage.write_bytes("chain.txt", b"c", overwrite=True)
            assert storage.read_bytes("chain.txt") == b"c"
    # and the chain really is what authenticates: a wrong key in it is refused
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDWRONGCHAINKEY000")
    with S3Storage.from_config(s3_config(moto_server, bucket), empty_env) as storage:
        with pytest.raises(StorageError) as info:
            storage.read_bytes("chain.txt")
        assert info.value.kind == ErrorKind.PERMISSION


def test_from_config_reads_prefix_region_and_defaults(moto_server: MotoServer) -> None:
    bucket = moto_server.create_bucket()
    env = DictEnv({"K": moto_server.access_key_id, "S": moto_server.secret_access_key})
    creds = S3Credentials(access_key_id_env="K", secret_access_key_env="S")
    cfg = S3Backend(bucket=bucket, prefix="p/q", endpoint=moto_server.endpoint_url, force_path_style=True,
                    credentials=creds)  # the region and conditional_writes: the declaration's defaults
    with S3Storage.from_config(cfg, env, dry_run=True) as storage:
        assert storage.prefix == "p/q"
        assert storage.region == "us-east-1"
        assert storage.dry_run is True
        assert storage.client.meta.region_name == "us-east-1"
        assert storage.client.meta.config.s3["addressing_style"] == "path"
        assert storage.endpoint_url == moto_server.endpoint_url
        assert "p/q" in repr(storage) and moto_server.secret_access_key not in repr(storage)
        assert storage.conditional_writes == "precheck"  # a custom endpoint
    with S3Storage.from_config(s3_config(moto_server, bucket, conditional_writes="trusted"), env) as storage:
        assert storage.conditional_writes == "trusted"


def test_injected_client_is_used_and_left_open(moto_server: MotoServer) -> None:
    bucket = moto_server.create_bucket()
    client = moto_server.client()
    storage = S3Storage(bucket, prefix="injected", client=client)
    storage.write_bytes("a.txt", b"a", overwrite=False)
    storage.close()
    # the caller's client still works after the storage was closed
    assert client.get_object(Bucket=bucket, Key="injected/a.txt")["Body"].read() == b"a"
    client.close()


def test_unreachable_endpoint_is_unavailable() -> None:
    storage = S3Storage(
        "bucket",
        endpoint_url="http://127.0.0.1:9",
        force_path_style=True,
        access_key_id="AKIDUNREACHABLE00000",
        secret_access_key="unreachable-secret",
        max_attempts=1,
    )
    with storage, pytest.raises(StorageError) as info:
        storage.stat("x.txt")
    assert info.value.kind == ErrorKind.UNAVAILABLE
    assert "unreachable-secret" not in str(info.value)


# ---------------------------------------------------------------------------- conditional writes


def test_create_only_refuses_existing_key(s3_storage: S3Storage) -> None:
    s3_storage.write_bytes("state.json", b"first", overwrite=False)
    with pytest.raises(StorageError) as info:
        s3_storage.write_bytes("state.json", b"second", overwrite=False)
    assert info.value.kind == ErrorKind.ALREADY_EXISTS
    assert s3_storage.read_bytes("state.json") == b"first"


def test_create_only_loses_a_race_with_if_none_match(moto_server: MotoServer, s3_storage: S3Storage) -> None:
    """Another writer creates the key after the pre-check: ``If-None-Match: *`` makes S3 refuse."""

    def racing_chunks() -> Iterator[bytes]:
        raw_put(moto_server, s3_storage.bucket, "lock.json", b"other writer")
        yield b"mine"

    with pytest.raises(StorageError) as info:
        s3_storage.write_stream("lock.json", racing_chunks(), overwrite=False)
    assert info.value.kind == ErrorKind.ALREADY_EXISTS
    assert s3_storage.read_bytes("lock.json") == b"other writer"


def test_if_revision_matches_and_rejects_stale(s3_storage: S3Storage) -> None:
    first = s3_storage.write_bytes("state.json", b"v1", overwrite=False)
    second = s3_storage.write_bytes("state.json", b"v2", overwrite=True, if_revision=first.revision)
    assert second.revision == s3_storage.stat("state.json").revision
    assert second.revision != first.revision
    with pytest.raises(StorageError) as info:
        s3_storage.write_bytes("state.json", b"v3", overwrite=True, if_revision=first.revision)
    assert info.value.kind == ErrorKind.CONFLICT
    assert s3_storage.read_bytes("state.json") == b"v2"
    with pytest.raises(StorageError) as info:
        s3_storage.write_bytes("gone.json", b"v1", overwrite=True, if_revision=first.revision)
    assert info.value.kind == ErrorKind.CONFLICT
    assert not s3_storage.exists("gone.json")


def test_if_match_loses_a_race(moto_server: MotoServer, s3_storage: S3Storage) -> None:
    """The state changes after the pre-check: ``If-Match`` makes S3 answer 412 → conflict."""
    first = s3_storage.write_bytes("state.json", b"v1", overwrite=False)

    def racing_chunks() -> Iterator[bytes]:
        raw_put(moto_server, s3_storage.bucket, "state.json", b"other writer")
        yield b"mine"

    with pytest.raises(StorageError) as info:
        s3_storage.write_stream("state.json", racing_chunks(), overwrite=True, if_revision=first.revision)
    assert info.value.kind == ErrorKind.CONFLICT
    assert s3_storage.read_bytes("state.json") == b"other writer"


def test_empty_if_revision_means_the_object_must_still_be_absent(
    moto_server: MotoServer, s3_storage: S3Storage
) -> None:
    """``if_revision=""`` is "there was no state when I inspected": create-only, and a 412 from
    ``If-None-Match: *`` is a ``conflict`` (resolutions A3), as the local backend reports it."""
    entry = s3_storage.write_bytes("b/.distributor.json", b"v1", overwrite=True, if_revision="")
    assert entry.revision == s3_storage.stat("b/.distributor.json").revision
    with pytest.raises(StorageError) as info:
        s3_storage.write_bytes("b/.distributor.json", b"v2", overwrite=True, if_revision="")
    assert info.value.kind == ErrorKind.CONFLICT

    def racing_chunks() -> Iterator[bytes]:
        raw_put(moto_server, s3_storage.bucket, "c/.distributor.json", b"other writer")
        yield b"mine"

    with pytest.raises(StorageError) as info:
        s3_storage.write_stream("c/.distributor.json", racing_chunks(), overwrite=True, if_revision="")
    assert info.value.kind == ErrorKind.CONFLICT
    assert s3_storage.read_bytes("c/.distributor.json") == b"other writer"


def test_small_write_integrity_failure_writes_nothing(s3_storage: S3Storage) -> None:
    data = b"payload"
    good = "sha256:" + hashlib.sha256(data).hexdigest()
    with pytest.raises(StorageError) as info:
        s3_storage.write_stream("a.txt", [data], overwrite=False, expected_size=len(data) + 1)
    assert info.value.kind == ErrorKind.INTEGRITY
    with pytest.raises(StorageError) as info:
        s3_storage.write_stream("a.txt", [data], overwrite=False, expected_sha256="sha256:" + "0" * 64)
    assert info.value.kind == ErrorKind.INTEGRITY
    assert not s3_storage.exists("a.txt")
    entry = s3_storage.write_stream("a.txt", [data], overwrite=False, expected_size=len(data), expected_sha256=good)
    assert entry.size == len(data)


def test_empty_object(s3_storage: S3Storage) -> None:
    entry = s3_storage.write_stream("empty.txt", [], overwrite=False, expected_size=0)
    assert entry.size == 0
    assert s3_storage.read_bytes("empty.txt") == b""
    assert s3_storage.stat("empty.txt").size == 0


# ---------------------------------------------------------------------------- rename


def test_rename_moves_and_keeps_content_type(moto_server: MotoServer, s3_storage: S3Storage) -> None:
    s3_storage.write_bytes(
        "dir/.distributor-tmp-0123456789abcdef", b"<h1>x</h1>", overwrite=False, content_type="text/html; charset=utf-8"
    )
    s3_storage.rename("dir/.distributor-tmp-0123456789abcdef", "dir/index.html", overwrite=False)
    assert raw_keys(moto_server, s3_storage.bucket) == ["dir/index.html"]
    response = raw_get(moto_server, s3_storage.bucket, "dir/index.html")
    assert response["Data"] == b"<h1>x</h1>"
    assert response["ContentType"] == "text/html; charset=utf-8"


def test_rename_without_overwrite_keeps_both(s3_storage: S3Storage) -> None:
    s3_storage.write_bytes("a.txt", b"a", overwrite=False)
    s3_storage.write_bytes("b.txt", b"b", overwrite=False)
    with pytest.raises(StorageError) as info:
        s3_storage.rename("a.txt", "b.txt", overwrite=False)
    assert info.value.kind == ErrorKind.ALREADY_EXISTS
    assert (s3_storage.read_bytes("a.txt"), s3_storage.read_bytes("b.txt")) == (b"a", b"b")
    s3_storage.rename("a.txt", "b.txt", overwrite=True)
    assert s3_storage.read_bytes("b.txt") == b"a"
    assert not s3_storage.exists("a.txt")
    # onto itself: a no-op when overwriting is allowed, already_exists otherwise (as locally)
    s3_storage.rename("b.txt", "b.txt", overwrite=True)
    with pytest.raises(StorageError) as info:
        s3_storage.rename("b.txt", "b.txt", overwrite=False)
    assert info.value.kind == ErrorKind.ALREADY_EXISTS
    assert s3_storage.read_bytes("b.txt") == b"a"


def test_rename_large_object_uses_multipart_copy(moto_server: MotoServer) -> None:
    storage = make_s3_storage(
        moto_server,
        part_size=5 * 1024 * 1024,
        multipart_copy_threshold=5 * 1024 * 1024,
        copy_part_size=5 * 1024 * 1024,
    )
    data = hashlib.sha256(b"seed").digest() * (12 * 1024 * 1024 // 32)  # 12 MiB
    with storage:
        storage.write_bytes("big.md", data, overwrite=False)
        storage.rename("big.md", "moved/big.md", overwrite=False)
        assert raw_keys(moto_server, storage.bucket) == ["moved/big.md"]
        response = raw_get(moto_server, storage.bucket, "moved/big.md")
        assert hashlib.sha256(response["Data"]).digest() == hashlib.sha256(data).digest()
        assert response["ContentType"] == "text/markdown; charset=utf-8"
        assert response["ETag"].endswith('-3"')  # three copied parts
        client = moto_server.client()
        assert client.list_multipart_uploads(Bucket=storage.bucket).get("Uploads", []) == []
        client.close()


# ---------------------------------------------------------------------------- listings


def test_listing_synthesizes_directories(moto_server: MotoServer, s3_storage: S3Storage) -> None:
    for path in ("b/x.txt", "b/c/d/y.txt", "a.txt", "b/.distributor.json"):
        s3_storage.write_bytes(path, b"1", overwrite=False)
    assert [(e.path, e.type) for e in s3_storage.list("")] == [("a.txt", "file"), ("b", "directory")]
    assert [(e.path, e.type) for e in s3_storage.list("b")] == [
        ("b/.distributor.json", "file"),
        ("b/c", "directory"),
        ("b/x.txt", "file"),
    ]
    assert [(e.path, e.type) for e in s3_storage.walk("b")] == [
        ("b/c", "directory"),
        ("b/c/d", "directory"),
        ("b/c/d/y.txt", "file"),
        ("b/x.txt", "file"),
    ]
    assert [e.path for e in s3_storage.walk("", include_dirs=False)] == ["a.txt", "b/c/d/y.txt", "b/x.txt"]
    assert s3_storage.walk("missing") == []
    assert s3_storage.walk("a.txt") == []
    with pytest.raises(StorageError) as info:
        s3_storage.walk("", limit=3)
    assert info.value.kind == ErrorKind.LIMIT_EXCEEDED


def test_has_any_ignores_reserved_names(s3_storage: S3Storage) -> None:
    assert not s3_storage.has_any("")
    s3_storage.write_bytes("bundle/.distributor.json", b"{}", overwrite=False)
    s3_storage.write_bytes("bundle/.distributor.lock", b"{}", overwrite=False)
    assert not s3_storage.has_any("bundle")
    s3_storage.write_bytes("bundle/out/report.html", b"x", overwrite=False)
    assert s3_storage.has_any("bundle")
    assert not s3_storage.has_any("bundle/other")


def test_keys_that_are_not_logical_paths_are_skipped(moto_server: MotoServer, s3_storage: S3Storage) -> None:
    for key in ("ok/file.txt", "folder/", "bad//double.txt", "dot/./x.txt", "back\\slash.txt"):
        raw_put(moto_server, s3_storage.bucket, key, b"" if key.endswith("/") else b"x")
    # invalid keys are never files, but their valid ancestors (and a "folder/" marker's folder) exist
    assert [(e.path, e.type) for e in s3_storage.walk("")] == [
        ("bad", "directory"),
        ("dot", "directory"),
        ("folder", "directory"),
        ("ok", "directory"),
        ("ok/file.txt", "file"),
    ]
    assert s3_storage.stat("folder").type == "directory"
    assert [e.path for e in s3_storage.list("")] == ["bad", "dot", "folder", "ok"]
    assert s3_storage.stat("bad").type == "directory"
    assert s3_storage.list("bad") == []
    assert not s3_storage.has_any("bad")
    assert s3_storage.delete_prefix("") == ["ok/file.txt"]
    assert raw_keys(moto_server, s3_storage.bucket) == ["back\\slash.txt", "bad//double.txt", "dot/./x.txt", "folder/"]


# ---------------------------------------------------------------------------- dry run


def test_dry_run_refuses_every_write(moto_server: MotoServer) -> None:
    bucket = moto_server.create_bucket()
    raw_put(moto_server, bucket, "keep.txt", b"k")
    storage = make_s3_storage(moto_server, bucket=bucket, dry_run=True)
    with storage:
        assert storage.read_bytes("keep.txt") == b"k"
        for call in (
            lambda: storage.write_bytes("new.txt", b"n", overwrite=True),
            lambda: storage.rename("keep.txt", "moved.txt", overwrite=True),
            lambda: storage.delete_file("keep.txt"),
            lambda: storage.delete_paths(["keep.txt"], op="delete managed outputs"),
            lambda: storage.delete_prefix(""),
        ):
            with pytest.raises(StorageError) as info:
                call()
            assert info.value.kind == ErrorKind.UNSUPPORTED
            assert "dry run" in str(info.value)
    assert raw_keys(moto_server, bucket) == ["keep.txt"]


# ---------------------------------------------------------------------------- IAM


def documented_policy(bucket: str, prefix: str) -> dict[str, Any]:
    """The least-privilege destination policy of docs/integrations/s3.md."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "ListThePrefix",
                "Effect": "Allow",
                "Action": "s3:ListBucket",
                "Resource": f"arn:aws:s3:::{bucket}",
                "Condition": {"StringLike": {"s3:prefix": [f"{prefix}/*"]}},
            },
            {
                "Sid": "ObjectsUnderThePrefix",
                "Effect": "Allow",
                "Action": ["s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload"],
                "Resource": f"arn:aws:s3:::{bucket}/{prefix}/*",
            },
        ],
    }


def test_documented_least_privilege_policy_is_enough(moto_server: MotoServer) -> None:
    """Every operation the backend uses works with the documented policy; writes outside the
    prefix are refused with ``permission``."""
    bucket = moto_server.create_bucket()
    policy = documented_policy(bucket, "site")
    # moto authorizes DeleteObjects against the bucket ARN; AWS checks s3:DeleteObject per key
    policy["Statement"].append({"Effect": "Allow", "Action": "s3:DeleteObject", "Resource": f"arn:aws:s3:::{bucket}"})
    key, secret = moto_server.create_user(policy)
    storage = make_s3_storage(
        moto_server,
        bucket=bucket,
        prefix="site",
        access_key_id=key,
        secret_access_key=secret,
        part_size=5 * 1024 * 1024,
    )
    with storage:
        storage.write_bytes("b/.distributor.lock", b"{}", overwrite=False)
        storage.write_bytes("b/index.html", b"<p>1</p>", overwrite=False)
        storage.write_stream("b/big.bin", [b"x" * (11 * 1024 * 1024)], overwrite=False)
        with pytest.raises(StorageError):
            storage.write_stream("b/bad.bin", [b"x" * (11 * 1024 * 1024)], overwrite=False, expected_size=1)
        state = storage.write_bytes("b/.distributor.json", b"{}", overwrite=True, if_revision="")
        storage.write_bytes("b/.distributor.json", b"{1}", overwrite=True, if_revision=state.revision)
        storage.rename("b/index.html", "b/.distributor-bak-0123456789abcdef", overwrite=False)
        assert [e.path for e in storage.walk("b", include_reserved=True, include_dirs=False)] == [
            "b/.distributor-bak-0123456789abcdef",
            "b/.distributor.json",
            "b/.distributor.lock",
            "b/big.bin",
        ]
        assert storage.stat("b").is_dir and storage.read_bytes("b/.distributor.json") == b"{1}"
        storage.delete_file("b/.distributor.lock")
        assert storage.delete_prefix("b") == ["b/.distributor-bak-0123456789abcdef", "b/.distributor.json", "b/big.bin"]
    outside = make_s3_storage(moto_server, bucket=bucket, prefix="other", access_key_id=key, secret_access_key=secret)
    with outside, pytest.raises(StorageError) as info:
        outside.write_bytes("a.txt", b"x", overwrite=True)
    assert info.value.kind == ErrorKind.PERMISSION
    assert raw_keys(moto_server, bucket) == []

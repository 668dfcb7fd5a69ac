"""Pure parts of the S3 backend: content types, error mapping, part buffers, credentials."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from botocore.exceptions import (
    ClientError,
    ConnectTimeoutError,
    EndpointConnectionError,
    IncompleteReadError,
    NoCredentialsError,
)

from distributor_core.config.errors import SecretError
from distributor_core.storage.capabilities import Feature
from distributor_core.storage.errors import ErrorKind, StorageError
from distributor_core.storage.s3 import S3Storage, resolve_credentials
from distributor_core.storage.s3_content import content_type_for
from distributor_core.storage.s3_errors import map_error, redact
from distributor_core.storage.s3_upload import MAX_PARTS, MIB, BufferPool, PartBuffer, copy_ranges, part_size_for


class DictEnv:
    def __init__(self, values: dict[str, str]) -> None:
        self.values = values
        self.asked: list[str] = []

    def lookup(self, name: str) -> str | None:
        self.asked.append(name)
        return self.values.get(name)


# ---------------------------------------------------------------------------- content types


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("index.html", "text/html; charset=utf-8"),
        ("a/b/page.htm", "text/html; charset=utf-8"),
        ("README.md", "text/markdown; charset=utf-8"),
        ("notes.txt", "text/plain; charset=utf-8"),
        ("data.json", "application/json"),
        (".distributor.json", "application/json"),
        ("site.css", "text/css; charset=utf-8"),
        ("app.js", "text/javascript; charset=utf-8"),
        ("logo.svg", "image/svg+xml"),
        ("logo.png", "image/png"),
        ("REPORT.HTML", "text/html; charset=utf-8"),
        ("photo.jpg", "image/jpeg"),
        ("archive.tar.gz", "application/gzip"),
        ("bundle.tar", "application/x-tar"),
        ("table.csv", "text/csv"),
        ("no-extension", "application/octet-stream"),
        ("weird.zzqq", "application/octet-stream"),
        (".hidden", "application/octet-stream"),
    ],
)
def test_content_type_for(path: str, expected: str) -> None:
    assert content_type_for(path) == expected


# ---------------------------------------------------------------------------- error mapping


def _client_error(code: str, status: int, message: str = "msg") -> ClientError:
    return ClientError(
        {"Error": {"Code": code, "Message": message}, "ResponseMetadata": {"HTTPStatusCode": status}},
        "PutObject",
    )


@pytest.mark.parametrize(
    ("code", "status", "kind"),
    [
        ("NoSuchKey", 404, ErrorKind.NOT_FOUND),
        ("404", 404, ErrorKind.NOT_FOUND),
        ("NotFound", 404, ErrorKind.NOT_FOUND),
        ("AccessDenied", 403, ErrorKind.PERMISSION),
        ("403", 403, ErrorKind.PERMISSION),
        ("InvalidAccessKeyId", 403, ErrorKind.PERMISSION),
        ("SignatureDoesNotMatch", 403, ErrorKind.PERMISSION),
        ("ExpiredToken", 400, ErrorKind.PERMISSION),
        ("PreconditionFailed", 412, ErrorKind.CONFLICT),
        ("ConditionalRequestConflict", 409, ErrorKind.CONFLICT),
        ("SlowDown", 503, ErrorKind.UNAVAILABLE),
        ("ServiceUnavailable", 503, ErrorKind.UNAVAILABLE),
        ("InternalError", 500, ErrorKind.UNAVAILABLE),
        ("Whatever", 502, ErrorKind.UNAVAILABLE),
        ("TooManyRequests", 429, ErrorKind.UNAVAILABLE),
        ("BadDigest", 400, ErrorKind.INTEGRITY),
        ("EntityTooLarge", 400, ErrorKind.LIMIT_EXCEEDED),
        ("InvalidArgument", 400, ErrorKind.OTHER),
    ],
)
def test_client_error_kinds(code: str, status: int, kind: ErrorKind) -> None:
    mapped = map_error(_client_error(code, status), bucket="b")
    assert mapped.kind == kind
    assert mapped.precondition == (kind == ErrorKind.CONFLICT)


def test_no_such_bucket_names_the_bucket() -> None:
    mapped = map_error(_client_error("NoSuchBucket", 404, "The specified bucket does not exist"), bucket="reports")
    assert mapped.kind == ErrorKind.NOT_FOUND
    assert mapped.cause == "bucket reports does not exist"


def test_client_error_cause_has_code_and_message() -> None:
    mapped = map_error(_client_error("AccessDenied", 403, "Access Denied"), bucket="b")
    assert mapped.cause == "AccessDenied: Access Denied"


@pytest.mark.parametrize(
    "exc",
    [
        EndpointConnectionError(endpoint_url="http://127.0.0.1:1/b/k"),
        ConnectTimeoutError(endpoint_url="http://127.0.0.1:1/b/k"),
        IncompleteReadError(actual_bytes=1, expected_bytes=2),
        ConnectionResetError("reset"),
    ],
)
def test_transport_errors_are_unavailable(exc: BaseException) -> None:
    assert map_error(exc, bucket="b").kind == ErrorKind.UNAVAILABLE


def test_missing_credentials_are_permission() -> None:
    mapped = map_error(NoCredentialsError(), bucket="b")
    assert mapped.kind == ErrorKind.PERMISSION
    assert "credentials" in mapped.cause


def test_redact_removes_url_userinfo_and_bounds_length() -> None:
    text = redact('Could not connect to the endpoint URL: "https://AKIAXX:SeCrEt@minio.local:9000/b"')
    assert "SeCrEt" not in text and "AKIAXX" not in text
    assert "https://***@minio.local:9000/b" in text
    assert len(redact("x" * 1000)) == 300


def test_endpoint_error_with_userinfo_is_redacted() -> None:
    mapped = map_error(EndpointConnectionError(endpoint_url="http://user:hunter2@host:1/b"), bucket="b")
    assert mapped.kind == ErrorKind.UNAVAILABLE
    assert "hunter2" not in mapped.cause


# ---------------------------------------------------------------------------- part buffers


def test_part_buffer_cuts_exact_parts_from_odd_chunks() -> None:
    pool = BufferPool(10)
    pool.enter()
    buffer = PartBuffer(10, pool)
    data = bytes(range(256)) * 2
    parts: list[bytes] = []
    for start in range(0, len(data), 7):
        for part in buffer.feed(data[start : start + 7]):
            assert len(part) == 10
            parts.append(bytes(part))
            buffer.release(part)
    rest = buffer.take_rest()
    assert b"".join(parts) + bytes(rest) == data
    assert len(rest) == len(data) % 10
    # released buffers are reused: only the first part needed a new one
    assert pool.allocated == 1


def test_buffer_pool_allocates_only_when_none_is_free_and_empties_when_idle() -> None:
    pool = BufferPool(4)
    pool.enter()
    first = PartBuffer(4, pool)
    held = list(first.feed(b"abcdefghijkl"))
    assert [bytes(p) for p in held] == [b"abcd", b"efgh", b"ijkl"]
    assert pool.allocated == 3
    for part in held:
        first.release(part)
    # a second write on the same storage reuses the first write's buffers
    pool.enter()
    second = PartBuffer(4, pool)
    assert [bytes(p) for p in second.feed(b"mnopqrst")] == [b"mnop", b"qrst"]
    assert pool.allocated == 3
    pool.exit()
    assert pool.free == 1
    pool.exit()
    assert pool.free == 0  # the last write leaving drops the recycled buffers
    first.release(bytearray(4))
    assert pool.free == 0  # nothing is kept while no write uses the pool
    with pytest.raises(ValueError):
        PartBuffer(8, pool)


def test_part_buffer_small_payload_stays_small() -> None:
    buffer = PartBuffer(8 * MIB)
    assert list(buffer.feed(b"hello")) == []
    rest = buffer.take_rest()
    assert rest == bytearray(b"hello")
    assert len(buffer.take_rest()) == 0


def test_part_size_for_fits_ten_thousand_parts() -> None:
    assert part_size_for(None, 8 * MIB) == 8 * MIB
    assert part_size_for(80 * MIB, 8 * MIB) == 8 * MIB
    big = 200 * 1024 * MIB  # 200 GiB
    size = part_size_for(big, 8 * MIB)
    assert size % MIB == 0
    assert size * MAX_PARTS >= big
    assert (size - MIB) * MAX_PARTS < big


def test_copy_ranges_cover_every_byte_once() -> None:
    assert list(copy_ranges(25, 10)) == [(1, 0, 9), (2, 10, 19), (3, 20, 24)]
    assert list(copy_ranges(20, 10)) == [(1, 0, 9), (2, 10, 19)]


# ---------------------------------------------------------------------------- credentials


def test_resolve_credentials_none_uses_default_chain() -> None:
    env = DictEnv({})
    assert resolve_credentials(None, env) is None
    assert resolve_credentials(SimpleNamespace(access_key_id_env=None, secret_access_key_env=None), env) is None
    assert env.asked == []


def test_resolve_credentials_reads_both_names() -> None:
    env = DictEnv({"KEY_NAME": "AKIDVALUE", "SECRET_NAME": "s3cr3t"})
    creds = SimpleNamespace(access_key_id_env="KEY_NAME", secret_access_key_env="SECRET_NAME")
    assert resolve_credentials(creds, env) == ("AKIDVALUE", "s3cr3t")
    assert env.asked == ["KEY_NAME", "SECRET_NAME"]


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"SECRET_NAME": "s3cr3t"}, "s3 access key id environment variable KEY_NAME is not set"),
        ({"KEY_NAME": "AKIDVALUE"}, "s3 secret access key environment variable SECRET_NAME is not set"),
        ({"KEY_NAME": "", "SECRET_NAME": "s3cr3t"}, "s3 access key id environment variable KEY_NAME is empty"),
        (
            {"KEY_NAME": "AKIDVALUE", "SECRET_NAME": ""},
            "s3 secret access key environment variable SECRET_NAME is empty",
        ),
    ],
)
def test_resolve_credentials_unresolved_name_is_named_without_values(values: dict[str, str], message: str) -> None:
    creds = SimpleNamespace(access_key_id_env="KEY_NAME", secret_access_key_env="SECRET_NAME")
    with pytest.raises(SecretError) as info:
        resolve_credentials(creds, DictEnv(values), context="pipelines[0].destinations[1]")
    text = str(info.value)
    assert text == f"pipelines[0].destinations[1]: {message}"
    for value in values.values():
        if value:
            assert value not in text


def test_resolve_credentials_requires_both_names() -> None:
    with pytest.raises(SecretError, match="must be set together"):
        resolve_credentials(SimpleNamespace(access_key_id_env="K", secret_access_key_env=None), DictEnv({"K": "v"}))


def test_from_config_refuses_unresolved_credentials_before_building_a_client() -> None:
    cfg = SimpleNamespace(
        bucket="b",
        prefix="",
        region="us-east-1",
        endpoint=None,
        force_path_style=False,
        credentials=SimpleNamespace(access_key_id_env="DIST_KEY", secret_access_key_env="DIST_SECRET"),
    )
    with pytest.raises(SecretError, match=r"^s3 access key id environment variable DIST_KEY is not set$"):
        S3Storage.from_config(cfg, DictEnv({}))


def test_from_config_accepts_the_config_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """The real pydantic model and secret resolver (environment, then secrets directory)."""
    from distributor_core.config.models import S3Backend, S3Credentials
    from distributor_core.config.secrets import Environment

    cfg = S3Backend(
        bucket="b",
        prefix="out/site",
        endpoint="http://127.0.0.1:9",
        force_path_style=True,
        credentials=S3Credentials(access_key_id_env="DIST_KEY", secret_access_key_env="DIST_SECRET"),
    )
    env = Environment({"DIST_KEY": "AKIDFROMENV", "DIST_SECRET": "secret-from-env"})
    with S3Storage.from_config(cfg, env) as storage:
        assert (storage.bucket, storage.prefix, storage.region) == ("b", "out/site", "us-east-1")
        assert storage.client.meta.endpoint_url == "http://127.0.0.1:9"
        assert storage.client.meta.config.s3["addressing_style"] == "path"
        assert "secret-from-env" not in repr(storage)
    with pytest.raises(SecretError, match="DIST_SECRET is empty"):
        S3Storage.from_config(cfg, Environment({"DIST_KEY": "AKIDFROMENV", "DIST_SECRET": ""}))


# ---------------------------------------------------------------------------- constructor


def test_constructor_rejects_bad_prefix_and_tuning() -> None:
    client = object()
    with pytest.raises(StorageError) as info:
        S3Storage("b", prefix="/abs/", client=client)
    assert info.value.kind == ErrorKind.INVALID_PATH
    with pytest.raises(ValueError, match="part_size"):
        S3Storage("b", part_size=MIB, client=client)
    with pytest.raises(ValueError, match="max_concurrency"):
        S3Storage("b", max_concurrency=0, client=client)
    with pytest.raises(ValueError, match="bucket"):
        S3Storage("", client=client)


def test_keys_and_root_display() -> None:
    plain = S3Storage("b", client=object())
    assert plain.key("a/b.txt") == "a/b.txt"
    assert plain.root_display == "."
    nested = S3Storage("b", prefix="team/reports", client=object())
    assert nested.key("a/b.txt") == "team/reports/a/b.txt"
    assert nested.key("") == "team/reports"
    assert nested.root_display == "team/reports"
    assert nested.backend == "s3"
    assert Feature.ATOMIC_RENAME not in nested.capabilities
    assert nested.capabilities.parallel_writes == 16  # small objects are latency-bound
    assert S3Storage("b", client=object(), max_parallel_writes=7).capabilities.parallel_writes == 7

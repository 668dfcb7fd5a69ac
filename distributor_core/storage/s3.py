"""S3 backend on boto3 (interfaces §1.6, §5.4; core-semantics §8; resolutions A3, A4).

Object key = ``<prefix>/<logical path>`` (just the logical path when the prefix is empty; never
a leading ``/``). Decisions:

* **Directories are implicit.** A logical path is a directory when at least one object exists
  below ``<key>/``; ``stat`` reports it (after a ``HeadObject`` miss), listings synthesize
  directory entries (from ``CommonPrefixes`` for non-recursive listings, from key ancestors for
  recursive ones), and ``_remove_dir_if_empty`` stays the no-op of the base class. The backend
  root (``stat("")``) is always a directory once the bucket is reachable. Keys that are not valid
  logical paths below the prefix (``a//b``, ``x/./y``, ``a\\b``, console "folder" markers ending
  in ``/``) are never listed as files and never deleted, but like any key they make their valid
  ancestor directories exist (so recursive and non-recursive listings and ``stat`` agree).
  A key and a "directory" of the same name can coexist in S3; this backend does not prevent it.
* **Writes stream.** Payloads smaller than one part go out as a single ``PutObject``; larger ones
  as a multipart upload whose parts are cut from the chunk stream and uploaded on a bounded pool.
  Part buffers are recycled storage-wide, so part memory is at most
  ``(max_concurrency + concurrent writes) * part_size`` whatever the file sizes. Size and sha256 are
  verified before the single ``PutObject`` is sent, or before ``CompleteMultipartUpload``; every
  failure aborts the multipart upload. Each request carries ``Content-MD5``.
* **Conditional writes.** ``overwrite=False`` sends ``If-None-Match: *`` (412 → ``already_exists``);
  ``if_revision`` sends ``If-Match: <ETag>`` (412, or 404 because the object is gone → ``conflict``),
  and ``if_revision=""`` ("there was no object when I looked") sends ``If-None-Match: *`` with a
  412 meaning ``conflict``: the state write of resolutions A3.
  ``conditional_writes`` says whether the store is trusted to enforce those headers. ``precheck``
  sends a ``HeadObject`` first: it fails early, before bytes are uploaded, and is the only
  protection on stores that ignore conditional headers. ``trusted`` (the default for AWS S3, i.e.
  without ``endpoint_url``: S3 enforces both headers on ``PutObject`` and
  ``CompleteMultipartUpload``) sends no ``HeadObject`` and maps the store's 412 as above, so a
  small conditional write costs one request instead of two; an ``If-Match`` write that must also
  not overwrite (never issued by the executor) is still pre-checked, since no header says both.
* **Rename** is a server-side copy (``CopyObject`` with ``x-amz-copy-source-if-match`` on the
  ETag read by the pre-check; a multipart ``UploadPartCopy`` above ``multipart_copy_threshold``)
  followed by ``DeleteObject`` of the source. It is not atomic: a failure between the two
  leaves both objects, so ``Feature.ATOMIC_RENAME`` is not declared (the executor writes outputs
  straight to their final names instead), nor ``IN_PLACE_WRITES`` (every write is already
  invisible until complete).
* **Batched deletes** (``Feature.BATCHED_DELETES``). ``delete_paths`` and ``delete_prefix``
  remove objects with ``DeleteObjects`` in batches of 1000 (``delete_paths`` first stats its
  targets concurrently; ``delete_prefix`` lists once). They keep the base semantics (root
  refused, directory → ``unsupported``, missing skipped or ``not_found``) and raise for the first
  failure in planned order; the raised error carries ``deleted``: the deletions S3 confirmed, in
  planned order (a failed batch may have removed keys planned after the failing one).
* **Parallel writes.** ``max_parallel_writes`` (default 16) is declared as
  ``capabilities.parallel_writes``: how many outputs the executor writes at once, since a small
  object costs one round trip of waiting and next to no memory or CPU. Only small writes
  (an ``expected_size`` below ``SMALL_WRITE``, 256 KiB) use all of them; larger ones also take one
  of ``max_parallel_large_writes`` (default 4) slots for their whole duration, and multipart
  parts of all writes share one bound of ``max_concurrency`` in flight, so part memory stays
  below ``(max_concurrency + max_parallel_large_writes) * part_size`` plus the small payloads.
* **Stored checksums** (``Feature.STORED_SHA256``). ``sha256`` reads an object's
  ``ChecksumSHA256`` (``HeadObject`` with ``ChecksumMode=ENABLED``) and answers with it when it
  is the sha256 of the whole object (``FULL_OBJECT``, or a single-part object: S3 verified it
  against the bytes on upload), so an audit need not download it; other objects are streamed.
  This backend does not ask S3 to store one on its own uploads (several S3-compatible stores
  reject checksum headers, see :func:`build_client`).
* **Dry runs** (``dry_run=True``) refuse every mutating call with ``unsupported``, so a planning
  bug can never write.
"""

from __future__ import annotations

import base64
import binascii
import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any, BinaryIO, Protocol, cast

from distributor_core import paths as lp
from distributor_core.config.models import S3Backend, default_of
from distributor_core.storage.base import (
    CHUNK_SIZE,
    BytesCallback,
    ContentDigest,
    Entry,
    HashingVerifier,
    ReadStream,
    Storage,
    WriteRequest,
)
from distributor_core.storage.capabilities import Capabilities, Feature
from distributor_core.storage.errors import ErrorKind, StorageError
from distributor_core.storage.s3_content import content_type_for
from distributor_core.storage.s3_errors import map_error
from distributor_core.storage.s3_upload import (
    MAX_PART_SIZE,
    MIN_PART_SIZE,
    BufferPool,
    PartBuffer,
    PartPool,
    content_md5,
    copy_ranges,
    part_size_for,
)

#: a boto3 S3 client (typed loosely: boto3 ships no type stubs)
S3Client = Any

log = logging.getLogger(__name__)

#: an ``s3`` backend's declared ``region`` default
DEFAULT_REGION: str = default_of(S3Backend, "region")
DEFAULT_PART_SIZE = 8 * 1024 * 1024
DEFAULT_MAX_CONCURRENCY = 4
#: outputs the executor may write at once (``max_parallel_writes``): object stores are
#: latency-bound, so small files publish several times faster in parallel
DEFAULT_MAX_PARALLEL_WRITES = 16
#: writes of at least SMALL_WRITE bytes (or of unknown size) at once, within max_parallel_writes
DEFAULT_MAX_PARALLEL_LARGE_WRITES = 4
#: below this expected size a write holds at most this much memory and needs no large-write slot
SMALL_WRITE = 256 * 1024
#: ``conditional_writes`` values: rely on If-None-Match/If-Match alone, or HeadObject first
CONDITIONAL_WRITES_MODES = ("trusted", "precheck")
DEFAULT_MULTIPART_COPY_THRESHOLD = 512 * 1024 * 1024
DEFAULT_COPY_PART_SIZE = 256 * 1024 * 1024
#: DeleteObjects accepts at most 1000 keys per request.
DELETE_BATCH = 1000
#: HeadObject requests run concurrently when a batched delete checks its targets.
STAT_CONCURRENCY = 8


class SecretLookup(Protocol):
    """The secret resolver of interfaces §1.4 (``Environment.lookup``)."""

    def lookup(self, name: str) -> str | None: ...


def resolve_credentials(
    credentials: object | None, env: SecretLookup, *, context: str | None = None
) -> tuple[str, str] | None:
    """Resolve ``credentials.access_key_id_env`` / ``secret_access_key_env`` through ``env``.

    ``None`` when no names are configured: boto3's default credential chain is then used
    unchanged. Otherwise both names must resolve to non-empty values; resolution is the config
    package's (:func:`distributor_core.config.secrets.resolve_s3_credentials`), so a failure is a
    ``SecretError`` with its message, e.g. ``s3 access key id environment variable DIST_KEY is
    not set`` (prefixed with ``context:`` when given), naming the variable and never a value.
    """
    if credentials is None:
        return None
    names = (getattr(credentials, "access_key_id_env", None), getattr(credentials, "secret_access_key_env", None))
    if not any(names):
        return None
    from distributor_core.config.errors import SecretError
    from distributor_core.config.secrets import resolve_s3_credentials

    if not all(names):
        prefix = f"{context}: " if context else ""
        raise SecretError(f"{prefix}s3 credentials.access_key_id_env and secret_access_key_env must be set together")
    pair = resolve_s3_credentials(cast(Any, SimpleNamespace(credentials=credentials)), cast(Any, env), context=context)
    return None if pair is None else (pair.access_key_id, pair.secret_access_key)


def build_client(
    *,
    region: str = DEFAULT_REGION,
    endpoint_url: str | None = None,
    force_path_style: bool = False,
    access_key_id: str | None = None,
    secret_access_key: str | None = None,
    max_pool_connections: int = 10,
    max_attempts: int = 5,
    connect_timeout: float = 10.0,
    read_timeout: float = 60.0,
) -> S3Client:
    """A boto3 S3 client for AWS or an S3-compatible store.

    Checksums are computed and validated only where the API requires them
    (``when_required``): boto3 ≥ 1.36 otherwise adds CRC checksums that several S3-compatible
    stores reject; where a checksum is required (DeleteObjects) ``Content-MD5`` replaces CRC32.
    Integrity comes from ``Content-MD5`` on every upload and from the sha256 the backend verifies
    itself.
    """
    import boto3
    from botocore.config import Config

    if (access_key_id is None) != (secret_access_key is None):
        raise ValueError("access_key_id and secret_access_key must be given together")
    config = Config(
        region_name=region or DEFAULT_REGION,
        signature_version="s3v4",
        s3={"addressing_style": "path" if force_path_style else "auto"},
        retries={"mode": "standard", "max_attempts": max_attempts},
        connect_timeout=connect_timeout,
        read_timeout=read_timeout,
        max_pool_connections=max_pool_connections,
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
        user_agent_extra="distributor",
    )
    session = boto3.session.Session()
    client = session.client(
        "s3",
        endpoint_url=endpoint_url or None,
        aws_access_key_id=access_key_id,
        aws_secret_access_key=secret_access_key,
        config=config,
    )
    client.meta.events.register("before-sign.s3.DeleteObjects", _md5_instead_of_crc32)
    return client


def _md5_instead_of_crc32(request: Any, **_: Any) -> None:
    """DeleteObjects requires a body checksum, and boto3 ≥ 1.36 sends CRC32 even with
    ``when_required``. ``Content-MD5`` is what every S3 implementation accepts (AWS too), so send
    that instead. Runs before signing, so the signature covers the final headers."""
    headers = request.headers
    names = [name for name in headers if name.lower().startswith(("x-amz-checksum-", "x-amz-sdk-checksum-"))]
    if not names or "Content-MD5" in headers:
        return
    body = request.body
    if isinstance(body, str):
        body = body.encode("utf-8")
    if not isinstance(body, bytes | bytearray):
        return  # not a buffered body: keep boto3's checksum
    for name in names:
        del headers[name]
    headers["Content-MD5"] = content_md5(body)


class _S3ReadStream(ReadStream):
    """A GetObject body as a binary stream whose reads return full buffers (short only at EOF)
    and whose transport failures are storage errors."""

    def __init__(self, storage: S3Storage, path: str, body: Any) -> None:
        super().__init__()
        self._storage = storage
        self._path = path
        self._body = body

    def _read_some(self, size: int) -> bytes:
        if self.closed:
            raise ValueError("I/O operation on closed file")
        try:
            return self._body.read(size)
        except Exception as exc:
            raise self._storage._mapped("read", self._path, exc) from exc

    def read(self, size: int | None = -1) -> bytes:
        if size is None or size < 0:
            return self.readall()
        parts: list[bytes] = []
        remaining = size
        while remaining > 0:
            data = self._read_some(remaining)
            if not data:
                break
            parts.append(data)
            remaining -= len(data)
        return b"".join(parts)

    def readall(self) -> bytes:
        parts: list[bytes] = []
        while True:
            data = self._read_some(CHUNK_SIZE)
            if not data:
                return b"".join(parts)
            parts.append(data)

    def close(self) -> None:
        if not self.closed:
            try:
                self._body.close()
            finally:
                super().close()


class S3Storage(Storage):
    """Objects under ``s3://<bucket>/<prefix>/`` as a storage backend."""

    backend = "s3"

    def __init__(
        self,
        bucket: str,
        *,
        prefix: str = "",
        region: str = DEFAULT_REGION,
        endpoint_url: str | None = None,
        force_path_style: bool = False,
        access_key_id: str | None = None,
        secret_access_key: str | None = None,
        client: S3Client | None = None,
        dry_run: bool = False,
        part_size: int = DEFAULT_PART_SIZE,
        max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
        max_parallel_writes: int = DEFAULT_MAX_PARALLEL_WRITES,
        max_parallel_large_writes: int = DEFAULT_MAX_PARALLEL_LARGE_WRITES,
        multipart_copy_threshold: int = DEFAULT_MULTIPART_COPY_THRESHOLD,
        copy_part_size: int = DEFAULT_COPY_PART_SIZE,
        max_attempts: int = 5,
        conditional_writes: str | None = None,
    ) -> None:
        """``client`` injects a ready boto3 S3 client (e.g. dagster-aws ``S3Resource.get_client()``);
        the connection arguments are then ignored and :meth:`close` leaves it open. Otherwise a
        client is built from them; without keys boto3's default credential chain applies.

        ``part_size`` (≥ 5 MiB) is both the multipart threshold and the part size of streamed
        uploads; ``max_concurrency`` bounds parts in flight across all writes of this storage, and
        ``max_parallel_writes`` is how many outputs the executor writes at once, of which at most
        ``max_parallel_large_writes`` are of ``SMALL_WRITE`` bytes or more, so part memory stays
        below ``(max_concurrency + max_parallel_large_writes) * part_size`` plus
        ``max_parallel_writes * SMALL_WRITE``. Objects larger than
        ``multipart_copy_threshold`` are renamed by a multipart copy of ``copy_part_size`` parts.

        ``conditional_writes`` is ``trusted`` (no ``HeadObject`` before a conditional write: the
        store enforces ``If-None-Match``/``If-Match``) or ``precheck``; ``None`` means ``trusted``
        for AWS S3 (no ``endpoint_url`` and no injected client) and ``precheck`` otherwise.
        """
        if not bucket:
            raise ValueError("s3 bucket is required")
        if prefix and lp.check_path(prefix):
            raise StorageError(
                "open",
                self.backend,
                prefix,
                ErrorKind.INVALID_PATH,
                f"prefix {prefix!r} must be a clean relative slash-separated path",
            )
        if not MIN_PART_SIZE <= part_size <= MAX_PART_SIZE:
            raise ValueError("part_size must be between 5 MiB and 5 GiB")
        if not MIN_PART_SIZE <= copy_part_size <= MAX_PART_SIZE:
            raise ValueError("copy_part_size must be between 5 MiB and 5 GiB")
        if not 0 < multipart_copy_threshold <= MAX_PART_SIZE:
            raise ValueError("multipart_copy_threshold must be positive and at most 5 GiB")
        if max_concurrency < 1:
            raise ValueError("max_concurrency must be at least 1")
        if max_parallel_writes < 1:
            raise ValueError("max_parallel_writes must be at least 1")
        if max_parallel_large_writes < 1:
            raise ValueError("max_parallel_large_writes must be at least 1")
        if conditional_writes is None:
            conditional_writes = "trusted" if endpoint_url is None and client is None else "precheck"
        if conditional_writes not in CONDITIONAL_WRITES_MODES:
            raise ValueError("conditional_writes must be trusted or precheck")
        self.conditional_writes = conditional_writes
        self.bucket = bucket
        self.prefix = prefix
        self.region = region or DEFAULT_REGION
        self.endpoint_url = endpoint_url or None
        self.root_display = prefix or "."
        self.dry_run = dry_run
        self.part_size = part_size
        self.max_concurrency = max_concurrency
        self.multipart_copy_threshold = multipart_copy_threshold
        self.copy_part_size = copy_part_size
        self.max_parallel_writes = max_parallel_writes
        self._capabilities = Capabilities(
            frozenset(
                {
                    Feature.CONDITIONAL_WRITES,
                    Feature.EXCLUSIVE_CREATE,
                    Feature.REVISIONS,
                    Feature.BATCHED_DELETES,
                    Feature.STORED_SHA256,
                    Feature.RECURSIVE_LISTING,
                }
            ),
            parallel_writes=max_parallel_writes,
        )
        # parts in flight across every write of this storage (parallel writes share the bound)
        self._part_slots = threading.BoundedSemaphore(max_concurrency)
        # writes that may fill part buffers (SMALL_WRITE bytes or more) at once
        self._large_slots = threading.BoundedSemaphore(min(max_parallel_large_writes, max_parallel_writes))
        # recycled part buffers shared by all writes: at most parts in flight + one per write
        self._buffers = BufferPool(part_size)
        self._owns_client = client is None
        if client is None:
            client = build_client(
                region=self.region,
                endpoint_url=self.endpoint_url,
                force_path_style=force_path_style,
                access_key_id=access_key_id,
                secret_access_key=secret_access_key,
                max_pool_connections=max(10, max_concurrency + max_parallel_writes + STAT_CONCURRENCY),
                max_attempts=max_attempts,
            )
        self.client: S3Client = client

    @classmethod
    def from_config(
        cls, cfg: S3Backend, env: SecretLookup, *, dry_run: bool = False, context: str | None = None,
        max_attempts: int | None = None,
    ) -> S3Storage:
        """Open the backend described by an ``s3`` source or destination config (interfaces §1.6):
        its fields carry the declaration's defaults.

        Credential names resolve through ``env.lookup`` (see :func:`resolve_credentials`; a
        missing or empty value raises ``SecretError`` naming the variable, with ``context``,
        e.g. ``pipelines[0].destinations[1]``, as its prefix). Without names the boto3 default
        chain applies. ``max_attempts``: botocore's attempts per request (default 5).
        """
        keys = resolve_credentials(cfg.credentials, env, context=context)
        access_key_id, secret_access_key = keys if keys is not None else (None, None)
        return cls(
            cfg.bucket,
            prefix=cfg.prefix,
            region=cfg.region,
            endpoint_url=cfg.endpoint,
            force_path_style=cfg.force_path_style,
            access_key_id=access_key_id,
            secret_access_key=secret_access_key,
            dry_run=dry_run,
            conditional_writes=cfg.conditional_writes,
            **({"max_attempts": max_attempts} if max_attempts is not None else {}),
        )

    def below(self, relative: str) -> S3Storage:
        """The same bucket rooted at ``<prefix>/<relative>``, sharing this storage's client (which
        stays this storage's to close), e.g. one staged upload's bundle as a source."""
        prefix = "/".join(part for part in (self.prefix, relative.strip("/")) if part)
        return S3Storage(
            self.bucket, prefix=prefix, region=self.region, endpoint_url=self.endpoint_url, client=self.client,
            dry_run=self.dry_run, part_size=self.part_size, max_concurrency=self.max_concurrency,
            max_parallel_writes=self.max_parallel_writes, conditional_writes=self.conditional_writes,
        )

    @property
    def capabilities(self) -> Capabilities:
        return self._capabilities

    def __repr__(self) -> str:
        return f"S3Storage(bucket={self.bucket!r}, prefix={self.prefix!r}, endpoint={self.endpoint_url!r})"

    def close(self) -> None:
        if self._owns_client:  # a client build_client made (botocore clients have close())
            self.client.close()

    # ------------------------------------------------------------------ keys and errors

    def key(self, path: str) -> str:
        """Object key of logical ``path`` (``""`` → the prefix itself)."""
        if not self.prefix:
            return path
        return f"{self.prefix}/{path}" if path else self.prefix

    def _list_prefix(self, path: str) -> str:
        """Key prefix that lists everything below logical directory ``path``."""
        base = self.key(path)
        return f"{base}/" if base else ""

    def _mapped(
        self, op: str, path: str, exc: BaseException, *, precondition: ErrorKind = ErrorKind.CONFLICT
    ) -> StorageError:
        mapped = map_error(exc, bucket=self.bucket)
        kind = precondition if mapped.precondition else mapped.kind
        return self.error(op, path, kind, mapped.cause)

    def _check_writable(self, op: str, path: str) -> None:
        if self.dry_run:
            raise self.error(op, path, ErrorKind.UNSUPPORTED, "storage was opened for a dry run")

    def _call(self, op: str, path: str, fn: Callable[..., Any], /, **kwargs: Any) -> Any:
        try:
            return fn(Bucket=self.bucket, **kwargs)
        except StorageError:
            raise
        except Exception as exc:
            raise self._mapped(op, path, exc) from exc

    def _head(self, op: str, path: str) -> dict[str, Any] | None:
        """HeadObject of ``path``'s key, ``None`` when there is no such object."""
        try:
            return self.client.head_object(Bucket=self.bucket, Key=self.key(path))
        except Exception as exc:
            mapped = map_error(exc, bucket=self.bucket)
            if mapped.kind == ErrorKind.NOT_FOUND and mapped.code != "NoSuchBucket":
                return None
            raise self.error(op, path, mapped.kind, mapped.cause) from exc

    def _is_dir(self, op: str, path: str) -> bool:
        response = self._call(op, path, self.client.list_objects_v2, Prefix=self._list_prefix(path), MaxKeys=1)
        return bool(response.get("Contents") or response.get("CommonPrefixes"))

    def _missing(self, op: str, path: str, *, dir_kind: ErrorKind, dir_cause: str) -> StorageError:
        """Error for a key that does not exist: ``dir_kind`` when it is an implicit directory
        (this also surfaces ``NoSuchBucket``), else ``not_found``."""
        if self._is_dir(op, path):
            return self.error(op, path, dir_kind, dir_cause)
        return self.error(op, path, ErrorKind.NOT_FOUND)

    def _file_entry(self, path: str, head: dict[str, Any]) -> Entry:
        return Entry(
            path=path,
            type="file",
            size=int(head.get("ContentLength", 0)),
            mtime=_utc(head.get("LastModified")),
            revision=head.get("ETag"),
        )

    # ------------------------------------------------------------------ primitives

    def stat(self, path: str) -> Entry:
        op = "stat"
        if path == "":
            self._is_dir(op, path)  # surfaces NoSuchBucket and permission errors
            return Entry(path="", type="directory")
        self._check_path(op, path)
        head = self._head(op, path)
        if head is not None:
            return self._file_entry(path, head)
        if self._is_dir(op, path):
            return Entry(path=path, type="directory")
        raise self.error(op, path, ErrorKind.NOT_FOUND)

    def sha256(self, path: str, *, on_bytes: BytesCallback | None = None) -> ContentDigest:
        """One ``HeadObject`` with ``ChecksumMode=ENABLED``: the object's stored
        ``ChecksumSHA256`` when it is the sha256 of the whole object (see
        :func:`full_object_sha256`); otherwise (no such checksum, no object, a directory) the
        object is streamed as on every backend."""
        op = "read"
        self._check_path(op, path)
        try:
            head = self.client.head_object(Bucket=self.bucket, Key=self.key(path), ChecksumMode="ENABLED")
        except Exception as exc:
            mapped = map_error(exc, bucket=self.bucket)
            if mapped.kind != ErrorKind.NOT_FOUND or mapped.code == "NoSuchBucket":
                raise self.error(op, path, mapped.kind, mapped.cause) from exc
            head = None
        stored = None if head is None else full_object_sha256(head)
        if head is None or stored is None:
            return super().sha256(path, on_bytes=on_bytes)
        size = int(head.get("ContentLength", 0))
        if on_bytes is not None:
            on_bytes(size)
        return ContentDigest(size, stored, stored=True)

    def open_read(self, path: str) -> BinaryIO:
        op = "read"
        self._check_path(op, path)
        try:
            response = self.client.get_object(Bucket=self.bucket, Key=self.key(path))
        except Exception as exc:
            mapped = map_error(exc, bucket=self.bucket)
            if mapped.kind == ErrorKind.NOT_FOUND and mapped.code != "NoSuchBucket":
                raise self._missing(
                    op, path, dir_kind=ErrorKind.UNSUPPORTED, dir_cause="not a regular file (directory)"
                ) from exc
            raise self.error(op, path, mapped.kind, mapped.cause) from exc
        return cast(BinaryIO, _S3ReadStream(self, path, response["Body"]))

    def _write_stream(self, path: str, chunks: Iterable[bytes], request: WriteRequest) -> Entry:
        op = "write"
        self._check_writable(op, path)
        conditions = self._write_conditions(op, path, overwrite=request.overwrite, if_revision=request.if_revision)
        precondition = ErrorKind.CONFLICT if request.if_revision is not None else ErrorKind.ALREADY_EXISTS
        if request.expected_size is not None and request.expected_size < SMALL_WRITE:
            return self._write(op, path, chunks, conditions, precondition, request)
        with self._large_slots:
            return self._write(op, path, chunks, conditions, precondition, request)

    def _write(
        self,
        op: str,
        path: str,
        chunks: Iterable[bytes],
        conditions: dict[str, str],
        precondition: ErrorKind,
        request: WriteRequest,
    ) -> Entry:
        verifier = HashingVerifier(request.expected_size, request.expected_sha256)
        headers = {"ContentType": request.content_type or content_type_for(path)}
        part_size = part_size_for(request.expected_size, self.part_size)
        pool = self._buffers if part_size == self.part_size else BufferPool(part_size)
        parts = PartBuffer(part_size, pool)
        upload: _MultipartUpload | None = None
        pool.enter()
        try:
            for chunk in chunks:
                if not chunk:
                    continue
                verifier.update(chunk)
                if verifier.exceeded():
                    raise self.error(op, path, ErrorKind.INTEGRITY, verifier.problem())
                for part in parts.feed(chunk):
                    if upload is None:
                        upload = _MultipartUpload(self, op, path, headers, self.max_concurrency)
                    upload.add(part, parts.release)
            problem = verifier.problem()
            if upload is None:
                body = parts.take_rest()
                if problem:
                    raise self.error(op, path, ErrorKind.INTEGRITY, problem)
                response = self._put(op, path, body, headers, conditions, precondition)
            else:
                rest = parts.take_rest()
                if rest:
                    upload.add(rest, None)
                upload.wait()
                if problem:
                    raise self.error(op, path, ErrorKind.INTEGRITY, problem)
                response = upload.complete(conditions, precondition)
        except BaseException:
            if upload is not None:
                upload.abort()
            raise
        finally:
            pool.exit()
        return Entry(path=path, type="file", size=verifier.size, revision=response.get("ETag"))

    def _write_conditions(self, op: str, path: str, *, overwrite: bool, if_revision: str | None) -> dict[str, str]:
        """Return the conditional headers for the final request, pre-checked with HeadObject
        unless ``conditional_writes`` is ``trusted``.

        ``if_revision`` is the revision read earlier: an ETag (``If-Match``) or ``""`` for "there
        was no object" (``If-None-Match: *``); a mismatch is ``conflict``, as in the local backend.
        """
        if overwrite and if_revision is None:
            return {}
        if self.conditional_writes == "trusted" and (overwrite or not if_revision):
            # the store's 412 (404 for a vanished If-Match key) is the whole check
            return {"IfMatch": if_revision} if if_revision else {"IfNoneMatch": "*"}
        head = self._head(op, path)
        current = "" if head is None else str(head.get("ETag", ""))
        if if_revision is not None:
            if current != if_revision:
                raise self.error(op, path, ErrorKind.CONFLICT, "stored revision changed")
            if not overwrite and head is not None:
                raise self.error(op, path, ErrorKind.ALREADY_EXISTS)
            return {"IfMatch": if_revision} if if_revision else {"IfNoneMatch": "*"}
        if head is not None:
            raise self.error(op, path, ErrorKind.ALREADY_EXISTS)
        return {"IfNoneMatch": "*"}

    def _put(
        self,
        op: str,
        path: str,
        body: bytearray,
        headers: dict[str, str],
        conditions: dict[str, str],
        precondition: ErrorKind,
    ) -> dict[str, Any]:
        try:
            return self.client.put_object(
                Bucket=self.bucket,
                Key=self.key(path),
                Body=body,
                ContentLength=len(body),
                ContentMD5=content_md5(body),
                **headers,
                **conditions,
            )
        except Exception as exc:
            raise self._conditional_error(op, path, exc, conditions, precondition) from exc

    def _conditional_error(
        self,
        op: str,
        path: str,
        exc: BaseException,
        conditions: dict[str, str],
        precondition: ErrorKind,
    ) -> StorageError:
        mapped = map_error(exc, bucket=self.bucket)
        if mapped.precondition:
            cause = "stored revision changed" if precondition == ErrorKind.CONFLICT else None
            return self.error(op, path, precondition, cause)
        # If-Match on a key that is gone answers 404: the revision we expected no longer exists
        if "IfMatch" in conditions and mapped.kind == ErrorKind.NOT_FOUND and mapped.code != "NoSuchBucket":
            return self.error(op, path, ErrorKind.CONFLICT, "stored revision changed")
        return self.error(op, path, mapped.kind, mapped.cause)

    def rename(self, src: str, dst: str, *, overwrite: bool) -> None:
        op = "rename"
        self._check_path(op, src)
        self._check_path(op, dst)
        self._check_writable(op, src)
        head = self._head(op, src)
        if head is None:
            raise self._missing(op, src, dir_kind=ErrorKind.UNSUPPORTED, dir_cause="source is a directory")
        if src == dst:
            if not overwrite:
                raise self.error(op, dst, ErrorKind.ALREADY_EXISTS)
            return
        conditions: dict[str, str] = {}
        if not overwrite:
            if self._head(op, dst) is not None:
                raise self.error(op, dst, ErrorKind.ALREADY_EXISTS)
            conditions = {"IfNoneMatch": "*"}
        size = int(head.get("ContentLength", 0))
        etag = str(head.get("ETag", ""))
        try:
            if size > self.multipart_copy_threshold:
                self._multipart_copy(op, src, dst, head, conditions)
            else:
                source = {"Bucket": self.bucket, "Key": self.key(src)}
                self.client.copy_object(
                    Bucket=self.bucket,
                    Key=self.key(dst),
                    CopySource=source,
                    CopySourceIfMatch=etag,
                    MetadataDirective="COPY",
                    **conditions,
                )
        except StorageError:
            raise
        except Exception as exc:
            raise self._copy_error(op, src, dst, exc, overwrite=overwrite) from exc
        self._delete_object(op, src)

    def _copy_error(self, op: str, src: str, dst: str, exc: BaseException, *, overwrite: bool) -> StorageError:
        mapped = map_error(exc, bucket=self.bucket)
        if mapped.precondition:
            # ambiguous: the destination appeared (If-None-Match) or the source changed
            if not overwrite and self._head(op, dst) is not None:
                return self.error(op, dst, ErrorKind.ALREADY_EXISTS)
            return self.error(op, src, ErrorKind.CONFLICT, "source changed during rename")
        if mapped.kind == ErrorKind.NOT_FOUND and mapped.code != "NoSuchBucket":
            return self.error(op, src, ErrorKind.NOT_FOUND, mapped.cause)
        return self.error(op, src, mapped.kind, mapped.cause)

    def _multipart_copy(self, op: str, src: str, dst: str, head: dict[str, Any], conditions: dict[str, str]) -> None:
        headers: dict[str, Any] = {"Metadata": head.get("Metadata", {})}
        for field in ("ContentType", "CacheControl", "ContentDisposition", "ContentEncoding", "ContentLanguage"):
            if head.get(field):
                headers[field] = head[field]
        size = int(head.get("ContentLength", 0))
        part_size = part_size_for(size, self.copy_part_size)
        source = {"Bucket": self.bucket, "Key": self.key(src)}
        etag = str(head.get("ETag", ""))
        upload = _MultipartUpload(self, op, dst, headers, self.max_concurrency)
        try:
            for number, first, last in copy_ranges(size, part_size):
                upload.add_copy(number, source, etag, first, last)
            upload.wait()
            upload.complete(conditions, ErrorKind.ALREADY_EXISTS)
        except BaseException:
            upload.abort()
            raise

    def delete_file(self, path: str) -> None:
        op = "delete"
        self._check_path(op, path)
        self._check_writable(op, path)
        if self._head(op, path) is None:
            raise self._missing(op, path, dir_kind=ErrorKind.UNSUPPORTED, dir_cause="target is a directory")
        self._delete_object(op, path)

    def _delete_object(self, op: str, path: str) -> None:
        self._call(op, path, self.client.delete_object, Key=self.key(path))

    def _iter_entries(self, prefix: str, recursive: bool) -> Iterator[Entry]:
        op = "walk"
        list_prefix = self._list_prefix(prefix)
        kwargs: dict[str, Any] = {"Bucket": self.bucket, "Prefix": list_prefix}
        if not recursive:
            kwargs["Delimiter"] = "/"
        seen_dirs: set[str] = set()
        paginator = self.client.get_paginator("list_objects_v2")
        try:
            pages = paginator.paginate(**kwargs)
            for page in pages:
                for common in page.get("CommonPrefixes", ()):
                    relative = common["Prefix"][len(list_prefix) :].rstrip("/")
                    if relative and relative not in seen_dirs and not lp.check_path(relative):
                        seen_dirs.add(relative)
                        yield Entry(path=_join(prefix, relative), type="directory")
                for obj in page.get("Contents", ()):
                    relative = obj["Key"][len(list_prefix) :]
                    marker = relative.endswith("/")
                    name = relative[:-1] if marker else relative
                    if not name:
                        continue
                    if lp.check_path(name):
                        if recursive:  # its valid ancestors still exist as directories
                            yield from self._new_dirs(prefix, _valid_parent(name), seen_dirs)
                        continue
                    if recursive:
                        yield from self._new_dirs(prefix, name if marker else lp.parent(name), seen_dirs)
                    if marker:
                        continue
                    yield Entry(
                        path=_join(prefix, name),
                        type="file",
                        size=int(obj.get("Size", 0)),
                        mtime=_utc(obj.get("LastModified")),
                        revision=obj.get("ETag"),
                    )
        except StorageError:
            raise
        except Exception as exc:
            raise self._mapped(op, prefix, exc) from exc

    @staticmethod
    def _new_dirs(prefix: str, relative_dir: str, seen: set[str]) -> Iterator[Entry]:
        """Directory entries for ``relative_dir`` and its ancestors not yielded before."""
        missing: list[str] = []
        current = relative_dir
        while current and current not in seen:
            seen.add(current)
            missing.append(current)
            current = lp.parent(current)
        for directory in reversed(missing):
            yield Entry(path=_join(prefix, directory), type="directory")

    # ------------------------------------------------------------------ batched deletes

    def delete_paths(
        self,
        targets: list[str],
        *,
        op: str,
        ignore_missing: bool = True,
        prune_empty_dirs: bool = True,
    ) -> list[str]:
        """Base semantics with concurrent existence checks and ``DeleteObjects`` batches.

        ``prune_empty_dirs`` has nothing to do: directories vanish with their last object.
        """
        deleted: list[str] = []
        for start in range(0, len(targets), DELETE_BATCH):
            batch = targets[start : start + DELETE_BATCH]
            planned, stop = self._plan_batch(op, batch, ignore_missing=ignore_missing, deleted=deleted)
            self._delete_batch(op, planned, deleted)
            if stop is not None:
                stop.deleted = list(deleted)  # type: ignore[attr-defined]
                raise stop
        return deleted

    def _plan_batch(
        self, op: str, batch: list[str], *, ignore_missing: bool, deleted: list[str]
    ) -> tuple[list[str], StorageError | None]:
        """Targets of ``batch`` to delete, in order, up to the first problem (returned too)."""
        if batch:
            self._check_writable(op, batch[0])
        checkable = batch
        for index, target in enumerate(batch):
            if target == "":
                checkable = batch[:index]
                break
        results = self._stat_many(checkable)
        planned: list[str] = []
        for index, target in enumerate(batch):
            if index >= len(checkable):
                return planned, self.error(op, target, ErrorKind.INVALID_PATH, "refusing to delete the backend root")
            result = results[index]
            if isinstance(result, StorageError):
                if result.kind == ErrorKind.NOT_FOUND:
                    if ignore_missing:
                        continue
                    return planned, self.error(op, target, ErrorKind.NOT_FOUND)
                return planned, result
            if result.is_dir:
                return planned, self.error(op, target, ErrorKind.UNSUPPORTED, "target is a directory")
            planned.append(target)
        return planned, None

    def _stat_many(self, targets: list[str]) -> list[Entry | StorageError]:
        def one(target: str) -> Entry | StorageError:
            try:
                return self.stat(target)
            except StorageError as exc:
                return exc

        if len(targets) <= 1:
            return [one(t) for t in targets]
        with ThreadPoolExecutor(max_workers=min(STAT_CONCURRENCY, len(targets))) as pool:
            return list(pool.map(one, targets))

    def _delete_batch(self, op: str, planned: list[str], deleted: list[str]) -> None:
        """``DeleteObjects`` for ``planned`` (≤ 1000 keys). Appends confirmed deletions to
        ``deleted`` in planned order and raises for the first failed key in planned order."""
        if not planned:
            return
        keys = {self.key(path): path for path in planned}
        try:
            response = self.client.delete_objects(
                Bucket=self.bucket,
                Delete={"Objects": [{"Key": key} for key in keys], "Quiet": False},
            )
        except Exception as exc:
            error = self._mapped(op, planned[0], exc)
            error.deleted = list(deleted)  # type: ignore[attr-defined]
            raise error from exc
        confirmed = {item.get("Key") for item in response.get("Deleted", ())}
        failures = {item.get("Key"): item for item in response.get("Errors", ())}
        first_failure: str | None = None
        for path in planned:
            key = self.key(path)
            if key in failures:
                first_failure = first_failure or path
            elif key in confirmed:
                deleted.append(path)
        if first_failure is not None:
            item = failures[self.key(first_failure)]
            code = str(item.get("Code", "") or "")
            kind = _DELETE_ERROR_KINDS.get(code, ErrorKind.OTHER)
            message = str(item.get("Message", "") or "")
            error = self.error(op, first_failure, kind, f"{code}: {message}" if message else code)
            error.deleted = list(deleted)  # type: ignore[attr-defined]
            raise error

    def delete_prefix(
        self,
        prefix: str,
        *,
        ignore_missing: bool = True,
        prune_empty_dirs: bool = True,
        keep: Callable[[str], bool] | None = None,
        limit: int = 1_000_000,
    ) -> list[str]:
        """Every object under ``prefix`` (whole segments) except locks and journals by default,
        listed once and removed with ``DeleteObjects`` in batches of 1000, in path order."""
        op = "delete prefix"
        self._check_prefix(op, prefix)
        self._check_writable(op, prefix)
        keep = keep or _keep_locks_and_journals
        entries = self.walk(prefix, limit=limit, include_reserved=True, include_dirs=False)
        targets = [e.path for e in entries if not keep(e.path)]
        deleted: list[str] = []
        for start in range(0, len(targets), DELETE_BATCH):
            self._delete_batch(op, targets[start : start + DELETE_BATCH], deleted)
        return deleted


_DELETE_ERROR_KINDS: dict[str, ErrorKind] = {
    "AccessDenied": ErrorKind.PERMISSION,
    "NoSuchKey": ErrorKind.NOT_FOUND,
    "InternalError": ErrorKind.UNAVAILABLE,
    "SlowDown": ErrorKind.UNAVAILABLE,
    "ServiceUnavailable": ErrorKind.UNAVAILABLE,
}


def full_object_sha256(head: dict[str, Any]) -> str | None:
    """``sha256:<hex>`` from a ``HeadObject`` answer's ``ChecksumSHA256`` when it is the sha256
    of the object's whole content, else ``None``.

    S3 stores a ``ChecksumSHA256`` only when the uploader asked for one, and verifies it on
    upload. For a multipart upload it is a checksum of the parts' checksums (``ChecksumType``
    ``COMPOSITE``, the value and the ETag ending ``-<parts>``), which is *not* the file's sha256:
    only ``FULL_OBJECT`` checksums, or, where the store reports no type, single-part objects
    (no ``-<n>`` in the checksum or the ETag) are used.
    """
    value = head.get("ChecksumSHA256")
    if not isinstance(value, str) or not value:
        return None
    kind = head.get("ChecksumType")
    if kind is not None and kind != "FULL_OBJECT":
        return None
    if kind is None and ("-" in value or "-" in str(head.get("ETag", ""))):
        return None
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return None
    return "sha256:" + raw.hex() if len(raw) == 32 else None


def _utc(value: object) -> datetime | None:
    return value.astimezone(UTC) if isinstance(value, datetime) else None


def _valid_parent(name: str) -> str:
    """The leading run of valid directory segments of an invalid relative key."""
    valid: list[str] = []
    for segment in name.split("/")[:-1]:
        if lp.check_path(segment):
            break
        valid.append(segment)
    return "/".join(valid)


def _join(prefix: str, relative: str) -> str:
    return relative if prefix == "" else f"{prefix}/{relative}"


def _keep_locks_and_journals(path: str) -> bool:
    return lp.basename(path) in (lp.LOCK_NAME, lp.JOURNAL_NAME)


class _MultipartUpload:
    """One multipart upload (streamed parts or server-side part copies) and its cleanup."""

    def __init__(self, storage: S3Storage, op: str, path: str, headers: dict[str, Any], max_concurrency: int) -> None:
        self.storage = storage
        self.op = op
        self.path = path
        self.key = storage.key(path)
        self.client = storage.client
        response = storage._call(op, path, storage.client.create_multipart_upload, Key=self.key, **headers)
        self.upload_id: str = response["UploadId"]
        self.pool = PartPool(max_concurrency, storage._part_slots)
        self.next_number = 1
        self._finished = False

    def add(self, data: bytearray, release: Callable[[bytearray], None] | None) -> None:
        """Upload ``data`` as the next part; ``release`` gets the buffer back afterwards."""
        number = self.next_number
        self.next_number += 1

        def job() -> str:
            try:
                return self._upload_part(number, data)
            finally:
                if release is not None:
                    release(data)

        self.pool.submit(number, job)

    def _upload_part(self, number: int, data: bytearray) -> str:
        try:
            response = self.client.upload_part(
                Bucket=self.storage.bucket,
                Key=self.key,
                UploadId=self.upload_id,
                PartNumber=number,
                Body=data,
                ContentLength=len(data),
                ContentMD5=content_md5(data),
            )
        except Exception as exc:
            raise self.storage._mapped(self.op, self.path, exc) from exc
        return str(response["ETag"])

    def add_copy(self, number: int, source: dict[str, str], etag: str, first: int, last: int) -> None:
        self.next_number = number + 1

        def job() -> str:
            response = self.client.upload_part_copy(
                Bucket=self.storage.bucket,
                Key=self.key,
                UploadId=self.upload_id,
                PartNumber=number,
                CopySource=source,
                CopySourceIfMatch=etag,
                CopySourceRange=f"bytes={first}-{last}",
            )
            return str(response["CopyPartResult"]["ETag"])

        self.pool.submit(number, job)

    def wait(self) -> None:
        self.parts = self.pool.finish()

    def complete(self, conditions: dict[str, str], precondition: ErrorKind) -> dict[str, Any]:
        try:
            response = self.client.complete_multipart_upload(
                Bucket=self.storage.bucket,
                Key=self.key,
                UploadId=self.upload_id,
                MultipartUpload={"Parts": self.parts},
                **conditions,
            )
        except Exception as exc:
            raise self.storage._conditional_error(self.op, self.path, exc, conditions, precondition) from exc
        self._finished = True
        self.pool.shutdown()
        return response

    def abort(self) -> None:
        if self._finished:
            return
        self._finished = True
        self.pool.shutdown()
        try:
            self.client.abort_multipart_upload(Bucket=self.storage.bucket, Key=self.key, UploadId=self.upload_id)
        except Exception as exc:  # the original failure matters more; say what is left behind
            log.warning(
                "could not abort multipart upload %s of s3 key %s in bucket %s: %s",
                self.upload_id,
                self.key,
                self.storage.bucket,
                map_error(exc, bucket=self.storage.bucket).cause,
            )

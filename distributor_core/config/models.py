"""The models of a loaded, defaulted and validated config: frozen msgspec Structs.

These are what the rest of distributor consumes. They are immutable, keyword-only and reject
unknown fields. They do no validation of their own: ``load.py`` builds them (``msgspec.convert``
in ``construct.py``) only from a tree that ``decode``, ``defaults`` and ``validate`` finished, and
those worded every message. Structs instead of pydantic models (issue 17 start-up): importing
pydantic and creating 26 model classes was ~0.1–0.2 s of every command's start; msgspec imports
in a few milliseconds and builds its classes in C.
A :class:`Config` only exists for a valid file: every default of interfaces §1.9 is filled in,
every local path is absolute (resolved against the config file's directory, resolutions D4), and
every mode is one of its documented values.

Backend fields are inline in the YAML; here a source *is* its backend model
(:class:`LocalBackend`, :class:`SSHBackend`, :class:`S3Backend`, :class:`HTTPUploadSource`) and a
destination carries its backend model in ``storage`` (``destination.backend`` names it).
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import ClassVar, Literal

import msgspec

from distributor_core.config.addresses import split_host_port
from distributor_core.config.errors import ConfigLookupError
from distributor_core.config.fields import DEFAULT_MAX_PARTITIONS


class _Model(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Base of every config model (``kw_only`` is per class in msgspec: each model repeats it)."""


# --- server, secrets, upload tokens ---------------------------------------------------------


#: ``server.http`` connection guards, also used by ``distributor serve`` without a config
DEFAULT_HEADER_TIMEOUT = timedelta(seconds=10)
DEFAULT_MAX_CONNECTIONS = 256
DEFAULT_MAX_CONNECTIONS_PER_CLIENT = 32
#: 0: see :meth:`ServerHTTP.reserved_slots`
DEFAULT_RESERVED_CONNECTIONS = 0
DEFAULT_MAX_HEAD_SIZE = 64 * 1024


class UploadLimits(_Model, kw_only=True):
    """``server.http.limits``: what one upload archive may hold, checked while it streams."""

    max_entries: int = 10_000
    max_path_depth: int = 64
    max_name_length: int = 255
    max_path_length: int = 4096
    max_header_size: int = 64 * 1024
    max_manifest_size: int = 16 * 1024 * 1024
    max_directories: int = 10_000
    max_header_count: int = 8


class ServerHTTP(_Model, kw_only=True):
    """``server.http``: the upload server. Sizes are bytes; ``staging_root`` is absolute."""

    bind: str
    staging_root: Path
    max_upload_size: int
    queue_size: int
    max_concurrency: int
    retention: timedelta
    header_timeout: timedelta = DEFAULT_HEADER_TIMEOUT
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    body_idle_timeout: timedelta = timedelta(seconds=60)
    #: bytes per second; 0: no minimum
    body_min_rate: int = 64 * 1024
    #: 0: see :meth:`queue_share`
    max_queue_per_token: int = 0
    #: 0: no cap per client address
    max_connections_per_client: int = DEFAULT_MAX_CONNECTIONS_PER_CLIENT
    reserved_connections: int = DEFAULT_RESERVED_CONNECTIONS
    max_head_size: int = DEFAULT_MAX_HEAD_SIZE
    max_failed_bytes: int = 4 * 1024**3
    max_failed_bytes_per_token: int = 1024**3
    limits: UploadLimits = UploadLimits()
    #: an ``s3://`` staging root (issue 29): the shared store every ``serve`` replica uses;
    #: ``staging_root`` is then this host's scratch directory for receiving uploads
    staging_store: S3Backend | None = None
    #: the inline publisher's claim on a publication in a shared store (renewed every quarter)
    publication_lease: timedelta = timedelta(seconds=60)
    #: an admission's claim on its idempotency key in a shared store (and a marker's life without
    #: its record)
    admission_lease: timedelta = timedelta(seconds=120)

    def queue_share(self, token_count: int) -> int:
        """Queue slots one token may hold: ``max_queue_per_token``, or by default half of
        ``queue_size`` rounded up (all of it when only one token is configured)."""
        if self.max_queue_per_token > 0:
            return min(self.max_queue_per_token, self.queue_size)
        if token_count <= 1:
            return self.queue_size
        return max(1, (self.queue_size + 1) // 2)

    def reserved_slots(self) -> int:
        """Connection slots kept for requests with a valid upload token: ``reserved_connections``,
        or by default a quarter of ``max_connections`` (rounded down)."""
        if self.reserved_connections > 0:
            return min(self.reserved_connections, self.max_connections - 1)
        return self.max_connections // 4

    @property
    def bind_host(self) -> str:
        """Host part of ``bind`` (without IPv6 brackets)."""
        return split_host_port(self.bind)[0]

    @property
    def bind_port(self) -> int:
        return split_host_port(self.bind)[1]


class Server(_Model, kw_only=True):
    http: ServerHTTP


class Secrets(_Model, kw_only=True):
    """``secrets``: ``directory`` as written (``""`` = disabled) and its resolved absolute path."""

    directory: str = ""
    resolved_directory: Path | None = None


class UploadToken(_Model, kw_only=True):
    """One ``upload_tokens`` record. The value is never in the config, only its secret name."""

    id: str
    token_env: str
    allow_pipelines: tuple[str, ...]


# --- backends ---------------------------------------------------------------------------------


class LocalBackend(_Model, kw_only=True, tag_field="backend", tag="local"):
    """A local directory. ``path`` is the configured text; ``resolved_path`` is absolute."""

    #: the union tag (``backend`` in the YAML), also readable as an attribute
    backend: ClassVar[Literal["local"]] = "local"
    path: str
    resolved_path: Path

    @property
    def root_path(self) -> str:
        """The configured root, as reports show it (``.`` when empty)."""
        return self.path or "."

    @property
    def root_key(self) -> str:
        """Identifies the destination root for serialisation (resolutions B1)."""
        return f"local:{self.resolved_path}"


class SSHBackend(_Model, kw_only=True, tag_field="backend", tag="ssh"):
    """An SFTP server. ``path`` is the absolute remote root; key files are absolute local paths."""

    #: the union tag (``backend`` in the YAML), also readable as an attribute
    backend: ClassVar[Literal["ssh"]] = "ssh"
    host: str
    port: int = 22
    user: str
    path: str
    private_key_file: Path | None = None
    known_hosts_file: Path
    host_key_policy: Literal["strict", "accept_new"] = "strict"
    transport: Literal["paramiko", "openssh"] = "paramiko"
    #: OpenSSH client config (``-F``) for ``transport: openssh``; ``None``: ``-F /dev/null``
    ssh_config_file: Path | None = None
    #: extra ``-o Option=value`` pairs for ``transport: openssh``, in file order
    ssh_options: tuple[tuple[str, str], ...] = ()

    @property
    def root_path(self) -> str:
        return self.path or "."

    @property
    def root_key(self) -> str:
        return f"ssh://{self.user}@{self.host}:{self.port}{self.path}"


class S3Credentials(_Model, kw_only=True):
    """Names of the secrets (environment variables or secret files) holding S3 credentials."""

    access_key_id_env: str
    secret_access_key_env: str


class S3Backend(_Model, kw_only=True, tag_field="backend", tag="s3"):
    """An S3 bucket (``endpoint`` for S3-compatible services, passed to boto3 as ``endpoint_url``)."""

    #: the union tag (``backend`` in the YAML), also readable as an attribute
    backend: ClassVar[Literal["s3"]] = "s3"
    bucket: str
    prefix: str = ""
    region: str = "us-east-1"
    endpoint: str | None = None
    force_path_style: bool = False
    #: ``None`` (a model built in code): ``trusted`` without ``endpoint``, ``precheck`` with one
    conditional_writes: Literal["trusted", "precheck"] | None = None
    credentials: S3Credentials | None = None

    @property
    def root_path(self) -> str:
        """The configured prefix, as reports show it (``.`` for the bucket root)."""
        return self.prefix or "."

    @property
    def root_key(self) -> str:
        where = f"s3://{self.bucket}/{self.prefix}"
        return f"{where}@{self.endpoint}" if self.endpoint else where


class HTTPUploadSource(_Model, kw_only=True, tag_field="backend", tag="http_upload"):
    """An ``http_upload`` source, served by ``distributor serve``. ``staging_path`` is absolute."""

    #: the union tag (``backend`` in the YAML), also readable as an attribute
    backend: ClassVar[Literal["http_upload"]] = "http_upload"
    staging_path: Path
    max_upload_size: int
    #: the pipeline's part of a shared S3 staging store (``<prefix>/<pipeline id>``); then
    #: ``staging_path`` is only this host's scratch directory for uploads being received
    staging_store: S3Backend | None = None

    @property
    def shared(self) -> bool:
        """Whether uploads are staged in a store several ``serve`` replicas share."""
        return self.staging_store is not None


#: the backend unions, told apart by their ``backend`` tag
StorageBackend = LocalBackend | SSHBackend | S3Backend
SourceBackend = LocalBackend | SSHBackend | S3Backend | HTTPUploadSource


# --- destination policies ---------------------------------------------------------------------


class PublishPolicy(_Model, kw_only=True):
    source: bool = True
    html: bool = False


class MarkdownToHTML(_Model, kw_only=True):
    enabled: bool = False
    mode: Literal["sidecar", "index"] = "sidecar"


class TransformPolicy(_Model, kw_only=True):
    markdown_to_html: MarkdownToHTML | None = None


class PathMappingPolicy(_Model, kw_only=True):
    mode: Literal["preserve_relative", "fixed"] = "preserve_relative"


class LinksPolicy(_Model, kw_only=True):
    base_url: str
    primary: Literal["auto", "source", "html"] = "auto"


class StatePolicy(_Model, kw_only=True):
    mode: Literal["single_owner", "shared_root"] = "single_owner"


class ReconciliationPolicy(_Model, kw_only=True):
    mode: Literal["replace", "merge"] = "replace"


class BundleRetention(_Model, kw_only=True):
    """``retention.prune.bundles``: whole bundle paths of a ``preserve_relative`` destination, the
    newest ``keep_latest`` (by manifest ``created``) always kept, the rest removed when created
    before ``now - older_than`` (or, with only ``keep_latest``, always)."""

    keep_latest: int | None = None
    older_than: timedelta | None = None


class PrunePolicy(_Model, kw_only=True):
    """``retention.prune``. ``keep_latest`` may be negative only while ``enabled`` is false.
    ``older_than`` and ``keep_latest`` prune outputs of each bundle path (the Go tool's keys);
    ``bundles`` prunes whole bundle paths instead."""

    enabled: bool = False
    older_than: timedelta | None = None
    keep_latest: int | None = None
    bundles: BundleRetention | None = None


class RetentionPolicy(_Model, kw_only=True):
    prune: PrunePolicy = PrunePolicy()


class TakeoverPolicy(_Model, kw_only=True):
    mode: Literal["same_pipeline", "same_source", "any_managed", "never"] = "same_pipeline"


class TransferPolicy(_Model, kw_only=True):
    on_destination_same: Literal["skip", "fail"] = "skip"
    on_destination_older: Literal["replace", "fail"] = "replace"
    on_destination_newer: Literal["skip", "fail", "replace"] = "skip"
    on_conflict: Literal["fail", "replace"] = "fail"


class ValidationPolicy(_Model, kw_only=True):
    """The pipeline ``validation`` block (digest verification is always on)."""

    cache: bool = True


class DagsterAssets(_Model, kw_only=True):
    """The ``dagster`` block of a pipeline or a destination: how its assets look in Dagster. Only
    ``distributor_dagster`` reads it (and applies Dagster's rules to it); ``None`` and empty
    tuples mean "not set". ``tags`` keeps the written order."""

    description: str | None = None
    group: str | None = None
    owners: tuple[str, ...] = ()
    tags: tuple[tuple[str, str], ...] = ()
    kinds: tuple[str, ...] = ()
    deps: tuple[str, ...] = ()


class Destination(_Model, kw_only=True):
    id: str
    storage: StorageBackend
    publish: PublishPolicy = PublishPolicy()
    transform: TransformPolicy = TransformPolicy()
    path_mapping: PathMappingPolicy = PathMappingPolicy()
    links: LinksPolicy | None = None
    state: StatePolicy = StatePolicy()
    reconciliation: ReconciliationPolicy = ReconciliationPolicy()
    retention: RetentionPolicy = RetentionPolicy()
    takeover: TakeoverPolicy = TakeoverPolicy()
    transfer: TransferPolicy = TransferPolicy()
    dagster: DagsterAssets = DagsterAssets()
    #: the destination lock's lease: unchanged this long, another writer takes it over
    lock_lease: timedelta = timedelta(seconds=60)

    @property
    def backend(self) -> Literal["local", "ssh", "s3"]:
        return self.storage.backend

    @property
    def markdown_mode(self) -> Literal["sidecar", "index"] | None:
        """The Markdown rendering mode when this destination publishes HTML, else ``None``."""
        markdown = self.transform.markdown_to_html
        if not self.publish.html or markdown is None or not markdown.enabled:
            return None
        return markdown.mode


class PipelineDagster(DagsterAssets, kw_only=True):
    """A pipeline's ``dagster`` block: its assets' settings, and ``max_partitions``, how many
    bundles stay partitions in Dagster at most (issue 37)."""

    max_partitions: int = DEFAULT_MAX_PARTITIONS


class Pipeline(_Model, kw_only=True):
    id: str
    source: SourceBackend
    validation: ValidationPolicy = ValidationPolicy()
    dagster: PipelineDagster = PipelineDagster()
    destinations: tuple[Destination, ...]

    @property
    def is_upload(self) -> bool:
        """True when bundles arrive through ``distributor serve`` (``http_upload`` source)."""
        return self.source.backend == "http_upload"

    def destination(self, destination_id: str) -> Destination:
        """The destination with this id; :class:`ConfigLookupError` when there is none."""
        if destination_id == "":
            raise ConfigLookupError("destination id is required")
        for destination in self.destinations:
            if destination.id == destination_id:
                return destination
        raise ConfigLookupError(f"pipeline {self.id} destination {destination_id} not found")

    def destination_index(self, destination_id: str) -> int:
        return self.destinations.index(self.destination(destination_id))


class Config(_Model, kw_only=True):
    """A loaded config. ``base_dir`` is the directory relative paths were resolved against."""

    server: Server
    secrets: Secrets = Secrets()
    upload_tokens: tuple[UploadToken, ...] = ()
    pipelines: tuple[Pipeline, ...]
    base_dir: Path
    config_path: Path | None = None

    def pipeline(self, pipeline_id: str) -> Pipeline:
        """The pipeline with this id; :class:`ConfigLookupError` ``pipeline "<id>" not found``."""
        if pipeline_id == "":
            raise ConfigLookupError("pipeline id is required")
        for pipeline in self.pipelines:
            if pipeline.id == pipeline_id:
                return pipeline
        raise ConfigLookupError(f'pipeline "{pipeline_id}" not found')

    def pipeline_index(self, pipeline_id: str) -> int:
        return self.pipelines.index(self.pipeline(pipeline_id))

    def destination(self, pipeline_id: str, destination_id: str) -> Destination:
        """Shorthand for ``config.pipeline(p).destination(d)``."""
        return self.pipeline(pipeline_id).destination(destination_id)

    @property
    def upload_pipelines(self) -> tuple[Pipeline, ...]:
        """Pipelines whose source backend is ``http_upload``, in file order."""
        return tuple(pipeline for pipeline in self.pipelines if pipeline.is_upload)

"""The shape of the YAML config: every key, its kind, its documented values and static default.

One table drives the strict decoder (unknown fields, types), the defaults, and the JSON Schema,
so the three cannot drift apart. Rules between fields (required, ranges, "set together") live in
``validate.py``; this file only says what may be written where.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import msgspec

from distributor_core.structeq import key_without

SLUG_PATTERN = r"[a-zA-Z0-9][a-zA-Z0-9._-]*"

SOURCE_BACKENDS = ("local", "ssh", "s3", "http_upload")
DESTINATION_BACKENDS = ("local", "ssh", "s3")
HOST_KEY_POLICIES = ("strict", "accept_new")
#: ssh ``transport``: paramiko in this process, or the system OpenSSH client (``ssh -s sftp``)
SSH_TRANSPORTS = ("paramiko", "openssh")
#: s3 ``conditional_writes``: rely on If-None-Match/If-Match alone, or HeadObject first
S3_CONDITIONAL_WRITES = ("trusted", "precheck")
MARKDOWN_MODES = ("sidecar", "index")
PATH_MAPPING_MODES = ("preserve_relative", "fixed")
LINK_PRIMARIES = ("auto", "source", "html")
STATE_MODES = ("single_owner", "shared_root")
RECONCILIATION_MODES = ("replace", "merge")
TAKEOVER_MODES = ("same_pipeline", "same_source", "any_managed", "never")
TRANSFER_CHOICES: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "on_destination_same": ("skip", "fail"),
        "on_destination_older": ("replace", "fail"),
        "on_destination_newer": ("skip", "fail", "replace"),
        "on_conflict": ("fail", "replace"),
    }
)

DEFAULT_BIND = "127.0.0.1:8080"
DEFAULT_STAGING_DIR = ".distributor/staging"  # below the config file's directory (resolutions D4)
DEFAULT_MAX_UPLOAD_SIZE = "100MB"
DEFAULT_QUEUE_SIZE = 16
DEFAULT_MAX_CONCURRENCY = 1
DEFAULT_RETENTION = "24h"
DEFAULT_HEADER_TIMEOUT = "10s"
DEFAULT_MAX_CONNECTIONS = 256
DEFAULT_BODY_IDLE_TIMEOUT = "60s"
DEFAULT_BODY_MIN_RATE = "64KB"
DEFAULT_MAX_ENTRIES = 10_000
DEFAULT_MAX_PATH_DEPTH = 64
DEFAULT_MAX_NAME_LENGTH = 255
DEFAULT_MAX_PATH_LENGTH = 4096
DEFAULT_MAX_HEADER_SIZE = "64KB"
DEFAULT_MAX_MANIFEST_SIZE = "16MB"
DEFAULT_MAX_DIRECTORIES = 10_000
DEFAULT_MAX_HEADER_COUNT = 8
DEFAULT_MAX_HEAD_SIZE = "64KB"
DEFAULT_MAX_CONNECTIONS_PER_CLIENT = 32
DEFAULT_RESERVED_CONNECTIONS = 0
DEFAULT_MAX_FAILED_BYTES = "4GB"
DEFAULT_MAX_FAILED_BYTES_PER_TOKEN = "1GB"
DEFAULT_SSH_PORT = 22
DEFAULT_KNOWN_HOSTS_FILE = "~/.ssh/known_hosts"
DEFAULT_S3_REGION = "us-east-1"
DEFAULT_LOCK_LEASE = "60s"


class Kind(enum.Enum):
    STRING = "string"
    BOOLEAN = "boolean"
    INTEGER = "integer"
    DURATION = "duration"
    BYTE_SIZE = "byte size"
    STRING_LIST = "list of strings"
    STRING_MAP = "mapping of strings"
    MAPPING = "mapping"
    MAPPING_LIST = "list of mappings"


_NO_FIELDS: Mapping[str, Field] = MappingProxyType({})


class Field(msgspec.Struct, frozen=True):
    """One YAML key. ``fields`` describe a mapping's keys; ``backends`` marks a mapping whose
    ``backend`` key selects extra inline keys from :data:`BACKEND_FIELDS`."""

    kind: Kind
    doc: str
    fields: Mapping[str, Field] = msgspec.field(default_factory=lambda: _NO_FIELDS)
    backends: tuple[str, ...] = ()
    required: tuple[str, ...] = ()
    choices: tuple[str, ...] = ()
    pattern: str | None = None
    minimum: int | None = None
    maximum: int | None = None
    min_items: int | None = None
    default: Any = None

    def __hash__(self) -> int:  # ``fields`` (a read-only mapping) is not part of the hash
        return hash(_FIELD_HASH_KEY(self))


_FIELD_HASH_KEY = key_without(Field, "fields")


def _table(**fields: Field) -> Mapping[str, Field]:
    return MappingProxyType(dict(fields))


def _mode(doc: str, choices: tuple[str, ...], default: str) -> Mapping[str, Field]:
    return _table(mode=Field(Kind.STRING, doc, choices=choices, default=default))


SERVER_HTTP_LIMIT_FIELDS = _table(
    max_entries=Field(Kind.INTEGER, "entries an upload archive may hold", minimum=1, default=DEFAULT_MAX_ENTRIES),
    max_path_depth=Field(
        Kind.INTEGER, "path segments of one archive entry (a/b/c.txt has 3)", minimum=1, default=DEFAULT_MAX_PATH_DEPTH
    ),
    max_name_length=Field(
        Kind.INTEGER, "bytes (UTF-8) of one path segment of an archive entry", minimum=1,
        default=DEFAULT_MAX_NAME_LENGTH,
    ),
    max_path_length=Field(
        Kind.INTEGER, "bytes (UTF-8) of one archive entry's path", minimum=1, default=DEFAULT_MAX_PATH_LENGTH
    ),
    max_header_size=Field(
        Kind.BYTE_SIZE, "PAX and GNU extension headers of one archive entry", default=DEFAULT_MAX_HEADER_SIZE
    ),
    max_manifest_size=Field(Kind.BYTE_SIZE, "size of an upload's manifest.json", default=DEFAULT_MAX_MANIFEST_SIZE),
    max_directories=Field(
        Kind.INTEGER, "directories an upload archive names or implies (ancestors of its entries)", minimum=1,
        default=DEFAULT_MAX_DIRECTORIES,
    ),
    max_header_count=Field(
        Kind.INTEGER, "PAX and GNU extension headers chained in front of one archive entry", minimum=1,
        default=DEFAULT_MAX_HEADER_COUNT,
    ),
)

S3_CREDENTIAL_FIELDS = _table(
    access_key_id_env=Field(Kind.STRING, "environment variable or secret-file name holding the access key id"),
    secret_access_key_env=Field(
        Kind.STRING, "environment variable or secret-file name holding the secret access key"
    ),
)

#: how an S3 bucket is reached: the keys of an ``s3`` backend besides ``bucket`` and ``prefix``,
#: shared with ``server.http.staging_s3`` (an ``s3://`` staging root, issue 29)
S3_CONNECTION_FIELDS = _table(
    region=Field(Kind.STRING, "region", default=DEFAULT_S3_REGION),
    endpoint=Field(Kind.STRING, "endpoint URL of an S3-compatible service"),
    force_path_style=Field(Kind.BOOLEAN, "use path-style bucket addressing", default=False),
    conditional_writes=Field(
        Kind.STRING,
        "trusted: the store enforces If-None-Match/If-Match on writes, no HeadObject first; "
        "precheck: HeadObject before every conditional write; default trusted without endpoint, "
        "precheck with one",
        choices=S3_CONDITIONAL_WRITES,
    ),
    credentials=Field(
        Kind.MAPPING,
        "names of the secrets holding the credentials; omitted: the default credential chain",
        fields=S3_CREDENTIAL_FIELDS,
        required=("access_key_id_env", "secret_access_key_env"),
    ),
)

SERVER_HTTP_FIELDS = _table(
    bind=Field(Kind.STRING, "host:port the upload server listens on", default=DEFAULT_BIND),
    staging_root=Field(
        Kind.STRING,
        "directory under which upload pipelines stage bundles (relative: against the config file's directory)",
        default=DEFAULT_STAGING_DIR,
    ),
    max_upload_size=Field(Kind.BYTE_SIZE, "largest accepted upload request body", default=DEFAULT_MAX_UPLOAD_SIZE),
    queue_size=Field(Kind.INTEGER, "accepted uploads waiting to be published", minimum=1, default=DEFAULT_QUEUE_SIZE),
    max_concurrency=Field(
        Kind.INTEGER, "uploads published at the same time", minimum=1, default=DEFAULT_MAX_CONCURRENCY
    ),
    retention=Field(Kind.DURATION, "how long finished upload records are kept", default=DEFAULT_RETENTION),
    header_timeout=Field(
        Kind.DURATION, "time a connection has to send a complete request head", default=DEFAULT_HEADER_TIMEOUT
    ),
    max_connections=Field(
        Kind.INTEGER, "connections served at once; further ones are answered 503 and closed", minimum=1,
        default=DEFAULT_MAX_CONNECTIONS,
    ),
    max_connections_per_client=Field(
        Kind.INTEGER,
        "connections one client address may hold while none of its requests carries a valid token "
        "(idle, sending a head, or a request without a valid token); 0: no cap per address",
        minimum=0, default=DEFAULT_MAX_CONNECTIONS_PER_CLIENT,
    ),
    reserved_connections=Field(
        Kind.INTEGER,
        "connection slots only requests with a valid upload token may use; less than max_connections; "
        "0: a quarter of max_connections",
        minimum=0, default=DEFAULT_RESERVED_CONNECTIONS,
    ),
    max_head_size=Field(
        Kind.BYTE_SIZE, "bytes of a request line and its headers; a larger head is answered 431",
        default=DEFAULT_MAX_HEAD_SIZE,
    ),
    body_idle_timeout=Field(
        Kind.DURATION, "longest pause while an upload body arrives", default=DEFAULT_BODY_IDLE_TIMEOUT
    ),
    body_min_rate=Field(
        Kind.BYTE_SIZE,
        "slowest average upload rate, per second, once body_idle_timeout has passed; 0: no minimum",
        default=DEFAULT_BODY_MIN_RATE,
    ),
    max_queue_per_token=Field(
        Kind.INTEGER,
        "queue slots one upload token may hold; 0: half of queue_size (all of it when there is one token)",
        minimum=0, default=0,
    ),
    max_failed_bytes=Field(
        Kind.BYTE_SIZE,
        "bytes of failed uploads' staged bundles kept for inspection, all tokens together; the oldest are "
        "removed first", default=DEFAULT_MAX_FAILED_BYTES,
    ),
    max_failed_bytes_per_token=Field(
        Kind.BYTE_SIZE,
        "bytes of failed uploads' staged bundles kept for inspection per upload token; the oldest are removed "
        "first", default=DEFAULT_MAX_FAILED_BYTES_PER_TOKEN,
    ),
    limits=Field(
        Kind.MAPPING, "limits of an upload archive, checked while it streams", fields=SERVER_HTTP_LIMIT_FIELDS
    ),
    publication_lease=Field(
        Kind.DURATION,
        "with an s3:// staging_root and the inline publisher: how long a replica's claim on a publication "
        "lasts without renewal (renewed every quarter of it); another replica that sees it unchanged this long "
        "takes the publication over",
        default="60s",
    ),
    admission_lease=Field(
        Kind.DURATION,
        "with an s3:// staging_root: how long an admission's claim on its idempotency key lasts while its "
        "record is written; another replica that sees the claim (or a pending marker without its record) "
        "unchanged this long takes it over (or removes it); an admission slower than that loses its key",
        default="120s",
    ),
    staging_s3=Field(
        Kind.MAPPING,
        "how to reach an s3:// staging_root (region, endpoint, force_path_style, conditional_writes, "
        "credentials: the keys of an s3 destination)",
        fields=S3_CONNECTION_FIELDS,
    ),
)


BACKEND_FIELDS: Mapping[str, Mapping[str, Field]] = MappingProxyType(
    {
        "local": _table(
            path=Field(Kind.STRING, "root directory (relative: against the config file's directory)"),
        ),
        "ssh": _table(
            host=Field(Kind.STRING, "SFTP server host name or address"),
            port=Field(Kind.INTEGER, "SFTP server port", minimum=1, maximum=65535, default=DEFAULT_SSH_PORT),
            user=Field(Kind.STRING, "login user"),
            path=Field(Kind.STRING, "absolute remote root directory"),
            private_key_file=Field(Kind.STRING, "private key file; omitted: SSH agent and default keys"),
            known_hosts_file=Field(
                Kind.STRING, "known_hosts file used to verify the host key", default=DEFAULT_KNOWN_HOSTS_FILE
            ),
            host_key_policy=Field(
                Kind.STRING, "strict: host key must be known; accept_new: record unknown keys",
                choices=HOST_KEY_POLICIES, default="strict",
            ),
            transport=Field(
                Kind.STRING,
                "paramiko: SSH in this process; openssh: the system ssh client (ssh -s sftp), for "
                "ProxyJump, certificates, agents and ControlMaster from ssh_config_file",
                choices=SSH_TRANSPORTS, default="paramiko",
            ),
            ssh_config_file=Field(
                Kind.STRING,
                "OpenSSH client config file (transport: openssh); omitted: none, never ~/.ssh/config",
            ),
            ssh_options=Field(
                Kind.STRING_MAP,
                "extra OpenSSH options, Option: value (transport: openssh); options that weaken "
                "host-key checking or open forwardings are refused",
            ),
        ),
        "s3": _table(
            bucket=Field(Kind.STRING, "bucket name"),
            prefix=Field(Kind.STRING, "key prefix used as the root (no leading or trailing /)", default=""),
            **S3_CONNECTION_FIELDS,
        ),
        "http_upload": _table(
            staging_path=Field(
                Kind.STRING, "staging directory of this pipeline; default <server.http.staging_root>/<pipeline id>"
            ),
            max_upload_size=Field(Kind.BYTE_SIZE, "upload limit of this pipeline; default server.http.max_upload_size"),
        ),
    }
)

BACKEND_REQUIRED: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {"local": ("path",), "ssh": ("host", "user", "path"), "s3": ("bucket",), "http_upload": ()}
)

#: Every key that belongs to some backend, with the backends that own it.
BACKEND_KEY_OWNERS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        key: tuple(name for name, table in BACKEND_FIELDS.items() if key in table)
        for key in dict.fromkeys(k for table in BACKEND_FIELDS.values() for k in table)
    }
)

#: ``dagster``: how a pipeline's or a destination's assets look in Dagster (issue 25). Dagster's own
#: rules (group, owner and tag syntax) are applied by ``distributor_dagster`` when it builds the
#: assets, each refusal naming this key; the CLI and the upload server ignore the block.
DAGSTER_FIELDS = _table(
    description=Field(Kind.STRING, "the asset's description (replaces the generated one)"),
    group=Field(Kind.STRING, "asset group (segments of letters, digits and underscores, joined by /)"),
    owners=Field(Kind.STRING_LIST, "asset owners: email addresses or team:<name>"),
    tags=Field(Kind.STRING_MAP, "asset tags, key: value (Dagster's tag rules)"),
    kinds=Field(Kind.STRING_LIST, "kinds shown next to the built-in one (at most 10 in all)"),
    deps=Field(Kind.STRING_LIST, "upstream asset keys, components joined by / (e.g. analytics/daily_report)"),
)

#: ``dagster.max_partitions`` of a pipeline when unset (issue 37): Dagster's UI slows past about
#: 10,000 partitions per asset (its docs advise fewer than 100,000).
DEFAULT_MAX_PARTITIONS = 10_000

#: the pipeline's ``dagster`` block: the asset settings, and how many bundles stay partitions
PIPELINE_DAGSTER_FIELDS = _table(
    **DAGSTER_FIELDS,
    max_partitions=Field(
        Kind.INTEGER,
        "bundles the pipeline keeps as Dagster partitions at most; beyond it the partitions of the bundles "
        "seen first are deleted (their files stay)",
        default=DEFAULT_MAX_PARTITIONS,
    ),
)

DESTINATION_FIELDS = _table(
    id=Field(Kind.STRING, "destination id, unique within the pipeline", pattern=SLUG_PATTERN),
    publish=Field(
        Kind.MAPPING,
        "what is published; absent: source files only; an omitted key inside the block is false",
        fields=_table(
            source=Field(Kind.BOOLEAN, "publish the bundle's files", default=False),
            html=Field(Kind.BOOLEAN, "publish HTML generated from Markdown files", default=False),
        ),
    ),
    transform=Field(
        Kind.MAPPING,
        "transforms that generate outputs",
        fields=_table(
            markdown_to_html=Field(
                Kind.MAPPING,
                "render Markdown files to HTML",
                fields=_table(
                    enabled=Field(Kind.BOOLEAN, "enable the transform", default=False),
                    mode=Field(
                        Kind.STRING, "sidecar: name.md -> name.html; index: the one Markdown file -> index.html",
                        choices=MARKDOWN_MODES, default="sidecar",
                    ),
                ),
            ),
        ),
    ),
    path_mapping=Field(
        Kind.MAPPING,
        "where a bundle lands below the destination root",
        fields=_mode("preserve_relative: the source-relative bundle path; fixed: the destination root",
                     PATH_MAPPING_MODES, "preserve_relative"),
    ),
    links=Field(
        Kind.MAPPING,
        "public URLs recorded in destination state",
        fields=_table(
            base_url=Field(Kind.STRING, "absolute http(s) URL of the destination root"),
            primary=Field(Kind.STRING, "which output becomes the primary URL", choices=LINK_PRIMARIES, default="auto"),
        ),
        required=("base_url",),
    ),
    state=Field(
        Kind.MAPPING,
        "destination state ownership",
        fields=_mode("single_owner or shared_root", STATE_MODES, "single_owner"),
    ),
    reconciliation=Field(
        Kind.MAPPING,
        "what happens to managed outputs the new publication omits",
        fields=_mode("replace: delete them; merge: keep them", RECONCILIATION_MODES, "replace"),
    ),
    retention=Field(
        Kind.MAPPING,
        "retention of managed outputs",
        fields=_table(
            prune=Field(
                Kind.MAPPING,
                "the policy `distributor prune` applies",
                fields=_table(
                    enabled=Field(Kind.BOOLEAN, "enable pruning", default=False),
                    older_than=Field(
                        Kind.DURATION, "prune outputs (files) of each bundle path updated longer ago than this"
                    ),
                    keep_latest=Field(Kind.INTEGER, "always keep this many newest outputs (files) of each bundle path"),
                    bundles=Field(
                        Kind.MAPPING,
                        "preserve_relative destinations: remove whole bundle paths (outputs, .distributor.json, "
                        "empty folders), the newest bundles by their manifest's created time kept; instead of "
                        "older_than and keep_latest",
                        fields=_table(
                            keep_latest=Field(Kind.INTEGER, "always keep this many newest bundles"),
                            older_than=Field(Kind.DURATION, "remove bundles created longer ago than this"),
                        ),
                    ),
                ),
            ),
        ),
    ),
    lock_lease=Field(
        Kind.DURATION,
        "how long a writer's destination lock lasts without renewal (renewed every quarter of it): another "
        "writer that sees it unchanged this long takes it over (at once when its process on the same host is "
        "gone); a writer stalled longer loses the lock and writes nothing more",
        default=DEFAULT_LOCK_LEASE,
    ),
    takeover=Field(
        Kind.MAPPING,
        "when a normal publication may replace managed content of another owner or source",
        fields=_mode("same_pipeline, same_source, any_managed or never", TAKEOVER_MODES, "same_pipeline"),
    ),
    dagster=Field(
        Kind.MAPPING,
        "how the destination's asset looks in Dagster: group, owners and tags add to or replace the "
        "pipeline's; description, kinds and deps are the destination's own",
        fields=DAGSTER_FIELDS,
    ),
    transfer=Field(
        Kind.MAPPING,
        "actions for comparison outcomes",
        fields=_table(
            **{
                name: Field(Kind.STRING, f"action when {name.removeprefix('on_').replace('_', ' ')}",
                            choices=choices, default=choices[0])
                for name, choices in TRANSFER_CHOICES.items()
            }
        ),
    ),
)

UPLOAD_TOKEN_FIELDS = _table(
    id=Field(Kind.STRING, "token record id", pattern=SLUG_PATTERN),
    token_env=Field(Kind.STRING, "environment variable or secret-file name holding the bearer token"),
    allow_pipelines=Field(Kind.STRING_LIST, "http_upload pipeline ids this token may upload to", min_items=1),
)

PIPELINE_FIELDS = _table(
    id=Field(Kind.STRING, "pipeline id, unique in the config", pattern=SLUG_PATTERN),
    source=Field(
        Kind.MAPPING, "where bundles come from; backend fields are inline", backends=SOURCE_BACKENDS,
        required=("backend",),
    ),
    validation=Field(
        Kind.MAPPING,
        "validation policy of local sources (digest checks are always on)",
        fields=_table(
            cache=Field(
                Kind.BOOLEAN,
                "trust the validation cache for a local source file whose device, inode, size, mtime and "
                "ctime are unchanged since it last hashed to its recorded sha256 (false: hash every file)",
                default=True,
            ),
        ),
    ),
    dagster=Field(
        Kind.MAPPING,
        "how the pipeline's assets look in Dagster: group, owners and tags apply to all of them; "
        "description, kinds and deps to the source asset; max_partitions bounds its bundle partitions",
        fields=PIPELINE_DAGSTER_FIELDS,
    ),
    destinations=Field(
        Kind.MAPPING_LIST,
        "where bundles are published; backend fields are inline",
        fields=DESTINATION_FIELDS,
        backends=DESTINATION_BACKENDS,
        required=("id", "backend"),
        min_items=1,
    ),
)

ROOT_FIELDS = _table(
    server=Field(
        Kind.MAPPING,
        "server settings",
        fields=_table(http=Field(Kind.MAPPING, "the HTTP upload server", fields=SERVER_HTTP_FIELDS)),
    ),
    secrets=Field(
        Kind.MAPPING,
        "secret resolution",
        fields=_table(
            directory=Field(
                Kind.STRING, "directory of secret files, looked up after the environment; empty: disabled", default=""
            )
        ),
    ),
    upload_tokens=Field(
        Kind.MAPPING_LIST,
        "bearer tokens for `distributor serve`",
        fields=UPLOAD_TOKEN_FIELDS,
        required=("id", "token_env", "allow_pipelines"),
    ),
    pipelines=Field(
        Kind.MAPPING_LIST, "pipelines", fields=PIPELINE_FIELDS, required=("id", "source", "destinations"),
        min_items=1,
    ),
)

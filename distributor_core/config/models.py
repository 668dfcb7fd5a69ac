"""The config, declared once: every YAML key is a field of these frozen msgspec Structs.

A field says everything about its key: its type (``bool``, ``int``, ``str``, a ``Literal`` of
its documented values, :data:`Duration`, :data:`ByteSize`, a local ``Path``, a nested Struct for
a mapping, a tuple of Structs for a list of mappings), its default (the field's default; a key
without one is required), its constraints (``msgspec.Meta`` bounds and patterns) and its
description (``Meta(description=...)``, the text of docs/config.md and the JSON Schema). From
these, :mod:`.shape` derives what the strict decoder, the defaults, the JSON Schema and the
reference tables of docs/config.md use, and :mod:`.validate` takes every bound and choice it
checks; nothing else lists a key. What the YAML says beyond the Python type is ``Meta.extra``:

- ``derived``: not a YAML key; filled in at load from other keys (resolved paths, the shared
  staging store, the config's directory);
- ``inline``: the union's keys sit inline in the enclosing mapping (a destination's backend);
- ``expand_user``: a local path in which ``~`` is expanded;
- ``gt`` on a duration: it must be greater than zero (msgspec bounds only numbers);
- ``kind``: ``byte size`` for an ``int`` written as a size (:data:`ByteSize`);
- ``shown``: how docs/config.md names the type, where the Python type does not say it;
- ``default``: the default, in words, of a key whose default depends on other keys;
- ``keeps_empty``: an empty string is a value, kept for its reader to judge (elsewhere an empty
  string means "use the default", as Go's zero value does, and an optional path or URL is absent).

These are what the rest of distributor consumes: immutable, keyword-only, rejecting unknown
fields. :func:`~distributor_core.config.load.load_config` builds them (``msgspec.convert``) only
from a tree that ``decode``, ``fill`` and ``validate`` finished, and those worded every message;
a Struct built in code (tests, ``serve`` without a config) takes the same defaults. Structs
instead of pydantic models (issue 17 start-up): pydantic and 26 model classes cost ~0.1–0.2 s of
every command's start; msgspec imports in a few milliseconds, builds its classes in C, and its
``inspect`` module hands the declaration to :mod:`.shape` as plain data.

A :class:`Config` only exists for a valid file: every default of interfaces §1.9 is filled in,
every local path is absolute (resolved against the config file's directory, resolutions D4), and
every mode is one of its documented values. Backend fields are inline in the YAML; here a source
*is* its backend model and a destination carries its backend model in ``storage``. Each backend
model names its own root (:meth:`LocalBackend.location`, ``uri``, ``root_text``, ...): reports,
refusals, Dagster descriptions and the host-path scrubber ask it, never the backend's name.
"""

import os
import posixpath
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal
from urllib.parse import quote

import msgspec
from msgspec import Meta

from distributor_core.config.addresses import split_host_port
from distributor_core.config.errors import ConfigLookupError

#: ids of pipelines, destinations and upload tokens (interfaces §0.2), over the whole string
SLUG_PATTERN = r"[a-zA-Z0-9][a-zA-Z0-9._-]*"
#: an ssh host (issue 35): a host name, an IPv4 address, an IPv6 address (``::1``,
#: ``fe80::1%eth0``) or a ``Host`` alias; never a leading ``-``, which ``ssh`` would read as an option
SSH_HOST_PATTERN = r"^(?:[A-Za-z0-9_][A-Za-z0-9._-]*|[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*(?:%[A-Za-z0-9._-]+)?)$"
#: an ssh login name (``svc-reports``, ``user@example.com`` for a directory account)
SSH_USER_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9._@-]*$"
KB, MB, GB = 1024, 1024**2, 1024**3

#: a duration (Go syntax in the YAML, ``24h``)
Duration = timedelta
#: a number of bytes, written as a size (``20MB``) or a bare integer
ByteSize = Annotated[int, Meta(extra={"kind": "byte size"})]
#: a slug-like id
Slug = Annotated[str, Meta(pattern=f"^{SLUG_PATTERN}$", extra={"shown": "[slug-like id](#ids)"})]
#: an absolute http(s) URL
Url = Annotated[str, Meta(extra={"shown": "URL"})]

POSITIVE = Meta(gt=0)
NOT_NEGATIVE = Meta(ge=0)
POSITIVE_DURATION = Meta(extra={"gt": 0})
DERIVED = Meta(extra={"derived": True})
INLINE = Meta(extra={"inline": True})
EXPAND_USER = Meta(extra={"expand_user": True})


def _doc(text: str, **extra: Any) -> Meta:
    """A key's description, and what the YAML says beyond its type (see the module doc)."""
    return Meta(description=text, extra=extra or None)


class _Model(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Base of every config model (``kw_only`` is per class in msgspec: each model repeats it)."""


def default_of(model: type[msgspec.Struct], name: str) -> Any:
    """The declared default of ``model.name`` (for code that takes the value without a config)."""
    for field in msgspec.structs.fields(model):
        if field.name == name:
            if field.default_factory is not msgspec.NODEFAULT:
                return field.default_factory()
            if field.default is msgspec.NODEFAULT:
                raise LookupError(f"{model.__name__}.{name} has no default")
            return field.default
    raise LookupError(f"{model.__name__} has no field {name}")


# --- backends ---------------------------------------------------------------------------------


class S3Credentials(_Model, kw_only=True):
    """Names of the secrets (environment variables or secret files) holding S3 credentials."""

    access_key_id_env: Annotated[str, _doc("secret name of the access key id")]
    secret_access_key_env: Annotated[str, _doc("secret name of the secret access key")]


class S3Connection(_Model, kw_only=True):
    """How an S3 bucket is reached: the keys of an ``s3`` backend besides ``bucket`` and ``prefix``,
    and of ``server.http.staging_s3`` (an ``s3://`` staging root, issue 29)."""

    region: Annotated[str, _doc("the bucket's region")] = "us-east-1"
    endpoint: Annotated[
        Url | None,
        _doc("absolute `http`/`https` URL of an S3-compatible service (passed to boto3 as `endpoint_url`)"),
    ] = None
    force_path_style: Annotated[bool, _doc("path-style addressing, needed by most S3-compatible services")] = False
    #: ``None`` (a model built in code): ``trusted`` without ``endpoint``, ``precheck`` with one
    conditional_writes: Annotated[
        Literal["trusted", "precheck"] | None,
        _doc(
            "`trusted`: the service enforces `If-None-Match`/`If-Match` on writes, so no `HeadObject` is sent "
            "first (AWS S3 does); `precheck`: a `HeadObject` before every conditional write, the only protection "
            "on services that ignore those headers "
            "([s3.md](integrations/s3.md#writes-conditional-requests-and-what-they-guarantee))",
            default="`trusted` without `endpoint`, `precheck` with one",
        ),
    ] = None
    credentials: Annotated[
        S3Credentials | None,
        _doc("names of the secrets holding the credentials, set together; omitted (or empty): boto3's default "
             "credential chain (environment, shared files, instance roles)"),
    ] = None


class LocalBackend(_Model, kw_only=True, tag_field="backend", tag="local"):
    """A local directory. ``path`` is the configured text; ``resolved_path`` is absolute."""

    #: the union tag (``backend`` in the YAML), also readable as an attribute
    backend: ClassVar[Literal["local"]] = "local"
    #: root-relative paths are file system paths, bounded by ``PATH_MAX`` and ``NAME_MAX``
    object_keys: ClassVar[bool] = False
    path: Annotated[
        str, _doc("the backend root: the directory bundles are discovered under or published to (relative: "
                  "against the config directory)", shown="path")
    ]
    resolved_path: Annotated[Path, DERIVED]

    @property
    def root_path(self) -> str:
        """The configured root, as JSON reports show it (``.`` when empty)."""
        return self.path or "."

    @property
    def root_key(self) -> str:
        """Identifies the root for serialisation (resolutions B1) and Dagster pools."""
        return f"local:{self.resolved_path}"

    @property
    def local_root(self) -> Path | None:
        """The root as a directory of this host (what the host-path scrubber hides)."""
        return self.resolved_path

    def location(self, path: str = "") -> str:
        """Where the root-relative ``path`` is, as an operator types it: an absolute directory."""
        root = os.path.abspath(os.fspath(self.resolved_path))
        return os.path.join(root, path) if path else root

    def uri(self, path: str = "") -> str:
        """The same place as a URI (``file:///...``)."""
        return Path(self.location(path)).as_uri()

    @property
    def root_text(self) -> str:
        """The root as text reports show it: absolute, not relative to the config file."""
        return self.location()

    @property
    def path_prefix(self) -> str:
        """What stands in front of a root-relative path in the backend's own namespace."""
        return self.location().rstrip("/") + "/"

    endpoint_note: ClassVar[str] = ""


class SSHBackend(_Model, kw_only=True, tag_field="backend", tag="ssh"):
    """An SFTP server. ``path`` is the absolute remote root; key files are absolute local paths."""

    #: the union tag (``backend`` in the YAML), also readable as an attribute
    backend: ClassVar[Literal["ssh"]] = "ssh"
    object_keys: ClassVar[bool] = False
    endpoint_note: ClassVar[str] = ""
    host: Annotated[
        str, Meta(pattern=SSH_HOST_PATTERN, max_length=255),
        _doc("the SFTP server: a host name, an IP address or a `Host` alias of `ssh_config_file`: letters, digits, "
             "`.`, `-`, `_`, `:` (IPv6), not starting with `-`, at most 255 bytes"),
    ]
    port: Annotated[int, Meta(ge=1, le=65535), _doc("SFTP server port")] = 22
    user: Annotated[
        str, Meta(pattern=SSH_USER_PATTERN, max_length=255),
        _doc("a login name: letters, digits, `.`, `-`, `_`, `@`, not starting with `-` or `.`, at most 255 bytes"),
    ]
    path: Annotated[str, _doc("absolute remote directory, the backend root")]
    private_key_file: Annotated[
        Path | None, EXPAND_USER, _doc("omitted: the SSH agent and the default keys")
    ] = None
    known_hosts_file: Annotated[Path, EXPAND_USER, _doc("host keys are verified against it")] = Path(
        "~/.ssh/known_hosts"
    )
    host_key_policy: Annotated[
        Literal["strict", "accept_new"],
        _doc("`strict`: the host key must already be known; `accept_new`: an unknown key is recorded (never "
             "during a dry run); a changed key always fails"),
    ] = "strict"
    transport: Annotated[
        Literal["paramiko", "openssh"],
        _doc("`paramiko`: SSH inside the distributor process; `openssh`: the system `ssh` client (`ssh -s sftp`, "
             "batch mode, no TTY) carries the SFTP session, for bastions (`ProxyJump`), OpenSSH certificates, "
             "agents, hardware keys and `ControlMaster`, and it publishes faster "
             "([ssh-sftp](integrations/ssh-sftp.md))"),
    ] = "paramiko"
    #: OpenSSH client config (``-F``) for ``transport: openssh``; ``None``: ``-F /dev/null``
    ssh_config_file: Annotated[
        Path | None, EXPAND_USER,
        _doc("`transport: openssh` only: the OpenSSH client config passed as `ssh -F`; omitted: `-F /dev/null`, "
             "so neither `~/.ssh/config` nor `/etc/ssh/ssh_config` applies by accident. `host`, `port`, `user`, "
             "`private_key_file`, `known_hosts_file` and strict host-key checking are set on the command line "
             "and win over this file"),
    ] = None
    #: extra ``-o Option=value`` pairs for ``transport: openssh``, in file order
    ssh_options: Annotated[
        tuple[tuple[str, str], ...],
        _doc("`transport: openssh` only: extra `ssh -o Option=value` options from an allow-list, each value checked "
             "([the list](integrations/ssh-sftp.md#ssh_options)): algorithms (`Ciphers`, `MACs`, `KexAlgorithms`, "
             "`HostKeyAlgorithms`, ...) by names that are not weak, `ConnectTimeout`, `ServerAliveInterval`, "
             "`ServerAliveCountMax` as bounded numbers, `ControlMaster`, `ControlPath`, `ProxyJump` and a few more; "
             "anything else is refused, naming the option (put it in `ssh_config_file`)"),
    ] = ()

    @property
    def root_path(self) -> str:
        return self.path or "."

    @property
    def root_key(self) -> str:
        return self.location()

    local_root: ClassVar[None] = None

    def location(self, path: str = "") -> str:
        """``ssh://user@host:port/root[/path]``."""
        where = posixpath.join(self.path, path).rstrip("/") if path else self.path
        return f"ssh://{self.user}@{self.host}:{self.port}{where}"

    def uri(self, path: str = "") -> str:
        """The same place as a URI: the user and the path percent-encoded."""
        where = posixpath.join(self.path, path).rstrip("/") if path else self.path
        return f"ssh://{quote(self.user, safe='')}@{self.host}:{self.port}{quote(where)}"

    @property
    def root_text(self) -> str:
        """The remote directory, as text reports show it."""
        return self.root_path

    @property
    def path_prefix(self) -> str:
        return self.path.rstrip("/") + "/"


class S3Backend(S3Connection, kw_only=True, tag_field="backend", tag="s3"):
    """An S3 bucket (``endpoint`` for S3-compatible services, passed to boto3 as ``endpoint_url``)."""

    #: the union tag (``backend`` in the YAML), also readable as an attribute
    backend: ClassVar[Literal["s3"]] = "s3"
    #: root-relative paths are object keys, bounded by S3's key length
    object_keys: ClassVar[bool] = True
    bucket: Annotated[str, _doc("bucket name")]
    prefix: Annotated[
        str,
        _doc("relative, slash-separated, no leading or trailing `/`, no empty, `.` or `..` segment, no `\\`; "
             "object keys are `<prefix>/<path>`"),
    ] = ""

    @property
    def root_path(self) -> str:
        """The configured prefix, as reports show it (``.`` for the bucket root)."""
        return self.prefix or "."

    @property
    def root_key(self) -> str:
        where = f"s3://{self.bucket}/{self.prefix}"
        return f"{where}@{self.endpoint}" if self.endpoint else where

    local_root: ClassVar[None] = None

    def location(self, path: str = "") -> str:
        """``s3://bucket[/prefix][/path]``."""
        return "s3://" + "/".join(part.strip("/") for part in (self.bucket, self.prefix, path) if part.strip("/"))

    def uri(self, path: str = "") -> str:
        """The same place as a URI: the object key percent-encoded."""
        key = "/".join(part.strip("/") for part in (self.prefix, path) if part.strip("/"))
        return f"s3://{self.bucket}/{quote(key)}" if key else f"s3://{self.bucket}"

    @property
    def endpoint_note(self) -> str:
        """`` at <endpoint>`` for an S3-compatible service (the root's text names it)."""
        return f" at {self.endpoint}" if self.endpoint else ""

    @property
    def root_text(self) -> str:
        return self.root_path

    @property
    def path_prefix(self) -> str:
        return f"{self.prefix}/" if self.prefix else ""


class HTTPUploadSource(_Model, kw_only=True, tag_field="backend", tag="http_upload"):
    """An ``http_upload`` source, served by ``distributor serve``. ``staging_path`` is absolute."""

    #: the union tag (``backend`` in the YAML), also readable as an attribute
    backend: ClassVar[Literal["http_upload"]] = "http_upload"
    staging_path: Annotated[
        Path,
        _doc("where accepted uploads are staged; a local directory path (URLs are refused); must not be, contain "
             "or lie inside another upload pipeline's staging path",
             default="`<server.http.staging_root>/<pipeline id>`"),
    ]
    max_upload_size: Annotated[
        ByteSize, POSITIVE, _doc("the pipeline's upload limit", default="`server.http.max_upload_size`")
    ]
    #: the pipeline's part of a shared S3 staging store (``<prefix>/<pipeline id>``); then
    #: ``staging_path`` is only this host's scratch directory for uploads being received
    staging_store: Annotated[S3Backend | None, DERIVED] = None

    @property
    def shared(self) -> bool:
        """Whether uploads are staged in a store several ``serve`` replicas share."""
        return self.staging_store is not None

    @property
    def local_root(self) -> Path:
        return self.staging_path

    def location(self, path: str = "") -> str:
        """The staging area: its directory, or its part of the shared store."""
        if self.staging_store is not None:
            return self.staging_store.location(path)
        root = os.path.abspath(os.fspath(self.staging_path))
        return os.path.join(root, path) if path else root

    def uri(self, path: str = "") -> str:
        if self.staging_store is not None:
            return self.staging_store.uri(path)
        return Path(self.location(path)).as_uri()

    @property
    def endpoint_note(self) -> str:
        return self.staging_store.endpoint_note if self.staging_store is not None else ""


#: the backend unions, told apart by their ``backend`` tag
StorageBackend = LocalBackend | SSHBackend | S3Backend
SourceBackend = LocalBackend | SSHBackend | S3Backend | HTTPUploadSource


# --- server, secrets, upload tokens ---------------------------------------------------------


class UploadLimits(_Model, kw_only=True):
    """``server.http.limits``: what one upload archive may hold, checked while it streams."""

    max_entries: Annotated[int, POSITIVE, _doc("entries (files, directories) of one upload archive")] = 10_000
    max_path_depth: Annotated[int, POSITIVE, _doc("path segments of an entry (`a/b/c.txt` has 3)")] = 64
    max_name_length: Annotated[int, POSITIVE, _doc("bytes (UTF-8) of one path segment")] = 255
    max_path_length: Annotated[int, POSITIVE, _doc("bytes (UTF-8) of an entry's path")] = 4096
    max_header_size: Annotated[
        ByteSize, POSITIVE, _doc("PAX extended and GNU long-name headers of one entry, together")
    ] = 64 * KB
    max_manifest_size: Annotated[ByteSize, POSITIVE, _doc("size of the upload's `manifest.json`")] = 16 * MB
    max_directories: Annotated[
        int, POSITIVE,
        _doc("directories one upload archive names or implies (every ancestor of an entry counts once)"),
    ] = 10_000
    max_header_count: Annotated[
        int, POSITIVE,
        _doc("PAX extended and GNU long-name headers chained in front of one entry (a global PAX header counts "
             "for the entry it precedes)"),
    ] = 8


class ServerHTTP(_Model, kw_only=True):
    """``server.http``: the upload server. Sizes are bytes; ``staging_root`` is absolute."""

    bind: Annotated[
        str,
        _doc("port 0–65535 (`0` picks a free port); IPv6 as `[::1]:8080`; a host is required",
             shown="`host:port`"),
    ] = "127.0.0.1:8080"
    #: with an ``s3://`` root: this host's scratch directory for receiving uploads
    staging_root: Annotated[
        Path,
        _doc(
            "a local directory: the parent of the per-pipeline staging directories, used by one `serve` process. "
            "`s3://bucket/prefix`: staging shared by any number of `serve` replicas, each pipeline under "
            "`<prefix>/<pipeline id>` ([shared staging](#shared-staging-in-s3)); any other URL scheme is refused",
            shown="path or `s3://bucket/prefix`",
        ),
    ] = Path(".distributor/staging")
    staging_s3: Annotated[
        S3Connection | None,
        _doc("only with an `s3://` `staging_root`: how to reach the bucket, with the keys of an "
             "[`s3` backend](#s3) besides `bucket` and `prefix`"),
    ] = None
    max_upload_size: Annotated[ByteSize, POSITIVE, _doc("largest accepted upload request body")] = 100 * MB
    queue_size: Annotated[int, POSITIVE, _doc("accepted uploads waiting to be published")] = 16
    max_concurrency: Annotated[int, POSITIVE, _doc("uploads published at the same time")] = 1
    retention: Annotated[Duration, POSITIVE_DURATION, _doc("how long finished upload records are kept")] = timedelta(
        hours=24
    )
    header_timeout: Annotated[
        Duration, POSITIVE_DURATION,
        _doc("a connection that has not sent a complete request head (request line and headers) by then is "
             "closed, and so is an idle keep-alive connection"),
    ] = timedelta(seconds=10)
    body_idle_timeout: Annotated[
        Duration, POSITIVE_DURATION, _doc("longest pause while an upload body arrives (`400`)")
    ] = timedelta(seconds=60)
    #: the inline publisher's claim on a publication in a shared store (renewed every quarter)
    publication_lease: Annotated[
        Duration, POSITIVE_DURATION,
        _doc("only with an `s3://` `staging_root` and the inline publisher: a replica's claim on the publication "
             "it runs, renewed every quarter of it; when a replica dies, another one takes its publication over "
             "once it has seen the lease unchanged this long on its own monotonic clock (at once when the dead "
             "replica ran on the same host): the failover time"),
    ] = timedelta(seconds=60)
    #: an admission's claim on its idempotency key in a shared store (and a marker's life without its record)
    admission_lease: Annotated[
        Duration, POSITIVE_DURATION,
        _doc("only with an `s3://` `staging_root`: how long an admission's claim on its idempotency key lasts "
             "while the replica writes its record. Another replica that has seen the claim unchanged this long "
             "(on its own monotonic clock) takes the key over, and removes a pending marker whose record is "
             "missing; an admission slower than that loses its key and answers the winner's replay (or a "
             "retryable `503`) instead of a second `202`"),
    ] = timedelta(seconds=120)
    max_connections: Annotated[
        int, POSITIVE,
        _doc("connections served at once. When a new connection would exceed it, an idle connection (no request "
             "in progress: the oldest one of the address holding the most connections without a valid token) is "
             "closed to make room; when none is idle, the new one is answered `503` and closed"),
    ] = 256
    max_head_size: Annotated[
        ByteSize, POSITIVE,
        _doc("bytes of a request line and its headers; a larger head is answered `431` and the connection "
             "closed"),
    ] = 64 * KB
    #: 0: no cap per client address
    max_connections_per_client: Annotated[
        int, NOT_NEGATIVE,
        _doc("connections one client address may hold while none of them carries a request with a valid token "
             "(idle, still sending a request head, or a request without a valid token). A further connection of "
             "that address closes its oldest idle one, or is answered `503` and closed. `0`: no cap per address "
             "(behind a reverse proxy every client has the proxy's address: see "
             "[operations](operations.md#the-upload-server-under-hostile-producers))"),
    ] = 32
    #: 0: see :meth:`reserved_slots`
    reserved_connections: Annotated[
        int, NOT_NEGATIVE,
        _doc("less than `max_connections`; slots only requests with a valid upload token may use: connections "
             "without one hold at most `max_connections - reserved_connections`, and beyond that a new "
             "connection closes the oldest idle connection of the address holding the most. `0`: a quarter of "
             "`max_connections` (64 of the default 256)"),
    ] = 0
    #: 0: see :meth:`queue_share`
    max_queue_per_token: Annotated[
        int, NOT_NEGATIVE,
        _doc("at most `queue_size`; queue slots (uploads being received, `accepted` and `queued`) one upload "
             "token may hold; further uploads of that token get `503` while other tokens are still admitted. "
             "`0`: half of `queue_size`, rounded up, or all of it when the config has one token"),
    ] = 0
    #: bytes per second; 0: no minimum
    body_min_rate: Annotated[
        ByteSize,
        _doc("per second: once `body_idle_timeout` has passed, the body must have arrived at this average rate, "
             "so a body of N bytes must be complete within `body_idle_timeout` + N / `body_min_rate` (`400`); "
             "`0` disables it"),
    ] = 64 * KB
    max_failed_bytes: Annotated[
        ByteSize,
        _doc("bytes of the staged bundles that failed uploads keep for inspection, all tokens together; when a "
             "failure takes it over, the staged bundles of the token holding the most failed bytes are removed, "
             "oldest first (their records stay)"),
    ] = 4 * GB
    max_failed_bytes_per_token: Annotated[
        ByteSize,
        _doc("the same per upload token: a token's own oldest failed bundles are removed first. `0B` keeps no "
             "failed bundle"),
    ] = GB
    limits: Annotated[
        UploadLimits,
        _doc("limits of an upload archive, checked while it streams in, entry by entry, before anything of an "
             "entry is written"),
    ] = UploadLimits()
    #: an ``s3://`` staging root (issue 29): the shared store every ``serve`` replica uses
    staging_store: Annotated[S3Backend | None, DERIVED] = None

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
    http: Annotated[
        ServerHTTP, _doc("settings of `distributor serve`, the HTTP upload API; validated even when no pipeline "
                         "uses uploads")
    ] = ServerHTTP()


class Secrets(_Model, kw_only=True):
    """``secrets``: ``directory`` as written (``""`` = disabled) and its resolved absolute path."""

    directory: Annotated[
        str, _doc("directory of secret files, looked up after the environment; empty: disabled", shown="path")
    ] = ""
    resolved_directory: Annotated[Path | None, DERIVED] = None


class UploadToken(_Model, kw_only=True):
    """One ``upload_tokens`` record. The value is never in the config, only its secret name."""

    id: Annotated[Slug, _doc("unique across token records")]
    token_env: Annotated[str, _doc("the secret name holding the token value")]
    allow_pipelines: Annotated[
        tuple[str, ...], Meta(min_length=1),
        _doc("each entry an `http_upload` pipeline id; no duplicates"),
    ]


# --- destination policies ---------------------------------------------------------------------


class PublishPolicy(_Model, kw_only=True):
    """``publish``: absent, the source files only; present, an omitted key is false."""

    source: Annotated[bool, _doc("copy the bundle's files", default="`true` when `publish` is absent")] = False
    html: Annotated[bool, _doc("publish HTML generated from the bundle's Markdown files")] = False


class MarkdownToHTML(_Model, kw_only=True):
    enabled: Annotated[bool, _doc("enable the Markdown renderer")] = False
    mode: Annotated[
        Literal["sidecar", "index"],
        _doc("`sidecar`: each `dir/name.md` produces `dir/name.html`; `index`: the one Markdown file produces "
             "`index.html` in its directory"),
    ] = "sidecar"


class TransformPolicy(_Model, kw_only=True):
    markdown_to_html: Annotated[MarkdownToHTML | None, _doc("render Markdown files to HTML")] = None


class PathMappingPolicy(_Model, kw_only=True):
    mode: Annotated[
        Literal["preserve_relative", "fixed"],
        _doc("`preserve_relative`: the bundle's path relative to the source root; `fixed`: always the "
             "destination root (the newest bundle)"),
    ] = "preserve_relative"


class LinksPolicy(_Model, kw_only=True):
    base_url: Annotated[Url, _doc("absolute `http`/`https`, no query or fragment")]
    primary: Annotated[
        Literal["auto", "source", "html"], _doc("which output becomes the primary URL")
    ] = "auto"


class StatePolicy(_Model, kw_only=True):
    mode: Annotated[
        Literal["single_owner", "shared_root"],
        _doc("`single_owner`: one pipeline/destination owns each destination bundle path; `shared_root`: several "
             "owners publish disjoint outputs into one root"),
    ] = "single_owner"


class ReconciliationPolicy(_Model, kw_only=True):
    mode: Annotated[
        Literal["replace", "merge"],
        _doc("`replace`: managed outputs a new publication omits are deleted; `merge`: they are kept"),
    ] = "replace"


class BundleRetention(_Model, kw_only=True):
    """``retention.prune.bundles``: whole bundle paths of a ``preserve_relative`` destination, the
    newest ``keep_latest`` (by manifest ``created``) always kept, the rest removed when created
    before ``now - older_than`` (or, with only ``keep_latest``, always)."""

    keep_latest: Annotated[int | None, _doc("always keep this many newest bundles; 1 or greater")] = None
    older_than: Annotated[
        Duration | None, _doc("remove bundles created longer ago than this; greater than zero")
    ] = None


class PrunePolicy(_Model, kw_only=True):
    """``retention.prune``. ``keep_latest`` may be negative only while ``enabled`` is false.
    ``older_than`` and ``keep_latest`` prune outputs of each bundle path (the Go tool's keys);
    ``bundles`` prunes whole bundle paths instead."""

    enabled: Annotated[bool, _doc("enable pruning (the rules of the other keys apply only then)")] = False
    older_than: Annotated[
        Duration | None,
        _doc("prune outputs (files) of each bundle path updated longer ago than this; greater than zero"),
    ] = None
    keep_latest: Annotated[
        int | None, _doc("always keep this many newest outputs (files) of each bundle path; zero or greater")
    ] = None
    bundles: Annotated[
        BundleRetention | None,
        _doc("`keep_latest` or `older_than` (or both): remove whole bundle paths (outputs, `.distributor.json`, "
             "empty folders), the newest bundles by their manifest's `created` time kept; not with "
             "`prune.older_than`/`prune.keep_latest`; only for `preserve_relative` destinations of `local`, `ssh` "
             "or `s3` pipelines"),
    ] = None


class RetentionPolicy(_Model, kw_only=True):
    prune: Annotated[PrunePolicy, _doc("the policy `distributor prune` applies")] = PrunePolicy()


class TakeoverPolicy(_Model, kw_only=True):
    mode: Annotated[
        Literal["same_pipeline", "same_source", "any_managed", "never"],
        _doc("when a normal publication may replace managed content of another owner or source"),
    ] = "same_pipeline"


class TransferPolicy(_Model, kw_only=True):
    on_destination_same: Annotated[
        Literal["skip", "fail"], _doc("the destination already holds this exact bundle: `skip_same`, or fail")
    ] = "skip"
    on_destination_older: Annotated[
        Literal["replace", "fail"],
        _doc("the destination holds an older bundle of the same id: `replace_older`, or fail"),
    ] = "replace"
    on_destination_newer: Annotated[
        Literal["skip", "fail", "replace"],
        _doc("the destination holds a newer bundle of the same id: `skip_destination_newer`, fail, or replace — "
             "`replace` acts only with `run --force`; without it the destination fails with `destination is newer "
             "and replacement requires --force`"),
    ] = "skip"
    on_conflict: Annotated[
        Literal["fail", "replace"],
        _doc("invalid state, identity mismatch or another source (not resolved by takeover): fail, or replace — "
             "`replace` acts only with `run --force`"),
    ] = "fail"


class ValidationPolicy(_Model, kw_only=True):
    """The pipeline ``validation`` block (digest verification is always on)."""

    cache: Annotated[
        bool,
        _doc("`distributor run` over a `local` source keeps a [validation cache](operations.md#validation-cache): "
             "a file whose device, inode, size, mtime and ctime are unchanged since it last hashed to the sha256 "
             "its manifest records is not read again. `false` hashes every file on every run (so does "
             "`DISTRIBUTOR_VALIDATION_CACHE=off` in the environment, for every pipeline). Ignored for `ssh`, `s3` "
             "and `http_upload` sources, which always hash"),
    ] = True


class DagsterAssets(_Model, kw_only=True):
    """The ``dagster`` block of a pipeline or a destination: how its assets look in Dagster. Only
    ``distributor_dagster`` reads it (and applies Dagster's rules to it); ``None`` and empty
    tuples mean "not set". ``tags`` keeps the written order."""

    description: Annotated[
        str | None, _doc("the asset's description (replaces the generated one)", keeps_empty=True)
    ] = None
    #: ``""`` is kept: Dagster refuses an empty group, and the refusal names the key
    group: Annotated[
        str | None, _doc("asset group (segments of letters, digits and underscores, joined by /)", keeps_empty=True)
    ] = None
    owners: Annotated[tuple[str, ...], _doc("asset owners: email addresses or team:<name>")] = ()
    tags: Annotated[tuple[tuple[str, str], ...], _doc("asset tags, key: value (Dagster's tag rules)")] = ()
    kinds: Annotated[tuple[str, ...], _doc("kinds shown next to the built-in one (at most 10 in all)")] = ()
    deps: Annotated[
        tuple[str, ...],
        _doc("upstream asset keys, components joined by / (e.g. analytics/daily_report)"),
    ] = ()


class Destination(_Model, kw_only=True):
    id: Annotated[Slug, _doc("unique **within the pipeline** (two pipelines may both have an `archive`)")]
    storage: Annotated[
        StorageBackend, INLINE,
        _doc("`local`, `ssh` or `s3`, plus that backend's fields inline ([local](#local), [ssh](#ssh-sftp), "
             "[s3](#s3)); `http_upload` is refused"),
    ]
    publish: Annotated[PublishPolicy, _doc("what is published")] = PublishPolicy(source=True)
    transform: Annotated[TransformPolicy, _doc("transforms that generate outputs")] = TransformPolicy()
    path_mapping: Annotated[
        PathMappingPolicy, _doc("where a bundle lands below the destination root")
    ] = PathMappingPolicy()
    links: Annotated[LinksPolicy | None, _doc("public URLs recorded in destination state")] = None
    state: Annotated[StatePolicy, _doc("who owns the destination root")] = StatePolicy()
    reconciliation: Annotated[
        ReconciliationPolicy, _doc("what happens to managed outputs a new publication omits")
    ] = ReconciliationPolicy()
    retention: Annotated[RetentionPolicy, _doc("retention of managed outputs")] = RetentionPolicy()
    takeover: Annotated[
        TakeoverPolicy, _doc("whether normal publication may replace content of another owner or source")
    ] = TakeoverPolicy()
    #: the destination lock's lease: unchanged this long, another writer takes it over
    lock_lease: Annotated[
        Duration, POSITIVE_DURATION,
        _doc("how long a writer's [destination lock](operations.md#safe-writes-crashes-and-concurrent-writers) "
             "lasts without renewal (the writer renews it every quarter of it). Another writer (`run`, `prune`, "
             "`reconcile-state`, a `serve` replica, a Dagster run) that has seen the lock unchanged this long on "
             "its own monotonic clock takes it over, at once when the holder's process on the same host is gone; "
             "a writer that stalled longer than this loses the lock and writes nothing more. No clocks are "
             "compared, so hosts need not agree on the time. The lease is written into the lock, so writers of "
             "one destination need not configure the same value"),
    ] = timedelta(seconds=60)
    transfer: Annotated[TransferPolicy, _doc("the action for each comparison outcome")] = TransferPolicy()
    dagster: Annotated[
        DagsterAssets,
        _doc("how the destination's asset looks in Dagster, see [`dagster`](#dagster): group, owners and tags add "
             "to or replace the pipeline's; description, kinds and deps are the destination's own"),
    ] = DagsterAssets()

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

    #: Dagster's UI slows past about 10,000 partitions per asset (its docs advise fewer than 100,000)
    max_partitions: Annotated[
        int, Meta(ge=1),
        _doc("bundles the pipeline keeps as Dagster partitions at most; beyond it the partitions of the bundles "
             "seen first are deleted (their files stay)"),
    ] = 10_000


class Pipeline(_Model, kw_only=True):
    id: Annotated[Slug, _doc("unique across pipelines")]
    source: Annotated[SourceBackend, _doc("where bundles come from; see [sources](#sources)")]
    validation: Annotated[
        ValidationPolicy,
        _doc("validation policy of local sources (digest verification of source bundles is always on; a digest "
             "mismatch fails the bundle before any destination is written)"),
    ] = ValidationPolicy()
    dagster: Annotated[
        PipelineDagster,
        _doc("how the pipeline's assets look in Dagster, see [`dagster`](#dagster): group, owners and tags apply "
             "to all of them; description, kinds and deps to the source asset"),
    ] = PipelineDagster()
    destinations: Annotated[
        tuple[Destination, ...], Meta(min_length=1),
        _doc("where bundles are published; see [destinations](#destinations)"),
    ]

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

    server: Annotated[Server, _doc("the HTTP upload server")] = Server()
    secrets: Annotated[Secrets, _doc("where secrets come from besides the environment")] = Secrets()
    upload_tokens: Annotated[
        tuple[UploadToken, ...],
        _doc("bearer tokens for `distributor serve`; required when any pipeline source is `http_upload`, "
             "invalid otherwise"),
    ] = ()
    pipelines: Annotated[tuple[Pipeline, ...], Meta(min_length=1), _doc("the pipelines")]
    base_dir: Annotated[Path, DERIVED]
    config_path: Annotated[Path | None, DERIVED] = None

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

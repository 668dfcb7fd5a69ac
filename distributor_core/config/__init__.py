"""The YAML configuration: strict loading, defaults, validation, secrets and JSON Schema.

Entry points: :func:`load_config` (a file; relative paths resolve against its directory) and
:func:`parse_config` (text plus an explicit ``base_dir``). Both return a validated
:class:`Config` or raise :class:`ConfigError` listing every problem.

Owns: the config's shape, declared once in :mod:`.models` (types, defaults, bounds, descriptions;
:mod:`.shape` reads it for the decoder, the defaults, the JSON Schema and the docs' tables), the
rules between keys and every message (:mod:`.validate`), and how each backend names its root.
Must not know: storage, planning, execution, any shell (it is pure data; nothing here opens a
connection).
"""

from distributor_core.config.errors import ConfigError, ConfigFileError, ConfigLookupError, SecretError
from distributor_core.config.load import load_config, parse_config
from distributor_core.config.models import (
    BundleRetention,
    Config,
    DagsterAssets,
    Destination,
    HTTPUploadSource,
    LinksPolicy,
    LocalBackend,
    MarkdownToHTML,
    PathMappingPolicy,
    Pipeline,
    PipelineDagster,
    PrunePolicy,
    PublishPolicy,
    ReconciliationPolicy,
    RetentionPolicy,
    S3Backend,
    S3Connection,
    S3Credentials,
    Secrets,
    Server,
    ServerHTTP,
    SourceBackend,
    SSHBackend,
    StatePolicy,
    StorageBackend,
    TakeoverPolicy,
    TransferPolicy,
    TransformPolicy,
    UploadLimits,
    UploadToken,
    ValidationPolicy,
    default_of,
)
from distributor_core.config.schema import config_json_schema
from distributor_core.config.secrets import (
    Environment,
    S3SecretPair,
    UploadGrant,
    UploadTokenTable,
    resolve_s3_credentials,
    resolve_upload_tokens,
)
from distributor_core.config.units import format_byte_size, format_duration, parse_byte_size, parse_duration
from distributor_core.config.validate import destination_context, is_slug_like_id, pipeline_context

__all__ = [
    "BundleRetention",
    "Config",
    "ConfigError",
    "ConfigFileError",
    "ConfigLookupError",
    "DagsterAssets",
    "Destination",
    "Environment",
    "HTTPUploadSource",
    "LinksPolicy",
    "LocalBackend",
    "MarkdownToHTML",
    "PathMappingPolicy",
    "Pipeline",
    "PipelineDagster",
    "PrunePolicy",
    "PublishPolicy",
    "ReconciliationPolicy",
    "RetentionPolicy",
    "S3Backend",
    "S3Connection",
    "S3Credentials",
    "S3SecretPair",
    "SSHBackend",
    "SecretError",
    "Secrets",
    "Server",
    "ServerHTTP",
    "SourceBackend",
    "StatePolicy",
    "StorageBackend",
    "TakeoverPolicy",
    "TransferPolicy",
    "TransformPolicy",
    "UploadGrant",
    "UploadLimits",
    "UploadToken",
    "UploadTokenTable",
    "ValidationPolicy",
    "config_json_schema",
    "default_of",
    "destination_context",
    "format_byte_size",
    "format_duration",
    "is_slug_like_id",
    "load_config",
    "parse_byte_size",
    "parse_config",
    "parse_duration",
    "pipeline_context",
    "resolve_s3_credentials",
    "resolve_upload_tokens",
]

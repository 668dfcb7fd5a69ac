"""Run config of a publication: one set of settings per run, ``resources.publish.config`` (issue 37
item 1).

A run that publishes (``publish_<p>``, Materialize, ``dagster asset materialize``, ``dg launch``, a
sensor's run request) takes its settings once, as the config of the run-level resource
``publish`` (``<name_prefix>publish``), and every step of every publish graph of the run reads
them from there: the per-bundle graph ``<p>`` and the ``fixed`` graph ``<p>__newest`` alike, and
the graphs of every pipeline the run selects. The schema is built once per code location; every
key is optional with its default shown in the launchpad, so "Materialize" and "Execute checks"
need no config.

- ``dry_run``, ``force``, ``republish``: the CLI's ``--dry-run``, ``--force``, ``--republish``;
- ``destinations``: restrict the run to these of its selected destination assets, each named by
  its destination id or ``<pipeline id>/<destination id>`` (empty: every selected one);
- ``bundle_path`` (sites with a ``local``/``ssh``/``s3`` pipeline): the one bundle of a run
  without a partition (empty: every bundle; a ``fixed`` destination takes the newest);
- ``upload_run_id`` / ``upload_run_ids`` (sites with an ``http_upload`` pipeline): one staged
  upload (the launchpad's), or a batch (the uploads sensor's); neither: every waiting upload.

Before issue 37 each publish graph had its own op config (``ops.<graph>.config``), so a pipeline
with per-bundle and ``fixed`` destinations took two: a dry run set under one graph published
through the other. That shape is refused before the run starts, naming this one
(:data:`MOVED_CONFIG`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import dagster as dg

from distributor_core.config import Config

#: The resource key of the run settings (after the build option ``name_prefix``).
SETTINGS_RESOURCE = "publish"

DESCRIPTIONS = {
    "dry_run": "Plan and report without writing anything, in every step of the run.",
    "force": "Replace conflicting or unmanaged content; needs a run that targets exactly one destination.",
    "republish": "Rewrite a destination that already matches its source; needs exactly one destination.",
    "destinations": "Restrict the run to these of its selected destination assets, each named by its "
    "destination id or '<pipeline id>/<destination id>'. Empty: every selected destination asset.",
    "bundle_path": "Source-relative path of the one bundle to publish ('.' for a bundle at the source root), in a "
    "run without a partition. Empty: every discovered bundle (a fixed destination takes the newest). A "
    "partitioned run publishes its partitions.",
    "upload_run_id": "http_upload pipelines: the one staged upload to publish. Empty (and no upload_run_ids): "
    "every upload still waiting (status accepted), in admission order.",
    "upload_run_ids": "http_upload pipelines: a batch of staged uploads to publish, in this order (the uploads "
    "sensor sets it). Uploads already published, or in progress in another run, are passed over. Not together "
    "with upload_run_id.",
}


@dataclass(frozen=True)
class RunSettings:
    """The settings of one publish run, as every step reads them (``None``: not set)."""

    dry_run: bool = False
    force: bool = False
    republish: bool = False
    destinations: tuple[str, ...] = ()
    bundle_path: str | None = None
    upload_run_id: str | None = None
    upload_run_ids: tuple[str, ...] | None = None

    @classmethod
    def from_config(cls, values: Mapping[str, Any]) -> RunSettings:
        return cls(
            dry_run=bool(values.get("dry_run", False)),
            force=bool(values.get("force", False)),
            republish=bool(values.get("republish", False)),
            destinations=tuple(values.get("destinations") or ()),
            bundle_path=values.get("bundle_path") or None,
            upload_run_id=values.get("upload_run_id") or None,
            upload_run_ids=tuple(values["upload_run_ids"]) if values.get("upload_run_ids") else None,
        )

    def named_uploads(self) -> list[str] | None:
        """The uploads the run names (``None``: every waiting one); a :class:`dagster.Failure`
        when both fields are set."""
        if self.upload_run_id and self.upload_run_ids is not None:
            raise dg.Failure(f"set upload_run_id (one upload) or upload_run_ids (a batch) in {WHERE}, not both")
        if self.upload_run_id:
            return [self.upload_run_id]
        return list(self.upload_run_ids) if self.upload_run_ids is not None else None


#: Where the settings are, for messages.
WHERE = f"the run config resources.{SETTINGS_RESOURCE}.config"


def settings_fields(config: Config) -> dict[str, dg.Field]:
    """The keys of the run settings a code location offers, each with its default: the flags and
    ``destinations`` always, ``bundle_path`` when a pipeline reads a source, ``upload_run_id(s)``
    when one takes uploads."""
    fields = {
        "dry_run": dg.Field(bool, default_value=False, description=DESCRIPTIONS["dry_run"]),
        "force": dg.Field(bool, default_value=False, description=DESCRIPTIONS["force"]),
        "republish": dg.Field(bool, default_value=False, description=DESCRIPTIONS["republish"]),
        "destinations": dg.Field([str], default_value=[], description=DESCRIPTIONS["destinations"]),
    }
    kinds = {pipeline.is_upload for pipeline in config.pipelines}
    if False in kinds:
        fields["bundle_path"] = dg.Field(str, default_value="", description=DESCRIPTIONS["bundle_path"])
    if True in kinds:
        fields["upload_run_id"] = dg.Field(str, default_value="", description=DESCRIPTIONS["upload_run_id"])
        fields["upload_run_ids"] = dg.Field([str], default_value=[], description=DESCRIPTIONS["upload_run_ids"])
    return fields


def settings_resource(config: Config) -> dg.ResourceDefinition:
    """The run-level resource every publish step reads its settings from (its schema built once
    per code location)."""
    return dg.ResourceDefinition(
        resource_fn=lambda init: RunSettings.from_config(init.resource_config or {}),
        config_schema=settings_fields(config),
        description="The settings of a publish run (dry run, force, republish, destinations, the bundle or "
        "uploads), read by every step of every publish graph of the run.",
    )


def resource_key(prefix: str) -> str:
    return f"{prefix}{SETTINGS_RESOURCE}"


def run_config(prefix: str = "", **settings: object) -> dict[str, Any]:
    """The run config of a publish run with ``settings`` (keys of :class:`RunSettings`; sequences as
    lists), for a code location built with ``name_prefix=prefix``."""
    values = {key: list(value) if isinstance(value, tuple) else value for key, value in settings.items()}
    return {"resources": {resource_key(prefix): {"config": values}}}


def moved_message(graph: str, prefix: str, values: Mapping[str, Any]) -> str:
    shown = ", ".join(f"{key}: {_yaml(value)}" for key, value in values.items()) if isinstance(values, Mapping) else ""
    example = "{" + (shown or "dry_run: true") + "}"
    return (
        f"the run config ops.{graph}.config is no longer read (the shape of earlier releases): a publish run "
        "takes its settings once, for "
        f"every step of every graph, as resources.{resource_key(prefix)}.config; write "
        f"{{resources: {{{resource_key(prefix)}: {{config: {example}}}}}}} instead"
    )


def _yaml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Sequence) and not isinstance(value, str):
        return "[" + ", ".join(_yaml(v) for v in value) + "]"
    return str(value) if value != "" else "''"


class MovedRunConfigError(dg.DagsterInvariantViolationError):
    """A run config in the shape before issue 37 (``ops.<graph>.config``)."""


def moved_field(prefix: str) -> dg.Field:
    """The config of a publish graph (one field, shared by every graph): nothing is read there."""
    return dg.Field(
        dg.Permissive(), is_required=False,
        description=f"Not read: publish runs take their settings under resources.{resource_key(prefix)}.config.",
    )


def moved_config(graph: str, prefix: str, field: dg.Field) -> dg.ConfigMapping:
    """The config of the publish graph ``graph``: nothing, but a run config in the shape before
    issue 37 (``ops.<graph>.config: {...}``) is refused while the run is created, before any step
    runs, with a message naming the new shape."""

    def refuse(values: Any) -> dict[str, Any]:
        if values:
            raise MovedRunConfigError(moved_message(graph, prefix, values))
        return {}

    return dg.ConfigMapping(config_fn=refuse, config_schema=field)

"""Run config of a publication: ``ops: {<graph>: {config: {...}}}`` (issue 12, issue 24).

Every field is optional, so "Materialize" and "Execute checks" run without a launchpad. A pipeline
that reads a source takes ``bundle_path``; an ``http_upload`` pipeline takes ``upload_run_ids``
(a batch, set by the uploads sensor) or ``upload_run_id`` (one upload, the launchpad's); without
either, a run publishes the uploads still waiting in the staging area. Partitioned runs name their
bundles by partition instead of ``bundle_path``.
"""

from __future__ import annotations

import hashlib
from typing import Any

import dagster as dg
from pydantic import Field

from distributor_core.config import Pipeline


class PublishConfig(dg.Config):
    """Where to publish, with the CLI's ``--dry-run``, ``--force`` and ``--republish``."""

    destination: str | None = Field(
        default=None,
        description="Destination id to restrict the run to (among the selected destination assets); "
        "every selected destination when unset.",
    )
    dry_run: bool = Field(default=False, description="Plan and report without writing anything.")
    force: bool = Field(
        default=False,
        description="Replace conflicting or unmanaged content; needs a run that targets exactly one destination.",
    )
    republish: bool = Field(
        default=False,
        description="Rewrite a destination that already matches its source; needs exactly one destination.",
    )


class BundlePublishConfig(PublishConfig):
    """A run of a pipeline that reads a ``local``, ``ssh`` or ``s3`` source."""

    bundle_path: str | None = Field(
        default=None,
        description="Source-relative bundle path to publish (unpartitioned runs); a partitioned run publishes "
        "its partitions, and with neither every discovered bundle is published.",
    )


class UploadPublishConfig(PublishConfig):
    """A run of an ``http_upload`` pipeline."""

    upload_run_id: str | None = Field(
        default=None,
        description="The one staged upload to publish; unset (and no upload_run_ids): every upload still "
        "waiting (status accepted), in admission order.",
    )
    upload_run_ids: list[str] | None = Field(
        default=None,
        description="A batch of staged uploads to publish, in this order (the uploads sensor sets it, at most "
        "bundles_per_run of them). Uploads already published, or in progress in another run, are passed over; "
        "each upload's record gets its own outcome. Not together with upload_run_id.",
    )

    def named_uploads(self) -> list[str] | None:
        """The uploads the run names (``None``: every waiting one); a :class:`dagster.Failure`
        when both fields are set."""
        if self.upload_run_id and self.upload_run_ids is not None:
            raise dg.Failure("set upload_run_id (one upload) or upload_run_ids (a batch) in the run config, not both")
        if self.upload_run_id:
            return [self.upload_run_id]
        return list(self.upload_run_ids) if self.upload_run_ids is not None else None


#: The launchpad's value of ``destination`` for "every selected destination" (no id can be it:
#: ids start with a letter or digit).
ALL_DESTINATIONS = "(all)"


def enum_name(node: str, ids: list[str]) -> str:
    """The config type name of a pipeline's destination choice. Dagster memoizes config shapes by
    their fields' type names for the life of the process, so the name carries the choices: a code
    server that reloads a config with one more destination must offer it, not the old list."""
    digest = hashlib.sha256("\0".join(ids).encode()).hexdigest()[:8]
    return f"{node}__destination_{digest}"


def bundle_config_mapping(pipeline: Pipeline, node: str) -> dg.ConfigMapping:
    """What the launchpad offers for a graph of a ``local``/``ssh``/``s3`` pipeline: every field
    with a visible default (``destination: (all)``, a choice among the pipeline's destinations,
    only when it has several; ``bundle_path: ""``), mapped onto :class:`BundlePublishConfig`."""
    described = BundlePublishConfig.model_fields
    fields: dict[str, dg.Field] = {}
    if len(pipeline.destinations) > 1:
        choices = [dg.EnumValue(ALL_DESTINATIONS, description="every selected destination asset")]
        choices += [dg.EnumValue(d.id) for d in pipeline.destinations]
        fields["destination"] = dg.Field(
            dg.Enum(enum_name(node, [d.id for d in pipeline.destinations]), choices), default_value=ALL_DESTINATIONS,
            description=f"Restrict the run to one of the destination assets it selects; {ALL_DESTINATIONS}: every "
            "selected one.",
        )
    fields["bundle_path"] = dg.Field(
        str, default_value="",
        description="Source-relative path of the one bundle to publish ('.' for a bundle at the source root), in a "
        "run without a partition. Empty: every discovered bundle (a fixed destination takes the newest). A "
        "partitioned run publishes its partitions.",
    )
    for flag in ("dry_run", "force", "republish"):
        fields[flag] = dg.Field(bool, default_value=False, description=described[flag].description)

    def config_fn(values: dict[str, Any]) -> dict[str, Any]:
        chosen = values.get("destination", ALL_DESTINATIONS)
        inner = {
            **values,
            "destination": None if chosen == ALL_DESTINATIONS else chosen,
            "bundle_path": values.get("bundle_path") or None,
        }
        return {"discover": {"config": inner}}

    return dg.ConfigMapping(config_fn=config_fn, config_schema=fields)

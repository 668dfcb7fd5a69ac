"""``report``: the last step of an upload pipeline's publish graph (resolutions D1, D2).

An upload is published whole: its record gets one outcome for every destination of the pipeline.
This step waits for every ``publish_<d>`` result (also of failed steps, which hand their result
over before they fail), then writes each upload's run report into its record (``succeeded`` or
``failed``, the Dagster run id, host paths scrubbed), as the inline publisher does, and outputs
the run's report as ``distributor run`` prints it.

(No ``from __future__ import annotations``: Dagster reads the input types from annotations.)
"""

import dagster as dg

from distributor_core.app.publication import PipelineOutcome, run_report
from distributor_core.app.run_options import RunOptions
from distributor_dagster.publish import uploads
from distributor_dagster.publish.destination import evaluate_checks
from distributor_dagster.publish.model import DestinationResult, Validated
from distributor_dagster.publish.ops import checked_scope, tag_uploads
from distributor_dagster.publish.routes import Routes
from distributor_dagster.site import Site

#: the run report output (JSON, as `distributor run --json` prints it)
RUN_REPORT = "run_report"


def report_outputs(count: int, checks: tuple[str, ...]) -> list[dict[str, str]]:
    """The check outputs of a report step over ``count`` destinations: per destination (config
    order), check name -> output name (``d<i>_<check>``)."""
    return [{check: f"d{index}_{check}" for check in checks} for index in range(count)]


def report_op(
    site: Site, routes: Routes, name: str, settings_key: str, count: int, checks: tuple[str, ...]
) -> dg.OpDefinition:
    """The ``report`` step of every ``http_upload`` pipeline with ``count`` destinations (the
    checks of an upload pipeline's destinations are evaluated here, once the records are written)."""
    by_index = report_outputs(count, checks)
    outs = {output: dg.Out(dg.Nothing, is_required=False) for by_name in by_index for output in by_name.values()}
    outs[RUN_REPORT] = dg.Out(dict, is_required=False)

    @dg.op(
        name=name,
        description="Record each upload's outcome in its upload record (every destination's result), report "
        "the run as `distributor run` prints it, and evaluate the destinations' checks.",
        out=outs,
        required_resource_keys={settings_key},
    )
    def report(context: dg.OpExecutionContext, validated: Validated, results: list[DestinationResult]):  # type: ignore[no-untyped-def]
        route = routes.graph(context)
        pipeline, pnames = route.pipeline, route.names
        check_outputs = dict(zip(route.graph.destination_ids, by_index, strict=True))
        checked_scope(context, settings_key, validated.selection)
        # a re-execution records only the uploads not yet published
        validated = uploads.still_to_publish(context, site.config, pipeline, validated, site.clock,
                                             env=site.environment())
        selection = validated.selection
        options = RunOptions(dry_run=selection.dry_run, force=selection.force, republish=selection.republish)
        tag_uploads(context, selection)
        everything = []
        with uploads.item_store(pipeline, site.environment()) as store:
            for valid in validated.valid:
                item = valid.item
                entries = [entry for result in results for it, entry in result.entries if it.key == item.key]
                errors = [result.error for result in results if result.error]
                run = run_report([PipelineOutcome(pipeline, 1)], entries, options)
                everything.extend(entries)
                for line in run.text_lines():
                    context.log.info(f"{item.label}: {line}")
                if item.upload_run_id and not selection.dry_run:
                    record = uploads.mark_finished(
                        site.config, pipeline, item.upload_run_id, context.run_id, report=run,
                        error="; ".join(errors), clock=site.clock, store=store,
                    )
                    context.log.info(f"upload {record.run_id}: {record.status}")
        invalid = "; ".join(message for _, message in validated.invalid)
        count = len(validated.valid) + len(validated.invalid)
        whole = run_report([PipelineOutcome(pipeline, count, error=invalid)], everything, options).to_dict()
        if RUN_REPORT in context.selected_output_names:
            yield dg.Output(whole, RUN_REPORT, metadata={
                "uploads": dg.MetadataValue.int(count),
                "summary": dg.MetadataValue.json(whole["summary"]),
                "report": dg.MetadataValue.json(whole),
            })
        by_id = {result.destination_id: result for result in results}
        problems = []
        for destination_id, outputs in check_outputs.items():
            destination = pipeline.destination(destination_id)
            published = by_id.get(destination_id)
            problems += yield from evaluate_checks(
                context, site, pipeline, destination, pnames.destination(destination_id), outputs, validated,
                published if published is not None and validated.selection.selects(destination_id) else None,
            )
        if problems:
            raise dg.Failure(description="; ".join(f"blocking check failed: {p}" for p in problems))

    return report

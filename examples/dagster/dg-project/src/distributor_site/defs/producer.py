"""The asset that produces the bundles pipeline site-reports publishes.

In a real project this is your report job, dbt model or export: it writes a bundle (files and a
``manifest.json``) below the pipeline's source path. The pipeline names it in ``dagster.deps``,
so the lineage graph shows producer -> source -> destinations.
"""

import dagster as dg


@dg.asset(
    key=["finance", "daily_report"],
    group_name="finance",
    kinds={"python"},
    owners=["team:finance"],
    description="Writes the daily report bundle (this example's bundle is examples/source-bundle, "
    "already on disk, so materializing it only records that).",
)
def daily_report() -> dg.MaterializeResult:
    return dg.MaterializeResult(metadata={"bundle": "examples/source-bundle"})

"""Jobs rebuilt from the environment for ``dagster.execute_job`` (which runs a job with its own
executor, unlike ``execute_in_process``): ``DISTRIBUTOR_CONFIG`` names the config and
``DISTRIBUTOR_TEST_JOB`` the job."""

from __future__ import annotations

import os

import dagster as dg

from distributor_dagster.location import definitions_from_environment


def job_from_environment() -> dg.JobDefinition:
    return definitions_from_environment().resolve_job_def(os.environ["DISTRIBUTOR_TEST_JOB"])

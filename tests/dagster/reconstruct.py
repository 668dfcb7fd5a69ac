"""Jobs rebuilt from the environment for ``dagster.execute_job`` (which runs a job with its own
executor, unlike ``execute_in_process``): ``DISTRIBUTOR_CONFIG`` names the config and
``DISTRIBUTOR_TEST_JOB`` the job."""

from __future__ import annotations

import os

import dagster as dg

from distributor_dagster.location import definitions_from_environment


def job_from_environment() -> dg.JobDefinition:
    return definitions_from_environment().resolve_job_def(os.environ["DISTRIBUTOR_TEST_JOB"])


def job_of_config(config_path: str, job_name: str) -> dg.JobDefinition:
    return definitions_from_environment({**os.environ, "DISTRIBUTOR_CONFIG": config_path}).resolve_job_def(job_name)


def reconstructable_job(config_path: os.PathLike[str] | str, job_name: str) -> dg.ReconstructableJob:
    """``job_name`` of the config at ``config_path``, for ``dagster.execute_job``. Dagster keeps
    the last job it reconstructed per pointer for the life of the process, so a pointer that
    carries the config path (unlike :func:`job_from_environment`) never hands one test another
    test's job."""
    return dg.build_reconstructable_job(
        "tests.dagster.reconstruct", "job_of_config", reconstructable_args=(str(config_path), job_name)
    )

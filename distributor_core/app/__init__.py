"""Use cases shared by the CLI, the upload server and Dagster."""
